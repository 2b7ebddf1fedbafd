"""A full walk of one family's CT maps under its lock: the cost every caller pays.

Periodic GC passes and pod scrubs run the same loop (spec §3, §5): two
syscalls per present entry, one more per entry deleted. Only GC deletes
expired entries; a scrub deletes only its pod's (none, for a new IP).
"""

from __future__ import annotations

from collections.abc import Generator

import simpy

from ctsim.node import Family, Node
from ctsim.projection import walk_seconds


def walk(
    node: Node,
    family: Family,
    *,
    collect_garbage: bool,
    caller_deadline: float | None = None,
) -> Generator[simpy.Event, object, tuple[int, int, float]]:
    """Returns (entries walked, entries deleted, max delete ratio over the maps).

    ``caller_deadline`` is when whoever asked for the walk stopped waiting;
    walk time after it is counted as orphaned.
    """
    env = node.env
    with family.lock.request() as req:
        yield req
        start = env.now
        walked = family.present
        expired = [m.expired(start) for m in family.maps] if collect_garbage else []
        duration = walk_seconds(walked, node.walk_rate, sum(expired), node.delete_seconds)
        yield env.timeout(duration)
        family.lock.record_hold(duration)
        ratio, deleted = 0.0, 0
        if collect_garbage:
            for ctmap in family.maps:
                n = ctmap.delete_expired(start)
                deleted += n
                ratio = max(ratio, n / ctmap.max_entries)
    c = node.counters
    if collect_garbage:
        c.gc_seconds += duration
    else:
        c.scrub_seconds += duration
    if caller_deadline is not None and env.now > caller_deadline:
        c.orphaned_walks += 1
        c.orphaned_walk_seconds += env.now - max(start, caller_deadline)
    return walked, deleted, ratio
