"""The agent's primitives on threads and the wall clock, for ``ctsim emulate``.

Each mirrors its SimPy twin in ``ctsim.sim``: ``ThreadFIFOLock`` the
per-family lock (``ctsim.sim.lock.FIFOLock``), ``ThreadSemaphore``
``x/sync/semaphore``, ``ThreadLimiter`` the API limiter around the same
clock-free ``ctsim.core.rate.LimiterCore``.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable

from ctsim.core.rate import (
    WAIT_SEMAPHORE_RESOLUTION,
    APILimiterParameters,
    Cancelled,
    LimitedRequest,
    LimiterCore,
    TooManyRequests,
)


def realtime() -> str:
    """Puts the calling thread under ``SCHED_FIFO`` at the lowest real-time priority, where allowed.

    Busy processes beside an emulation then cannot delay its wake-ups. Its
    threads and its walker mostly sleep, and the kernel caps real-time tasks
    at 95 % of a core anyway, so they cannot take the machine. Returns the
    policy the caller got (``SCHED_OTHER`` when not root).
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # 0: this thread, not the process
    except (AttributeError, OSError):
        return "SCHED_OTHER"
    return "SCHED_FIFO"


class StallWatch:
    """How long the emulation could not run when it should have: its own lateness, measured.

    A thread sleeps ``TICK`` at a time and adds up what each sleep overshot by
    more than ``MIN`` (a host that starves the VM, a neighbour the scheduler
    preferred). A pod's latency can differ from the model's by that much
    without the model being wrong, and the report says how much there was.
    """

    TICK = 0.005
    MIN = 0.02  # overshoots below this are ordinary wake-up latency, counted by no one

    def __init__(self) -> None:
        self.stalled_s = 0.0
        self.worst_s = 0.0

    def run(self, stop: threading.Event) -> None:
        while True:
            start = time.monotonic()
            if stop.wait(self.TICK):
                return
            late = time.monotonic() - start - self.TICK
            if late > self.MIN:
                self.stalled_s += late
                self.worst_s = max(self.worst_s, late)


class Clock:
    """The emulated node's clock: seconds since ``start()`` (or since it was made)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def start(self) -> float:
        """Makes now t=0; returns the seconds that had passed since the last start."""
        now = time.monotonic()
        since, self.t0 = now - self.t0, now
        return since

    def now(self) -> float:
        return time.monotonic() - self.t0

    def sleep_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > 0:
            time.sleep(delay)


class ThreadFIFOLock:
    """A ticket lock: waiters are served in arrival order, like Go's mutex in starvation mode.

    Not owner-bound: one thread may take it for another to release.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0
        self._serving = 0
        self.max_queue = 0

    def acquire(self) -> None:
        with self._cond:
            ticket = self._next
            self._next += 1
            self.max_queue = max(self.max_queue, self._next - self._serving - 1)
            while self._serving != ticket:
                self._cond.wait()

    def release(self) -> None:
        with self._cond:
            self._serving += 1
            self._cond.notify_all()


class _Waiter:
    """One blocked acquire. Compared by identity: two waiters for the same weight are still two waiters
    (a list ``[n, False]`` compares equal to another's, and ``deque.remove`` would take the wrong one)."""

    __slots__ = ("n", "ready")

    def __init__(self, n: int) -> None:
        self.n, self.ready = n, False


class ThreadSemaphore:
    """``x/sync/semaphore.Weighted`` on threads: FIFO, with a give-up time."""

    def __init__(self, clock: Clock, size: int) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._size, self._cur = size, 0
        self._waiters: deque[_Waiter] = deque()

    def acquire(self, n: int, give_up_at: float, entered: Callable[[], None] | None = None) -> bool:
        """``entered`` is called once the request holds its place (a slot, or its turn in the queue)."""
        with self._cond:
            if self._size - self._cur >= n and not self._waiters:
                self._cur += n
                if entered is not None:
                    entered()
                return True
            me = _Waiter(n)
            self._waiters.append(me)
            if entered is not None:
                entered()
            while not me.ready:
                remaining = give_up_at - self._clock.now()
                if remaining <= 0:
                    self._waiters.remove(me)
                    self._notify()
                    return False
                self._cond.wait(remaining)
            return True

    def release(self, n: int) -> None:
        with self._cond:
            self._cur -= n
            self._notify()

    def _notify(self) -> None:
        while self._waiters and self._size - self._cur >= self._waiters[0].n:
            waiter = self._waiters.popleft()
            self._cur += waiter.n
            waiter.ready = True
        self._cond.notify_all()


class ThreadLimiter:
    """``APILimiter`` on the wall clock: the model's LimiterCore behind a mutex, in ``wait()``'s order."""

    def __init__(self, clock: Clock, name: str, params: APILimiterParameters) -> None:
        self.clock = clock
        self.core = LimiterCore(name, params)
        self._mutex = threading.Lock()
        self._sem = ThreadSemaphore(clock, WAIT_SEMAPHORE_RESOLUTION)

    def wait(self, deadline: float, entered: Callable[[], None] | None = None) -> LimitedRequest:
        """Admits, or raises TooManyRequests or Cancelled; ``deadline`` is the caller's.

        ``entered`` is called once the request holds its place in the limiter
        (``ctsim emulate`` keeps the pods' first arrivals in the model's order).
        """
        clock, core = self.clock, self.core
        with self._mutex:
            req = core.schedule(clock.now())
            if req.skip:
                if entered is not None:
                    entered()
                return core.admitted(clock.now(), req)
            mean, weight = core.mean_processing, core.slot_weight
        if not weight and entered is not None:
            entered()
        if weight:
            give_up = deadline
            if core.params.max_wait > 0:
                give_up = min(deadline, req.scheduled_at + core.params.max_wait)
            if not self._sem.acquire(weight, give_up, entered):
                self.finish(req, success=False)
                if clock.now() >= deadline:
                    raise Cancelled()
                with self._mutex:
                    core.refused()
                raise TooManyRequests()
            req.weight = weight
        with self._mutex:
            now = clock.now()
            limit = core.rate_limit  # the reservation's: AutoAdjust may re-tune the bucket before a cancel
            delay, token_at = core.reserve(now)
            if core.too_late(delay, now - req.scheduled_at):
                core.cancel(now, token_at, limit)
                core.refused(paced=mean > 0)
                refused = True
            else:
                refused = False
        if refused:
            time.sleep(mean)  # holding the slot, as the agent's handler does
            self.finish(req, success=False)
            raise TooManyRequests(paced=mean > 0)
        if delay > 0:
            clock.sleep_until(min(now + delay, deadline))
            if clock.now() >= deadline:
                with self._mutex:
                    core.cancel(clock.now(), token_at, limit)
                self.finish(req, success=False)
                raise Cancelled()
        with self._mutex:
            return core.admitted(clock.now(), req)

    def finish(self, req: LimitedRequest, success: bool) -> None:
        with self._mutex:
            freed = self.core.finished(self.clock.now(), req, success)
        if freed and req.weight:
            self._sem.release(req.weight)
