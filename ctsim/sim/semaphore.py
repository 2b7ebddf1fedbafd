"""``golang.org/x/sync/semaphore.Weighted`` as the limiter uses it: FIFO waiters, and parked ones played lazily."""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import Protocol


class Waiter(Protocol):
    """What queues in the semaphore: a weight, whether it gave up, and what to do once granted.

    ``order`` is (arrival time, arrival number): the queue's order, also
    between waiters that arrived at the same instant.
    """

    weight: int
    abandoned: bool
    order: tuple[float, int]

    def granted(self) -> None: ...


ARRIVALS = itertools.count()  # numbers every arrival in the limiters, real or played (ctsim.sim.parking)


class LazyQueue(Protocol):
    """Waiters not yet made into objects (``ctsim.sim.parking``): pods whose retries are played on demand.

    The semaphore calls ``settle`` before its state changes (so what was
    played so far saw the state it had), asks ``first`` for the earliest such
    waiter still queued (its order, weight) when it has room to grant, and
    ``take``s it as a real waiter (or None: it was answered in the instant
    of its grant, and its slot is free again); the limiter calls ``changed``
    after a request finished.
    """

    def settle(self) -> None: ...

    def first(self) -> tuple[tuple[float, int], int] | None: ...

    def take(self) -> Waiter | None: ...

    def changed(self) -> None: ...


class WeightedSemaphore:
    """``golang.org/x/sync/semaphore.Weighted``: FIFO; the head waiter blocks the rest.

    A waiter that gives up is only marked, and dropped when it reaches the
    head, so leaving costs O(1) however long the queue is.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.cur = 0
        self.waiting = 0  # waiters not abandoned
        self._waiters: deque[Waiter] = deque()
        self.lazy: LazyQueue | None = None

    def has_room(self, n: int) -> bool:
        return self.size - self.cur >= n and not self.waiting

    def _settle(self) -> None:
        """Before the state changes: the lazy queue's steps so far play on the state they saw."""
        if self.lazy is not None:
            self.lazy.settle()

    def try_acquire(self, n: int) -> bool:
        if not self.has_room(n):
            return False
        self._settle()
        self.cur += n
        return True

    def enqueue(self, waiter: Waiter) -> None:
        """Queues a waiter; its ``granted()`` runs (synchronously, in FIFO order) when it gets its slot."""
        self._waiters.append(waiter)
        self.waiting += 1

    def abandon(self, waiter: Waiter) -> None:
        """A waiter gave up before its grant (context done): its place goes to the next."""
        self._settle()
        waiter.abandoned = True
        self.waiting -= 1
        self._notify()

    def release(self, n: int) -> None:
        self._settle()
        self.cur -= n
        self._notify()

    def requeue(self, waiters: list[Waiter]) -> None:
        """Waiters taken back from the lazy queue at once, placed among the rest by arrival."""
        ordered = heapq.merge(self._waiters, sorted(waiters, key=_order), key=_order)
        self._waiters = deque(ordered)
        self.waiting += len(waiters)

    def _notify(self) -> None:
        waiters, lazy = self._waiters, self.lazy
        while True:
            while waiters and waiters[0].abandoned:
                waiters.popleft()
            parked = lazy.first() if lazy is not None else None
            if parked is not None and (not waiters or parked[0] < waiters[0].order):
                if self.size - self.cur < parked[1]:
                    break
                self.cur += parked[1]
                assert lazy is not None
                waiter = lazy.take()
                if waiter is None:  # granted and answered in this instant: the slot is back
                    self.cur -= parked[1]
                else:
                    waiter.granted()
                continue
            if not waiters:
                break
            head = waiters[0]
            if self.size - self.cur < head.weight:
                break
            self.cur += head.weight
            waiters.popleft()
            self.waiting -= 1
            head.granted()


def _order(waiter: Waiter) -> tuple[float, int]:
    return waiter.order
