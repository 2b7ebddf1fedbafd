"""The per-family CT lock: ``mapInfo[...].natMapLock`` with ``globalDeleteLock[mapType]``.

``doGC4``/``doGC6`` take the family's ``natMapLock`` (shared by its TCP and
non-TCP maps) for the whole walk of one map, with that map type's
``globalDeleteLock`` around the dump: every IPv4 CT walk, periodic GC pass or
pod scrub alike, is serialised map by map. Go's ``sync.Mutex`` turns FIFO
under contention (starvation mode), so a FIFO ``simpy.Resource`` of capacity
1 models it.
"""

from __future__ import annotations

import simpy


class GlobalDeleteLock(simpy.Resource):
    """A FIFO mutex that remembers how it was used."""

    def __init__(self, env: simpy.Environment, family: str) -> None:
        super().__init__(env, capacity=1)
        self.family = family
        self.max_queue = 0
        self.max_holders = 0
        self.held_seconds = 0.0

    def request(self) -> simpy.resources.resource.Request:  # type: ignore[override]
        req = super().request()
        self.max_queue = max(self.max_queue, len(self.queue))
        self.max_holders = max(self.max_holders, len(self.users))
        return req

    def record_hold(self, seconds: float) -> None:
        self.held_seconds += seconds
        self.max_holders = max(self.max_holders, len(self.users))
