"""A full walk of one family's CT maps: the cost every caller pays, one map at a time.

Periodic GC passes and pod scrubs run the same loop (``doGC4``/``doGC6``):
two syscalls per present entry, one more per entry deleted. Each map is
walked under the family's lock, taken for that map alone and released before
the next, so a waiter can get in between the TCP and the non-TCP map. Only GC
deletes expired entries; a scrub deletes only its pod's (none, for a new IP).
"""

from __future__ import annotations

from collections.abc import Generator

import simpy

from ctsim.core.projection import walk_seconds
from ctsim.sim.clock import advance
from ctsim.sim.node import Family, Node


def walk(
    node: Node,
    family: Family,
    *,
    collect_garbage: bool,
    caller_deadline: float | None = None,
) -> Generator[simpy.Event, object, tuple[int, int, float]]:
    """Returns (entries walked, entries deleted, max delete ratio over the maps).

    The ratio is deleted entries over the map's *capacity* (``runGC``).
    ``caller_deadline`` is when whoever asked for the walk stopped waiting;
    walk time after it is counted as orphaned.
    """
    env, lock, c = node.env, family.lock, node.counters
    walked = deleted = 0
    ratio = orphaned = 0.0
    for ctmap in family.maps:
        # A walker is woken alone (its timer, a grant, a walk's end) or runs in create's start, whose later steps
        # touch nothing a walk does: a free lock is taken without an event.
        if not lock.take_now():
            yield lock.request()
        start = env.now
        if ctmap.feed is None and ctmap.present == 0 and not node.bucket_seconds:  # empty, per entry: no walk
            lock.record_hold(0.0)
            lock.release()
            continue
        ctmap.catch_up(start)
        present = ctmap.present
        expired = ctmap.expired(start) if collect_garbage else 0
        duration = walk_seconds(
            present, node.walk_rate, expired, node.delete_seconds, ctmap.max_entries, node.bucket_seconds
        )
        if duration > 0 and not advance(env, duration):
            yield env.timeout(duration)  # a simulation torn down here ends the walk holding the lock: no matter
        lock.record_hold(duration)
        walked += present
        if collect_garbage:
            # The connections opened during the walk, and what they evicted.
            ctmap.catch_up(env.now)
            n = ctmap.delete_expired(start)
            deleted += n
            ratio = max(ratio, n / ctmap.max_entries)
        lock.release()
        if collect_garbage:
            c.gc_seconds += duration
        else:
            c.scrub_seconds += duration
        if caller_deadline is not None and env.now > caller_deadline:
            orphaned += env.now - max(start, caller_deadline)
    if orphaned > 0:
        c.orphaned_walks += 1
        c.orphaned_walk_seconds += orphaned
    return walked, deleted, ratio
