"""What a source reports: counts of one map or table, and what it measured on the way."""

from __future__ import annotations

from dataclasses import dataclass, field

from ctsim.core.defaults import CT_MAPS, FAMILY_OF_MAP  # noqa: F401 - ctwatch's modules take both from here


@dataclass(frozen=True)
class MapReading:
    """Entries and capacity of one table, as one source saw them."""

    source: str  # nf_conntrack | bpf | cilium_metrics
    family: str  # ipv4 | ipv6 | all
    map: str
    entries: int | None  # None: not counted this cycle (a cheaper source had it)
    max_entries: int


@dataclass
class SourceResult:
    """One collection of one source: readings, or the error that took it down."""

    source: str
    up: bool
    duration_s: float
    readings: list[MapReading] = field(default_factory=list)
    walk_rates: dict[str, float] = field(default_factory=dict)  # family -> entries/s measured
    pressure: dict[str, float] = field(default_factory=dict)  # map -> count/max, from Cilium
    extra: dict[str, float] = field(default_factory=dict)  # e.g. Cilium's GC interval
    error: str = ""
