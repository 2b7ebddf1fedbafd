"""Float arithmetic that gives the same bits on every CPython the package allows.

Since 3.12, ``sum()`` of floats compensates its rounding (Neumaier), so the
same durations summed on 3.11 and on 3.13 can differ in the last bit, and a
limiter decision or a projection with them. Same seed, same result,
everywhere: sums that feed results add left to right, as 3.11's ``sum()``.
"""

from __future__ import annotations

from collections.abc import Iterable


def left_sum(values: Iterable[float]) -> float:
    """``((0 + a) + b) + c ...``: CPython 3.11's ``sum()`` of floats, on every version."""
    total = 0.0
    for v in values:
        total += v
    return total
