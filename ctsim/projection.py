"""How long walks take: the one projection the simulator and ctwatch share.

A walk visits every present entry of every map it covers at a per-entry rate,
plus one delete syscall per entry it removes (spec §3). A burst of N creates
queues N such walks on one lock (spec §4), so the N-th caller waits N walks.
"""

from __future__ import annotations

import math


def walk_seconds(entries: float, rate: float, deletes: float = 0.0, delete_seconds: float = 0.0) -> float:
    """Seconds for one full walk of ``entries`` at ``rate`` entries/s, with deletes."""
    if rate <= 0:
        raise ValueError("walk rate must be positive")
    return entries / rate + deletes * delete_seconds


def burst_seconds(entries: float, rate: float, burst: int) -> float:
    """Seconds until the last of ``burst`` creates, queued on one lock, finishes its scrub."""
    return burst * walk_seconds(entries, rate)


def safe_burst(entries: float, rate: float, deadline: float, overhead: float = 0.0) -> int | None:
    """The largest burst whose last scrub (plus ``overhead``) ends within the deadline.

    None means unbounded: an empty table costs nothing to walk.
    """
    walk = walk_seconds(entries, rate)
    budget = deadline - overhead
    if budget <= 0:
        return 0
    if walk <= 0:
        return None
    return math.floor(budget / walk + 1e-9)


def max_entries_for_burst(burst: int, rate: float, deadline: float, overhead: float = 0.0) -> int:
    """The largest table on which ``burst`` queued scrubs (plus overhead) fit the deadline."""
    budget = deadline - overhead
    if budget <= 0 or burst <= 0:
        return 0
    return math.floor(budget / burst * rate)
