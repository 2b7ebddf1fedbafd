"""Retry intervals at 8 bytes each give the percentiles a sorted list of floats gives, byte for byte."""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import tempfile
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctsim.inputs.scenario import resolve_flags
from ctsim.sim import intervals
from ctsim.sim.intervals import RetryIntervals
from ctsim.sim.model import Model
from ctsim.sim.result import percentile
from tests.support.needs import REQUIRED

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


def _replayed(values: list[float], calls: list[frozenset[int]]) -> Callable[[frozenset[int]], array[float]]:
    """A replay of a run that appended ``values``: every value of the keys asked for."""

    def replay(keys: frozenset[int]) -> array[float]:
        calls.append(keys)
        return array("d", [x for x in values if intervals._order(x) >> intervals.SHIFT in keys])

    return replay


def _refused() -> BinaryIO:
    raise PermissionError(13, "Permission denied", "/var/tmp")


def refuse_spill(mp: pytest.MonkeyPatch) -> None:
    """A disk that will not take the spill: a percentile outside its window must replay."""
    mp.setattr(intervals, "spill_file", _refused)


nonnegative = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False, allow_subnormal=True)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(finite | nonnegative | st.sampled_from([10.0, 10.5, 95.25]), max_size=80),
    pieces=st.lists(st.integers(1, 30), min_size=1, max_size=8),
    budget=st.integers(0, 40),
    window=st.sampled_from([0.0, 0.02, 0.3]),
    shift=st.sampled_from([40, 52, 60]),
    spill=st.booleans(),
)
def test_a_folded_run_gives_the_sorted_lists_ranks(
    values: list[float], pieces: list[int], budget: int, window: float, shift: int, spill: bool
) -> None:
    """Appended in pieces, folded after each past the budget: every rank exact, read back (or replayed) if missed."""
    calls: list[frozenset[int]] = []
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (("BUDGET", budget), ("WINDOW", window), ("SHIFT", shift), ("RUN", 7)):
            mp.setattr(intervals, name, value)
        if not spill:
            refuse_spill(mp)
        got = RetryIntervals()
        got.replay = _replayed(values, calls)
        i = 0
        for size in itertools.cycle(pieces):
            got.values.extend(values[i : i + size])
            got.fold()
            i += size
            if i >= len(values):
                break
        assert got.folded == (len(values) > budget)
        assert len(got) == len(values)
        xs = sorted(values)
        for q in (0.0, 0.5, 0.9, 0.99, 1.0):
            assert repr(got.percentile(q)) == repr(percentile(values, q) if values else None)
        for k in range(len(xs)):
            assert got.kth(k) == xs[k]
        assert got.max() == (max(values) if values else None)
    assert all(calls), "a replay is asked for keys it lacks, never for nothing"
    assert spill or not got.folded or got._spill is None
    assert not (spill and calls), "a run that could spill never replays"


def _folded(values: list[float], piece: int) -> tuple[RetryIntervals, list[frozenset[int]]]:
    """``values`` appended ``piece`` at a time, folded after each; and the replays asked for."""
    calls: list[frozenset[int]] = []
    got = RetryIntervals()
    got.replay = _replayed(values, calls)
    for i in range(0, len(values), piece):
        got.values.extend(values[i : i + piece])
        got.fold()
    return got, calls


@pytest.mark.parametrize("spill", [True, False], ids=["spilled", "disk-refused"])
def test_a_window_that_holds_the_percentiles_needs_no_replay(monkeypatch: pytest.MonkeyPatch, spill: bool) -> None:
    monkeypatch.setattr(intervals, "BUDGET", 5_000)
    if not spill:
        refuse_spill(monkeypatch)
    rng = random.Random(1)
    values = [10.0 + 90.0 * rng.random() for _ in range(20_000)]  # the same spread all along: p50, p90 stay put
    got, calls = _folded(values, 2_500)
    assert got.folded and len(got._kept) < len(values)  # a fold keeps a part
    assert (got.percentile(0.5), got.percentile(0.9)) == (percentile(values, 0.5), percentile(values, 0.9))
    assert not calls
    # Later intervals that move p90 out of its window: the missed key is read back (or replayed, once): exact.
    values += [500.0 + i for i in range(6_000)]
    got.values.extend(values[20_000:])
    assert got.percentile(0.9) == percentile(values, 0.9)
    assert len(calls) == (0 if spill else 1)
    assert (got._spill is not None) == spill


