"""Cilium's API rate limiter (``pkg/rate/api_limiter.go``, v1.16.5) on simulated time.

``wait()`` admits a request in this order: the first ``skip_initial`` requests
the agent ever schedules pass untouched; then the request waits for one of
``parallel_requests`` slots (``x/sync/semaphore``, FIFO) for at most
``max_wait`` (timeout: HTTP 429, no token used); then it reserves a token
(``x/time/rate``). If the token's delay plus the time already spent waiting
exceeds ``max_wait``, the reservation is cancelled and the handler sleeps the
mean processing duration *holding its slot* before answering 429 (it paces
callers that retry at once). Every error path calls ``requestFinished`` with
the error: the slot is freed and nothing is re-tuned. Only a request the
handler ends with ``Done()`` feeds AutoAdjust, which rescales rate, burst and
parallelism from the mean of the last ``mean_over`` processing times.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import simpy
from simpy.events import PENDING

from ctsim.clock import Deadline, fire_now, process_now, timeout_at

WAIT_SEMAPHORE_RESOLUTION = 10_000_000


class APILimiterParameters(NamedTuple):
    estimated_processing: float = 0.0
    auto_adjust: bool = False
    mean_over: int = 10
    parallel_requests: int = 0
    max_parallel_requests: int = 0
    min_parallel_requests: int = 1
    rate_limit: float = 0.0
    rate_burst: int = 1
    max_wait: float = 0.0
    skip_initial: int = 0
    delayed_adjustment_factor: float = 0.5
    max_adjustment_factor: float = 100.0


# daemon/restapi/api_limits.go, apiRateLimitDefaults (v1.16.5).
ENDPOINT_CREATE = APILimiterParameters(
    estimated_processing=2.0,
    auto_adjust=True,
    rate_limit=0.5,
    rate_burst=4,
    parallel_requests=4,
    min_parallel_requests=2,
    skip_initial=4,
    max_wait=60.0,
)
ENDPOINT_DELETE = APILimiterParameters(
    estimated_processing=0.2,
    auto_adjust=True,
    parallel_requests=4,
    min_parallel_requests=4,
)


# Why wait() did not admit a request; it admits with the LimitedRequest itself.
REFUSED = "429"  # no parallel slot within max_wait
REFUSED_PACED = "429 paced"  # the token came too late; refused after sleeping the mean processing time
CANCELLED = "cancelled"  # the caller's context ended while the request waited


class TooManyRequests(Exception):
    """HTTP 429 on the wall clock (``ctsim emulate``): REFUSED, or REFUSED_PACED when ``paced``."""

    def __init__(self, paced: bool = False) -> None:
        super().__init__(REFUSED_PACED if paced else REFUSED)
        self.paced = paced


class Cancelled(Exception):
    """CANCELLED on the wall clock (``ctsim emulate``)."""


@dataclass(slots=True)
class TokenBucket:
    """``golang.org/x/time/rate.Limiter`` reservations: tokens may go negative."""

    limit: float
    burst: int
    tokens: float = 0.0
    last: float = 0.0
    last_event: float = 0.0

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)

    def _advance(self, now: float) -> float:
        last = min(self.last, now)
        tokens = self.tokens + (now - last) * self.limit
        return min(tokens, float(self.burst))

    def reserve(self, now: float) -> float:
        """Takes one token; returns the delay until it may be used."""
        tokens = self._advance(now) - 1.0
        delay = -tokens / self.limit if tokens < 0 else 0.0
        self.last, self.tokens = now, tokens
        self.last_event = now + delay
        return delay

    def cancel(self, now: float, time_to_act: float) -> None:
        """``Reservation.CancelAt``: gives back the token unless later ones depend on it."""
        if time_to_act < now:
            return
        restore = 1.0 - (self.last_event - time_to_act) * self.limit
        if restore <= 0:
            return
        tokens = min(self._advance(now) + restore, float(self.burst))
        self.last, self.tokens = now, tokens
        if time_to_act == self.last_event:
            previous = time_to_act - 1.0 / self.limit
            if previous >= now:
                self.last_event = previous

    def set_limit(self, now: float, limit: float) -> None:
        self.tokens, self.last, self.limit = self._advance(now), now, limit

    def set_burst(self, now: float, burst: int) -> None:
        self.tokens, self.last, self.burst = self._advance(now), now, burst


class Waiter(Protocol):
    """What queues in the semaphore: a weight, whether it gave up, and what to do once granted.

    ``order`` is (arrival time, arrival number): the queue's order, also
    between waiters that arrived at the same instant.
    """

    weight: int
    abandoned: bool
    order: tuple[float, int]

    def granted(self) -> None: ...


ARRIVALS = itertools.count()  # numbers every arrival in the limiters, real or played (ctsim.parking)


class LazyQueue(Protocol):
    """Waiters not yet made into objects (``ctsim.parking``): pods whose retries are played on demand.

    The semaphore calls ``settle`` before its state changes (so what was
    played so far saw the state it had), asks ``first`` for the earliest such
    waiter still queued (its order, weight) when it has room to grant, and
    ``take``s it as a real waiter; the limiter calls ``changed`` after a
    request finished.
    """

    def settle(self) -> None: ...

    def first(self) -> tuple[tuple[float, int], int] | None: ...

    def take(self) -> Waiter: ...

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
                lazy.take().granted()
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


@dataclass(slots=True)
class LimitedRequest:
    """``limitedRequest``: when it was scheduled, its slot, and when processing started."""

    scheduled_at: float
    skip: bool = False
    weight: int = 0
    start: float | None = None  # None until admitted (``startTime.IsZero()``)
    finished: bool = False


def scaled(params: APILimiterParameters, time_scale: float) -> APILimiterParameters:
    """The same limiter on a clock ``time_scale`` times faster (for ``ctsim emulate``)."""
    if time_scale == 1.0:
        return params
    return params._replace(
        estimated_processing=params.estimated_processing / time_scale,
        rate_limit=params.rate_limit * time_scale,
        max_wait=params.max_wait / time_scale,
    )


@dataclass
class LimiterCore:
    """The clock-free part of ``APILimiter``: counters, the token bucket and AutoAdjust.

    The simulator drives it on SimPy time, ``ctsim emulate`` on the wall clock;
    both call it in ``wait()``'s order (see the module docstring).
    """

    name: str
    params: APILimiterParameters
    requests_scheduled: int = 0
    requests_processed: int = 0
    in_flight: int = 0
    rejected: int = 0  # 429s
    paced: int = 0  # 429s that slept the mean processing duration first
    parallel_requests: int = 0
    slot_weight: int = field(default=0, init=False)  # one request's semaphore weight at this parallelism (0: none)
    adjustment_factor: float = 1.0
    mean_processing: float = 0.0  # meanProcessingDuration: successful requests only
    bucket: TokenBucket | None = None
    _durations: deque[float] = field(default_factory=deque)
    _adjusted: bool = False

    def __post_init__(self) -> None:
        self._set_parallel(self.params.parallel_requests)
        if self.params.rate_limit:
            self.bucket = TokenBucket(self.params.rate_limit, self.params.rate_burst)

    @property
    def rate_limit(self) -> float:
        return self.bucket.limit if self.bucket else 0.0

    @property
    def rate_burst(self) -> int:
        return self.bucket.burst if self.bucket else 0

    def spend_skip_initial(self) -> None:
        """A long-running agent: its first ``skip_initial`` requests were served long ago."""
        self.requests_scheduled = max(self.requests_scheduled, self.params.skip_initial)

    def schedule(self, now: float) -> LimitedRequest:
        """``wait()``'s first step: count the request; the first few skip the limiter."""
        self.requests_scheduled += 1
        skip = self.params.skip_initial > 0 and self.requests_scheduled <= self.params.skip_initial
        return LimitedRequest(scheduled_at=now, skip=skip)

    def _set_parallel(self, n: int) -> None:
        """The parallelism, and so the weight of a slot in the semaphore (read on every arrival)."""
        self.parallel_requests = n
        self.slot_weight = WAIT_SEMAPHORE_RESOLUTION // n if n > 0 else 0

    def reserve(self, now: float) -> float:
        """The token's delay (0 without a bucket)."""
        return self.bucket.reserve(now) if self.bucket is not None else 0.0

    def too_late(self, delay: float, waited: float) -> bool:
        """The token would come after ``max_wait`` counted from scheduling."""
        return self.params.max_wait > 0 and delay + waited > self.params.max_wait

    def cancel(self, now: float, time_to_act: float) -> None:
        """``Reservation.Cancel``: the request will not be processed; give the token back."""
        if self.bucket is not None:
            self.bucket.cancel(now, time_to_act)

    def admitted(self, now: float, req: LimitedRequest) -> LimitedRequest:
        self.in_flight += 1
        req.start = now
        return req

    def finished(self, now: float, req: LimitedRequest, success: bool) -> bool:
        """``requestFinished``; returns False when ``req`` was already finished.

        The caller frees ``req.weight`` of the semaphore when this returns True.
        """
        if req.finished:
            return False
        req.finished = True
        if req.start is not None:
            self.requests_processed += 1
            self.in_flight -= 1
        if not success:  # "Only auto-adjust ratelimiter using metrics from successful API requests"
            return True
        durations = self._durations
        durations.append(now - (req.start if req.start is not None else now))
        if len(durations) > self.params.mean_over:
            durations.popleft()
        self.mean_processing = sum(durations) / len(durations)
        if self.params.auto_adjust and self.params.estimated_processing:
            self._adjust(now, self.mean_processing)
        return True

    def _delayed(self, current: float, low: float, high: float) -> float:
        """``delayedAdjustment``: moves only part of the way towards current * f."""
        n = current + (current * self.adjustment_factor - current) * self.params.delayed_adjustment_factor
        if low > 0 and n < low:
            n = low
        if high > 0 and n > high:
            n = high
        return n

    def _bounded(self, new: float, initial: float) -> float:
        """``adjustmentLimit``: never beyond initial / max factor .. initial * max factor."""
        m = self.params.max_adjustment_factor
        return max(initial / m, min(initial * m, new))

    def _adjust(self, now: float, mean: float) -> None:
        p = self.params
        m = p.max_adjustment_factor
        f = p.estimated_processing / mean if mean > 0 else m
        f = min(max(f, 1.0 / m), m)
        if f == self.adjustment_factor and self._adjusted:
            return  # same factor, same values: nothing to recompute
        self.adjustment_factor, self._adjusted = f, True
        parallel = self._delayed(p.parallel_requests, p.min_parallel_requests, p.max_parallel_requests)
        self._set_parallel(int(self._bounded(parallel, p.parallel_requests)))
        if self.bucket is not None:
            self.bucket.set_limit(now, self._bounded(p.rate_limit * f, p.rate_limit))
            burst = self._bounded(self._delayed(p.rate_burst, p.min_parallel_requests, 0.0), p.rate_burst)
            self.bucket.set_burst(now, math.floor(burst + 0.5))  # Go's math.Round: halves away from zero


