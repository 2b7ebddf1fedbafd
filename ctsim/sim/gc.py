"""Cilium's periodic CT garbage collection on SimPy's clock: the GC goroutine and its history.

Source: ``pkg/maps/ctmap/gc/gc.go`` (``enableGC``, ``runGC``) in v1.16.5. One
GC goroutine walks every global map of every enabled family, IPv4 then IPv6,
and adapts one interval (``ctsim.core.gc_interval``) from the largest ratio
over all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import simpy

from ctsim.core.gc_interval import GCPolicy
from ctsim.sim.clock import advance


@dataclass(slots=True)
class GCPass:
    start: float
    end: float
    walked: int
    deleted: int
    max_delete_ratio: float
    interval_after: float


@dataclass
class GCHistory:
    passes: list[GCPass] = field(default_factory=list)
    on_pass: Callable[[GCPass], None] | None = None  # told of every pass as it ends

    @property
    def intervals(self) -> list[float]:
        return [p.interval_after for p in self.passes]


def run_gc(
    env: simpy.Environment,
    walk_pass: Callable[[], Generator[simpy.Event, object, tuple[int, int, float]]],
    policy: GCPolicy,
    first_pass_at: float,
    history: GCHistory,
    time_scale: float = 1.0,
) -> Generator[simpy.Event, object, None]:
    """The GC goroutine: pass, adapt the interval, sleep, repeat.

    Intervals are on the node's clock; sleeps are divided by ``time_scale``.
    The sleep starts when the pass ends; the actual interval handed to
    ``GetInterval`` is from pass start to pass start (``gcStart.Sub(gcPrev)``).

    ``walk_pass`` walks every global map of every family and returns
    (entries walked, entries deleted, max delete ratio over all maps).
    """
    if first_pass_at > 0:
        yield env.timeout(first_pass_at / time_scale)
    previous_start: float | None = None
    while True:
        start = env.now
        walked, deleted, ratio = yield from walk_pass()
        actual = (start - previous_start) * time_scale if previous_start is not None else 0.0
        interval = policy.get_interval(actual, ratio)
        done = GCPass(start, env.now, walked, deleted, ratio, interval)
        history.passes.append(done)
        if history.on_pass is not None:
            history.on_pass(done)
        previous_start = start
        if not advance(env, interval / time_scale):  # a quiet stretch: passes back to back, no events
            yield env.timeout(interval / time_scale)
