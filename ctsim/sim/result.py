"""What one run produced, derived from the model's final state; renderers read only this."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ctsim.core.maptype import MapType
from ctsim.core.projection import FamilyWalk, scrub_seconds
from ctsim.core.rate import LimiterCore
from ctsim.inputs.scenario import Scenario
from ctsim.sim.gc import GCHistory, GCPass
from ctsim.sim.intervals import RetryIntervals
from ctsim.sim.latency import Latencies, NodeLatencies
from ctsim.sim.node import Counters
from ctsim.sim.pod import Pod

if TYPE_CHECKING:
    from ctsim.sim.deletion import Deletion


class Verdict(StrEnum):
    """What a run says of the burst (README, "Reading the output")."""

    OK = "ok"  # every pod Ready at its first attempt
    DEGRADED = "degraded"  # every pod Ready, some after failed attempts
    COLLAPSE = "collapse"  # the storm stalled: pods still failing at the end, or until an outside event (a GC pass)
    UNFINISHED = "unfinished"  # the run ended before some pod's first attempt did, or while pods still drained


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# What each of ``latency_s``'s figures is on a node: the series that holds it, or why none does.
LATENCY_SERIES = {
    "cni_add": "kubelet's sandbox start (RunPodSandbox); cilium-cni exports none",
    "cni_del": "containerd's teardown (StopPodSandbox); cilium-cni exports none",
    "ct_clean_wait_ok": 'cilium_endpoint_regeneration_time_stats_seconds{scope="waitingForCTClean",outcome="success"}',
    "ct_clean_wait_failed": "none: a failed regeneration sends no stats",
    "limiter_wait": "cilium_api_limiter_wait_duration_seconds{api_call} (mean, min, max), "
    "cilium_api_limiter_wait_history_duration_seconds{api_call} (off by default)",
}

STALL = 1800.0  # pods failing this long with none becoming Ready: the burst is not draining on its own


class Stall:
    """The longest stretch in which pods kept failing and none became Ready; what ended it, if anything."""

    __slots__ = ("ended_by", "since", "until")

    def __init__(self, since: float, until: float | None, ended_by: GCPass | None) -> None:
        self.since, self.until, self.ended_by = since, until, ended_by  # until None: it had not ended


def stall(pods: list[Pod], passes: list[GCPass], end: float, at_least: float = STALL) -> Stall | None:
    """The burst's longest stall of ``at_least`` seconds (``STALL`` on the node's clock) up to ``end``.

    None: it kept draining. Times are the run's clock, as the pods' are.

    A closed stall is ended by the last GC pass that deleted entries and
    started within it, when there is one: the outside event that let the
    next pod through.
    """
    if not any(p.failures for p in pods):
        return None
    ready = sorted(p.ready_at for p in pods if p.ready_at is not None)
    since, longest = 0.0, None
    for at in ready:
        if at - since >= at_least and (longest is None or at - since > longest[1] - longest[0]):
            longest = (since, at)
        since = at
    if (
        len(ready) < len(pods)
        and end - since >= at_least
        and (longest is None or end - since > longest[1] - longest[0])
    ):
        return Stall(since, None, None)
    if longest is None:
        return None
    a, b = longest
    ended_by = next((g for g in reversed(passes) if a <= g.start <= b and g.deleted > 0), None)
    return Stall(a, b, ended_by)


def verdict(pods: list[Pod], passes: list[GCPass] | None = None, end: float = 0.0, at_least: float = STALL) -> Verdict:
    """ok / degraded when every pod is Ready on its own; unfinished while some pod's first attempt has not ended.

    A burst that every pod survived only because a GC pass ended its stall is
    a collapse: it would not have drained on its own.
    """
    if all(p.ready for p in pods):
        if all(p.attempts == 1 for p in pods):
            return Verdict.OK
        stalled = stall(pods, passes or [], end, at_least)
        return Verdict.COLLAPSE if stalled is not None and stalled.ended_by is not None else Verdict.DEGRADED
    if any(not p.ready and not p.failures for p in pods):
        return Verdict.UNFINISHED
    # Pods still failing: a collapse only once they stalled (STALL with none Ready); else still draining.
    return Verdict.COLLAPSE if stall(pods, passes or [], end, at_least) is not None else Verdict.UNFINISHED


def limiter_start(s: Scenario) -> dict[str, float]:
    """endpoint-create as the run starts it (``Scenario.create_mean_processing``; JSON ``limiter.start``)."""
    core = LimiterCore("endpoint-create", s.endpoint_create)
    if s.agent_state == "warm":
        core.warm(s.create_mean_processing)
        if s.create_limiter is not None:
            core.set_state(s.create_limiter.parallel_requests, s.create_limiter.rate_limit, s.create_limiter.rate_burst)
    return {
        "endpoint_create_parallel": core.parallel_requests,
        "endpoint_create_burst": core.rate_burst,
        "endpoint_create_rate_per_s": core.rate_limit,
        "mean_processing_s": core.mean_processing,
    }


def _stall_dict(st: Stall | None) -> dict[str, float | None] | None:
    if st is None:
        return None
    return {
        "since_s": st.since,
        "until_s": st.until,
        "ended_by_gc_pass_at_s": None if st.ended_by is None else st.ended_by.start,
    }


def _spread(values: RetryIntervals) -> dict[str, float | None]:
    return {"p50": values.percentile(0.50), "p90": values.percentile(0.90), "max": values.max()}


class LimiterEnd:
    """Where AutoAdjust left the agent's limiters at the end of the run (JSON ``limiter``): a contract.

    A slotted class: a dataclass or NamedTuple costs ~0.4 ms (~0.8 M instructions) to define at every start-up.
    """

    FIELDS = (  # the JSON's keys, in its order
        "endpoint_create_rate_per_s",
        "endpoint_create_burst",
        "endpoint_create_parallel",
        "endpoint_create_rejected",
        "endpoint_create_paced",
        "endpoint_delete_parallel",
    )
    __slots__ = FIELDS

    def __init__(self, create: LimiterCore, delete: LimiterCore) -> None:
        self.endpoint_create_rate_per_s: float = create.rate_limit
        self.endpoint_create_burst: int = create.rate_burst
        self.endpoint_create_parallel: int = create.parallel_requests
        self.endpoint_create_rejected: int = create.rejected
        self.endpoint_create_paced: int = create.paced
        self.endpoint_delete_parallel: int = delete.parallel_requests

    def to_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.FIELDS}


@dataclass
class FamilyResult:
    """One address family's maps and lock over the run."""

    name: str
    max_entries: int
    any_max_entries: int
    entries_at_start: int
    any_entries_at_start: int  # the non-TCP map's part of entries_at_start
    entries_at_end: int
    expired_at_end: int
    live_evicted: int
    lock_max_queue: int
    lock_max_holders: int
    lock_held_seconds: float


