"""From counts to a verdict per family: the same projection the simulator uses.

Entries come from the cheapest source that answered (Cilium's own pressure
metric, else our batched count); the walk rate from our bounded sample, else
a calibration file, else the configured fallback. The projection itself is
``ctsim.core.projection``: ctwatch and ``ctsim run`` cannot disagree. A scrub walks
every family's maps, so on a dual-stack node the burst figures (burst
seconds, deadline ratio, safe burst, level) are the node's, computed from both
families' walks, and each family's series carries them; walk seconds are the
family's own.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace

from ctsim.core.defaults import DEFAULT_REGENERATION
from ctsim.core.floats import left_sum
from ctsim.core.projection import (
    CRITICAL_RATIO,
    WARNING_RATIO,
    FamilyWalk,
    Level,
    Projection,
    seconds_until,
)
from ctwatch.readings import CT_MAPS, MapReading, Pressure, SourceResult, WalkRate, readings_of

GROWTH_WINDOW_S = 1800.0
RATE_WINDOW = 20  # walk-rate samples per family; the second fastest of these is the rate
HOLD_CYCLES = 3  # a new level must be seen this many cycles in a row before it is reported


@dataclass(frozen=True)
class Thresholds:
    burst: int = 10
    deadline_s: float = 90.0
    warning_ratio: float = WARNING_RATIO  # burst projection over this share of the deadline: warning
    critical_ratio: float = CRITICAL_RATIO


@dataclass(frozen=True)
class FamilyAssessment:
    family: str
    entries: int
    max_entries: int
    entries_source: str
    rate: float
    rate_source: str
    walk_seconds: float
    burst_seconds: float
    deadline_ratio: float
    safe_burst: float  # +Inf when the table is empty
    seconds_until_deadline: float  # +Inf when not growing towards it; 0 when past it
    level: Level
    rate_samples: int = 0  # measured samples behind ``rate`` (0: not measured)
    age_s: float = 0.0  # 0: from this cycle; else the last good projection, this old
    walk: str = ""  # how ``rate`` was timed: per-entry or batched, as the agent walks ("": not measured)
    release: str = ""  # the agent's release that walk follows ("": unknown)

    @property
    def level_rank(self) -> int:
        """``ctwatch_level``'s value."""
        return self.level.rank


