"""A conntrack map as cohorts of entries, never as one object per entry.

A cohort is ``[expiry, count]``: ``count`` entries that stop being live at
``expiry`` (seconds of node time). Cohorts sit in LRU order, least recently
used first, which for churn is insertion order. Entries of long-lived,
still-refreshed connections are kept apart as ``established``: they are the
most recently used and never expire within a run. Cost grows with events
(one cohort per churn tick), not with entries, so 16 M entries cost as little
as 16 K.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

NEVER = float("inf")


@dataclass
class CTMap:
    """One of ``cilium_ct{4,_any4,6,_any6}_global``: BPF_MAP_TYPE_LRU_HASH."""

    name: str
    max_entries: int
    established: int = 0
    live_evicted: int = 0
    _cohorts: deque[list[float]] = field(default_factory=deque)
    _present: int = 0

    def __post_init__(self) -> None:
        self._present = self.established + int(sum(c[1] for c in self._cohorts))
        if self._present > self.max_entries:
            raise ValueError(f"{self.name}: {self._present} entries exceed max_entries {self.max_entries}")

    @property
    def present(self) -> int:
        return self._present

    def expired(self, now: float) -> int:
        """Entries whose lifetime ended at or before ``now``: what a GC pass deletes."""
        return int(sum(c[1] for c in self._cohorts if c[0] <= now))

    def live(self, now: float) -> int:
        return self._present - self.expired(now)

    def insert(self, now: float, count: int, expiry: float) -> None:
        """New connections; a full map evicts its least recently used entries (LRU)."""
        if count <= 0:
            return
        count = min(count, self.max_entries)
        overflow = self._present + count - self.max_entries
        if overflow > 0:
            self._evict(now, overflow)
        self._cohorts.append([expiry, count])
        self._present += count

    def _evict(self, now: float, n: int) -> None:
        cohorts = self._cohorts
        while n > 0 and cohorts:
            head = cohorts[0]
            take = min(n, int(head[1]))
            if head[0] > now:
                self.live_evicted += take  # a live connection loses its state
            head[1] -= take
            if head[1] <= 0:
                cohorts.popleft()
            n -= take
            self._present -= take
        if n > 0:
            take = min(n, self.established)
            self.established -= take
            self.live_evicted += take
            self._present -= take

    def delete_expired(self, now: float) -> int:
        """Remove every entry expired at ``now``; returns how many were deleted."""
        kept: deque[list[float]] = deque()
        deleted = 0
        for cohort in self._cohorts:
            if cohort[0] <= now:
                deleted += int(cohort[1])
            else:
                kept.append(cohort)
        self._cohorts = kept
        self._present -= deleted
        return deleted

    @property
    def cohorts(self) -> int:
        return len(self._cohorts)


def new_map(name: str, max_entries: int, *, established: int = 0, expired: int = 0) -> CTMap:
    """A map holding ``established`` live entries and ``expired`` garbage at t=0."""
    ctmap = CTMap(name=name, max_entries=max_entries, established=established)
    if expired:
        ctmap.insert(0.0, expired, -NEVER)
    return ctmap
