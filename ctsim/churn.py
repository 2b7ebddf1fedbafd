"""Connection churn: new connections per second, constant or a repeating schedule.

Each connection holds a live entry while open; after it closes the entry lives
on for the TCP close timeout (``bpf-ct-timeout-regular-tcp-fin``, 10 s) and is
then *expired*: it stays in the map until a GC pass deletes it or LRU evicts
it (``bpf-ct-timeout-*`` defaults). Arrivals are batched into one cohort per tick.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from dataclasses import dataclass

import simpy

from ctsim.ctmap import CTMap
from ctsim.errors import InputError
from ctsim.quantity import format_duration, format_rate, parse_duration, parse_rate

CT_TIMEOUT_TCP_FIN = 10.0  # seconds; bpf-ct-timeout-regular-tcp-fin
TICK_SECONDS = 60.0


@dataclass(frozen=True)
class ChurnSchedule:
    """``(rate per second, duration)`` segments, repeated for the whole run."""

    segments: tuple[tuple[float, float], ...]

    @property
    def constant(self) -> bool:
        return len(self.segments) == 1

    def rate_at(self, t: float) -> float:
        if self.constant:
            return self.segments[0][0]
        period = sum(d for _, d in self.segments)
        t %= period
        for rate, duration in self.segments:
            if t < duration:
                return rate
            t -= duration
        return self.segments[-1][0]

    @property
    def peak(self) -> float:
        return max(rate for rate, _ in self.segments)

    def describe(self) -> str:
        if self.constant:
            return format_rate(self.segments[0][0])
        return ", ".join(f"{format_rate(r)} for {format_duration(d)}" for r, d in self.segments)


_SEGMENT_RE = re.compile(r"^\s*(\S+)\s+for\s+(\S+)\s*$")


def parse_churn(text: str) -> ChurnSchedule:
    """``50000/min`` or ``50000/min for 8h, 500/min for 16h`` (a repeating day)."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise InputError("--churn: empty schedule")
    if len(parts) == 1 and " for " not in parts[0]:
        return ChurnSchedule(((parse_rate(parts[0], "--churn"), float("inf")),))
    segments = []
    for part in parts:
        match = _SEGMENT_RE.match(part)
        if not match:
            raise InputError(f"--churn: cannot read {part.strip()!r}; write e.g. '50000/min for 8h, 500/min for 16h'")
        segments.append((parse_rate(match.group(1), "--churn"), parse_duration(match.group(2), "--churn")))
    return ChurnSchedule(tuple(segments))


def connection_churn(
    env: simpy.Environment,
    ctmap: CTMap,
    schedule: ChurnSchedule,
    conn_seconds: float,
    tick: float = TICK_SECONDS,
) -> Generator[simpy.Event, None, None]:
    """Opens connections into ``ctmap``, one cohort per tick, until the run ends."""
    carry = 0.0
    lifetime = conn_seconds + CT_TIMEOUT_TCP_FIN
    while True:
        yield env.timeout(tick)
        carry += schedule.rate_at(env.now - tick / 2) * tick
        count = int(carry)
        carry -= count
        if count:
            # The tick's connections opened, on average, half a tick ago.
            ctmap.insert(env.now, count, env.now - tick / 2 + lifetime)