@contextmanager
def small_disk(size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` on a fresh directory: a real disk that fills (ENOSPC); unmounted afterwards."""
    root = Path(tempfile.mkdtemp(prefix="ctsim-small-disk-"))
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(root)], capture_output=True, text=True, check=False
    )
    if made.returncode != 0:
        os.rmdir(root)
        msg = f"cannot mount a tmpfs: {made.stderr.strip() or made.returncode}"
        if REQUIRED:
            pytest.fail(f"CTSIM_REQUIRE_KERNEL=1 but {msg}")
        pytest.skip(msg)
    try:
        yield root
    finally:
        subprocess.run(["umount", str(root)], check=False)
        os.rmdir(root)


def test_a_disk_that_fills_during_the_run_ends_the_spill_and_the_percentile_is_replayed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first folds spill, a later one meets ENOSPC: the spill is dropped (not read half), a replay answers."""
    monkeypatch.setattr(intervals, "BUDGET", 2_000)
    rng = random.Random(3)
    values = [10.0 + 90.0 * rng.random() for _ in range(20_000)] + [500.0 + i for i in range(10_000)]
    with small_disk("64k") as disk:
        monkeypatch.setenv("TMPDIR", str(disk))
        got, calls = _folded(values, 2_500)  # 20 KB a fold: the third does not fit
        assert got.folded and got._spill is None and not got._spilling
        assert not list(disk.iterdir()), "the spill was never a name on the disk"
    assert (got.percentile(0.5), got.percentile(0.9)) == (percentile(values, 0.5), percentile(values, 0.9))
    assert calls and all(calls)


def test_the_spill_goes_to_tmpdir_and_leaves_no_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(intervals, "BUDGET", 100)
    got = RetryIntervals(array("d", [float(i) for i in range(1_000)]))
    got.fold()
    assert got._spill is not None and os.fstat(got._spill.fileno()).st_size == 8_000
    where = Path(os.readlink(f"/proc/self/fd/{got._spill.fileno()}")).parent  # "<dir>/#123 (deleted)"
    assert where == tmp_path and not list(tmp_path.iterdir())


def test_a_storm_that_settles_after_its_first_fold_needs_no_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """As 100,000 pods: the first intervals spread wide, the later ones narrow; the first fold's p90 lies far above.

    The final percentiles lie between where all intervals so far place
    them and where the latest do, so a window spanning both holds them.
    """
    monkeypatch.setattr(intervals, "BUDGET", 8_000)
    rng = random.Random(2)
    values = [10.0 + 90.0 * rng.random() for _ in range(4_000)] + [72.0 + 2.0 * rng.random() for _ in range(16_000)]
    got, calls = _folded(values, 1_000)
    assert got.folded and len(got._kept) < len(values) / 2
    assert percentile(values[:9_000], 0.9) > 78.0 > percentile(values, 0.9)  # p90 moved as the storm settled
    assert (got.percentile(0.5), got.percentile(0.9)) == (percentile(values, 0.5), percentile(values, 0.9))
    assert not calls


@pytest.mark.parametrize("spill", [True, False], ids=["spilled", "disk-refused"])
def test_a_storm_folded_past_its_budget_reports_what_it_reports_whole(
    monkeypatch: pytest.MonkeyPatch, spill: bool
) -> None:
    """The model's run with a budget of 500 intervals (none kept near p90: read back or replayed) against it whole."""
    scenario = resolve_flags(entries="16M", pods="50", horizon="1h")
    whole = Model(scenario).run()
    assert len(whole.retry_intervals) > 1_000 and not whole.retry_intervals.folded
    if not spill:
        refuse_spill(monkeypatch)
    for window in (0.02, 0.0):
        monkeypatch.setattr(intervals, "BUDGET", 500)
        monkeypatch.setattr(intervals, "WINDOW", window)
        folded = Model(scenario).run()
        assert folded.retry_intervals.folded
        assert json.dumps(folded.to_dict()) == json.dumps(whole.to_dict())
        assert (folded.retry_intervals._spill is not None) == spill
