"""A conntrack map as cohorts of entries, never as one object per entry.

A cohort is ``count`` entries that stop being live at one ``expiry`` (seconds
of node time). Cohorts sit in LRU order, least recently used first, which for
churn is insertion order, and so also expiry order. Entries of long-lived,
still-refreshed connections are kept apart as ``established``: they are the
most recently used and never expire within a run.

Churn opens one cohort per tick, all of a size while the rate holds, so the
cohorts are kept as *runs*: ``n`` cohorts one tick apart, each of ``count``
entries (the oldest may have lost some to LRU eviction). Cost grows with
runs, not with entries or ticks: 16 M entries cost as little as 16 K, and a
quiet year as little as a quiet day.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

NEVER = float("inf")


class Run:
    """``n`` cohorts opened ``step`` apart from ``t0``; cohort i expires at ``(t0 + i*step - half) + lifetime``.

    A single cohort with a given expiry is a run of one with ``t0 = expiry``
    and no step. ``first`` is what is left of the oldest cohort.
    """

    __slots__ = ("count", "first", "half", "lifetime", "n", "step", "t0")

    def __init__(self, t0: float, n: int, count: int, step: float = 0.0, half: float = 0.0, lifetime: float = 0.0):
        self.t0, self.n, self.count, self.first = t0, n, count, count
        self.step, self.half, self.lifetime = step, half, lifetime

    def expiry(self, i: int) -> float:
        """The expiry of cohort ``i``, computed as the tick that opened it computed it."""
        return (self.t0 + i * self.step - self.half) + self.lifetime

    @property
    def entries(self) -> int:
        return self.first + (self.n - 1) * self.count

    def expired_cohorts(self, now: float) -> int:
        """How many of the oldest cohorts have expired at ``now`` (expiries ascend)."""
        if self.step == 0.0 or self.n == 1:
            return self.n if self.expiry(0) <= now else 0
        guess = math.floor(((now - self.lifetime) + self.half - self.t0) / self.step)
        k = min(max(guess + 1, 0), self.n)  # the exact float comparison decides at the edge
        while k < self.n and self.expiry(k) <= now:
            k += 1
        while k > 0 and self.expiry(k - 1) > now:
            k -= 1
        return k

    def entries_of(self, k: int) -> int:
        """Entries in the oldest ``k`` cohorts."""
        return 0 if k <= 0 else self.first + (k - 1) * self.count

    def drop(self, k: int) -> None:
        """Removes the oldest ``k`` cohorts (k < n)."""
        if k > 0:
            self.t0 += k * self.step
            self.n -= k
            self.first = self.count


@dataclass
class CTMap:
    """One of ``cilium_ct{4,_any4,6,_any6}_global``: BPF_MAP_TYPE_LRU_HASH."""

    name: str
    max_entries: int
    established: int = 0
    live_evicted: int = 0
    _runs: deque[Run] = field(default_factory=deque)
    _present: int = 0
    # What fills the map between reads (``ConnectionChurn.catch_up``); None for a map without churn.
    feed: Callable[..., None] | None = None

    def __post_init__(self) -> None:
        self._present = self.established + sum(r.entries for r in self._runs)
        if self._present > self.max_entries:
            raise ValueError(f"{self.name}: {self._present} entries exceed max_entries {self.max_entries}")

    def catch_up(self, now: float, *, inclusive: bool = True) -> None:
        """Lets the feed add what arrived up to ``now``; call before reading or deleting at ``now``."""
        if self.feed is not None:
            self.feed(now, inclusive=inclusive)

    @property
    def present(self) -> int:
        return self._present

    def expired(self, now: float) -> int:
        """Entries whose lifetime ended at or before ``now``: what a GC pass deletes."""
        total = 0
        for run in self._runs:
            k = run.expired_cohorts(now)
            total += run.entries_of(k)
            if k < run.n:
                break
        return total

    def live(self, now: float) -> int:
        return self._present - self.expired(now)

    def insert(self, now: float, count: int, expiry: float) -> None:
        """New connections; a full map evicts its least recently used entries (LRU)."""
        if count <= 0:
            return
        if count > self.max_entries:  # LRU: the tick's own oldest flows pushed out by its newest, live
            self.live_evicted += count - self.max_entries
            count = self.max_entries
        overflow = self._present + count - self.max_entries
        if overflow > 0:
            self._evict(now, overflow)
        self._runs.append(Run(expiry, 1, count))
        self._present += count

    def insert_ticks(self, t: float, m: int, count: int, step: float, lifetime: float) -> None:
        """``m`` ticks from ``t``, ``step`` apart, each opening ``count`` connections that live ``lifetime``.

        The same as ``insert(t_i, count, (t_i - step/2) + lifetime)`` tick by
        tick, in one step where it is the same: while the map has room, and
        while what the ticks evict is older than the first of them and dead
        by then.
        """
        if count <= 0 or m <= 0:
            return
        if count > self.max_entries:  # as ``insert``: each tick's excess is evicted live by the tick itself
            self.live_evicted += (count - self.max_entries) * m
            count = self.max_entries
        fits = min(m, (self.max_entries - self._present) // count)
        self._append(t, fits, count, step, lifetime)
        t, m = t + fits * step, m - fits
        if m == 0:
            return
        evicted = self._present + m * count - self.max_entries
        if self._evicts_only_dead(evicted, t):
            self._evict(t, evicted)
            self._append(t, m, count, step, lifetime)
            return
        for i in range(m):
            ti = t + i * step
            overflow = self._present + count - self.max_entries
            if overflow > 0:
                self._evict(ti, overflow)
            self._append(ti, 1, count, step, lifetime)

    def _append(self, t: float, m: int, count: int, step: float, lifetime: float) -> None:
        if m <= 0:
            return
        runs, half = self._runs, step / 2
        last = runs[-1] if runs else None
        if (
            last is not None
            and last.step == step
            and last.count == count
            and last.lifetime == lifetime
            and last.half == half
            and last.t0 + last.n * step == t
        ):
            last.n += m
        else:
            runs.append(Run(t, m, count, step, half, lifetime))
        self._present += m * count

    def _evicts_only_dead(self, n: int, at: float) -> bool:
        """The oldest ``n`` entries are all in cohorts and all expired at or before ``at``."""
        for run in self._runs:
            if n <= 0:
                return True
            k = run.expired_cohorts(at)
            if run.entries_of(k) < min(n, run.entries):
                return False
            n -= run.entries
        return n <= 0

    def _evict(self, now: float, n: int) -> None:
        runs = self._runs
        while n > 0 and runs:
            head = runs[0]
            if n >= head.entries:  # the whole run
                take = head.entries
                self.live_evicted += take - head.entries_of(head.expired_cohorts(now))
                runs.popleft()
            elif n < head.first:  # part of its oldest cohort
                take = n
                if head.expiry(0) > now:
                    self.live_evicted += take
                head.first -= take
            else:  # its oldest cohorts whole, then part of the next
                whole = 1 + (n - head.first) // head.count
                take = head.entries_of(whole)
                self.live_evicted += take - head.entries_of(min(head.expired_cohorts(now), whole))
                head.drop(whole)
                rest = n - take
                if rest:
                    if head.expiry(0) > now:
                        self.live_evicted += rest
                    head.first -= rest
                    take += rest
            n -= take
            self._present -= take
        if n > 0:
            take = min(n, self.established)
            self.established -= take
            self.live_evicted += take
            self._present -= take

    def delete_expired(self, now: float) -> int:
        """Remove every entry expired at ``now``; returns how many were deleted."""
        runs = self._runs
        deleted = 0
        while runs:
            head = runs[0]
            k = head.expired_cohorts(now)
            if k == head.n:
                deleted += head.entries
                runs.popleft()
                continue
            deleted += head.entries_of(k)
            head.drop(k)
            break
        self._present -= deleted
        return deleted

    def delete_oldest_expired(self, now: float, n: int) -> int:
        """Remove the ``n`` oldest entries, all expired at ``now`` (at most as many as are); returns how many."""
        n = min(n, self.expired(now))
        if n > 0:
            self._evict(now, n)  # the oldest are expired ones: nothing live is counted evicted
        return max(n, 0)

    @property
    def cohorts(self) -> int:
        return sum(r.n for r in self._runs)


def new_map(name: str, max_entries: int, *, established: int = 0, expired: int = 0) -> CTMap:
    """A map holding ``established`` live entries and ``expired`` garbage at t=0."""
    ctmap = CTMap(name=name, max_entries=max_entries, established=established)
    if expired:
        ctmap.insert(0.0, expired, -NEVER)
    return ctmap
