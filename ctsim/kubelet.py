"""kubelet's pod worker: create a sandbox, and on failure retry with a new one.

Sandbox failures are retried after ``wait.Jitter(10s, 0.5)`` = 10–15 s with no
exponential growth (``pod_workers.go``); each retry is a new sandbox and a new
CNI ADD. A sandbox whose teardown timed out is torn down again first by the
next sync (``kuberuntime_manager.go`` ``SyncPod``).
"""

from __future__ import annotations

import itertools
import random
from array import array
from collections.abc import Generator
from dataclasses import dataclass, field

import simpy

from ctsim.cni import cni_add, cni_del
from ctsim.endpoint import OK, Sandbox
from ctsim.node import Node

BACKOFF = 10.0
BACKOFF_JITTER = 0.5


class Draws:
    """A pod's own random stream, ``random.Random(seed).random()``, drawn ahead in blocks.

    A Mersenne Twister holds 2.5 KB of state; a hundred thousand parked pods
    would hold 250 MB of it to draw a few dozen jitters an hour. This keeps a
    block of drawn values and re-seeds for the next block (skipping what was
    drawn; blocks double, so the skipping costs as much as the drawing).
    """

    __slots__ = ("_block", "_drawn", "_next", "_seed")

    def __init__(self, seed: int) -> None:
        self._seed, self._drawn, self._next = seed, 0, 0
        self._block: array[float] = array("d")

    def random(self) -> float:
        if self._next == len(self._block):
            rng = random.Random(self._seed)
            for _ in range(self._drawn):
                rng.random()
            size = max(8, self._drawn)
            self._block = array("d", (rng.random() for _ in range(size)))
            self._drawn += size
            self._next = 0
        value = self._block[self._next]
        self._next += 1
        return value


@dataclass
class Pod:
    index: int
    created_at: float
    rng: Draws = field(repr=False, compare=False)
    attempts: int = 0
    attempt_times: list[float] = field(default_factory=list)  # when each CNI ADD started
    ready_at: float | None = None
    failures: int = 0  # attempts that ended without the pod Ready
    stale_sandbox: bool = False

    @property
    def retry_intervals(self) -> list[float]:
        """Time between consecutive ADD attempts: what an operator sees as the retry cadence."""
        t = self.attempt_times
        return [b - a for a, b in itertools.pairwise(t)]

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


def backoff(rng: Draws | random.Random) -> float:
    """``wait.Jitter(10s, 0.5)``."""
    return BACKOFF * (1.0 + rng.random() * BACKOFF_JITTER)


def new_pod(index: int, pods: int, seed: int, start_spread: float) -> Pod:
    """The ``index``-th of ``pods`` pods reaching CNI ADD within ``start_spread``.

    Arrivals are in index order, each jittered within the first half of its
    slot (so two never coincide); each pod draws from its own random stream,
    so its randomness does not depend on the order of events.
    """
    rng = Draws(seed * 1_000_003 + index)
    slot = start_spread / pods
    return Pod(index=index, created_at=(index + 0.5 * rng.random()) * slot, rng=rng)


def pod_worker(node: Node, pod: Pod, deadline_s: float, start_delay: float) -> Generator[simpy.Event, object, None]:
    """One pod's sync loop: ADD, and on failure containerd's DEL, back-off, a new sandbox."""
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
            pod.attempt_times.append(env.now)
            sandbox = Sandbox(pod=pod.index, attempt=pod.attempts)
            outcome = yield from cni_add(node, sandbox, deadline_s)
            if outcome == OK:
                pod.ready_at = env.now
                return
            pod.failures += 1
            torn_down = yield from cni_del(node, sandbox)  # containerd's deferred teardown
            if not torn_down:
                stale, pod.stale_sandbox = sandbox, True
        yield env.timeout(backoff(pod.rng) / node.time_scale)
