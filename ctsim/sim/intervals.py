"""The run's retry intervals at 8 bytes each, and their exact percentiles, in memory that stops growing.

A storm of 100,000 pods plays 215.6 M ADD attempts in two days. A float per
interval (and a list of them, sorted for each percentile) took ~4 GB; an
``array('d')`` takes 8 bytes per interval. It is sorted in runs of
``RUN`` values, in place, so that no more than one run is ever a list of
Python floats, and the k-th smallest is found by bisecting the value's
IEEE-754 bits against every run: the same value ``sorted(values)[k]``
gives, so the percentiles stay exact, byte for byte.

Past ``BUDGET`` intervals (128 MiB of them) the run *folds* them: every
interval is counted by its key (the top 24 bits of its order: sign,
exponent and 12 bits of mantissa, so keys sort as the values do), and only
those whose key lies near p50 or p90 are kept: from where the first fold's
intervals place each to where their latest quarter does, ``WINDOW`` of the
ranks either side. The k-th smallest is then the ``k - below(key)``-th
kept value of its key: still exact. A storm whose later intervals moved a
percentile out of its window has that key's values read back from the
*spill*: every folded interval, written as it was folded, 8 bytes each, to
an unlinked file in ``$TMPDIR`` (else ``/var/tmp``, which is on disk where
``/tmp`` is a tmpfs). Where the disk refuses the spill, the same run is
played again (``replay``), keeping only that key's values.
"""

from __future__ import annotations

import math
import os
import struct
import tempfile
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import compress, repeat
from operator import rshift
from typing import BinaryIO

RUN = 1 << 20  # values sorted at once: 8 MiB as an array, ~32 MiB while a list
BUDGET = 1 << 24  # intervals kept as they are: 128 MiB; a longer storm's are folded
SHIFT = 40  # a key is an order's top 24 bits: ~1/4096 of an octave
WINDOW = 0.02  # ranks kept around each percentile's, as a share of all intervals
SPAN = 1 << 16  # keys a window holds at most: 16 octaves' worth is no window
QUANTILES = (0.50, 0.90)  # the percentiles the JSON gives (``result._spread``)
_SIGN = 1 << 63
_MAGNITUDE = _SIGN - 1
_BITS = struct.Struct("<Q")
_DOUBLE = struct.Struct("<d")


def _order(x: float) -> int:
    """An integer in the floats' order, one step per double (0.0 and -0.0 are one: a kth of -0.0 reads 0.0)."""
    bits = _BITS.unpack(_DOUBLE.pack(x))[0]
    return -(bits & _MAGNITUDE) if bits & _SIGN else bits


def _value(order: int) -> float:
    bits = (-order) | _SIGN if order < 0 else order
    return float(_DOUBLE.unpack(_BITS.pack(bits))[0])


def _keys(chunk: array[float]) -> Iterable[int]:
    """Each value's key, in the values' order; in C while every value is a non-negative double (intervals are)."""
    bits = array("Q", chunk.tobytes())
    if bits and max(bits) >= _SIGN:  # a negative value, or -0.0: the general order
        return [_order(x) >> SHIFT for x in chunk]
    return map(rshift, bits, repeat(SHIFT))


def _index(counts: Counter[int]) -> tuple[list[int], list[int]]:
    """The keys in order, and how many intervals lie below each."""
    keys = sorted(counts)
    below, total = [], 0
    for key in keys:
        below.append(total)
        total += counts[key]
    return keys, below


def _around(keys: list[int], below: list[int], n: int, q: float) -> tuple[int, int]:
    """The keys of the ranks within ``WINDOW`` of the ``q``-th percentile's, of ``n`` intervals."""
    lo = max(0, math.floor((q - WINDOW) * (n - 1)))
    hi = min(n - 1, math.ceil((q + WINDOW) * (n - 1)))
    return keys[bisect_right(below, lo) - 1], keys[bisect_right(below, hi) - 1]


def spill_file() -> BinaryIO:
    """Unlinked as it opens, so it goes with the process however the run ends; on disk, not in RAM, where it can."""
    where = os.environ.get("TMPDIR") or ("/var/tmp" if os.path.isdir("/var/tmp") else tempfile.gettempdir())
    return tempfile.TemporaryFile(prefix="ctsim-intervals-", dir=where)


