"""How long scrubs take: the one projection the simulator and ctwatch share.

A walk visits every present entry of a map at a per-entry rate, plus one
delete syscall per entry it removes. A scrub walks every map of every family,
IPv4 then IPv6, the TCP map before the non-TCP one, each under its family's
lock, which is released between maps (``doGC4``/``doGC6``). The lock is FIFO.

So when a burst of N creates queue their scrubs at once, family 1's lock
serves all N TCP walks, then all N non-TCP walks (each pod re-queues behind
the others' TCP walks): pod i leaves family 1 at N·t₁ + i·a₁. Family 2's
lock, fed at those times, never idles while work is pending, so it drains
(and the last scrub ends) at max over i of (arrival_i + the work arriving
from then on) = max(N·t₁ + a₁ + N·W₂, N·W₁ + W₂), where W = t + a is one
family's whole walk. With one family, the last scrub ends at N·W₁.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from ctsim.floats import left_sum


def walk_seconds(entries: float, rate: float, deletes: float = 0.0, delete_seconds: float = 0.0) -> float:
    """Seconds for one full walk of ``entries`` at ``rate`` entries/s, with deletes."""
    if rate <= 0:
        raise ValueError("walk rate must be positive")
    return entries / rate + deletes * delete_seconds


class FamilyWalk(NamedTuple):
    """One family's part of a scrub: present entries per map (TCP, non-TCP) at one rate."""

    family: str
    map_entries: tuple[float, ...]
    rate: float

    @property
    def entries(self) -> float:
        return sum(self.map_entries)

    @property
    def seconds(self) -> float:
        return walk_seconds(self.entries, self.rate)

    @property
    def first_map_seconds(self) -> float:
        return walk_seconds(self.map_entries[0], self.rate) if self.map_entries else 0.0


def scrub_seconds(walks: Sequence[FamilyWalk]) -> float:
    """One full scrub on an idle node: every family's walk, one after the other."""
    return left_sum(w.seconds for w in walks)


def _burst_lines(walks: Sequence[FamilyWalk]) -> list[tuple[float, float]]:
    """The end of a burst of N scrubs is max over lines of slope·N + intercept (see the module)."""
    if not walks:
        return [(0.0, 0.0)]
    if len(walks) == 1:
        return [(walks[0].seconds, 0.0)]
    if len(walks) > 2:
        raise ValueError("Cilium has two address families")
    one, two = walks
    t1 = one.first_map_seconds
    a1 = one.seconds - t1
    return [(t1 + two.seconds, a1), (one.seconds, two.seconds)]


def burst_seconds(walks: Sequence[FamilyWalk], burst: int) -> float:
    """Seconds until the last of ``burst`` creates, queued at once, finishes its scrub."""
    if burst <= 0:
        return 0.0
    return max(slope * burst + intercept for slope, intercept in _burst_lines(walks))


def safe_burst(walks: Sequence[FamilyWalk], deadline: float, overhead: float = 0.0) -> int | None:
    """The largest burst whose last scrub (plus ``overhead``) ends within the deadline.

    None means unbounded: empty tables cost nothing to walk.
    """
    budget = deadline - overhead
    if budget <= 0:
        return 0
    fits: int | None = None
    for slope, intercept in _burst_lines(walks):
        if slope <= 0:
            if intercept > budget:
                return 0
            continue
        n = max(0, math.floor((budget - intercept) / slope + 1e-9))
        fits = n if fits is None else min(fits, n)
    return fits


def max_entries_for_burst(walks: Sequence[FamilyWalk], burst: int, deadline: float, overhead: float = 0.0) -> int:
    """The largest table (all families, in today's proportions) on which ``burst`` scrubs fit.

    Scaling every map by s scales the burst's end by s, so the answer is the
    present total times budget / burst_seconds. With empty tables it is the
    first family's rate times the budget per pod.
    """
    budget = deadline - overhead
    if budget <= 0 or burst <= 0:
        return 0
    end = burst_seconds(walks, burst)
    total = sum(w.entries for w in walks)
    if end <= 0 or total <= 0:
        rate = walks[0].rate if walks else 0.0
        return math.floor(budget / burst * rate)
    return math.floor(total * budget / end)
