"""The metrics page: a prometheus-client collector over the latest snapshot.

Names live in the ``ctwatch_`` namespace with base units; labels are
``source``, ``family`` and ``map`` as the issue asks, plus ``source_up`` and a
scrape duration per source as node_exporter does per collector.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import PLATFORM_COLLECTOR, PROCESS_COLLECTOR
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from ctwatch import __version__
from ctwatch.assess import Thresholds
from ctwatch.readings import FAMILY_OF_MAP, MapReading, Pressure, readings_of
from ctwatch.sources import REGISTRY
from ctwatch.watcher import Snapshot

SOURCES = tuple(REGISTRY)  # every registered collector, in page order


class SnapshotCollector(Collector):
    """Serves whatever the last cycle produced; collection never blocks on a source."""

    def __init__(self, thresholds: Thresholds, enabled: tuple[str, ...] = SOURCES) -> None:
        self.thresholds = thresholds
        self.enabled = enabled
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()

    def update(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._snapshot = snapshot

    @property
    def healthy(self) -> bool:
        """A collection has run (what /healthz reports)."""
        return self._snapshot is not None

    def collect(self) -> Iterator[Family]:
        with self._lock:
            snap = self._snapshot
        yield from _settings(self.thresholds)
        yield from _sources(snap, self.enabled)
        if snap is None:
            return
        yield from _tables(snap)
        yield from _families(snap)


Family = GaugeMetricFamily | CounterMetricFamily | InfoMetricFamily

# Each family's projection, declared once: (name, help, the FamilyAssessment field), in page order.
# The walk rate also carries its source, so it is built apart (first on the page).
FAMILY_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("ctwatch_walk_rate_samples", "Measured samples behind the walk rate (0: not measured).", "rate_samples"),
    ("ctwatch_projected_walk_seconds", "One full walk of the family's CT maps.", "walk_seconds"),
    (
        "ctwatch_projected_burst_seconds",
        "Until the last of ctwatch_burst_pods creates queued on the lock finishes (walks + regeneration).",
        "burst_seconds",
    ),
    (
        "ctwatch_burst_deadline_ratio",
        "Projected burst seconds over the deadline (headroom is 1 - this).",
        "deadline_ratio",
    ),
    ("ctwatch_safe_burst_pods", "The largest burst whose scrubs fit the deadline.", "safe_burst"),
    (
        "ctwatch_seconds_until_deadline",
        "At the recent growth of the table, until the burst projection reaches the deadline (+Inf: not growing).",
        "seconds_until_deadline",
    ),
    ("ctwatch_level", "0 ok, 1 warning, 2 critical.", "level_rank"),
    (
        "ctwatch_projection_age_seconds",
        "0 when this cycle computed the projection; else the age of the last good one, kept while sources fail.",
        "age_s",
    ),
)


def _settings(t: Thresholds) -> Iterator[Family]:
    """What ctwatch runs with: its version, the deadline and the burst it projects."""
    yield InfoMetricFamily("ctwatch_build", "ctwatch's version.", value={"version": __version__})
    yield GaugeMetricFamily("ctwatch_deadline_seconds", "cilium-cni's API client timeout.", value=t.deadline_s)
    yield GaugeMetricFamily("ctwatch_burst_pods", "Pod creates assumed to queue on the CT lock at once.", value=t.burst)


def _sources(snap: Snapshot | None, enabled: tuple[str, ...]) -> Iterator[Family]:
    """Per source, as node_exporter per collector: up, how long it took, when it last answered; ctwatch's cost."""
    up = GaugeMetricFamily("ctwatch_source_up", "1 if the source answered in the last cycle.", labels=["source"])
    took = GaugeMetricFamily(
        "ctwatch_source_scrape_duration_seconds", "Time the source took in the last cycle.", labels=["source"]
    )
    if snap is None:
        yield up
        yield took
        return
    for name in enabled:
        result = snap.results.get(name)
        if result is not None:
            up.add_metric([name], 1.0 if result.up else 0.0)
            took.add_metric([name], result.duration_s)
    yield up
    yield took
    last = GaugeMetricFamily(
        "ctwatch_last_success_timestamp_seconds",
        "When the source last answered (unix time): how stale its readings are.",
        labels=["source"],
    )
    for name in enabled:
        if name in snap.last_success:
            last.add_metric([name], snap.last_success[name])
    yield last
    yield CounterMetricFamily(
        "ctwatch_cycle_cpu_seconds", "CPU time ctwatch spent on collection cycles.", value=snap.cpu_total_s
    )
    yield CounterMetricFamily("ctwatch_cycles", "Collection cycles run.", value=snap.cycles_total)


def _tables(snap: Snapshot) -> Iterator[Family]:
    """Entries and capacity of every table each source read; a reported pressure times the map's capacity.

    Then each source's own series (``Collector.expose``), in page order.
    """
    labels = ["source", "family", "map"]
    entries = GaugeMetricFamily("ctwatch_entries", "Entries present in the table.", labels=labels)
    max_entries = GaugeMetricFamily("ctwatch_max_entries", "Capacity of the table.", labels=labels)
    tables = readings_of(snap.results, MapReading)
    for r in tables:
        if r.entries is not None:
            entries.add_metric([r.source, r.family, r.map], r.entries)
        max_entries.add_metric([r.source, r.family, r.map], r.max_entries)
    capacity = {r.map: r.max_entries for r in tables}
    for p in sorted(readings_of(snap.results, Pressure), key=lambda p: (p.source, p.map)):
        if p.map in capacity:
            entries.add_metric([p.source, FAMILY_OF_MAP[p.map], p.map], round(p.ratio * capacity[p.map]))
    yield entries
    yield max_entries
    for name, result in snap.results.items():
        expose = REGISTRY[name].expose if name in REGISTRY else None
        if expose is not None and result.up:
            yield from expose(result)


def _families(snap: Snapshot) -> Iterator[Family]:
    """Each family's projection: the walk rate with its source, then ``FAMILY_GAUGES``."""
    rate = GaugeMetricFamily(
        "ctwatch_walk_rate_entries_per_second", "Entries per second one CT walk visits.", labels=["family", "source"]
    )
    walks = InfoMetricFamily(
        "ctwatch_walk",
        "How the walk rate was timed: per-entry (get_next_key + lookup) or batched (BPF_MAP_LOOKUP_BATCH in the "
        "agent's chunks, buckets included), as the agent's release walks.",
        labels=["family"],
    )
    gauges = [(GaugeMetricFamily(name, text, labels=["family"]), field) for name, text, field in FAMILY_GAUGES]
    for f in snap.families:
        rate.add_metric([f.family, f.rate_source], f.rate)
        if f.walk:
            walks.add_metric([f.family], {"walk": f.walk, "release": f.release})
        for gauge, field in gauges:
            gauge.add_metric([f.family], getattr(f, field))
    yield rate
    yield walks
    yield from (gauge for gauge, _ in gauges)


def new_registry(collector: SnapshotCollector, process: bool = False) -> CollectorRegistry:
    """The page: ctwatch's collector, and with ``process`` the process_* and python_* metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    if process:
        registry.register(PROCESS_COLLECTOR)
        registry.register(PLATFORM_COLLECTOR)
    return registry
