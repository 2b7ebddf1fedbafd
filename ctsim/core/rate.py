"""The API limiter's arithmetic with no clock (Cilium's ``pkg/rate``, v1.16.5): parameters, tokens, AutoAdjust.

``LimiterCore`` is what ``wait()`` and ``requestFinished`` compute; the
simulator drives it on SimPy time (``ctsim.sim.limiter``), ``ctsim emulate``
on the wall clock (``ctsim.kernel.threads``). Both call it in ``wait()``'s
order. ``wait()`` admits a request in this order: the first ``skip_initial`` requests
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
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from ctsim.core.floats import left_sum

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


# Why wait() did not admit a request; it admits with the LimitedRequest itself.
class Unanswered(StrEnum):
    """Why a client got no answer from the handler: wait() did not admit it, or the client left first."""

    REFUSED = "429"  # no parallel slot within max_wait
    REFUSED_PACED = "429 paced"  # the token came too late; refused after sleeping the mean processing time
    CANCELLED = "cancelled"  # the caller's context ended while the request waited
    GONE = "gone"  # the client's context ended first, with the request past the limiter's waits or in the handler


# The members by name, for the hot paths (a module global is read faster than an Enum attribute on 3.11).
REFUSED, REFUSED_PACED, CANCELLED, GONE = Unanswered


class TooManyRequests(Exception):
    """HTTP 429 on the wall clock (``ctsim emulate``): REFUSED, or REFUSED_PACED when ``paced``."""

    def __init__(self, paced: bool = False) -> None:
        super().__init__(REFUSED_PACED if paced else REFUSED)
        self.paced = paced


class Cancelled(Exception):
    """CANCELLED on the wall clock (``ctsim emulate``)."""


NS = 1_000_000_000  # time.Second


def to_ns(seconds: float) -> int:
    """A point in time as Go holds it: whole nanoseconds (``time.Time``)."""
    return round(seconds * NS)


def _tokens_from(limit: float, d: int) -> float:
    """``Limit.tokensFromDuration``: ``d.Seconds() * limit``, where Seconds() adds whole and fractional parts."""
    sec, nsec = divmod(d, NS) if d >= 0 else (-((-d) // NS), -((-d) % NS))
    return (sec + nsec / 1e9) * limit


def _duration_from(limit: float, tokens: float) -> int:
    """``Limit.durationFromTokens``: truncated to whole nanoseconds, as ``time.Duration(float)`` converts."""
    return int(tokens / limit * NS)


@dataclass(slots=True)
class TokenBucket:
    """``golang.org/x/time/rate.Limiter`` reservations: tokens may go negative.

    Its times are Go's: whole nanoseconds (``last``, ``last_event``), durations
    truncated to them. In float seconds, 23.918639 - 10.0 falls below
    13.918639, and a cancelled reservation would give back 1e-16 tokens, not 1.
    """

    limit: float
    burst: int
    tokens: float = 0.0
    last: int = 0  # ns
    last_event: int = 0  # ns

    def __post_init__(self) -> None:
        self.tokens = float(self.burst)

    def _advance(self, now: int) -> float:
        last = min(self.last, now)
        tokens = self.tokens + _tokens_from(self.limit, now - last)
        return min(tokens, float(self.burst))

    def reserve(self, at: float) -> tuple[float, int]:
        """Takes one token: the delay until it may be used (seconds) and ``timeToAct`` (ns), for ``cancel``."""
        now = to_ns(at)
        tokens = self._advance(now) - 1.0
        wait = _duration_from(self.limit, -tokens) if tokens < 0 else 0
        self.last, self.tokens = now, tokens
        self.last_event = now + wait
        return wait / NS, now + wait

    def cancel(self, at: float, time_to_act: int, limit: float) -> None:
        """``Reservation.CancelAt``: gives back the token unless later ones depend on it.

        ``time_to_act``: the reservation's (ns, from ``reserve``). ``limit`` is the
        reservation's (``r.limit``), which AutoAdjust may have changed on the bucket
        since: x/time/rate restores at the reservation's.
        """
        now = to_ns(at)
        if time_to_act < now:
            return
        restore = 1.0 - _tokens_from(limit, self.last_event - time_to_act)
        if restore <= 0:
            return
        tokens = min(self._advance(now) + restore, float(self.burst))
        self.last, self.tokens = now, tokens
        if time_to_act == self.last_event:
            previous = time_to_act + _duration_from(limit, -1.0)
            if previous >= now:
                self.last_event = previous

    def set_limit(self, at: float, limit: float) -> None:
        now = to_ns(at)
        self.tokens, self.last, self.limit = self._advance(now), now, limit

    def set_burst(self, at: float, burst: int) -> None:
        now = to_ns(at)
        self.tokens, self.last, self.burst = self._advance(now), now, burst


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

    def warm(self, mean: float, now: float = 0.0) -> None:
        """A long-running agent whose last ``mean_over`` successful requests each took ``mean`` seconds.

        Skip-initial is long spent, and AutoAdjust has re-tuned from that mean;
        the bucket has been idle since, so it is full at its new burst.
        """
        self.spend_skip_initial()
        if mean <= 0:
            return
        self._durations.extend([mean] * self.params.mean_over)
        self.mean_processing = left_sum(self._durations) / len(self._durations)
        if self.params.auto_adjust and self.params.estimated_processing:
            self._adjust(now, self.mean_processing)

    def set_state(self, parallel: int, limit: float, burst: int) -> None:
        """Where the agent reports its limiter now (``cilium_api_limiter_*``): that parallelism, rate and burst,
        the bucket full (idle since). A limiter without a rate keeps none."""
        self._set_parallel(parallel)
        if self.bucket is not None:
            self.bucket.limit, self.bucket.burst, self.bucket.tokens = limit, burst, float(burst)

    def schedule(self, now: float) -> LimitedRequest:
        """``wait()``'s first step: count the request; the first few skip the limiter."""
        self.requests_scheduled += 1
        skip = self.params.skip_initial > 0 and self.requests_scheduled <= self.params.skip_initial
        return LimitedRequest(scheduled_at=now, skip=skip)

    def schedule_played(self) -> None:
        """``schedule`` for a request parking plays: counted, with no ``LimitedRequest`` until its pod resumes.

        Parking runs only once skip-initial is spent, so no played request skips.
        """
        self.requests_scheduled += 1

    def answered_at_once(self) -> None:
        """Scheduled, admitted and ended with ``Error()`` in one instant (a DEL's 404): two counters move."""
        self.requests_scheduled += 1
        self.requests_processed += 1

    def refused(self, paced: bool = False) -> None:
        """A 429, whichever clock drove the wait; ``paced``: after sleeping the mean processing time."""
        self.rejected += 1
        self.paced += paced

    def _set_parallel(self, n: int) -> None:
        """The parallelism, and so the weight of a slot in the semaphore (read on every arrival)."""
        self.parallel_requests = n
        self.slot_weight = WAIT_SEMAPHORE_RESOLUTION // n if n > 0 else 0

    def reserve(self, now: float) -> tuple[float, int]:
        """The token's delay in seconds (0 without a bucket) and its ``timeToAct`` in ns, for ``cancel``."""
        return self.bucket.reserve(now) if self.bucket is not None else (0.0, 0)

    def too_late(self, delay: float, waited: float) -> bool:
        """The token would come after ``max_wait`` counted from scheduling."""
        return self.params.max_wait > 0 and delay + waited > self.params.max_wait

    def cancel(self, now: float, time_to_act: int, limit: float) -> None:
        """``Reservation.Cancel``: the request will not be processed; give the token back.

        ``time_to_act``: from ``reserve`` (ns); ``limit``: the bucket's limit when the token was reserved.
        """
        if self.bucket is not None:
            self.bucket.cancel(now, time_to_act, limit)

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
        self.mean_processing = left_sum(durations) / len(durations)
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