@dataclass
class Advice:
    burst: int
    safe_burst: int | None  # largest burst whose queued scrubs fit the deadline
    max_entries_for_burst: int  # table size at which `burst` pods fit
    walk_seconds_for_burst: float


@dataclass
class Result:
    scenario: Scenario
    verdict: Verdict
    families: list[FamilyResult]
    walks: list[FamilyWalk]  # each family's walk at t=0
    pods: list[Pod]
    counters: Counters
    gc: GCHistory
    limiter_end: LimiterEnd
    advice: Advice
    ended_at: float = 0.0  # on the run's clock, as every time here (the node's, for ctsim run)
    ended_because: str = "horizon"  # horizon (--horizon), resolved (all Ready), settled (1 h after a GC pass), cap
    extra: dict[str, Any] = field(default_factory=dict)
    retry_intervals: RetryIntervals = field(default_factory=RetryIntervals)
    latency: NodeLatencies = field(default_factory=NodeLatencies)
    limiter_waits: dict[str, Latencies] = field(default_factory=dict)  # by api_call
    deletions: list[Deletion] = field(default_factory=list)  # --deletes: each running pod deleted
    rollout: dict[str, float | int | None] | None = None  # --rollout: how far it got
    signals: dict[str, dict[str, int]] | None = None  # fill-up signals handled and dropped (muted), by family
    agent: dict[str, object] | None = None  # a fresh agent's start-up (sim.bootstrap): its starts, exits, API

    def deletes(self) -> dict[str, Any]:
        """JSON ``deletes``: how the deletions went, from kubelet's ask to the DEL that succeeded."""
        took = Latencies()
        for d in self.deletions:
            if d.latency is not None:
                took.add(d.latency)
        return {
            "requested": len(self.deletions),
            "deleted": len(took),
            "pending": sum(d.deleted_at is None and d.asked_at <= self.ended_at for d in self.deletions),
            "del_attempts": sum(d.attempts for d in self.deletions),
            "delete_latency_s": took.to_dict(),
        }

    def latency_figures(self) -> dict[str, Any]:
        """JSON ``latency_s``: each figure's p50, p90 and max (None where nothing was observed)."""
        lat = self.latency
        return {
            "cni_add": lat.cni_add.to_dict(),
            "cni_del": lat.cni_del.to_dict(),
            "ct_clean_wait_ok": lat.ct_clean_wait_ok.to_dict(),
            "ct_clean_wait_failed": lat.ct_clean_wait_failed.to_dict(),
            "limiter_wait": {api_call: w.to_dict() for api_call, w in self.limiter_waits.items()},
        }

    @property
    def stall(self) -> Stall | None:
        return stall(self.pods, self.gc.passes, self.ended_at, STALL / self.scenario.time_scale)

    @property
    def walk_seconds(self) -> float:
        """One full scrub at t=0: every family's maps."""
        return scrub_seconds(self.walks)

    @property
    def entries_at_start(self) -> int:
        return sum(f.entries_at_start for f in self.families)

    @property
    def entries_at_end(self) -> int:
        return sum(f.entries_at_end for f in self.families)

    @property
    def expired_at_end(self) -> int:
        return sum(f.expired_at_end for f in self.families)

    @property
    def live_evicted(self) -> int:
        return sum(f.live_evicted for f in self.families)

    @property
    def lock_max_queue(self) -> int:
        return max(f.lock_max_queue for f in self.families)

    @property
    def lock_max_holders(self) -> int:
        return max(f.lock_max_holders for f in self.families)

    @property
    def lock_held_seconds(self) -> float:
        """The busiest family lock's time held."""
        return max(f.lock_held_seconds for f in self.families)

    @property
    def ready_latencies(self) -> list[float]:
        return [p.ready_latency for p in self.pods if p.ready_latency is not None]

    @property
    def pods_ready(self) -> int:
        return sum(p.ready for p in self.pods)

    @property
    def ready_first_attempt(self) -> int:
        return sum(p.ready and p.attempts == 1 for p in self.pods)

    def ready_latency(self) -> dict[str, float | None]:
        """Percentiles of the Ready pods' latencies (None without any)."""
        lat = self.ready_latencies
        return {
            "p50": percentile(lat, 0.50),
            "p90": percentile(lat, 0.90),
            "p99": percentile(lat, 0.99),
            "max": max(lat) if lat else None,
        }

    @property
    def recovered_at(self) -> float | None:
        if not all(p.ready for p in self.pods):
            return None
        return max(p.ready_at for p in self.pods if p.ready_at is not None)

    def to_dict(self) -> dict[str, Any]:
        c = self.counters
        s = self.scenario
        return {
            "verdict": self.verdict,
            "walk_seconds": self.walk_seconds,
            "inputs": s.to_dict(),
            "pods": {
                "requested": len(self.pods),
                "ready": self.pods_ready,
                "ready_first_attempt": self.ready_first_attempt,
                "retrying": sum(p.state == "retrying" for p in self.pods),
                "pending": sum(p.state == "pending" for p in self.pods),
                "attempts": sum(p.attempts for p in self.pods),
                "ready_latency_s": self.ready_latency(),
                "retry_interval_s": _spread(self.retry_intervals),
                "recovered_at_s": self.recovered_at,
            },
            "run": {
                "ended_at_s": self.ended_at,
                "ended_because": self.ended_because,
                "until_resolved": s.until_resolved,
            },
            "stall": _stall_dict(self.stall),
            "cni": {
                "add_attempts": c.add_attempts,
                "add_ok": c.add_ok,
                "add_timeouts": c.add_timeouts,
                "add_429": c.add_429,
                "add_429_paced": c.add_429_paced,
                "add_gave_up_in_limiter": c.add_cancelled_in_limiter,
                "del_calls": c.del_calls,
                "del_404": c.del_404,
                "del_timeouts": c.del_timeouts,
                **({"add_no_agent": c.add_no_agent} if self.agent is not None else {}),
            },
            **({"deletes": self.deletes()} if self.deletions else {}),
            **({"rollout": self.rollout} if self.rollout is not None else {}),
            **({"agent": self.agent} if self.agent is not None else {}),
            "latency_s": self.latency_figures(),
            "latency_series": LATENCY_SERIES,
            "lock": {
                "orphaned_walk_seconds": c.orphaned_walk_seconds,
                "orphaned_walks": c.orphaned_walks,
                "max_queue": self.lock_max_queue,
                "max_holders": self.lock_max_holders,
                "held_seconds": self.lock_held_seconds,
                "scrub_seconds": c.scrub_seconds,
                "gc_seconds": c.gc_seconds,
                "create_scrubs": c.create_scrubs,
                "delete_scrubs": c.delete_scrubs,
            },
            "gc": {
                "initial_interval_s": s.gc_initial_interval,
                "intervals_s": self.gc.intervals,
                "pass_starts_s": [p.start for p in self.gc.passes],
                "deleted": [p.deleted for p in self.gc.passes],
                "max_delete_ratios": [p.max_delete_ratio for p in self.gc.passes],
                "pass_families": [list(p.families) for p in self.gc.passes],
                "woken_by": [p.woken_by for p in self.gc.passes],
                "runs": self.gc.runs([f.name for f in self.families]),
                "delete_ratios": self.gc.ratios([f.name for f in self.families]),
                **({"signals": self.signals} if self.signals is not None else {}),
            },
            "table": {
                "max_entries": s.map(MapType.IPV4_TCP).max_entries,
                "entries_at_start": self.entries_at_start,
                "entries_at_end": self.entries_at_end,
                "expired_at_end": self.expired_at_end,
                "live_evicted": self.live_evicted,
            },
            "families": {
                f.name: {
                    "walk_seconds": w.seconds,
                    "max_entries": f.max_entries,
                    "any_max_entries": f.any_max_entries,
                    "entries_at_start": f.entries_at_start,
                    "tcp_entries_at_start": f.entries_at_start - f.any_entries_at_start,
                    "any_entries_at_start": f.any_entries_at_start,
                    "entries_at_end": f.entries_at_end,
                    "expired_at_end": f.expired_at_end,
                    "live_evicted": f.live_evicted,
                    "lock": {
                        "max_queue": f.lock_max_queue,
                        "max_holders": f.lock_max_holders,
                        "held_seconds": f.lock_held_seconds,
                    },
                }
                for f, w in zip(self.families, self.walks, strict=True)
            },
            "limiter": {"start": limiter_start(s), **self.limiter_end.to_dict()},
            "advice": {
                "burst": self.advice.burst,
                "safe_burst": self.advice.safe_burst,
                "max_entries_for_burst": self.advice.max_entries_for_burst,
                "walk_seconds_for_burst": self.advice.walk_seconds_for_burst,
            },
            "sim": dict(self.extra),
        }
