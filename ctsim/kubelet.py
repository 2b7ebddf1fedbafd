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
from typing import TYPE_CHECKING, cast

import simpy

from ctsim.cni import cni_add, cni_del
from ctsim.endpoint import OK, Sandbox
from ctsim.node import Node

if TYPE_CHECKING:
    from ctsim.limiter import Call
    from ctsim.parking import Parking, Resume

BACKOFF = 10.0
BACKOFF_JITTER = 0.5

# A pod's next step in its sync loop.
ADD = "add"
DEL_AFTER_ADD = "del"  # containerd's teardown of the sandbox whose ADD failed
DEL_STALE = "del stale"  # the next sync's teardown of a sandbox whose DEL timed out
BACK_OFF = "back-off"


class Draws:
    """A pod's own random stream, ``random.Random(seed).random()``, drawn ahead in blocks.

    A Mersenne Twister holds 2.5 KB of state; a hundred thousand parked pods
    would hold 250 MB of it to draw a few dozen jitters an hour. This keeps a
    block of drawn values and re-seeds for the next block, skipping what was
    drawn (one ``getrandbits`` call). A pod served at once draws one or two
    values; one that retries draws ~45 an hour in a collapse, so the second
    block holds 48 (one re-seed an hour, not three); each later one holds as
    many as were drawn before it.
    """

    __slots__ = ("_block", "_drawn", "_next", "_seed")

    def __init__(self, seed: int) -> None:
        self._seed, self._drawn, self._next = seed, 0, 0
        self._block: array[float] = array("d")

    def random(self) -> float:
        value = self._block[self._next] if self._next < len(self._block) else self.peek()
        self._next += 1
        return value

    def next_after(self) -> float:
        """``random()`` then ``peek()``: draws the value peeked before, peeks the one after it."""
        if self._next == len(self._block):
            self.peek()  # the next block
        self._next += 1
        return self._block[self._next] if self._next < len(self._block) else self.peek()

    def peek(self) -> float:
        """The value the next ``random()`` returns."""
        if self._next == len(self._block):
            rng = random.Random(self._seed)
            if self._drawn:
                rng.getrandbits(64 * self._drawn)  # random() takes two 32-bit words: skips what was drawn
            size = max(48, self._drawn) if self._drawn else 8  # a re-seed costs as much as ~90 draws
            draw = rng.random
            self._block = array("d", [draw() for _ in range(size)])
            self._drawn += size
            self._next = 0
        return self._block[self._next]


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
    return jitter(rng.random())


def jitter(u: float) -> float:
    """``wait.Jitter(10s, 0.5)`` for the uniform draw ``u``."""
    return BACKOFF * (1.0 + u * BACKOFF_JITTER)


def new_pod(index: int, pods: int, seed: int, start_spread: float) -> Pod:
    """The ``index``-th of ``pods`` pods reaching CNI ADD within ``start_spread``.

    Arrivals are in index order, each jittered within the first half of its
    slot (so two never coincide); each pod draws from its own random stream,
    so its randomness does not depend on the order of events.
    """
    rng = Draws(seed * 1_000_003 + index)
    slot = start_spread / pods
    return Pod(index=index, created_at=(index + 0.5 * rng.random()) * slot, rng=rng)


def pod_worker(
    node: Node, pod: Pod, deadline_s: float, parking: Parking | None = None
) -> Generator[simpy.Event, object, None]:
    """One pod's sync loop from its first ADD: on failure containerd's DEL, back-off, a new sandbox.

    It is started at ``pod.created_at`` (``clock.process_after``).

    A sandbox whose DEL timed out is torn down first at the next sync; once
    it is, the new sandbox's ADD follows at once. With ``parking``, steps that
    can only be refused are handed to it (``ctsim.parking``): from a back-off,
    a step its own timer (its start, a back-off) brought it to, or the
    teardown's DEL; the loop picks up where parking leaves the pod.
    """
    env = node.env
    stale: Sandbox | None = None  # a sandbox whose teardown timed out
    sandbox: Sandbox | None = None  # this attempt's
    call: Call | None = None  # a call already waiting in the limiter (a pod coming back from parking)
    step = ADD
    own_timer = True  # this instant came from the pod's own jittered timer: no other event shares it
    while True:
        # A step due now is played at once, in this process's turn. It parks the pod only if what follows
        # from it comes at the pod's own instants: its own timer brought it here, or it is the teardown's
        # DEL, which is answered at once or ends in containerd's timeout and a back-off.
        if (
            parking is not None
            and call is None
            and (own_timer or step == DEL_AFTER_ADD)
            and parking.worth_it(pod)
            and parking.admits(sandbox if step == DEL_AFTER_ADD else stale)
        ):
            step, stale, sandbox, call = yield from _parked(parking, pod, stale, sandbox, env.now, step)
            own_timer = False
            continue
        own_timer = False
        if step == BACK_OFF:
            delay = backoff(pod.rng) / node.time_scale
            step = DEL_STALE if stale is not None else ADD
            if parking is None or not parking.worth_it(pod) or not parking.admits(stale):
                yield env.timeout(delay)
                own_timer = True
                continue
            step, stale, sandbox, call = yield from _parked(parking, pod, stale, sandbox, env.now + delay, step)
            continue
        if step == DEL_STALE:
            assert stale is not None
            torn_down = yield from cni_del(node, stale, call)
            call = None
            pod.stale_sandbox = not torn_down
            if torn_down:
                stale, step = None, ADD
            else:
                step = BACK_OFF
        elif step == ADD:
            if call is None:
                pod.attempts += 1
                pod.attempt_times.append(env.now)
                sandbox = Sandbox(pod=pod.index, attempt=pod.attempts)
            assert sandbox is not None
            outcome = yield from cni_add(node, sandbox, deadline_s, call)
            call = None
            if outcome == OK:
                pod.ready_at = env.now
                return
            pod.failures += 1
            step = DEL_AFTER_ADD
        else:  # containerd's deferred teardown
            assert sandbox is not None
            torn_down = yield from cni_del(node, sandbox, call)
            call = None
            if not torn_down:
                stale, pod.stale_sandbox = sandbox, True
            step = BACK_OFF


def _parked(
    parking: Parking, pod: Pod, stale: Sandbox | None, sandbox: Sandbox | None, at: float, step: str
) -> Generator[simpy.Event, object, tuple[str, Sandbox | None, Sandbox | None, Call | None]]:
    """Hands the pod's ``step`` at ``at`` to parking; returns where the pod goes on (step, sandboxes, call)."""
    resume = cast("Resume", (yield parking.park(pod, stale, sandbox, at, step)))
    return resume.step, resume.stale, resume.sandbox, resume.call