class APILimiter:
    """One named limiter of the agent's ``APILimiterSet``, on SimPy time."""

    def __init__(self, env: simpy.Environment, name: str, params: APILimiterParameters) -> None:
        self.env = env
        self.core = LimiterCore(name, params)
        self.semaphore = WeightedSemaphore(WAIT_SEMAPHORE_RESOLUTION)

    def has_room(self) -> bool:
        """A request scheduled now would get a slot at once."""
        weight = self.core.slot_weight
        return not weight or self.semaphore.has_room(weight)

    def answer_at_once(self) -> bool:
        """A request admitted and ended with ``Error()`` in no time (a DEL's 404), if a slot is free.

        Its slot would be taken and given back in the same instant, so only
        the counters change; False (nothing counted) when it would have to wait.
        """
        if not self.has_room():
            return False
        core = self.core  # schedule, admit and finish with an error: two counters move
        core.requests_scheduled += 1
        core.requests_processed += 1
        return True

    def call(self, ctx: simpy.Event, handler: Handler) -> Call:
        """An API call through ``wait()`` to ``handler``, as its client sees it (see ``Call``)."""
        return Call(self, ctx, handler)

    def finish(self, req: LimitedRequest, success: bool) -> None:
        """``requestFinished`` (``Done`` or ``Error``): frees the slot; only success re-tunes."""
        lazy = self.semaphore.lazy
        if lazy is not None:
            lazy.settle()
        if self.core.finished(self.env.now, req, success) and req.weight:
            self.semaphore.release(req.weight)
        if lazy is not None:
            lazy.changed()


