"""A conntrack map as runs of entries, never as one object per entry.

Entries sit in LRU order, least recently used first, which for churn is
opening order, and so also expiry order. Entries of long-lived, still-refreshed
connections are kept apart as ``established``: they are the most recently
used and never expire within a run.

Churn opens each connection at its own time, evenly spaced while a rate holds
(``ctsim.sim.connections``), so the entries are kept as *runs*: ``n``
connections ``step`` apart, each living ``lifetime`` after it opened. Garbage
given at t=0 is a run of one cohort of many entries. Cost grows with runs, not
with entries or connections: 16 M entries cost as little as 16 K, and a quiet
year as little as a quiet day.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

NEVER = float("inf")


class Run:
    """``n`` cohorts, cohort i opened at ``t0 + (i0 + i) * step`` and expiring ``lifetime`` later.

    A churn run's cohorts are single connections (``count`` 1) numbered ``i0``
    on within their segment, so the next read's connections extend the run.
    A single cohort with a given expiry is a run of one with ``t0 = expiry``
    and no step. ``first`` is what is left of the oldest cohort.
    """

    __slots__ = ("count", "first", "i0", "lifetime", "n", "step", "t0")

    def __init__(self, t0: float, n: int, count: int, step: float = 0.0, lifetime: float = 0.0, i0: int = 0):
        self.t0, self.i0, self.n, self.count, self.first = t0, i0, n, count, count
        self.step, self.lifetime = step, lifetime

    def expiry(self, i: int) -> float:
        """The expiry of cohort ``i``, in the floats every read uses."""
        return (self.t0 + (self.i0 + i) * self.step) + self.lifetime

    @property
    def entries(self) -> int:
        return self.first + (self.n - 1) * self.count

    def expired_cohorts(self, now: float) -> int:
        """How many of the oldest cohorts have expired at ``now`` (expiries ascend)."""
        if self.step == 0.0 or self.n == 1:
            return self.n if self.expiry(0) <= now else 0
        guess = math.floor(((now - self.lifetime) - self.t0) / self.step) - self.i0
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
            self.i0 += k
            self.n -= k
            self.first = self.count


class Arrivals:
    """New connections ``t0 + (i0 + j) * step`` for ``j`` from 0: when the one that pushes out entry ``q`` came."""

    __slots__ = ("i0", "step", "t0")

    def __init__(self, t0: float, i0: int, step: float) -> None:
        self.t0, self.i0, self.step = t0, i0, step

    def live_among(self, run: Run, q0: int, take: int) -> int:
        """Of ``run``'s oldest ``take`` entries, pushed out by arrivals ``q0, q0+1, ...``, how many had not expired.

        Compared exactly (the floats as integers over one power of two), so
        the answer is the one entry-by-entry comparison would give, at any
        scale. An entry's expiry is ``t0 + (i0 + i) * step + lifetime``
        without rounding, as is an arrival's instant; ``step`` is positive.
        """
        if take <= 0:
            return 0
        if run.n == 1 and not math.isfinite(run.t0):  # a cohort that never expires, or always has
            return take if run.t0 > 0 else 0
        t, s, t0, step, lifetime = _scaled(self.t0, self.step, run.t0, run.step, run.lifetime)
        expiry = t0 + run.i0 * step + lifetime  # of the run's oldest entry
        if run.n == 1:  # one cohort: its entries share an expiry
            # arrival q is before it while t + (i0 + q) * s < expiry: q < ceil((expiry - t) / s) - i0
            return min(max(-((t - expiry) // s) - self.i0 - q0, 0), take)
        # a churn run, single connections: entry c (from 0) is live while g0 + c * d > 0
        g0 = expiry - (t + (self.i0 + q0) * s)
        d = step - s
        if d == 0:
            return take if g0 > 0 else 0
        if d > 0:  # live from the first c > -g0 / d
            return take - min(max(-g0 // d + 1, 0), take)
        return min(max(-(-g0 // -d), 0), take)  # live below ceil(g0 / -d)


def _scaled(*xs: float) -> list[int]:
    """Finite floats as integers over their largest denominator (a power of two): sums and products stay exact."""
    ratios = [x.as_integer_ratio() for x in xs]
    bits = max(d.bit_length() for _, d in ratios)
    return [n << (bits - d.bit_length()) for n, d in ratios]


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
    feed: Callable[[float], None] | None = None

    def __post_init__(self) -> None:
        self._present = self.established + sum(r.entries for r in self._runs)
        if self._present > self.max_entries:
            raise ValueError(f"{self.name}: {self._present} entries exceed max_entries {self.max_entries}")

    def catch_up(self, now: float) -> None:
        """Lets the feed add what opened up to ``now``; call before reading or deleting at ``now``."""
        if self.feed is not None:
            self.feed(now)

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
        """``count`` entries at once; a full map evicts its least recently used entries (LRU)."""
        if count <= 0:
            return
        if count > self.max_entries:  # LRU: the first of them pushed out by the last, live
            self.live_evicted += count - self.max_entries
            count = self.max_entries
        overflow = self._present + count - self.max_entries
        if overflow > 0:
            self._evict(overflow, at=now)
        self._runs.append(Run(expiry, 1, count))
        self._present += count

    def insert_arrivals(self, t0: float, i0: int, m: int, step: float, lifetime: float) -> None:
        """``m`` connections, opened at ``t0 + (i0 + j) * step`` and living ``lifetime``, one by one.

        Each that finds the map full pushes out its least recently used entry
        (LRU): the older entries first, then the earliest of these connections
        themselves. An entry pushed out before its expiry is counted as
        evicted live, judged at the instant of the connection that pushed it.
        """
        if m <= 0:
            return
        room = self.max_entries - self._present
        if m > room:
            arrivals = Arrivals(t0, i0, step)
            if room == 0 and self._present == self.established:  # full of refreshed flows: the first pushes one out
                self.established -= 1
                self.live_evicted += 1
                self._present -= 1
                room = 1
            evictions = m - room
            older = min(evictions, self._present - self.established)
            # connection room + q pushes out the q-th oldest entry
            self._evict(older, arrivals=Arrivals(t0, i0 + room, step))
            own = evictions - older  # then the earliest of these, each pushed out room + (entries before) later
            if own > 0:
                lag = room + older
                self.live_evicted += arrivals.live_among(Run(t0, own, 1, step, lifetime, i0), lag, own)
                i0, m = i0 + own, m - own
        self._append(t0, i0, m, step, lifetime)

    def _append(self, t0: float, i0: int, m: int, step: float, lifetime: float) -> None:
        if m <= 0:
            return
        runs = self._runs
        last = runs[-1] if runs else None
        if (
            last is not None
            and last.count == 1
            and last.t0 == t0
            and last.step == step
            and last.lifetime == lifetime
            and last.i0 + last.n == i0
        ):
            last.n += m
        else:
            runs.append(Run(t0, m, 1, step, lifetime, i0))
        self._present += m

    def _evict(self, n: int, *, at: float = 0.0, arrivals: Arrivals | None = None) -> None:
        """Pushes out the ``n`` least recently used entries, at ``at`` or by ``arrivals`` one by one."""
        runs, q = self._runs, 0
        while n > 0 and runs:
            head = runs[0]
            take = min(n, head.entries)
            if arrivals is not None:
                live = arrivals.live_among(head, q, take)
            else:
                live = max(take - head.entries_of(head.expired_cohorts(at)), 0)
            self.live_evicted += live
            if take == head.entries:  # the whole run
                runs.popleft()
            elif take < head.first:  # part of its oldest cohort
                head.first -= take
            else:  # its oldest cohorts whole, then part of the next
                whole = 1 + (take - head.first) // head.count
                rest = take - head.entries_of(whole)
                head.drop(whole)
                head.first -= rest
            n -= take
            q += take
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
            self._evict(n, at=now)  # the oldest are expired ones: nothing live is counted evicted
        return max(n, 0)

    @property
    def cohorts(self) -> int:
        return sum(r.n for r in self._runs)

    @property
    def runs(self) -> int:
        """What a read costs: runs of connections, not connections."""
        return len(self._runs)


def new_map(name: str, max_entries: int, *, established: int = 0, expired: int = 0) -> CTMap:
    """A map holding ``established`` live entries and ``expired`` garbage at t=0."""
    ctmap = CTMap(name=name, max_entries=max_entries, established=established)
    if expired:
        ctmap.insert(0.0, expired, -NEVER)
    return ctmap
