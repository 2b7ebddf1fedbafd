"""Cilium's API rate limiter (``pkg/rate/api_limiter.go``) on simulated time.

A request is admitted in three steps: the first ``skip_initial`` requests pass
untouched; later ones reserve a token (``x/time/rate``) and fail at once with
HTTP 429 when the reservation's delay exceeds ``max_wait``; then they wait for
one of ``parallel_requests`` slots (``x/sync/semaphore``, FIFO). When a request
finishes successfully, AutoAdjust rescales rate, burst and parallelism from the
mean of the last ``mean_over`` processing times; failed requests only free
their slot ("only auto-adjust using metrics from successful API requests").
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol

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


# daemon/cmd/api_limits.go as of 1.16 (spec §6).
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
    """HTTP 429 after waiting: no parallel slot within ``max_wait``."""


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

    def try_acquire(self, n: int) -> bool:
        if self.size - self.cur >= n and not self.waiters:
            self.cur += n
            return True
        return False

    def acquire(self, n: int) -> simpy.Event:
        event = self.env.event()
        if self.size - self.cur >= n and not self.waiters:
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
    start: float
    weight: int
    finished: bool = False


class Ticket(NamedTuple):
    """A request's place, taken synchronously when it arrives (``Wait``'s first half)."""

    skip: bool
    delay: float
    time_to_act: float


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
    """The clock-free part of ``APILimiter``: reservations, counters and AutoAdjust.

    The simulator drives it on SimPy time, ``ctsim emulate`` on the wall clock.
    """

    name: str
    params: APILimiterParameters
    requests_scheduled: int = 0
    requests_processed: int = 0
    in_flight: int = 0
    rejected: int = 0
    parallel_requests: int = 0
    adjustment_factor: float = 1.0
    bucket: TokenBucket | None = None
    _durations: deque[float] = field(default_factory=deque)
    _durations_sum: float = 0.0
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

    def reserve(self, now: float) -> Ticket | None:
        """Skip, or reserve a token; None (HTTP 429) when the wait would exceed max_wait."""
        p = self.params
        self.requests_scheduled += 1
        if p.skip_initial > 0 and self.requests_scheduled <= p.skip_initial:
            return Ticket(skip=True, delay=0.0, time_to_act=now)
        delay = self.bucket.reserve(now) if self.bucket is not None else 0.0
        if p.max_wait > 0 and delay > p.max_wait:
            self.bucket.cancel(now, now + delay)  # type: ignore[union-attr]
            self.rejected += 1
            return None
        return Ticket(skip=False, delay=delay, time_to_act=now + delay)

    def cancel(self, now: float, ticket: Ticket) -> None:
        """The caller left while waiting for its token: give the token back."""
        if self.bucket is not None and not ticket.skip:
            self.bucket.cancel(now, ticket.time_to_act)

    def admit_time(self, now: float) -> float:
        """The earliest time a reservation would not be refused, if nothing else changes."""
        b, max_wait = self.bucket, self.params.max_wait
        if b is None or max_wait <= 0:
            return now
        threshold = 1.0 - max_wait * b.limit  # delay <= max_wait  <=>  tokens >= threshold
        tokens = b._advance(now)
        if tokens >= threshold:
            return now
        return now + (threshold - tokens) / b.limit

    def refused(self, n: int) -> None:
        """``n`` requests refused with 429 (reserved and cancelled at once): counters only."""
        self.requests_scheduled += n
        self.rejected += n

    def passed_through(self, now: float, n: int) -> None:
        """``n`` requests admitted and finished in no time, as ``n`` calls of pass_through would."""
        self.requests_scheduled += n
        self.requests_processed += n
        zeros = min(n, self.params.mean_over)
        for _ in range(zeros):
            self._durations.append(0.0)
            if len(self._durations) > self.params.mean_over:
                self._durations_sum -= self._durations.popleft()
        if zeros and self.params.auto_adjust and self.params.estimated_processing:
            self._adjust(now, max(self._durations_sum, 0.0) / len(self._durations))

    def weight(self) -> int:
        """Semaphore weight of one request at the current parallelism."""
        return WAIT_SEMAPHORE_RESOLUTION // self.parallel_requests if self.parallel_requests > 0 else 0

    def admitted(self, now: float, weight: int) -> LimitedRequest:
        self.in_flight += 1
        return LimitedRequest(start=now, weight=weight)

    def finished(self, now: float, req: LimitedRequest, success: bool) -> bool:
        """``requestFinished``; returns False when ``req`` was already finished."""
        if req.finished:
            return False
        req.finished = True
        self.requests_processed += 1
        self.in_flight -= 1
        if not success:
            return True
        duration = now - req.start
        self._durations.append(duration)
        self._durations_sum += duration
        if len(self._durations) > self.params.mean_over:
            self._durations_sum -= self._durations.popleft()
        if self.params.auto_adjust and self.params.estimated_processing:
            self._adjust(now, max(self._durations_sum, 0.0) / len(self._durations))
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
        f = p.estimated_processing / mean if mean > 1e-12 else m
        f = min(max(f, 1.0 / m), m)
        if f == self.adjustment_factor and self._adjusted:
            return  # same factor, same values: nothing to recompute
        self.adjustment_factor, self._adjusted = f, True
        parallel = self._delayed(p.parallel_requests, p.min_parallel_requests, p.max_parallel_requests)
        self.parallel_requests = int(self._bounded(parallel, p.parallel_requests))
        if self.bucket is not None:
            self.bucket.set_limit(now, self._bounded(p.rate_limit * f, p.rate_limit))
            burst = self._bounded(self._delayed(p.rate_burst, p.min_parallel_requests, 0.0), p.rate_burst)
            self.bucket.set_burst(now, math.floor(burst + 0.5))


class StormWatch(Protocol):
    """What the limiters tell ``ctsim.storm.Storm`` around a change (see there)."""

    def before_change(self) -> tuple[float, bool]: ...

    def after_change(self, before: tuple[float, bool]) -> None: ...


class APILimiter:
    """One named limiter of the agent's ``APILimiterSet``, on SimPy time."""

    def __init__(self, env: simpy.Environment, name: str, params: APILimiterParameters) -> None:
        self.env = env
        self.core = LimiterCore(name, params)
        self._semaphore = WeightedSemaphore(env, WAIT_SEMAPHORE_RESOLUTION)
        self.storm: StormWatch | None = None

    def _before(self) -> tuple[float, bool]:
        return self.storm.before_change() if self.storm is not None else (0.0, False)

    def _after(self, before: tuple[float, bool]) -> None:
        if self.storm is not None:
            self.storm.after_change(before)

    def reserve(self) -> Ticket | None:
        return self.core.reserve(self.env.now)

    def try_admit(self, ticket: Ticket) -> LimitedRequest | None:
        """Admits at once when nothing has to be waited for; None otherwise."""
        core = self.core
        if ticket.skip:
            return core.admitted(self.env.now, 0)
        if ticket.delay > 0:
            return None
        weight = core.weight()
        if weight:
            if not self._semaphore.has_room(weight):
                return None
            before = self._before()
            self._semaphore.try_acquire(weight)
            self._after(before)
        return core.admitted(self.env.now, weight)

    def pass_through(self) -> bool:
        """A request answered at once (a DEL's 404): admitted and done in no time, if a slot is free.

        It leaves the slots as they were and only adds a zero processing time,
        so it needs no settling: zeros commute.
        """
        core = self.core
        ticket = core.reserve(self.env.now)
        weight = core.weight()
        if ticket is None or ticket.delay > 0 or (weight and not self._semaphore.has_room(weight)):
            core.requests_scheduled -= 1  # not taken: the caller goes the long way
            return False
        core.finished(self.env.now, core.admitted(self.env.now, weight), success=True)
        return True

    def wait(self, ticket: Ticket, ctx: simpy.Event) -> Generator[simpy.Event, object, LimitedRequest]:
        """The rest of ``APILimiter.Wait``: raises TooManyRequests or Cancelled, else admits."""
        req = self.try_admit(ticket)
        if req is not None:
            return req
        env, core = self.env, self.core
        if ticket.delay > 0:
            yield env.timeout(ticket.delay) | ctx
            if ctx.processed:
                before = self._before()
                core.cancel(env.now, ticket)
                self._after(before)
                raise Cancelled()
        weight = core.weight()
        if weight:
            before = self._before()
            grant = self._semaphore.acquire(weight)
            self._after(before)
            if not grant.triggered:
                waits = [grant, ctx]
                if core.params.max_wait > 0:
                    waits.append(env.timeout(core.params.max_wait - ticket.delay))
                yield env.any_of(waits)
                if not grant.triggered:
                    before = self._before()
                    self._semaphore.abandon(grant, weight)
                    self._after(before)
                    if ctx.processed:
                        raise Cancelled()
                    core.rejected += 1
                    raise TooManyRequests()
        return core.admitted(env.now, weight)

    def finish(self, req: LimitedRequest, success: bool) -> None:
        """``requestFinished`` (Done or Error): frees the slot; success re-tunes."""
        before = self._before()
        if self.core.finished(self.env.now, req, success) and req.weight:
            self._semaphore.release(req.weight)
        self._after(before)
