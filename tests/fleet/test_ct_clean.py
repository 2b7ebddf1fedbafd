"""waitingForCTClean read from its buckets: first builds behind a scrub apart from the microsecond rest."""

from __future__ import annotations

import math

import pytest

from ctsim.fleet.series import ct_clean_waits

INF = math.inf


def test_the_long_waits_mean_is_bounded_by_the_short_waits_buckets() -> None:
    # 100 regenerations: 90 of ~1 ms (bucket 5 ms), 10 first builds of 40 s each (+Inf).
    w = ct_clean_waits({0.005: 90, 0.01: 90, 1.0: 90, 2.5: 90, 10.0: 90, INF: 100}, total=90 * 0.001 + 10 * 40)
    assert w is not None and (w.regenerations, w.long_waits, w.split_at) == (100, 10, 1.0)
    assert w.long_mean_low is not None and w.long_mean_high is not None
    assert w.long_mean_low <= 40 <= w.long_mean_high
    assert w.long_mean_high - w.long_mean_low == pytest.approx(90 * 0.005 / 10)
    # The mean over every regeneration, what the fleet read before, is about a tenth of it.
    mean_of_all = (90 * 0.001 + 10 * 40) / 100
    assert w.long_mean_low > 9 * mean_of_all


def test_no_bucket_to_split_at_or_no_regeneration_is_no_figure() -> None:
    assert ct_clean_waits({INF: 50}, total=100.0) is None  # only +Inf: no wait can be told from another
    assert ct_clean_waits({2.5: 0, INF: 50}, total=100.0) is None  # no bound at or under 1 s
    assert ct_clean_waits({1.0: 0, INF: 0}, total=0.0) is None  # nothing regenerated in the window


def test_without_a_long_wait_there_is_no_mean_and_a_custom_split_is_said() -> None:
    w = ct_clean_waits({0.5: 30, INF: 30}, total=0.3)
    assert w is not None and w.long_waits == 0 and w.long_mean_high is None
    custom = ct_clean_waits({0.25: 5, 0.5: 5, 4.0: 8, INF: 8}, total=5 * 0.1 + 3 * 3.0)
    assert custom is not None and custom.split_at == 0.5 and custom.long_waits == 3
    assert custom.long_mean_low <= 3.0 <= custom.long_mean_high  # type: ignore[operator]