@dataclass
class Assessor:
    """Counts to projections, with a robust rate, levels that do not flap, and no silent gaps.

    ``pinned``: the fallback rate was given explicitly (``--rate`` or
    ``--calibration``) and wins over sampling. Otherwise the rate is the
    second fastest of the last ``RATE_WINDOW`` samples: contention (even a
    busy hyperthread sibling, which inflates CPU time too) only ever slows a
    sample, so the fast end of the window is what the node walks at, and no
    single sample, fast or slow, moves it.
    A level changes only after ``HOLD_CYCLES`` cycles agree. A family whose
    sources fail keeps its last good projection, with its age, so an alert
    that fires does not resolve because the data went away.
    """

    thresholds: Thresholds
    fallback_rate: float
    fallback_rate_source: str = "configured"
    pinned: bool = False
    hold_cycles: int = HOLD_CYCLES
    _history: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)
    _rates: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)  # (a cycle's rate, its samples)
    _walks: dict[str, tuple[str, str]] = field(default_factory=dict)  # family -> (walk, release) of its window
    _levels: dict[str, tuple[Level, Level, int]] = field(default_factory=dict)  # reported, candidate, seen
    _last: dict[str, tuple[float, FamilyAssessment]] = field(default_factory=dict)

    def assess(self, now: float, results: dict[str, SourceResult]) -> list[FamilyAssessment]:
        counted = []
        for family, names in CT_MAPS.items():
            picked = self._entries(names, results)
            if picked is None:
                continue
            counts, max_entries, source = picked
            rate, rate_source, samples = self._rate(family, results)
            walked = self._walks.get(family, ("", "")) if rate_source == "measured" else ("", "")
            counted.append((FamilyWalk(family, counts, rate), max_entries, source, rate_source, samples, *walked))
        walks = [c[0] for c in counted]
        fresh = {c[0].family: self._project(now, walks, *c) for c in counted}
        for family, assessment in fresh.items():
            self._last[family] = (now, assessment)
        out = []
        for family in CT_MAPS:
            if family in fresh:
                out.append(fresh[family])
            elif family in self._last:
                at, last = self._last[family]
                out.append(replace(last, age_s=now - at))
        return out

    def _entries(
        self, names: tuple[str, ...], results: dict[str, SourceResult]
    ) -> tuple[tuple[int, ...], int, str] | None:
        """Per map: a reported pressure x the map's capacity where a source has it, else the map's count."""
        by_map: dict[str, MapReading] = {r.map: r for r in readings_of(results, MapReading)}
        pressure: dict[str, Pressure] = {p.map: p for p in readings_of(results, Pressure)}
        present = [n for n in names if n in by_map]
        if not present:
            return None
        max_entries = sum(by_map[n].max_entries for n in present)
        counts = {n: by_map[n].entries for n in present}
        counts.update({n: round(pressure[n].ratio * by_map[n].max_entries) for n in present if n in pressure})
        if any(c is None for c in counts.values()):
            return None
        first = present[0]
        source = pressure[first].source if all(n in pressure for n in present) else by_map[first].source
        return tuple([c for c in counts.values() if c is not None]), max_entries, source

    def _rate(self, family: str, results: dict[str, SourceResult]) -> tuple[float, str, int]:
        """(entries/s, where it came from, measured samples behind it)."""
        if self.pinned:
            return self.fallback_rate, self.fallback_rate_source, 0
        window = self._rates.setdefault(family, deque(maxlen=RATE_WINDOW))
        timed = [w for w in readings_of(results, WalkRate) if w.family == family]
        if timed and self._walks.get(family) != (timed[-1].walk, timed[-1].release):
            window.clear()  # the agent walks another way now (an upgrade): earlier samples timed the old walk
            self._walks[family] = (timed[-1].walk, timed[-1].release)
        window.extend((w.entries_per_s, w.samples) for w in timed)
        if window:
            fastest = sorted(rate for rate, _ in window)
            samples = sum(n for _, n in window)  # every sample behind it: --once's cycle takes a whole window
            return fastest[-2] if len(fastest) > 1 else fastest[0], "measured", samples
        return self.fallback_rate, self.fallback_rate_source, 0

    def _level(self, family: str, raw: Level) -> Level:
        """The reported level: the first one at once, later changes after ``hold_cycles`` agreeing cycles."""
        if family not in self._levels:
            self._levels[family] = (raw, raw, 0)
            return raw
        reported, candidate, seen = self._levels[family]
        if raw == reported:
            self._levels[family] = (reported, raw, 0)
            return reported
        seen = seen + 1 if raw == candidate else 1
        if seen >= self.hold_cycles:
            self._levels[family] = (raw, raw, 0)
            return raw
        self._levels[family] = (reported, raw, seen)
        return reported

    def _project(
        self,
        now: float,
        walks: list[FamilyWalk],
        walk: FamilyWalk,
        max_entries: int,
        source: str,
        rate_source: str,
        rate_samples: int,
        walk_kind: str = "",
        release: str = "",
    ) -> FamilyAssessment:
        t = self.thresholds
        p = Projection(walks, t.burst, t.deadline_s, DEFAULT_REGENERATION, t.warning_ratio, t.critical_ratio)
        level = self._level(walk.family, p.level)
        entries = round(walk.entries)
        history = self._history.setdefault(walk.family, deque(maxlen=256))
        history.append((now, entries))
        while history and now - history[0][0] > GROWTH_WINDOW_S:
            history.popleft()
        # This family's share of the node-wide table limit at which the burst still fits.
        node_limit = p.max_entries_for_burst
        limit = round(node_limit * walk.entries / p.entries) if p.entries > 0 else node_limit
        return FamilyAssessment(
            family=walk.family,
            entries=entries,
            max_entries=max_entries,
            entries_source=source,
            rate=walk.rate,
            rate_source=rate_source,
            walk_seconds=walk.seconds,
            burst_seconds=p.burst_seconds,
            deadline_ratio=p.deadline_ratio,
            safe_burst=math.inf if p.safe_burst is None else float(p.safe_burst),
            seconds_until_deadline=_eta(history, limit),
            level=level,
            rate_samples=rate_samples,
            walk=walk_kind,
            release=release,
        )


def _eta(history: deque[tuple[float, int]], limit: int) -> float:
    """Seconds until the count reaches ``limit`` at its recent growth rate (least squares)."""
    _now, entries = history[-1]
    if entries >= limit or len(history) < 2:
        return seconds_until(entries, limit, None)
    n = len(history)
    mean_t = left_sum(t for t, _ in history) / n
    mean_e = left_sum(e for _, e in history) / n
    var = left_sum((t - mean_t) ** 2 for t, _ in history)
    if var <= 0:
        return math.inf
    return seconds_until(entries, limit, left_sum((t - mean_t) * (e - mean_e) for t, e in history) / var)
