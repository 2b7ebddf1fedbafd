"""kubelet's pod worker: create a sandbox, and on failure retry with a new one.

Sandbox failures are retried after ``wait.Jitter(10s, 0.5)`` = 10–15 s with no
exponential growth (``pod_workers.go``); each retry is a new sandbox and a new
CNI ADD. A sandbox whose teardown timed out is torn down again first by the
next sync (spec §6).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import simpy

from ctsim.cni import cni_add, cni_del
from ctsim.endpoint import OK, TOO_MANY_REQUESTS, Sandbox
from ctsim.node import Node

if TYPE_CHECKING:
    from ctsim.storm import Storm

BACKOFF = 10.0
BACKOFF_JITTER = 0.5


@dataclass
class Pod:
    index: int
    created_at: float
    rng: random.Random = field(repr=False, compare=False, default_factory=random.Random)
    drawn: deque[float] = field(repr=False, compare=False, default_factory=deque)  # backoffs drawn ahead
    attempts: int = 0
    ready_at: float | None = None
    failures: list[tuple[float, str]] = field(default_factory=list)
    stale_sandbox: bool = False

    def peek_backoff(self, i: int) -> float:
        """The ``i``-th backoff from now, drawn ahead if needed (the stream's order never changes)."""
        while len(self.drawn) <= i:
            self.drawn.append(backoff(self.rng))
        return self.drawn[i]

    def take_backoff(self) -> float:
        return self.drawn.popleft() if self.drawn else backoff(self.rng)

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    @property
    def ready_latency(self) -> float | None:
        return None if self.ready_at is None else self.ready_at - self.created_at

    @property
    def state(self) -> str:
        """Ready, failed-and-retrying, or pending (no attempt has ended yet)."""
        if self.ready:
            return "ready"
        return "retrying" if self.failures else "pending"


def backoff(rng: random.Random) -> float:
    """``wait.Jitter(10s, 0.5)``."""
    return BACKOFF * (1.0 + rng.random() * BACKOFF_JITTER)


def new_pod(index: int, pods: int, seed: int, start_spread: float) -> Pod:
    """The ``index``-th of ``pods`` pods reaching CNI ADD within ``start_spread``.

    Arrivals are in index order, each jittered within the first half of its
    slot (so two never coincide); each pod draws from its own random stream,
    so its randomness does not depend on the order of events.
    """
    rng = random.Random(seed * 1_000_003 + index)
    slot = start_spread / pods
    return Pod(index=index, created_at=(index + 0.5 * rng.random()) * slot, rng=rng)


def pod_worker(
    node: Node, pod: Pod, deadline_s: float, start_delay: float, storm: Storm | None = None
) -> Generator[simpy.Event, object, None]:
    """One pod's sync loop; with ``storm``, runs of certain 429s are fast-forwarded (ctsim.storm)."""
    env = node.env
    yield env.timeout(start_delay)
    stale: Sandbox | None = None
    while True:
        if stale is not None:
            torn_down = yield from cni_del(node, stale)
            pod.stale_sandbox = not torn_down
            if torn_down:
                stale = None
        if stale is None:
            pod.attempts += 1
            sandbox = Sandbox(pod=pod.index, attempt=pod.attempts)
            outcome = yield from cni_add(node, sandbox, deadline_s)
            if outcome == OK:
                pod.ready_at = env.now
                return
            pod.failures.append((env.now, outcome))
            torn_down = yield from cni_del(node, sandbox)  # containerd's deferred teardown
            if not torn_down:
                stale, pod.stale_sandbox = sandbox, True
            elif outcome == TOO_MANY_REQUESTS and storm is not None:
                yield from storm.ride(pod)
                continue
        yield env.timeout(pod.take_backoff() / node.time_scale)
