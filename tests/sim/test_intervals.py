"""Retry intervals at 8 bytes each give the percentiles a sorted list of floats gives, byte for byte."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctsim.sim import intervals
from ctsim.sim.intervals import RetryIntervals
from ctsim.sim.result import percentile

# -0.0 + 0.0 is 0.0: the bits' order makes the two zeros one value (intervals are >= 10 s anyway)
finite = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True).map(lambda x: x + 0.0)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(finite | st.sampled_from([10.0, 10.5, 95.25]), max_size=60), run=st.integers(1, 9))
def test_every_rank_and_percentile_is_the_sorted_lists(values: list[float], run: int) -> None:
    """In several sorted runs (a run of 1-9 values here, 2^20 in a real storm) as in one list."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(intervals, "RUN", run)
        got = RetryIntervals(array("d", values))
        xs = sorted(values)
        for k in range(len(xs)):
            assert got.kth(k) == xs[k]
        for q in (0.0, 0.5, 0.9, 0.99, 1.0):
            assert repr(got.percentile(q)) == repr(percentile(values, q) if values else None)
        assert got.max() == (max(values) if values else None)


def test_values_appended_after_a_percentile_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intervals, "RUN", 3)
    got = RetryIntervals(array("d", [30.0, 10.0, 20.0, 40.0]))
    assert got.percentile(0.5) == 25.0
    got.values.append(1.0)
    assert got.percentile(0.5) == 20.0 and got.max() == 40.0 and len(got) == 5
