"""Pods created or deleted over time (``--arrivals``, ``--deletes``): a schedule in churn's syntax, played once.

``'4.4/s for 10m'``, ``'30/min for 2h, 0/s for 1h, 30/min for 2h'``: each
segment's pods come evenly spaced at its rate, from the segment's start;
segments follow one another, once (a churn schedule repeats; a workload
ends). What the pods do is the model's (``ctsim.sim``); this is when.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ctsim.core.errors import InputError
from ctsim.core.floats import left_sum
from ctsim.core.quantity import format_duration, format_rate
from ctsim.inputs.churn import parse_churn

EPSILON = 1e-9  # 4.4/s for 10m is 2,640 pods, not 2,639 for the float 4.4 × 600


@dataclass(frozen=True)
class PodSchedule:
    """``(pods per second, duration)`` segments, played once from t=0."""

    segments: tuple[tuple[float, float], ...]

    @property
    def span(self) -> float:
        return left_sum(d for _, d in self.segments)

    def times(self) -> tuple[float, ...]:
        """Each pod's slot, ascending: ``start + k / rate`` for the k-th pod of each segment."""
        return tuple(t for t, _ in self.slots())

    def slots(self) -> tuple[tuple[float, float], ...]:
        """Each pod's slot: (its start, its width ``1 / rate``); the model jitters each in its slot's first half."""
        out: list[tuple[float, float]] = []
        start = 0.0
        for rate, duration in self.segments:
            n = math.floor(rate * duration + EPSILON) if rate > 0 else 0
            out.extend((start + k / rate, 1 / rate) for k in range(n))
            start += duration
        return tuple(out)

    @property
    def count(self) -> int:
        return sum(math.floor(rate * d + EPSILON) if rate > 0 else 0 for rate, d in self.segments)

    def describe(self) -> str:
        return ", ".join(f"{format_rate(r)} for {format_duration(d)}" for r, d in self.segments)


def parse_pod_schedule(text: str, flag: str, most: int) -> PodSchedule:
    """A churn-syntax schedule whose every segment has a span; at most ``most`` pods in all."""
    churn = parse_churn(text, flag)
    if any(math.isinf(d) for _, d in churn.segments):
        raise InputError(f"{flag}: give the rate a span, e.g. '4.4/s for 10m' (a workload ends; churn repeats)")
    schedule = PodSchedule(churn.segments)
    if schedule.count == 0:
        raise InputError(f"{flag}: {text.strip()!r} schedules no pod")
    if schedule.count > most:
        raise InputError(f"{flag}: {schedule.count:,} pods; at most {most:,}")
    return schedule


@dataclass(frozen=True)
class IntOrPercent:
    """A Deployment's ``maxSurge`` / ``maxUnavailable``: a count, or a percent of the replicas."""

    value: float
    percent: bool

    def of(self, replicas: int, round_up: bool) -> int:
        """Kubernetes' ``GetScaledValueFromIntOrPercent``: maxSurge rounds up, maxUnavailable down."""
        if not self.percent:
            return int(self.value)
        scaled = self.value * replicas / 100
        return math.ceil(scaled - EPSILON) if round_up else math.floor(scaled + EPSILON)

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else f"{self.value:g}"


def parse_int_or_percent(text: str, flag: str) -> IntOrPercent:
    """``25%`` or ``3``: ASCII digits, a whole count or a percent from 0 to 100."""
    t = text.strip()
    percent = t.endswith("%")
    digits = t[:-1] if percent else t
    if not digits.isascii() or not digits.isdigit():
        raise InputError(f"{flag}: cannot read {text!r}; write a count (3) or a percent (25%)")
    value = int(digits)
    if percent and value > 100:
        raise InputError(f"{flag}: at most 100%, got {text!r}")
    return IntOrPercent(float(value), percent)
