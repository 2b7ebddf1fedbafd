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

import math
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field, replace

import simpy

WAIT_SEMAPHORE_RESOLUTION = 10_000_000


@dataclass(frozen=True)
class APILimiterParameters:
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


class TooManyRequests(Exception):
    """HTTP 429: no parallel slot within ``max_wait``, or the token came too late (``paced``)."""

    def __init__(self, paced: bool = False) -> None:
        super().__init__("429")
        self.paced = paced


class Cancelled(Exception):
    """The caller's context ended while the request waited in the limiter."""


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


class WeightedSemaphore:
    """``golang.org/x/sync/semaphore.Weighted``: FIFO; the head waiter blocks the rest."""

    def __init__(self, env: simpy.Environment, size: int) -> None:
        self.env = env
        self.size = size
        self.cur = 0
        self.waiters: deque[tuple[int, simpy.Event]] = deque()

    def has_room(self, n: int) -> bool:
        return self.size - self.cur >= n and not self.waiters

    def acquire(self, n: int) -> simpy.Event:
        event = self.env.event()
        if self.has_room(n):
            self.cur += n
            event.succeed()
        else:
            self.waiters.append((n, event))
        return event

    def abandon(self, event: simpy.Event, n: int) -> None:
        """A waiter gave up (context done); frees its place or its grant."""
        for i, (_, waiting) in enumerate(self.waiters):
            if waiting is event:
                del self.waiters[i]
                self._notify()
                return
        if event.triggered:
            self.release(n)

    def release(self, n: int) -> None:
        self.cur -= n
        self._notify()

    def _notify(self) -> None:
        while self.waiters:
            n, event = self.waiters[0]
            if self.size - self.cur < n:
                break
            self.cur += n
            self.waiters.popleft()
            event.succeed()


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
    return replace(
        params,
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
    adjustment_factor: float = 1.0
    mean_processing: float = 0.0  # meanProcessingDuration: successful requests only
    bucket: TokenBucket | None = None
    _durations: deque[float] = field(default_factory=deque)
    _adjusted: bool = False

    def __post_init__(self) -> None:
        self.parallel_requests = self.params.parallel_requests
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

    def weight(self) -> int:
        """Semaphore weight of one request at the current parallelism (0: no semaphore)."""
        return WAIT_SEMAPHORE_RESOLUTION // self.parallel_requests if self.parallel_requests > 0 else 0

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
        self.parallel_requests = int(self._bounded(parallel, p.parallel_requests))
        if self.bucket is not None:
            self.bucket.set_limit(now, self._bounded(p.rate_limit * f, p.rate_limit))
            burst = self._bounded(self._delayed(p.rate_burst, p.min_parallel_requests, 0.0), p.rate_burst)
            self.bucket.set_burst(now, math.floor(burst + 0.5))  # Go's math.Round: halves away from zero


class APILimiter:
    """One named limiter of the agent's ``APILimiterSet``, on SimPy time."""

    def __init__(self, env: simpy.Environment, name: str, params: APILimiterParameters) -> None:
        self.env = env
        self.core = LimiterCore(name, params)
        self._semaphore = WeightedSemaphore(env, WAIT_SEMAPHORE_RESOLUTION)

    def has_room(self) -> bool:
        """A request scheduled now would get a slot at once."""
        weight = self.core.weight()
        return not weight or self._semaphore.has_room(weight)

    def answer_at_once(self) -> bool:
        """A request admitted and ended with ``Error()`` in no time (a DEL's 404), if a slot is free.

        Its slot would be taken and given back in the same instant, so only
        the counters change; False (nothing counted) when it would have to wait.
        """
        if not self.has_room():
            return False
        core = self.core
        req = core.schedule(self.env.now)
        core.finished(self.env.now, core.admitted(self.env.now, req), success=False)
        return True

    def wait(self, ctx: simpy.Event) -> Generator[simpy.Event, object, LimitedRequest]:
        """``APILimiter.Wait``: admits, or raises TooManyRequests or Cancelled (after ``requestFinished``)."""
        env, core = self.env, self.core
        req = core.schedule(env.now)
        if ctx.processed:
            self._fail(req)
            raise Cancelled()
        if req.skip:
            return core.admitted(env.now, req)
        mean = core.mean_processing  # read when scheduled, as wait() does
        weight = core.weight()
        if weight:
            grant = self._semaphore.acquire(weight)
            if not grant.triggered:
                waits = [grant, ctx]
                if core.params.max_wait > 0:
                    waits.append(env.timeout(core.params.max_wait))
                yield env.any_of(waits)
                if not grant.triggered:
                    self._semaphore.abandon(grant, weight)
                    self._fail(req)
                    if ctx.processed:
                        raise Cancelled()
                    core.rejected += 1
                    raise TooManyRequests()
            req.weight = weight
        waited = env.now - req.scheduled_at
        delay = core.reserve(env.now)
        if core.too_late(delay, waited):
            core.cancel(env.now, env.now + delay)
            if mean > 0:
                yield env.timeout(mean)  # time.Sleep: holds the slot, ignores the context
            self._fail(req)
            core.rejected += 1
            core.paced += mean > 0
            raise TooManyRequests(paced=mean > 0)
        if delay > 0:
            token = env.timeout(delay)
            yield token | ctx
            if not token.triggered:
                core.cancel(env.now, req.scheduled_at + waited + delay)
                self._fail(req)
                raise Cancelled()
        return core.admitted(env.now, req)

    def _fail(self, req: LimitedRequest) -> None:
        self.finish(req, success=False)

    def finish(self, req: LimitedRequest, success: bool) -> None:
        """``requestFinished`` (``Done`` or ``Error``): frees the slot; only success re-tunes."""
        if self.core.finished(self.env.now, req, success) and req.weight:
            self._semaphore.release(req.weight)
