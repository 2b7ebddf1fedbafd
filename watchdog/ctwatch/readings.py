"""What a source reports, as typed readings: a table's counts, a walk rate, a map's pressure.

The assessor and the page take readings by their type, never by the source
that made them: a new source that counts a CT map, or times a walk, feeds
the projection by returning these. A reading only its own source's series
use is a type of that source's file (``cilium_metrics.GCInterval``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from ctsim.core.defaults import CT_MAPS, FAMILY_OF_MAP  # noqa: F401 - ctwatch's modules take both from here
from ctsim.core.releases import Release

R = TypeVar("R")


@dataclass(frozen=True)
class MapReading:
    """Entries and capacity of one table, as one source saw them."""

    source: str  # nf_conntrack | bpf | cilium_metrics
    family: str  # ipv4 | ipv6 | all
    map: str
    entries: int | None  # None: not counted this cycle (a cheaper source had it)
    max_entries: int


@dataclass(frozen=True)
class WalkRate:
    """One family's walk rate as timed this cycle: entries per CPU second, walked as the node's agent walks."""

    family: str
    entries_per_s: float
    samples: int = 1  # behind it (``--once``: a whole window)
    spread: float | None = None  # (fastest - slowest) / fastest of this cycle's samples; None: one sample
    walk: str = "per-entry"  # ``WalkKind``: per-entry (get_next_key + lookup) or batched (LOOKUP_BATCH, buckets in)
    release: str = ""  # the agent's release the walk follows ("": unknown, sampled per entry)


@dataclass(frozen=True)
class AgentRelease:
    """The Cilium release the node's agent runs: ``cilium_version{version}``, or ``--cilium.version``."""

    source: str
    release: Release


@dataclass(frozen=True)
class Pressure:
    """A map's count over its capacity, as its agent reports it (``cilium_bpf_map_pressure``)."""

    source: str
    map: str  # the pinned map's name
    ratio: float


@dataclass
class SourceResult:
    """One collection of one source: readings, or the error that took it down."""

    source: str
    up: bool
    duration_s: float
    readings: list[object] = field(default_factory=list)
    error: str = ""

    def of(self, kind: type[R]) -> list[R]:
        """This result's readings of one type; none while the source is down."""
        return [r for r in self.readings if isinstance(r, kind)] if self.up else []


def readings_of(results: dict[str, SourceResult], kind: type[R]) -> list[R]:
    """Every up source's readings of one type, in collection order."""
    return [r for result in results.values() for r in result.of(kind)]
