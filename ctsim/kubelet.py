"""kubelet's pod worker: create a sandbox, and on failure retry with a new one.

Sandbox failures are retried after ``wait.Jitter(10s, 0.5)`` = 10–15 s with no
exponential growth (``pod_workers.go``); each retry is a new sandbox and a new
CNI ADD. A sandbox whose teardown timed out is torn down again first by the
next sync (``kuberuntime_manager.go`` ``SyncPod``).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Generator
from dataclasses import dataclass, field

import simpy

from ctsim.cni import cni_add, cni_del
from ctsim.endpoint import OK, Sandbox
from ctsim.node import Node

BACKOFF = 10.0
BACKOFF_JITTER = 0.5


@dataclass
class Pod:
    index: int
    created_at: float
    rng: random.Random = field(repr=False, compare=False, default_factory=random.Random)
    attempts: int = 0
    attempt_times: list[float] = field(default_factory=list)  # when each CNI ADD started
    ready_at: float | None = None
    failures: list[tuple[float, str]] = field(default_factory=list)
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
            pod.failures.append((env.now, outcome))
            torn_down = yield from cni_del(node, sandbox)  # containerd's deferred teardown
            if not torn_down:
                stale, pod.stale_sandbox = sandbox, True
        yield env.timeout(backoff(pod.rng) / node.time_scale)
