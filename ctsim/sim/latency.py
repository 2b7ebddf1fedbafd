"""The latencies a node shows, one ``Latencies`` per figure: p50, p90 and max in memory that stops growing.

A figure is what the reporters of this failure had from their nodes: CNI
ADD and DEL as the runtime timed them, waitingForCTClean, and each API
limiter's wait. A collapse plays hundreds of millions of ADDs, so a figure
keeps its values as they are (exact percentiles, numpy's linear
interpolation) until more than ``EXACT`` came, and from then on counts every
value by its key: its top 24 bits, as ``sim.intervals`` keys them, so a
percentile is then the smallest value of its key, within 1/4096 of an
octave (0.017 %). The max is always exact. The hot paths append to
``values`` (an ``array('d')`` that keeps its identity, so they may bind its
``append``); the run folds between its slices (``Model.run``), so a slice's
values are all that is held beyond the counts. A storm's answers of no time
(a DEL's 404, a limiter's wait of none: millions of them) are counted,
not kept (``add_zeros``). Observations are
order-free: parked and unparked runs (``sim.parking``) observe the same
values in other orders and agree.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from itertools import repeat

from ctsim.sim.intervals import SHIFT, _keys, _value

EXACT = 1 << 20  # values kept as they are: 8 MiB a figure (a 1,000-pod storm's ~300,000 never fold)


class Latencies:
    """One latency figure's observations, in seconds on the run's clock."""

    __slots__ = ("_counts", "_summary", "count", "max", "values", "zeros")

    def __init__(self) -> None:
        self.values: array[float] = array("d")  # observed since the last fold
        self.zeros = 0  # and observations of 0 s since then, counted
        self._counts: Counter[int] | None = None  # by key, once more than EXACT values came
        self.count = 0  # folded into the counts
        self.max: float | None = None  # of those folded
        self._summary: tuple[int, dict[str, float | None] | None] | None = None  # (observations, to_dict's)

    def add(self, seconds: float) -> None:
        self.values.append(seconds)

    def add_zeros(self, n: int) -> None:
        """``n`` observations of 0 s, as ``n`` calls of ``add(0.0)``."""
        self.zeros += n

    def fold(self) -> None:
        """Past ``EXACT`` values, count them by key (between a run's slices; cheap below it)."""
        if self._counts is not None or len(self.values) + self.zeros > EXACT:
            self._fold()

    def _fold(self) -> None:
        values, zeros = self.values, self.zeros
        if not values and not zeros:
            return
        counts = self._counts if self._counts is not None else Counter()
        counts.update(_keys(values))
        if zeros:
            counts[0] += zeros  # 0.0's key
        top = _top(values, zeros)
        if self.max is None or top > self.max:
            self.max = top
        self.count += len(values) + zeros
        self._counts = counts
        del values[:]  # in place: a bound ``append`` stays this array's
        self.zeros = 0

    def __len__(self) -> int:
        return self.count + len(self.values) + self.zeros

    def percentile(self, q: float) -> float | None:
        """The q-th percentile: exact while every value is kept, else its key's smallest value."""
        n = len(self)
        if not n:
            return None
        if self._counts is None:
            return _interpolated(_sorted(self.values, self.zeros), q)
        self._fold()
        assert self._counts is not None
        rank, seen = round((n - 1) * q), 0
        for key in sorted(self._counts):
            seen += self._counts[key]
            if seen > rank:
                return _value(key << SHIFT)
        raise AssertionError("a rank past every count")

    def top(self) -> float | None:
        kept = _top(self.values, self.zeros) if self.values or self.zeros else None
        if kept is None:
            return self.max
        return kept if self.max is None or kept > self.max else self.max

    def to_dict(self) -> dict[str, float | None] | None:
        """``{"p50", "p90", "max"}``; None where the figure has no observation.

        Sorted once, and kept while no value came since: a result is read
        by its JSON, its report and the mitigations' rows alike.
        """
        n = len(self)
        if self._summary is not None and self._summary[0] == n:
            return self._summary[1]
        summary: dict[str, float | None] | None = None
        if n and self._counts is None:
            summary = _exact(self.values, self.zeros)
        elif n:
            summary = {"p50": self.percentile(0.50), "p90": self.percentile(0.90), "max": self.top()}
        self._summary = (n, summary)
        return summary


def _top(values: array[float], zeros: int) -> float:
    top = max(values) if values else 0.0
    return max(top, 0.0) if zeros else top


def _sorted(values: array[float], zeros: int) -> list[float]:
    """``values`` and ``zeros`` zeros, sorted."""
    xs = sorted(values)
    if zeros:
        at = bisect_left(xs, 0.0)
        xs[at:at] = repeat(0.0, zeros)
    return xs


def _exact(values: array[float], zeros: int = 0) -> dict[str, float | None]:
    """p50, p90 and max of every value and ``zeros`` zeros, exactly: counted by value where they repeat (a
    storm's 60 s 429s, its 0 s 404s: a count is far cheaper than a sort), else sorted."""
    counts = Counter(values)
    if zeros:
        counts[0.0] += zeros
    if len(counts) * 4 > len(values) + zeros:  # mostly distinct: a sort is the cheaper
        xs = _sorted(values, zeros)
        return {"p50": _interpolated(xs, 0.50), "p90": _interpolated(xs, 0.90), "max": xs[-1]}
    distinct = sorted(counts)
    cumulative, total = [], 0
    for x in distinct:
        total += counts[x]
        cumulative.append(total)

    def kth(k: int) -> float:  # the k-th smallest value (0-based), as sorted(values)[k]
        return distinct[bisect_right(cumulative, k)]

    out: dict[str, float | None] = {}
    for name, q in (("p50", 0.50), ("p90", 0.90)):
        pos = (total - 1) * q
        lo, hi = math.floor(pos), math.ceil(pos)
        a, b = kth(lo), kth(hi)
        out[name] = a + (b - a) * (pos - lo)
    out["max"] = distinct[-1]
    return out


def _interpolated(xs: list[float], q: float) -> float:
    """numpy's default percentile of sorted ``xs``: linear between the closest ranks."""
    pos = (len(xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


class NodeLatencies:
    """The node's own figures; each limiter keeps its wait (``APILimiter.waits``)."""

    __slots__ = ("cni_add", "cni_del", "ct_clean_wait_failed", "ct_clean_wait_ok")

    def fold(self) -> None:
        for figure in (self.cni_add, self.cni_del, self.ct_clean_wait_ok, self.ct_clean_wait_failed):
            figure.fold()

    def __init__(self) -> None:
        self.cni_add = Latencies()  # every ADD, from cilium-cni's call to its answer (ok, 429, or the deadline)
        self.cni_del = Latencies()  # every DEL containerd sent, to its answer or containerd's timeout
        self.ct_clean_wait_ok = Latencies()  # waitingForCTClean of regenerations that went on to succeed
        self.ct_clean_wait_failed = Latencies()  # and of those whose create had failed by then
