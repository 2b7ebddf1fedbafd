"""The per-family CT lock: ``mapInfo[...].natMapLock`` with ``globalDeleteLock[mapType]``.

``doGC4``/``doGC6`` take the family's ``natMapLock`` (shared by its TCP and
non-TCP maps) for the whole walk of one map, with that map type's
``globalDeleteLock`` around the dump: every IPv4 CT walk, periodic GC pass or
pod scrub alike, is serialised map by map. Go's ``sync.Mutex`` turns FIFO
under contention (starvation mode).

It behaves as a ``simpy.Resource`` of capacity 1, event for event: a grant is
an event, and a release hands the lock on one scheduler round later (the
Resource's Release event), unless a new request comes first, which wakes the
oldest waiter at once. Written out, it costs half of what the generic
Resource does, and every GC pass and scrub takes it twice; ``FIFOLock`` is
the same for any capacity. A process woken alone by its own event takes a
free lock with nothing else due at this instant without the grant's event
(``take_now``): nothing could have run between. Walks, scrubs and
regenerations do.
"""

from __future__ import annotations

from collections import deque
from types import TracebackType

import simpy

from ctsim.sim.clock import nothing_due_now


class LockRequest(simpy.Event):
    """One ``Lock()``; use as ``with lock.request() as req: yield req``."""

    __slots__ = ("lock",)

    def __init__(self, lock: FIFOLock) -> None:
        super().__init__(lock.env)
        self.lock = lock

    def __enter__(self) -> LockRequest:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is GeneratorExit:  # a process torn down with the simulation: nothing to hand on
            return
        if self.triggered:
            self.lock.release()
        else:
            self.lock.waiters.remove(self)


class FIFOLock:
    """``capacity`` holders at a time, the rest served first come first: ``simpy.Resource``, event for event.

    The agent's other locks are this too: an endpoint's own lock
    (capacity 1) and the build semaphore ``buildEndpointSem`` (one per core).
    """

    def __init__(self, env: simpy.Environment, capacity: int = 1) -> None:
        self.env = env
        self.capacity = capacity
        self.holders = 0  # granted and not yet released
        self.waiters: deque[LockRequest] = deque()

    def request(self) -> LockRequest:
        req = LockRequest(self)
        self.waiters.append(req)
        self._grant()
        return req

    def take_now(self) -> bool:
        """Takes the lock without an event if a request now would be granted and nothing else is due now.

        Only for a caller the running event wakes alone (see
        ``ctsim.sim.clock.advance``): the grant's event would run next, so
        nothing can tell the difference. The caller then calls ``release``.
        """
        if self.holders < self.capacity and not self.waiters and nothing_due_now(self.env):
            self.holders += 1
            return True
        return False

    def release(self) -> None:
        self.holders -= 1
        if not self.waiters:
            return  # a hand-over to nobody: a request before it would be granted at once all the same
        handover = simpy.Event(self.env)
        handover.callbacks.append(lambda _: self._grant())  # type: ignore[union-attr]
        handover.succeed()

    def _grant(self) -> None:
        """Grants the oldest waiter if there is room: one per request or hand-over, as the Resource does."""
        if self.holders < self.capacity and self.waiters:
            self.holders += 1
            self.waiters.popleft().succeed()


class GlobalDeleteLock(FIFOLock):
    """A family's CT lock (a FIFO mutex) that remembers how it was used."""

    def __init__(self, env: simpy.Environment, family: str) -> None:
        super().__init__(env, capacity=1)
        self.family = family
        self.max_queue = 0
        self.max_holders = 0
        self.held_seconds = 0.0

    def request(self) -> LockRequest:
        req = super().request()
        if len(self.waiters) > self.max_queue:
            self.max_queue = len(self.waiters)
        if self.holders > self.max_holders:
            self.max_holders = self.holders
        return req

    def take_now(self) -> bool:
        if not super().take_now():
            return False
        if self.holders > self.max_holders:
            self.max_holders = self.holders
        return True

    def record_hold(self, seconds: float) -> None:
        self.held_seconds += seconds
        if self.holders > self.max_holders:
            self.max_holders = self.holders
