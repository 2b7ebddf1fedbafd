"""The run's retry intervals at 8 bytes each, and their exact percentiles.

A storm of 100,000 pods plays 215.6 M ADD attempts in two days. A float per
interval (and a list of them, sorted for each percentile) took ~4 GB; an
``array('d')`` takes 8 bytes per interval. It is sorted in runs of
``RUN`` values, in place, so that no more than one run is ever a list of
Python floats, and the k-th smallest is found by bisecting the value's
IEEE-754 bits against every run: the same value ``sorted(values)[k]``
gives, so the percentiles stay exact, byte for byte.
"""

from __future__ import annotations

import math
import struct
from array import array
from bisect import bisect_right
from collections.abc import Iterator

RUN = 1 << 20  # values sorted at once: 8 MiB as an array, ~32 MiB while a list
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


class RetryIntervals:
    """Seconds between a pod's consecutive ADD attempts, for every pod (JSON ``pods.retry_interval_s``)."""

    __slots__ = ("_runs", "values")

    def __init__(self, values: array[float] | None = None) -> None:
        self.values: array[float] = array("d") if values is None else values  # the model appends to it
        self._runs: list[tuple[int, int]] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[float]:
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

    def percentile(self, q: float) -> float | None:
        """Linear interpolation between closest ranks, as ``result.percentile`` (numpy's default)."""
        n = len(self.values)
        if not n:
            return None
        pos = (n - 1) * q
        lo, hi = math.floor(pos), math.ceil(pos)
        a = self.kth(lo)
        b = a if hi == lo else self.kth(hi)
        return a + (b - a) * (pos - lo)

    def max(self) -> float | None:
        runs, v = self._sorted_runs(), self.values
        return max(v[b - 1] for _, b in runs) if runs else None
