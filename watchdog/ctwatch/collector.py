"""The collector registry (node_exporter's ``collector.go``): each source file joins it with ``register_collector``.

The watcher collects from every enabled collector, the command line makes a
``--collector.<name>`` toggle for each, and the page lists each one's
``ctwatch_source_up``: a new source is one file in ``ctwatch/sources/``
(plus settings of its own in ``Config`` and their flags in ``ctwatch.cli``, if it has any).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctwatch.readings import SourceResult

# Set on SIGTERM: a collector waiting on a slow source stops waiting, so ctwatch ends within a second.
STOPPING = threading.Event()


@dataclass
class Config:
    """Every collector's settings; ``ctwatch.cli`` takes its flags' defaults from here."""

    procfs: str = "/proc"
    bpffs: str = "/sys/fs/bpf"
    netns: str | None = None
    metrics_url: str = "http://127.0.0.1:9962/metrics"
    metrics_timeout_s: float = 2.0
    bpf_sample_budget_s: float = 0.02  # 0: never sample the walk rate (use the fallback)
    bpf_samples_per_cycle: int = 1  # walk-rate samples per cycle; --once takes the assessor's whole window
    # --collector.<name> for each registered collector: name -> on or off; a collector not named here is on.
    # Keyed by the registry's names, so a new source needs no field here.
    toggles: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self) -> list[str]:
        """The registered collectors this configuration turns on."""
        return [name for name in REGISTRY if self.toggles.get(name, True)]


@dataclass
class Cycle:
    """What one collection hands each collector: the settings, the time, what ran before it, its own state."""

    config: Config
    clock: Callable[[], float]  # the watcher's monotonic clock (growth history, count ages)
    results: dict[str, SourceResult]
    state: dict[str, Any] = field(default_factory=dict)  # kept across cycles, one slot per collector


@dataclass(frozen=True)
class Collector:
    name: str  # --collector.<name>, the ``source`` label
    help: str  # the toggle's help
    collect: Callable[[Cycle, SourceResult], None]  # fills the result in place; raises to mark the source down
    reads: tuple[str, ...] = ()  # collectors whose results this one uses in the same cycle: they run first


REGISTRY: dict[str, Collector] = {}  # in page order: the order the files register in


def register_collector(collector: Collector) -> Collector:
    if collector.name in REGISTRY:
        raise ValueError(f"collector {collector.name!r} registered twice")
    REGISTRY[collector.name] = collector
    return collector


def collection_order(names: list[str]) -> list[Collector]:
    """The enabled collectors, each after those it reads, otherwise in page order."""
    pending = [REGISTRY[n] for n in REGISTRY if n in names]
    ordered: list[Collector] = []
    while pending:
        done = {c.name for c in ordered}
        ready = next((c for c in pending if all(r in done or r not in names for r in c.reads)), None)
        if ready is None:
            raise ValueError("collectors read each other in a circle")
        ordered.append(ready)
        pending.remove(ready)
    return ordered
