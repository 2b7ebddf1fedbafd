"""The adaptive GC interval against Cilium's own test cases, and its drift in the model."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctsim.core.defaults import CONNTRACK_GC_MAX_LRU_INTERVAL, CONNTRACK_GC_STARTING_INTERVAL
from ctsim.core.gc_interval import GCPolicy, calculate_interval
from tests.support.scenarios import run

# pkg/maps/ctmap/ctmap_test.go: TestCalculateInterval (prev, maxDeleteRatio → next).
CILIUM_CASES = [
    (60, 0.1, 60),
    (60, 0.2, 60),
    (60, 0.25, 60),
    (60, 0.40, 36),
    (60, 0.60, 24),
    (10, 0.01, 15),
    (10, 0.04, 15),
    (1, 0.9, 10),
    (24 * 3600, 0.01, 12 * 3600),
]


@pytest.mark.parametrize(("prev", "ratio", "expected"), CILIUM_CASES)
def test_calculate_interval_matches_cilium(prev: float, ratio: float, expected: float) -> None:
    assert calculate_interval(prev, ratio) == expected


def test_zero_ratio_keeps_interval() -> None:
    assert calculate_interval(300, 0.0) == 300


def test_growth_rounds_like_go_duration_round() -> None:
    # 11m15s * 1.5 = 1012.5 s: Go rounds halves away from zero.
    assert calculate_interval(675, 0.01) == 1013


# pkg/maps/ctmap/ctmap_test.go: TestGetInterval, step by step on one cache.
def test_get_interval_as_cilium_tests_it() -> None:
    policy = GCPolicy(cached_interval=60)
    assert policy.get_interval(60, 0.1) == 60
    # Setting ConntrackGCInterval overrides the calculation.
    policy.fixed_interval = 10
    assert policy.get_interval(60, 0.1) == 10
    policy.fixed_interval = 0
    assert policy.get_interval(60, 0.1) == 60
    # Setting ConntrackGCMaxInterval limits the maximum interval ...
    policy.max_interval = 20
    assert policy.get_interval(60, 0.1) == 20
    # ... but the cache keeps the uncapped value: lifting the cap gives 1m back.
    assert policy.cached_interval == 60
    policy.max_interval = 0
    assert policy.get_interval(60, 0.1) == 60


def test_a_fresh_agent_starts_from_five_minutes_and_ignores_early_passes() -> None:
    policy = GCPolicy()
    assert policy.cached_interval == 0
    # No cache yet: expected is 5m and an early pass does not scale the ratio
    # (4 % stays 4 %: grow by half).
    assert policy.get_interval(60, 0.04) == CONNTRACK_GC_STARTING_INTERVAL * 1.5
    assert policy.cached_interval == 450


def test_a_zero_ratio_leaves_the_cache_alone() -> None:
    policy = GCPolicy()
    assert policy.get_interval(0, 0.0) == CONNTRACK_GC_STARTING_INTERVAL
    assert policy.cached_interval == 0  # still a fresh agent's
    policy = GCPolicy(cached_interval=900)
    assert policy.get_interval(900, 0.0) == 900
    assert policy.cached_interval == 900


def test_early_pass_scales_ratio_up_once_the_cache_is_set() -> None:
    # 2 % deleted in half the expected time counts as 4 %: still < 5 %, grows.
    assert GCPolicy(cached_interval=600).get_interval(300, 0.02) == 900
    # 4 % in a quarter of the time counts as 16 %: unchanged.
    assert GCPolicy(cached_interval=600).get_interval(150, 0.04) == 600
    # A late pass (actual > expected) is not scaled.
    assert GCPolicy(cached_interval=600).get_interval(1200, 0.04) == 900


def test_the_cap_applies_after_the_cache_is_written() -> None:
    policy = GCPolicy(max_interval=3600, cached_interval=3000)
    assert policy.get_interval(3000, 0.01) == 3600  # 4500 capped
    assert policy.cached_interval == 4500
    assert policy.get_interval(3600, 0.01) == 3600  # grows from 4500 (6750), capped again
    assert policy.cached_interval == 6750


def test_quiet_drift_reaches_the_cap_after_13_passes() -> None:
    r = run(entries="0", max_entries="16Mi", churn="500/min", gc_initial_interval="5m", horizon="40h", pods="1")
    # The pass at t=0 finds nothing expired (r == 0: unchanged); then every
    # pass is quiet (0 < r < 5 %) and multiplies the interval by 1.5.
    quiet = [p for p in r.gc.passes if 0 < p.max_delete_ratio < 0.05]
    capped = next(i for i, p in enumerate(quiet) if p.interval_after == CONNTRACK_GC_MAX_LRU_INTERVAL)
    assert capped + 1 == 13
    assert 31 * 3600 < quiet[capped].start < 33 * 3600


def test_sixty_hour_drift_grows_by_half_each_pass() -> None:
    r = run(entries="0", max_entries="16Mi", churn="500/min", gc_initial_interval="5m", horizon="60h", pods="1")
    expected, interval = [300.0], 300.0  # the first pass (t=0) finds nothing to delete
    for _ in range(len(r.gc.intervals) - 1):
        interval = calculate_interval(interval, 0.01)
        expected.append(interval)
    assert r.gc.intervals == expected
    assert r.gc.intervals[:4] == [300, 450, 675, 1013]
    assert r.gc.intervals[-1] == CONNTRACK_GC_MAX_LRU_INTERVAL
    # Every pass stayed under 5 % of capacity: that is why it kept growing.
    assert max(p.max_delete_ratio for p in r.gc.passes) < 0.05


def _go_get_interval(actual_ns: int, ratio: float, cached_ns: int) -> tuple[int, int]:
    """``GetInterval`` and ``calculateInterval`` as Go runs them, on int64 nanoseconds: (interval, new cache)."""
    second = 1_000_000_000

    def round_second(d: int) -> int:  # Duration.Round(time.Second), halves away from zero
        q, r = divmod(d, second)
        return (q + (2 * r >= second)) * second

    expected = cached_ns or 300 * second
    if cached_ns and 0 < actual_ns < expected:
        ratio *= float(expected) / float(actual_ns)
    interval = expected
    if ratio > 0.25:
        interval = max(round_second(int(float(interval) * (1.0 - min(ratio, 0.9)))), 10 * second)
    elif 0 < ratio < 0.05:
        interval = min(round_second(int(float(interval) * 1.5)), 12 * 3600 * second)
    return interval, (interval if ratio != 0.0 else cached_ns)


@settings(max_examples=3000, deadline=None)
@given(
    cached_ns=st.one_of(st.just(0), st.integers(10 * 10**9, 30 * 86400 * 10**9)),
    actual_ns=st.integers(0, 30 * 86400 * 10**9),
    ratio=st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.05, 0.25, 0.05 - 1e-17, 0.25 + 5e-17])),
)
def test_get_interval_is_gos_on_integer_nanoseconds(cached_ns: int, actual_ns: int, ratio: float) -> None:
    """Early passes near the 0.05/0.25 thresholds and month-long intervals: Go's answer to the nanosecond."""
    policy = GCPolicy(cached_interval=cached_ns / 1e9)
    interval = policy.get_interval(actual_ns / 1e9, ratio)
    want, cache = _go_get_interval(actual_ns, ratio, cached_ns)
    assert round(interval * 1e9) == want
    assert round(policy.cached_interval * 1e9) == cache
