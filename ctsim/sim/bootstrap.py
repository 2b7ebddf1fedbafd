"""A fresh agent's start-up: its API answers only once bootstrap is done, and up to v1.16.6 that waits on the CT scan.

cilium-agent resolves the daemon promise that its API handlers await when
``startDaemon`` returns (``daemon/cmd/daemon_main.go:1781-1790`` at v1.16.5).
``startDaemon`` calls ``CTNATMapGC.Enable()`` right after ``initRestore``
(``:1837``). Up to v1.16.6, ``Enable`` waits for the initial scan and
``log.Fatal``s after 30 s (``pkg/maps/ctmap/gc/gc.go:223-228``): the agent
exits, and kubelet restarts it after its crash-loop back-off (10 s, doubling
to 5 min). The next start scans again from the top, over what the killed
scan left. From v1.16.7 and 1.17.0 (fea19ec9c7) the scan runs on its own;
from 1.19.0 (8303db21c5) the GC starts once the restored endpoints have
regenerated, taken here as one regeneration after the API answers.

While the API is down, cilium-cni's ADD polls ``GetConfig`` every 0.5 s for
30 s (``ClientConnectTimeout``) and then fails; its DEL falls back to the
deletion queue after its own connect timeout (10 s, 1.5 s from 1.19.0) and
succeeds (``ctsim.sim.cni``). Once the agent answers it deletes the queued
endpoints (``processQueuedDeletes``), each with its scrub, outside the limiter.

A map is cohorts here, not hash slots: a scan killed part-way through a map
is taken to have deleted that share of the garbage it would have.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import simpy

from ctsim.core.defaults import CRASH_LOOP_BACKOFF, CRASH_LOOP_MAX_BACKOFF, INITIAL_SCAN_TIMEOUT
from ctsim.core.projection import walk_seconds
from ctsim.sim.endpoint import Sandbox, delete_endpoint, has_endpoint
from ctsim.sim.node import AgentAPI, Node


@dataclass
class AgentStart:
    """The agent's starts in a run: each start, each ``log.Fatal``, and when its API answered."""

    api: AgentAPI  # the node's: it answers once bootstrap is done
    blocks: bool  # v1.16.0-1.16.6: bootstrap waits for the initial scan
    started_at: list[float] = field(default_factory=list)
    fatal_at: list[float] = field(default_factory=list)
    served_at: float | None = None
    scan_deleted: int = 0  # what the killed scans deleted

    def summary(self, time_scale: float = 1.0) -> dict[str, object]:
        k = time_scale
        return {
            "initial_scan_blocks": self.blocks,
            "starts": len(self.started_at),
            "fatal_exits_at_s": [t * k for t in self.fatal_at],
            "api_served_at_s": None if self.served_at is None else self.served_at * k,
            "deleted_by_killed_scans": self.scan_deleted,
            "deletes_queued": self.api.deletes_queued,
        }


def crash_loop_delay(restarts: int) -> float:
    """kubelet's back-off before restart ``restarts + 1`` of a crashing container (``backOffPeriod`` doubling)."""
    return min(CRASH_LOOP_BACKOFF * 2.0 ** min(restarts, 32), CRASH_LOOP_MAX_BACKOFF)


def initial_scan_seconds(node: Node, now: float) -> list[float]:
    """Each global map's part of a full GC pass from ``now``, in walk order, as the maps stand."""
    out = []
    for family in node.families:
        for ctmap in family.maps:
            ctmap.catch_up(now)
            expired = ctmap.expired(now)
            rate, delete_s, bucket_s = node.walk_rate, node.delete_seconds, node.bucket_seconds
            out.append(walk_seconds(ctmap.present, rate, expired, delete_s, ctmap.max_entries, bucket_s))
    return out


def _killed_scan(node: Node, began: float, parts: list[float], budget: float) -> int:
    """What a scan killed ``budget`` seconds in deleted: the maps it finished, and its share of the one it was in."""
    deleted, spent = 0, 0.0
    maps = [m for f in node.families for m in f.maps]
    for ctmap, seconds in zip(maps, parts, strict=True):
        at = began + spent
        ctmap.catch_up(node.env.now)
        if spent + seconds <= budget:
            deleted += ctmap.delete_expired(at)
            spent += seconds
            continue
        share = (budget - spent) / seconds if seconds > 0 else 0.0
        deleted += ctmap.delete_oldest_expired(at, math.floor(share * ctmap.expired(at)))
        break
    return deleted


def agent_start(
    node: Node,
    start: AgentStart,
    bootstrap_s: float,
    start_gc: Callable[[float], None],
    first_pass_done: Callable[[], simpy.Event],
    gc_delay: float,
) -> Generator[simpy.Event, object, None]:
    """The agent from its first start until its API answers, then its deletion queue.

    ``start_gc(first)`` starts the GC goroutine, its first pass ``first``
    node seconds on; ``first_pass_done()`` is an event for the end of that
    pass. ``gc_delay``: from the API's answer to the GC's first pass, where
    the scan does not block (1.19.0's wait for the restored endpoints); a
    blocking scan is the first pass, at once.
    """
    env, k = node.env, node.time_scale
    while True:
        start.started_at.append(env.now)
        if bootstrap_s:
            yield env.timeout(bootstrap_s / k)
        if not start.blocks:
            break
        parts = initial_scan_seconds(node, env.now)
        if sum(parts) <= INITIAL_SCAN_TIMEOUT / k:  # the scan ends in time: the GC goroutine's own first pass
            done = first_pass_done()
            start_gc(0.0)
            yield done
            break
        began = env.now
        yield env.timeout(INITIAL_SCAN_TIMEOUT / k)
        start.scan_deleted += _killed_scan(node, began, parts, INITIAL_SCAN_TIMEOUT / k)
        node.counters.gc_seconds += INITIAL_SCAN_TIMEOUT / k
        start.fatal_at.append(env.now)
        yield env.timeout(crash_loop_delay(len(start.fatal_at) - 1) / k)
    start.served_at = env.now
    start.api.serving.succeed()
    if not start.blocks:
        start_gc(gc_delay)
    queued = start.api.queued
    while queued:  # processQueuedDeletes: one after another, each with its scrub
        sandbox: Sandbox = queued.pop(0)
        if has_endpoint(sandbox):
            assert sandbox.endpoint is not None
            yield from delete_endpoint(node, sandbox.endpoint, math.inf)
