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

import enum
import math
from collections.abc import Sequence
from typing import NamedTuple

from ctsim.core.floats import left_sum


class Level(enum.StrEnum):
    """The level ctwatch and the fleet report: where a projected burst's end falls against the deadline."""

    OK = "ok"
    WARNING = "warning"
    CRITICAL = "critical"
    UNKNOWN = "unknown"  # the fleet: the series do not say enough to project

    @property
    def rank(self) -> int:
        """``ctwatch_level``'s value: 0 ok, 1 warning, 2 critical (-1 unknown)."""
        return _RANKS[self]

    @classmethod
    def of_rank(cls, rank: float) -> Level | None:
        """A ``ctwatch_level`` sample as its level; None for a value ctwatch never exports."""
        return next((level for level, r in _RANKS.items() if r == rank and r >= 0), None)


_RANKS = {Level.OK: 0, Level.WARNING: 1, Level.CRITICAL: 2, Level.UNKNOWN: -1}
LEVELS = (Level.OK, Level.WARNING, Level.CRITICAL)  # in rank order
WARNING_RATIO = 0.5
CRITICAL_RATIO = 1.0
# What every "safe burst" ctsim and ctwatch report means: run's advice, plan, the fleet's rows, ctwatch_safe_burst_pods.
SAFE_BURST_MEANS = (
    "the largest burst of pod creates whose scrubs, queued on the per-family locks at once, all end "
    "(with the regeneration) within the deadline; the API limiter may still answer some with HTTP 429"
)


def level_of(ratio: float, warning: float = WARNING_RATIO, critical: float = CRITICAL_RATIO) -> Level:
    """Where the burst's end falls against the deadline."""
    return Level.CRITICAL if ratio >= critical else Level.WARNING if ratio >= warning else Level.OK


def seconds_until(entries: float, limit: float, growth_per_s: float | None) -> float:
    """At ``growth_per_s``, until ``entries`` reach ``limit``: 0 when there, +Inf when not growing."""
    if entries >= limit:
        return 0.0
    if growth_per_s is None or not growth_per_s > 0:
        return math.inf
    return (limit - entries) / growth_per_s


def walk_seconds(
    entries: float,
    rate: float,
    deletes: float = 0.0,
    delete_seconds: float = 0.0,
    buckets: float = 0.0,
    bucket_seconds: float = 0.0,
) -> float:
    """Seconds for one full walk of ``entries`` at ``rate`` entries/s, with deletes.

    A batched walk (``BPF_MAP_LOOKUP_BATCH``) also visits every bucket of the
    hash table, full or not: ``buckets`` (the map's capacity) x ``bucket_seconds``.
    """
    if rate <= 0:
        raise ValueError("walk rate must be positive")
    return entries / rate + deletes * delete_seconds + buckets * bucket_seconds


class FamilyWalk(NamedTuple):
    """One family's part of a scrub: present entries per map (TCP, non-TCP) at one rate.

    ``capacities`` and ``bucket_seconds``: a batched walk's cost per bucket of each map (none per entry).
    """

    family: str
    map_entries: tuple[float, ...]
    rate: float
    capacities: tuple[int, ...] = ()
    bucket_seconds: float = 0.0

    @property
    def entries(self) -> float:
        return sum(self.map_entries)

    @property
    def seconds(self) -> float:
        return walk_seconds(self.entries, self.rate, buckets=sum(self.capacities), bucket_seconds=self.bucket_seconds)

    @property
    def first_map_seconds(self) -> float:
        if not self.map_entries:
            return 0.0
        buckets = self.capacities[0] if self.capacities else 0
        return walk_seconds(self.map_entries[0], self.rate, buckets=buckets, bucket_seconds=self.bucket_seconds)

    def emptied(self) -> FamilyWalk:
        """The same maps with no entries: what a walk costs whatever they hold."""
        return self._replace(map_entries=tuple(0.0 for _ in self.map_entries))


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


def _whole(entries: float) -> int:
    """The whole entries in ``entries``, a quotient that float rounding may leave a hair under its integer.

    88 s x 213,000 entries/s over 10 pods is 1,874,400 exactly, but reached through the walk's lines it
    came out 1,874,399.99999..., and the limit read 1,874,399 or 1,874,400 by the starting table (#52).
    """
    return math.floor(entries * (1.0 + 1e-12))


def max_entries_for_burst(walks: Sequence[FamilyWalk], burst: int, deadline: float, overhead: float = 0.0) -> int:
    """The largest table (all families, in today's proportions) on which ``burst`` scrubs fit.

    Scaling every map's entries by s makes each line of the burst's end
    affine in s (the buckets a batched walk visits cost the same at any s),
    so each line gives its largest s in one division; the answer is the
    present total times the least of them. With empty tables it is the first
    family's rate times the budget per pod left after the buckets.
    """
    budget = deadline - overhead
    if budget <= 0 or burst <= 0:
        return 0
    empty = [w.emptied() for w in walks]
    total = sum(w.entries for w in walks)
    fixed = burst_seconds(empty, burst)
    if total <= 0 or burst_seconds(walks, burst) <= fixed:
        rate = walks[0].rate if walks else 0.0
        return max(0, _whole((budget - fixed) / burst * rate))
    fits = math.inf
    for (slope, intercept), (slope0, intercept0) in zip(_burst_lines(walks), _burst_lines(empty), strict=True):
        at_empty = slope0 * burst + intercept0
        per_scale = slope * burst + intercept - at_empty
        if per_scale > 0:
            fits = min(fits, _whole(total * (budget - at_empty) / per_scale))
    return max(0, int(fits))


class Projection:
    """A node's scrubs held against the deadline, composed once: run's advice, plan, a fleet row and ctwatch.

    ``overhead`` (the regeneration) follows the last scrub before the
    endpoint is up. A slotted class: cheap to define at every start.
    """

    __slots__ = (
        "burst",
        "burst_seconds",
        "deadline",
        "deadline_ratio",
        "entries",
        "level",
        "max_entries_for_burst",
        "safe_burst",
        "scrub_seconds",
    )

    def __init__(
        self,
        walks: Sequence[FamilyWalk],
        burst: int,
        deadline: float,
        overhead: float = 0.0,
        warning: float = WARNING_RATIO,
        critical: float = CRITICAL_RATIO,
    ) -> None:
        self.burst, self.deadline = burst, deadline
        self.entries = left_sum(w.entries for w in walks)  # every map of every family
        self.scrub_seconds = scrub_seconds(walks)  # one scrub on an idle node
        self.burst_seconds = burst_seconds(walks, burst) + overhead  # until the burst's last endpoint is up
        self.deadline_ratio = self.burst_seconds / deadline
        self.level = level_of(self.deadline_ratio, warning, critical)
        self.safe_burst = safe_burst(walks, deadline, overhead)  # None: unbounded (empty tables)
        self.max_entries_for_burst = max_entries_for_burst(walks, burst, deadline, overhead)
