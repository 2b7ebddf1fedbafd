"""Cilium's periodic CT garbage collection on SimPy's clock: the GC goroutine and its history.

Source: ``pkg/maps/ctmap/gc/gc.go`` (``enableGC``, ``runGC``) in v1.16.5. One
GC goroutine walks every global map of every enabled family, IPv4 then IPv6,
and adapts one interval (``ctsim.core.gc_interval``) from the largest ratio
over all of them. Where the datapath signals a family's map filling up
(``ctsim.sim.signals``), a pass for the signalled families comes early
(``run_gc_signalled``): up to 1.18 it walks only those, from 1.19.0 every
family (1b95bf097d); what it does to the full pass's clock is the
release's (``GCPolicy.after_pass``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import simpy

from ctsim.core.gc_interval import GCPolicy
from ctsim.sim.clock import advance

if TYPE_CHECKING:
    from ctsim.sim.signals import GCSignals


@dataclass(slots=True)
class GCPass:
    start: float
    end: float
    walked: int
    deleted: int
    max_delete_ratio: float
    interval_after: float
    families: tuple[str, ...] = ()  # the families it walked, in walk order
    ratios: tuple[float, ...] = ()  # each walked family's largest delete ratio, in that order
    woken_by: str = "timer"  # the interval's timer, or a datapath "signal"


@dataclass
class GCHistory:
    passes: list[GCPass] = field(default_factory=list)
    watchers: list[Callable[[GCPass], None]] = field(default_factory=list)  # told of every pass as it ends

    def record(self, done: GCPass) -> None:
        self.passes.append(done)
        for told in tuple(self.watchers):  # a watcher may leave as it is told
            told(done)

    @property
    def intervals(self) -> list[float]:
        return [p.interval_after for p in self.passes]

    def runs(self, families: list[str]) -> dict[str, int]:
        """Passes that walked each family (``cilium_datapath_conntrack_gc_runs_total`` counts each map's walk)."""
        return {f: sum(f in p.families for p in self.passes) for f in families}

    def ratios(self, families: list[str]) -> dict[str, list[float]]:
        """Each family's largest delete ratio in each pass that walked it."""
        out: dict[str, list[float]] = {f: [] for f in families}
        for p in self.passes:
            for f, r in zip(p.families, p.ratios, strict=True):
                out[f].append(r)
        return out


WalkPass = Callable[[tuple[str, ...]], Generator[simpy.Event, object, tuple[int, int, tuple[float, ...]]]]


def _pass(
    env: simpy.Environment,
    walk_pass: WalkPass,
    families: tuple[str, ...],
    previous_start: float | None,
    time_scale: float,
) -> Generator[simpy.Event, object, tuple[float, int, int, tuple[float, ...], float]]:
    """One pass over ``families``, as both GC loops run it.

    Returns (its start, entries walked, entries deleted, each family's ratio,
    the actual interval ``GetInterval`` is handed: from the previous pass's
    start to this one's, on the node's clock; 0 for the first pass).
    """
    start = env.now
    walked, deleted, ratios = yield from walk_pass(families)
    actual = (start - previous_start) * time_scale if previous_start is not None else 0.0
    return start, walked, deleted, ratios, actual


def run_gc(
    env: simpy.Environment,
    walk_pass: WalkPass,
    policy: GCPolicy,
    first_pass_at: float,
    history: GCHistory,
    families: tuple[str, ...],
    time_scale: float = 1.0,
) -> Generator[simpy.Event, object, None]:
    """The GC goroutine: pass, adapt the interval, sleep, repeat.

    Intervals are on the node's clock; sleeps are divided by ``time_scale``.
    The sleep starts when the pass ends; the actual interval handed to
    ``GetInterval`` is from pass start to pass start (``gcStart.Sub(gcPrev)``).

    ``walk_pass`` walks every global map of the families it is given and
    returns (entries walked, entries deleted, each family's max delete ratio).
    """
    if first_pass_at > 0:
        yield env.timeout(first_pass_at / time_scale)
    previous_start: float | None = None
    while True:
        start, walked, deleted, ratios, actual = yield from _pass(env, walk_pass, families, previous_start, time_scale)
        ratio = max(ratios)
        interval = policy.get_interval(actual, ratio)
        history.record(GCPass(start, env.now, walked, deleted, ratio, interval, families, ratios))
        previous_start = start
        if not advance(env, interval / time_scale):  # a quiet stretch: passes back to back, no events
            yield env.timeout(interval / time_scale)


def run_gc_signalled(
    env: simpy.Environment,
    walk_pass: WalkPass,
    policy: GCPolicy,
    first_pass_at: float,
    history: GCHistory,
    families: tuple[str, ...],
    signals: GCSignals,
    walks_all: bool,
    time_scale: float = 1.0,
) -> Generator[simpy.Event, object, None]:
    """The GC goroutine where the datapath signals: ``select`` on the interval's timer and a signal.

    A timer wake-up passes over every family; a signal over the families
    signalled while it waited, or, from 1.19.0 (``walks_all``), over every
    family all the same, though the pass still counts as partial
    (``isFullGC`` reads the signalled families). Signals are muted while a
    pass runs.
    """
    wait = first_pass_at
    previous_start: float | None = None
    while True:
        flagged, woken_by = families, "timer"
        if wait > 0:
            timer = env.timeout(wait / time_scale)
            signal = signals.wait()
            yield env.any_of([timer, signal])
            signalled = signals.woken()
            if signal.triggered and not timer.processed:
                flagged, woken_by = tuple(f for f in families if f in signalled), "signal"
        walked_families = families if walks_all else flagged
        start, walked, deleted, ratios, actual = yield from _pass(
            env, walk_pass, walked_families, previous_start, time_scale
        )
        ratio = max(ratios)
        wait = policy.after_pass(actual, ratio, full=flagged == families, now=env.now * time_scale)
        history.record(GCPass(start, env.now, walked, deleted, ratio, wait, walked_families, ratios, woken_by))
        previous_start = start
