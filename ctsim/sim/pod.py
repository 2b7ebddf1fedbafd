"""A pod as kubelet sees it: its own random stream, its back-off, its attempts, and its sync-loop steps.

``ctsim.sim.kubelet`` runs the loop; ``ctsim.sim.parking`` plays the same
steps without a process. Both read them from here.
"""

from __future__ import annotations

import random
from array import array
from dataclasses import dataclass, field
from enum import Enum

BACKOFF = 10.0
BACKOFF_JITTER = 0.5


class Step(Enum):
    """A pod's next step in its sync loop."""

    ADD = "add"
    DEL_AFTER_ADD = "del"  # containerd's teardown of the sandbox whose ADD failed
    DEL_STALE = "del stale"  # the next sync's teardown of a sandbox whose DEL timed out
    BACK_OFF = "back-off"


# The members by name, for the hot paths (a module global is read faster than an Enum attribute on 3.11).
ADD, DEL_AFTER_ADD, DEL_STALE, BACK_OFF = Step


class Draws:
    """A pod's own random stream, ``random.Random(seed).random()``, drawn ahead in blocks.

    A Mersenne Twister holds 2.5 KB of state; a hundred thousand parked pods
    would hold 250 MB of it to draw a few dozen jitters an hour. This keeps a
    block of drawn values and re-seeds for the next block, skipping what was
    drawn (one ``getrandbits`` call). A pod served at once draws one or two
    values; one that retries draws ~45 an hour in a collapse, so the second
    block holds 48 (one re-seed an hour, not three); each later one holds as
    many as were drawn before it, up to ``BLOCK`` values: a pod's memory stays
    0.5 KB however long it retries (a block as long as its history made a
    20,000-pod storm hold 240 MB; blocks of 256 held 200 MB at 100,000 pods).
    A re-seed costs ~4 us and ~8 ns per value skipped: two days of retries
    (~2,400 draws, ~37 blocks) re-seed for ~0.4 ms a pod, within the noise of
    a 5,000-pod storm's 16-18 s.
    """

    BLOCK = 64

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

    def release(self) -> None:
        """Frees the values drawn ahead (2 KB after a long storm); the stream goes on where it was.

        A finished run's pods keep only what its result reads: 100,000 of them
        held 200 MB of blocks nobody would draw from.
        """
        self._drawn -= len(self._block) - self._next  # the next draw re-seeds and draws them again
        self._block, self._next = array("d"), 0

    def peek(self) -> float:
        """The value the next ``random()`` returns."""
        if self._next == len(self._block):
            rng = random.Random(self._seed)
            if self._drawn:
                rng.getrandbits(64 * self._drawn)  # random() takes two 32-bit words: skips what was drawn
            size = min(max(48, self._drawn), self.BLOCK) if self._drawn else 8  # a re-seed: as ~90 draws
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
    last_attempt_at: float = 0.0  # when its latest CNI ADD started (the run's intervals: Node.retry_intervals)
    ready_at: float | None = None
    failures: int = 0  # attempts that ended without the pod Ready
    stale_sandbox: bool = False

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


def new_pod(index: int, pods: int, seed: int, start_spread: float, at: float | None = None, within: float = 0.0) -> Pod:
    """The ``index``-th of ``pods`` pods reaching CNI ADD within ``start_spread``, or at ``at`` when given.

    Arrivals are in index order, each jittered within the first half of its
    slot (so two never coincide); each pod draws from its own random stream,
    so its randomness does not depend on the order of events. A pod with its
    own arrival time draws the jitter all the same: its stream is the same.
    ``within``: the slot of a scheduled arrival at ``at`` (``--arrivals``),
    jittered likewise (a schedule's round instants would meet other events';
    a pod's own instants must not, ``ctsim.sim.parking``); 0 keeps ``at``.
    """
    rng = Draws(seed * 1_000_003 + index)
    u = rng.random()
    if at is not None:
        return Pod(index=index, created_at=at + 0.5 * u * within if within else at, rng=rng)
    return Pod(index=index, created_at=(index + 0.5 * u) * (start_spread / pods), rng=rng)
