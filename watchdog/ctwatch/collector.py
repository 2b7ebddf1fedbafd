"""The collector registry (node_exporter's ``collector.go``): each source file joins it with ``register_collector``.

A source is one file in ``ctwatch/sources/``, settings and all. Its
``Collector`` names its flags (``Setting``: the command line makes each one,
parses it with the setting's own parser and hands the value back through
``Config``), the typed readings it returns (``ctwatch.readings``, or a type of
its own), and the series it adds to the page (``expose``). The watcher
collects from every enabled collector, the command line makes a
``--collector.<name>`` toggle for each, and the page lists each one's
``ctwatch_source_up``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctwatch.readings import SourceResult

# Set on SIGTERM: a collector waiting on a slow source stops waiting, so ctwatch ends within a second.
STOPPING = threading.Event()


@dataclass(frozen=True)
class Setting:
    """One setting of one collector, and the flag that gives it (node_exporter's ``kingpin.Flag`` in its file).

    ``parse`` turns the flag's text into the value (raising ``InputError``
    that names the flag); ``default`` is the value when no flag is given, and
    ``shown`` how ``--help`` shows it. A setting without a ``flag`` is ctwatch's
    own to set (``Config.once``-like facts), never the user's.
    """

    key: str  # how the collector reads it: ``cycle.config[key]``
    default: object
    flag: str | None = None  # "--cilium.metrics-url"
    metavar: str = ""
    help: str = ""
    shown: str = ""  # the default as the command line takes it
    parse: Callable[[str], object] | None = None


@dataclass(frozen=True)
class Collector:
    name: str  # --collector.<name>, the ``source`` label
    help: str  # the toggle's help
    collect: Callable[[Cycle, SourceResult], None]  # fills the result in place; raises to mark the source down
    reads: tuple[str, ...] = ()  # collectors whose results this one uses in the same cycle: they run first
    settings: tuple[Setting, ...] = ()
    # Series of its own for the page, from its last result (while it is up), after the tables' series.
    expose: Callable[[SourceResult], Iterator[Any]] | None = None


REGISTRY: dict[str, Collector] = {}  # in page order: the order the files register in


def register_collector(collector: Collector) -> Collector:
    if collector.name in REGISTRY:
        raise ValueError(f"collector {collector.name!r} registered twice")
    taken = {s.key for c in REGISTRY.values() for s in c.settings}
    if clash := taken & {s.key for s in collector.settings}:
        raise ValueError(f"collector {collector.name!r}: setting {sorted(clash)[0]!r} is another collector's")
    REGISTRY[collector.name] = collector
    return collector


def all_settings() -> dict[str, Setting]:
    """Every registered collector's settings by key, in page order."""
    return {s.key: s for c in REGISTRY.values() for s in c.settings}


class Config:
    """Every collector's settings, by key, and which collectors are on; a setting not given is its default.

    ``Config(bpffs="/x", toggles={"nf_conntrack": False})``: the keys are the
    collectors' own (``Setting.key``), so a new source needs nothing here.
    """

    def __init__(self, toggles: Mapping[str, bool] | None = None, once: bool = False, **settings: object) -> None:
        known = all_settings()
        if unknown := set(settings) - set(known):
            raise TypeError(f"no collector has the setting {sorted(unknown)[0]!r}")
        # --collector.<name> for each registered collector: name -> on or off; a collector not named here is on.
        self.toggles: Mapping[str, bool] = dict(toggles or {})
        self.once = once  # one collection, no earlier cycles (``--once``)
        self._settings = {key: settings.get(key, s.default) for key, s in known.items()}

    def __getitem__(self, key: str) -> Any:
        if key not in self._settings:  # registered since this Config was made: its default
            return all_settings()[key].default
        return self._settings[key]

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
