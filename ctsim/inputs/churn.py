"""Connection churn: new connections per second, constant or a repeating schedule.

The schedule only: how many connections a node opens when. What they do to
a CT map is ``ctsim.sim.connections``.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from ctsim.core.errors import InputError
from ctsim.core.floats import left_sum
from ctsim.core.quantity import format_duration, format_rate, parse_duration, parse_rate, split_list


@dataclass(frozen=True)
class ChurnSchedule:
    """``(rate per second, duration)`` segments, repeated for the whole run."""

    segments: tuple[tuple[float, float], ...]

    @property
    def constant(self) -> bool:
        return len(self.segments) == 1

    @functools.cached_property
    def period(self) -> float:
        return left_sum(d for _, d in self.segments)

    def rate_at(self, t: float) -> float:
        if self.constant:
            return self.segments[0][0]
        t %= self.period
        for rate, duration in self.segments:
            if t < duration:
                return rate
            t -= duration
        return self.segments[-1][0]

    def same_rate_run(self, t: float, step: float, limit: int) -> int:
        """How many of ``t, t+step, ...`` (at most ``limit``) fall in the segment ``t`` falls in."""
        if self.constant:
            return limit
        phase = t % self.period
        end = 0.0
        for _, duration in self.segments:
            end += duration
            if phase < end:
                break
        n = min(max(math.ceil((end - phase) / step), 1), limit)
        rate = self.rate_at(t)
        while n > 1 and self.rate_at(t + (n - 1) * step) != rate:  # float edges: the exact test decides
            n -= 1
        if n < limit and self.rate_at(t + n * step) == rate:
            n += 1
        return n

    @property
    def peak(self) -> float:
        return max(rate for rate, _ in self.segments)

    def describe(self) -> str:
        if self.constant:
            return format_rate(self.segments[0][0])
        return ", ".join(f"{format_rate(r)} for {format_duration(d)}" for r, d in self.segments)


_SEGMENT_RE = re.compile(r"^\s*(\S+)\s+for\s+(\S+)\s*$")
# A comma between segments, not one that groups a number's thousands (5,000/min): those sit between a digit and
# exactly three more.
_SEGMENT_COMMA = re.compile(r"(?<![0-9]),|,(?![0-9]{3}(?![0-9]))")


def parse_churn(text: str, flag: str = "--churn") -> ChurnSchedule:
    """``50000/min`` or ``50000/min for 8h, 500/min for 16h`` (a repeating day)."""
    if not text.strip():
        raise InputError(f"{flag}: empty schedule")
    parts = split_list(text, flag) if "," not in text else _segments(text, flag)
    if len(parts) == 1 and " for " not in parts[0]:
        return ChurnSchedule(((parse_rate(parts[0], flag), float("inf")),))
    segments = []
    for part in parts:
        match = _SEGMENT_RE.match(part)
        if not match:
            raise InputError(f"{flag}: cannot read {part.strip()!r}; write e.g. '50000/min for 8h, 500/min for 16h'")
        segments.append((parse_rate(match.group(1), flag), parse_duration(match.group(2), flag)))
    return ChurnSchedule(tuple(segments))


def _segments(text: str, flag: str) -> list[str]:
    """``split_list``'s rule, where a comma grouping a number's thousands (``5,000/min``) stays in its number."""
    items = [item.strip() for item in _SEGMENT_COMMA.split(text)]
    if not all(items):
        raise InputError(f"{flag}: empty item in {text.strip()!r} (a doubled or trailing comma?)")
    return items
