"""One collection cycle: every enabled source, each failing alone, then the assessment.

A source that fails is marked down, logged once (not every cycle) and tried
again next cycle; when it answers again that is logged once too. Level
changes are logged as one structured line.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ctwatch.sources  # noqa: F401 - importing the package registers every collector in it
from ctsim.core.projection import Level
from ctwatch.assess import Assessor, FamilyAssessment
from ctwatch.collector import Config, Cycle, collection_order
from ctwatch.logs import log_event
from ctwatch.readings import FAMILY_OF_MAP, SourceResult


@dataclass
class Snapshot:
    results: dict[str, SourceResult]
    families: list[FamilyAssessment]
    cycle_cpu_s: float
    cpu_total_s: float = 0.0  # every cycle's CPU so far: a counter
    cycles_total: int = 0
    last_success: dict[str, float] = field(default_factory=dict)  # source -> unix time of its last answer


@dataclass
class Watcher:
    config: Config
    assessor: Assessor
    timer: Callable[[], float] = time.perf_counter  # source durations
    clock: Callable[[], float] = time.monotonic  # growth history
    cpu_timer: Callable[[], float] = time.process_time  # cost per cycle
    wall_clock: Callable[[], float] = time.time  # last-success timestamps
    _state: dict[str, Any] = field(default_factory=dict)  # each collector's own, across cycles
    _last_success: dict[str, float] = field(default_factory=dict)
    _cpu_total: float = 0.0
    _cycles: int = 0
    _down: dict[str, str] = field(default_factory=dict)
    _levels: dict[str, Level] = field(default_factory=dict)

    def _run(self, name: str, fn: Callable[[SourceResult], None]) -> SourceResult:
        start = self.timer()
        result = SourceResult(source=name, up=True, duration_s=0.0)
        try:
            fn(result)
        except Exception as exc:  # a source fails alone, whatever the reason
            result = SourceResult(source=name, up=False, duration_s=0.0, error=f"{type(exc).__name__}: {exc}")
        result.duration_s = self.timer() - start
        if result.up:
            self._last_success[name] = self.wall_clock()
        self._log_transition(result)
        return result

    def _log_transition(self, result: SourceResult) -> None:
        was_down = result.source in self._down
        if not result.up and not was_down:
            self._down[result.source] = result.error
            log_event("source down", level="warn", source=result.source, error=result.error)
        elif result.up and was_down:
            del self._down[result.source]
            log_event("source up", source=result.source)

    def collect(self) -> Snapshot:
        cpu_start = self.cpu_timer()
        results: dict[str, SourceResult] = {}
        cycle = Cycle(self.config, self.clock, results, self._state)
        for c in collection_order(self.config.enabled()):
            results[c.name] = self._run(c.name, functools.partial(c.collect, cycle))
        families = self.assessor.assess(self.clock(), results)
        self._log_levels(families)
        spent = self.cpu_timer() - cpu_start
        self._cpu_total += spent
        self._cycles += 1
        return Snapshot(results, families, spent, self._cpu_total, self._cycles, dict(self._last_success))

    def _log_levels(self, families: list[FamilyAssessment]) -> None:
        for f in families:
            previous = self._levels.get(f.family)
            if previous != f.level and not (previous is None and f.level is Level.OK):
                log_event(
                    "level changed",
                    level="warn" if f.level is not Level.OK else "info",
                    family=f.family,
                    to=str(f.level),
                    previous=str(previous) if previous is not None else None,
                    entries=f.entries,
                    projected_burst_seconds=round(f.burst_seconds, 3),
                    deadline_seconds=self.assessor.thresholds.deadline_s,
                )
            self._levels[f.family] = f.level


__all__ = ["FAMILY_OF_MAP", "Config", "Snapshot", "Watcher", "log_event"]