Handler = Callable[[LimitedRequest], Generator[simpy.Event, object, object]]
GONE = "gone"  # the client's context ended first, with the request past the limiter's waits or in the handler


class Call(simpy.Event):
    """One API call as its client sees it: the handler's ``wait()``, then the handler.

    It fires with the handler's finished process, or with why the client got
    no answer from it: REFUSED, REFUSED_PACED, CANCELLED (its context ended
    while the request waited in the limiter) or GONE (its context ended while
    the request was being admitted or handled; the handler goes on).

    Nothing runs in a handler while its request waits in the limiter, so the
    wait is driven by callbacks (the semaphore grant, the context,
    ``max_wait``, the token) rather than by a process and its conditions:
    such waits are most of a retry storm. A woken waiter goes on as many
    scheduler rounds after its releaser as a handler process would, so
    events at the same instant keep their order; a request that times out
    waiting for a slot tells its client at that instant.
    """

    __slots__ = ("_ctx", "_handler", "_token_at", "abandoned", "limiter", "mean", "order", "req", "state", "weight")

    def __init__(self, limiter: APILimiter, ctx: simpy.Event, handler: Handler) -> None:
        super().__init__(limiter.env)
        self.limiter, self._ctx, self._handler = limiter, ctx, handler
        self.state = "new"
        ctx.callbacks.append(self._ctx_done)  # type: ignore[union-attr]  # the client's `handler | ctx`
        self._arrive()

    @classmethod
    def queued(
        cls, limiter: APILimiter, ctx: simpy.Event, handler: Handler, order: tuple[float, int], weight: int, mean: float
    ) -> Call:
        """A call that arrived as ``order`` (time, number) and has waited for a slot since (a parked pod's).

        Its arrival was counted when it was played; its ``max_wait`` timer
        lands where the one set at arrival would have. The caller grants it a
        slot at once, or queues it and calls ``wait_for_slot``.
        """
        self = cls.__new__(cls)
        simpy.Event.__init__(self, limiter.env)
        self.limiter, self._ctx, self._handler = limiter, ctx, handler
        arrived_at = order[0]
        self.req, self.order = LimitedRequest(scheduled_at=arrived_at), order
        self.state, self.weight, self.abandoned, self.mean = "semaphore", weight, False, mean
        ctx.callbacks.append(self._ctx_done)  # type: ignore[union-attr]
        max_wait = limiter.core.params.max_wait
        if max_wait > 0:
            timeout_at(limiter.env, arrived_at + max_wait).callbacks.append(self._max_wait_done)  # type: ignore[union-attr]
        return self

    def wait_for_slot(self) -> None:
        """A ``queued`` call goes on waiting in the semaphore: its client's deadline counts (as at arrival)."""
        max_wait = self.limiter.core.params.max_wait
        self._arm_ctx(self.req.scheduled_at + max_wait if max_wait > 0 else None)

    def _arm_ctx(self, refused_by: float | None = None) -> None:
        """Puts a ``Deadline`` context on the queue, unless ``max_wait`` refuses the request at ``refused_by`` first."""
        ctx = self._ctx
        if isinstance(ctx, Deadline) and (refused_by is None or ctx.at <= refused_by):
            ctx.arm()

    def _arrive(self) -> None:
        env, limiter, ctx = self.env, self.limiter, self._ctx
        core = limiter.core
        self.req = req = core.schedule(env.now)
        self.order = (env.now, next(ARRIVALS))
        if ctx.processed:
            self._refuse(CANCELLED)
            return
        if req.skip:
            self._arm_ctx()
            self._admit()
            return
        self.mean = core.mean_processing  # read when scheduled, as wait() does
        weight = core.slot_weight
        if weight and not limiter.semaphore.try_acquire(weight):
            self.state, self.weight, self.abandoned = "semaphore", weight, False
            limiter.semaphore.enqueue(self)
            max_wait = core.params.max_wait
            if max_wait > 0:
                env.timeout(max_wait).callbacks.append(self._max_wait_done)  # type: ignore[union-attr]
            self._arm_ctx(env.now + max_wait if max_wait > 0 else None)
            return
        self._arm_ctx()
        req.weight = weight
        self._reserve()

    def granted(self) -> None:
        ctx = self._ctx
        # The request goes on: its client's deadline counts again. Without a token to wait for, the
        # request is admitted in this instant, and a deadline after it matters only if the handler waits.
        if self.limiter.core.bucket is not None or not isinstance(ctx, Deadline) or ctx.at <= self.env.now:
            self._arm_ctx()
        self.req.weight = self.weight
        self.state = "granted"  # from here on, the context counts only while waiting for the token
        self._after_hops(2, lambda: self._reserve(woken=True))  # the grant, then the handler's select

    def _reserve(self, woken: bool = False) -> None:
        """``woken``: called last in a step whose event woke only this call (a hop); see ``_admit``."""
        env, core, req = self.env, self.limiter.core, self.req
        waited = env.now - req.scheduled_at
        delay = core.reserve(env.now)
        if core.too_late(delay, waited):
            core.cancel(env.now, env.now + delay)
            if self.mean > 0:
                self.state = "paced"  # time.Sleep: holds the slot, ignores the context
                env.timeout(self.mean).callbacks.append(self._paced_done)  # type: ignore[union-attr]
                return
            core.rejected += 1
            self._refuse(REFUSED)
            return
        if delay > 0:
            self.state, self._token_at = "token", env.now + delay
            if self._ctx.processed:
                self._leave_token()
                return
            env.timeout(delay).callbacks.append(self._token_done)  # type: ignore[union-attr]
            return
        self._admit(woken)

    def _ctx_done(self, _: simpy.Event) -> None:
        """The client gives up; a handler still waiting in the limiter gives back its place and errors."""
        if self.triggered:
            return
        if self.state == "semaphore":
            self._fire_now(CANCELLED)
            if self.state == "semaphore":  # the handler sees its context done: leaves the queue, errors out
                self.limiter.semaphore.abandon(self)
                self.state = CANCELLED
                self.limiter.finish(self.req, success=False)
        elif self.state == "token":
            self._fire(CANCELLED)
            self._after_hops(1, self._leave_token)
        else:
            self._fire(GONE)

    def _leave_token(self) -> None:
        token_at = self._token_at
        self._leave(lambda: self.limiter.core.cancel(self.env.now, token_at))

    def _leave(self, undo: Callable[[], None]) -> None:
        """The handler sees its context done: gives back its place and errors out (its client is gone)."""
        if self.state in ("semaphore", "token"):
            undo()
            self.state = CANCELLED
            self.limiter.finish(self.req, success=False)

    def _max_wait_done(self, _: simpy.Event) -> None:
        """No slot within ``max_wait``: 429, no token used; the client hears at once."""
        if self.state != "semaphore":
            return
        self.limiter.semaphore.abandon(self)
        self.limiter.core.rejected += 1
        self.state = REFUSED
        self.limiter.finish(self.req, success=False)
        self._drop_unarmed_ctx()
        self._fire_now(REFUSED)

    def _paced_done(self, _: simpy.Event) -> None:
        core = self.limiter.core
        core.rejected += 1
        core.paced += 1
        self._refuse(REFUSED_PACED)

    def _token_done(self, _: simpy.Event) -> None:
        if self.state == "token":
            self.state = "token taken"
            self._after_hops(1, lambda: self._admit(woken=True))

    def _admit(self, woken: bool = False) -> None:
        """Admitted: the handler goes on with its request at once; the client hears when it ends.

        ``woken``: this is the last thing a step does whose event woke only
        this call; unless another process is starting at this instant, the
        handler's start event would run next, so its first step runs here
        instead (``clock.process_now``).
        """
        self.state = "admitted"
        env = self.env
        req = self.limiter.core.admitted(env.now, self.req)
        handler = self._handler(req)
        process = process_now(env, handler) if woken else env.process(handler)  # type: ignore[arg-type]
        process.callbacks.append(self._handled)  # type: ignore[union-attr]
        if self._ctx._value is PENDING and not process.triggered:  # a deadline left unarmed (``granted``),
            self._arm_ctx()  # and the handler waits (or has yet to start): its client may give up first

    def _handled(self, process: simpy.Event) -> None:
        if not self.triggered:
            self._drop_unarmed_ctx()
            self._fire(process)

    def _drop_unarmed_ctx(self) -> None:
        """A ``Deadline`` never armed will not fire: its callback to this call would only keep both alive.

        A run turns the cyclic collector off (``Model.run``).
        """
        ctx = self._ctx
        if ctx._value is PENDING and isinstance(ctx, Deadline):
            ctx.callbacks = None

    def _refuse(self, why: str) -> None:
        """The handler returns the error; its client hears it two hops later (process end, condition)."""
        self.state = why
        self.limiter.finish(self.req, success=False)
        self._after_hops(1, lambda: self._handled_error(why))

    def _handled_error(self, why: str) -> None:
        if not self.triggered:
            self._fire(why)

    def _fire_now(self, value: object) -> None:
        """Fires and runs the callbacks at once, as ``Environment.step`` would a round later.

        Only for a request that leaves the semaphore's queue unserved: the
        events that end it (its client's context, its ``max_wait``) belong to
        this call alone, so nothing else waits on them.
        """
        fire_now(self, value)

    def _fire(self, value: object) -> None:
        self._ok, self._value = True, value
        self.env.schedule(self)

    def _after_hops(self, hops: int, then: Callable[[], None]) -> None:
        """Runs ``then`` after ``hops`` rounds of the scheduler at the current instant."""
        if hops == 0:
            then()
            return
        hop = simpy.Event(self.env)
        hop.callbacks.append(lambda _: self._after_hops(hops - 1, then))  # type: ignore[union-attr]
        hop._ok, hop._value = True, None
        self.env.schedule(hop)