def _chunks(values: array[float]) -> Iterator[array[float]]:
    for lo in range(0, len(values), RUN):
        yield values[lo : lo + RUN]


class RetryIntervals:
    """Seconds between a pod's consecutive ADD attempts, for every pod (JSON ``pods.retry_interval_s``).

    A folded run's percentile outside its window reads its key's intervals
    back from the spill; ``replay(keys)`` (set by the model) plays the run
    again for them where the spill could not be written.
    """

    __slots__ = (
        "_by_key",
        "_counts",
        "_index",
        "_keep",
        "_kept",
        "_max",
        "_n",
        "_runs",
        "_spill",
        "_spilling",
        "replay",
        "values",
    )

    def __init__(self, values: array[float] | None = None, gather: frozenset[int] | None = None) -> None:
        self.values: array[float] = array("d") if values is None else values  # the model appends to it
        self._runs: list[tuple[int, int]] | None = None
        self._counts: Counter[int] | None = None  # folded: how many intervals had each key
        self._keep = gather  # folded or gathering: the keys whose intervals are kept
        self._kept: array[float] = array("d")
        self._n = 0  # intervals folded
        self._max: float | None = None
        self._index: tuple[list[int], list[int]] | None = None  # sorted keys, the intervals below each
        self._by_key: dict[int, list[float]] = {}
        self._spill: BinaryIO | None = None  # every interval folded, in the order folded
        self._spilling = gather is None  # a replay's gathering keeps what it gathers; a failed write ends it
        self.replay: Callable[[frozenset[int]], array[float]] | None = None

    @property
    def folded(self) -> bool:
        return self._counts is not None

    def fold(self) -> None:
        """Past ``BUDGET`` (or gathering): counts the intervals appended since, keeps those near the percentiles."""
        v = self.values
        if not v or (self._keep is None and len(v) <= BUDGET):
            return
        if self._keep is None or self._counts is not None:  # folding (a replay's gathering does not count)
            counts = self._counts = Counter() if self._counts is None else self._counts
            for chunk in _chunks(v):
                counts.update(_keys(chunk))
            self._n += len(v)
            self._spilled(v)
            top = max(v)
            self._max = top if self._max is None else max(self._max, top)
            if self._keep is None:  # the first fold: where all so far, and the latest quarter, place them
                recent: Counter[int] = Counter()
                for chunk in _chunks(v[len(v) - max(1, len(v) // 4) :]):
                    recent.update(_keys(chunk))
                self._keep = self._windows(recent)
        keep = self._keep.__contains__
        for chunk in _chunks(v):
            self._kept.extend(compress(chunk, map(keep, _keys(chunk))))
        del v[:]
        self._runs, self._index, self._by_key = None, None, {}

    def _spilled(self, v: array[float]) -> None:
        """``v`` appended to the spill; a disk that refuses ends the spill, and a percentile that needs it replays."""
        if not self._spilling:
            return
        try:
            if self._spill is None:
                self._spill = spill_file()
            v.tofile(self._spill)
        except OSError:
            self._unspill()

    def _unspill(self) -> None:
        self._spilling = False
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def _read_back(self, keys: frozenset[int]) -> array[float] | None:
        """Every spilled interval whose key is in ``keys``, in the order folded; None if the spill is not whole."""
        if self._spill is None or not self._spilling:
            return None
        found: array[float] = array("d")
        wanted = keys.__contains__
        try:
            self._spill.flush()
            self._spill.seek(0)
            while block := self._spill.read(RUN * found.itemsize):
                chunk = array("d", block)
                found.extend(compress(chunk, map(wanted, _keys(chunk))))
            self._spill.seek(0, os.SEEK_END)  # later folds append
        except OSError:
            self._unspill()
            return None
        return found

    def kept(self) -> array[float]:
        """A gathering's intervals: those whose key it was given."""
        self.fold()
        return self._kept

    def _windows(self, recent: Counter[int]) -> frozenset[int]:
        """The keys a percentile may end in: from where all intervals so far place it to where the latest do.

        A storm that settles before its first fold counts its early
        intervals with all the later ones: its percentiles end between the
        two, give or take ``WINDOW`` of the ranks of each. One that settles
        later (100,000 pods: p90 fell from 187 s to 75 s between 25 M and
        37 M intervals, p50 0.3 s, out of its window) is replayed.
        """
        keys, below = self._located()
        lately, lately_below = _index(recent)
        lately_n = lately_below[-1] + recent[lately[-1]]
        wanted: set[int] = set()
        for q in QUANTILES:
            lo, hi = _around(keys, below, self._n, q)
            recent_lo, recent_hi = _around(lately, lately_below, lately_n, q)
            lo, hi = min(lo, recent_lo), max(hi, recent_hi)
            # Every key between, seen or not: where later intervals fall (a span too wide to hold: those seen).
            seen = keys[bisect_left(keys, lo) : bisect_right(keys, hi)]
            wanted.update(range(lo, hi + 1) if hi - lo <= SPAN else seen)
        return frozenset(wanted)

    def _located(self) -> tuple[list[int], list[int]]:
        if self._index is None:
            assert self._counts is not None
            self._index = _index(self._counts)
        return self._index

    def __len__(self) -> int:
        return self._n + len(self.values)

    def __iter__(self) -> Iterator[float]:
        if self.folded:
            raise ValueError("a folded run keeps only the intervals near its percentiles")
        return iter(self.values)

    def _sorted_runs(self) -> list[tuple[int, int]]:
        if self._runs is None or sum(hi - lo for lo, hi in self._runs) != len(self.values):
            v, runs = self.values, []
            for lo in range(0, len(v), RUN):
                hi = min(lo + RUN, len(v))
                v[lo:hi] = array("d", sorted(v[lo:hi]))
                runs.append((lo, hi))
            self._runs = runs
        return self._runs

    def kth(self, k: int) -> float:
        """``sorted(values)[k]``."""
        if self.folded:
            return self._folded_kth(k)
        runs, v = self._sorted_runs(), self.values
        if len(runs) == 1:
            return v[k]
        lo = _order(min(v[a] for a, _ in runs))
        hi = _order(max(v[b - 1] for _, b in runs))
        while lo < hi:  # the least value with more than k values at or below it: a value of the array
            mid = (lo + hi) // 2
            x = _value(mid)
            if sum(bisect_right(v, x, a, b) - a for a, b in runs) > k:
                hi = mid
            else:
                lo = mid + 1
        return _value(lo)

    def _folded_kth(self, k: int) -> float:
        self.fold()
        keys, below = self._located()
        i = bisect_right(below, k) - 1
        key = keys[i]
        if key not in self._by_key:
            self._gather_missing(key)
            is_key = key.__eq__
            chunks = _chunks(self._kept)
            self._by_key[key] = sorted(x for c in chunks for x in compress(c, map(is_key, _keys(c))))
        return self._by_key[key][k - below[i]]

    def _gather_missing(self, key: int) -> None:
        """``key`` and the percentiles' keys, where the window missed them: their intervals, spilled or replayed."""
        assert self._keep is not None
        keys, below = self._located()
        n = self._n
        ranks = {r for q in QUANTILES for r in (math.floor((n - 1) * q), math.ceil((n - 1) * q))}
        missing = frozenset({key, *(keys[bisect_right(below, r) - 1] for r in ranks)}) - self._keep
        if not missing:
            return
        found = self._read_back(missing)
        if found is None:
            if self.replay is None:
                raise ValueError("a folded run's percentile lies outside its window, and nothing can replay the run")
            found = self.replay(missing)
        self._kept.extend(found)
        self._keep = self._keep | missing

    def percentile(self, q: float) -> float | None:
        """Linear interpolation between closest ranks, as ``result.percentile`` (numpy's default)."""
        n = len(self)
        if not n:
            return None
        pos = (n - 1) * q
        lo, hi = math.floor(pos), math.ceil(pos)
        a = self.kth(lo)
        b = a if hi == lo else self.kth(hi)
        return a + (b - a) * (pos - lo)

    def max(self) -> float | None:
        if self.folded:
            self.fold()
            return self._max
        runs, v = self._sorted_runs(), self.values
        return max(v[b - 1] for _, b in runs) if runs else None
