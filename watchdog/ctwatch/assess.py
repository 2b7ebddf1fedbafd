"""From counts to a verdict per family: the same projection the simulator uses.

Entries come from the cheapest source that answered (Cilium's own pressure
metric, else our batched count); the walk rate from our bounded sample, else
a calibration file, else the configured fallback. The projection itself is
``ctsim.projection``: ctwatch and ``ctsim run`` cannot disagree. A scrub walks
every family's maps, so on a dual-stack node the burst figures (burst
seconds, deadline ratio, safe burst, level) are the node's, computed from both
families' walks, and each family's series carries them; walk seconds are the
family's own.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from ctsim.projection import FamilyWalk, burst_seconds, max_entries_for_burst, safe_burst
from ctsim.scenario import DEFAULT_REGENERATION
from ctwatch.readings import CT_MAPS, MapReading, SourceResult

LEVELS = ("ok", "warning", "critical")
GROWTH_WINDOW_S = 1800.0


@dataclass(frozen=True)
class Thresholds:
    burst: int = 10
    deadline_s: float = 90.0
    warning_ratio: float = 0.5  # burst projection over this share of the deadline: warning
    critical_ratio: float = 1.0


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
    level: int


@dataclass
class Assessor:
    thresholds: Thresholds
    fallback_rate: float
    fallback_rate_source: str = "configured"
    _history: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)

    def assess(self, now: float, results: dict[str, SourceResult]) -> list[FamilyAssessment]:
        counted = []
        for family, names in CT_MAPS.items():
            picked = self._entries(names, results)
            if picked is None:
                continue
            counts, max_entries, source = picked
            rate, rate_source = self._rate(family, results)
            counted.append((FamilyWalk(family, counts, rate), max_entries, source, rate_source))
        walks = [walk for walk, *_ in counted]
        return [self._project(now, walks, walk, *rest) for walk, *rest in counted]

    def _entries(
        self, names: tuple[str, ...], results: dict[str, SourceResult]
    ) -> tuple[tuple[int, ...], int, str] | None:
        """Per map: Cilium's pressure x our capacity where it has it, else our count."""
        bpf = results.get("bpf")
        by_map: dict[str, MapReading] = {r.map: r for r in bpf.readings} if bpf and bpf.up else {}
        metrics = results.get("cilium_metrics")
        pressure = metrics.pressure if metrics and metrics.up else {}
        present = [n for n in names if n in by_map]
        if not present:
            return None
        max_entries = sum(by_map[n].max_entries for n in present)
        counts = {n: by_map[n].entries for n in present}
        counts.update({n: round(pressure[n] * by_map[n].max_entries) for n in present if n in pressure})
        if any(c is None for c in counts.values()):
            return None
        source = "cilium_metrics" if all(n in pressure for n in present) else "bpf"
        return tuple([c for c in counts.values() if c is not None]), max_entries, source

    def _rate(self, family: str, results: dict[str, SourceResult]) -> tuple[float, str]:
        bpf = results.get("bpf")
        if bpf and bpf.up and family in bpf.walk_rates:
            return bpf.walk_rates[family], "bpf"
        return self.fallback_rate, self.fallback_rate_source

    def _project(
        self,
        now: float,
        walks: list[FamilyWalk],
        walk: FamilyWalk,
        max_entries: int,
        source: str,
        rate_source: str,
    ) -> FamilyAssessment:
        t = self.thresholds
        overhead = DEFAULT_REGENERATION
        burst = burst_seconds(walks, t.burst) + overhead
        ratio = burst / t.deadline_s
        fits = safe_burst(walks, t.deadline_s, overhead)
        level = 2 if ratio >= t.critical_ratio else 1 if ratio >= t.warning_ratio else 0
        entries = round(walk.entries)
        history = self._history.setdefault(walk.family, deque(maxlen=256))
        history.append((now, entries))
        while history and now - history[0][0] > GROWTH_WINDOW_S:
            history.popleft()
        # This family's share of the node-wide table limit at which the burst still fits.
        total = sum(w.entries for w in walks)
        node_limit = max_entries_for_burst(walks, t.burst, t.deadline_s, overhead)
        limit = round(node_limit * walk.entries / total) if total > 0 else node_limit
        return FamilyAssessment(
            family=walk.family,
            entries=entries,
            max_entries=max_entries,
            entries_source=source,
            rate=walk.rate,
            rate_source=rate_source,
            walk_seconds=walk.seconds,
            burst_seconds=burst,
            deadline_ratio=ratio,
            safe_burst=math.inf if fits is None else float(fits),
            seconds_until_deadline=_eta(history, limit),
            level=level,
        )


def _eta(history: deque[tuple[float, int]], limit: int) -> float:
    """Seconds until the count reaches ``limit`` at its recent growth rate (least squares)."""
    _now, entries = history[-1]
    if entries >= limit:
        return 0.0
    if len(history) < 2:
        return math.inf
    n = len(history)
    mean_t = sum(t for t, _ in history) / n
    mean_e = sum(e for _, e in history) / n
    var = sum((t - mean_t) ** 2 for t, _ in history)
    if var <= 0:
        return math.inf
    slope = sum((t - mean_t) * (e - mean_e) for t, e in history) / var
    if slope <= 0:
        return math.inf
    return (limit - entries) / slope
