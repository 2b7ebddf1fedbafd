"""The API limiter against the behaviour of pkg/rate/api_limiter.go (spec §6)."""

from __future__ import annotations

import pytest
import simpy

from ctsim.limiter import ENDPOINT_CREATE, APILimiter, TokenBucket


def test_token_bucket_reservations_queue_up() -> None:
    bucket = TokenBucket(limit=0.5, burst=4)
    delays = [bucket.reserve(0.0) for _ in range(6)]
    assert delays == [0, 0, 0, 0, 2, 4]


def test_cancel_gives_the_last_token_back() -> None:
    bucket = TokenBucket(limit=0.5, burst=4)
    for _ in range(4):
        bucket.reserve(0.0)
    delay = bucket.reserve(0.0)
    bucket.cancel(0.0, delay)
    assert bucket.reserve(0.0) == delay


def test_first_four_skip_then_burst_then_429() -> None:
    env = simpy.Environment()
    limiter = APILimiter(env, "endpoint-create", ENDPOINT_CREATE)
    tickets = [limiter.reserve() for _ in range(4)]
    assert all(t.skip for t in tickets)
    delays = []
    rejected = 0
    for _ in range(40):
        ticket = limiter.reserve()
        if ticket is None:
            rejected += 1
        else:
            delays.append(ticket.delay)
    # burst 4 at once, then one every 2 s up to the 60 s MaxWaitDuration.
    assert delays[:5] == [0, 0, 0, 0, 2]
    assert max(delays) == 60
    assert len(delays) == 4 + 30  # 2 s, 4 s, ... 60 s
    assert rejected == 6


def test_auto_adjust_slows_down_after_slow_successes() -> None:
    env = simpy.Environment()
    limiter = APILimiter(env, "endpoint-create", ENDPOINT_CREATE)
    ticket = limiter.reserve()
    assert ticket is not None
    req = limiter.try_admit(ticket)
    assert req is not None
    env.run(until=80)  # an 80 s request: the incident's walk
    limiter.finish(req, success=True)
    f = 2 / 80
    assert limiter.core.adjustment_factor == pytest.approx(f)
    assert limiter.core.rate_limit == pytest.approx(0.5 * f)
    assert limiter.core.rate_burst == 2  # round(max(2, 4 + (4f - 4) * 0.5))
    assert limiter.core.parallel_requests == 2


def test_failed_requests_do_not_adjust() -> None:
    env = simpy.Environment()
    limiter = APILimiter(env, "endpoint-create", ENDPOINT_CREATE)
    ticket = limiter.reserve()
    assert ticket is not None
    req = limiter.try_admit(ticket)
    env.run(until=80)
    limiter.finish(req, success=False)  # type: ignore[arg-type]
    assert limiter.core.rate_limit == 0.5
    assert limiter.core.in_flight == 0
