"""Connection churn into a CT map: each connection at its own time.

Each connection holds a live entry while open; after it closes the entry lives
on for the TCP close timeout (``bpf-ct-timeout-regular-tcp-fin``, 10 s) and is
then *expired*: it stays in the map until a GC pass deletes it or LRU evicts
it (``bpf-ct-timeout-*`` defaults). A non-TCP flow (UDP, DNS) is the same
with ``bpf-ct-timeout-regular-any`` (60 s) after its last packet.

While a rate holds, connections open evenly, ``1/rate`` apart; a schedule's
segment owes its share of a connection to the next (the running total is
floored), so ``30/min for 2h`` opens 3,600. A GC pass 10 s after the last one
finds 10 s of closed flows, not a whole minute's or none.
"""

from __future__ import annotations

import math

from ctsim.core.defaults import CT_TIMEOUT_TCP_FIN
from ctsim.core.floats import left_sum
from ctsim.inputs.churn import ChurnSchedule
from ctsim.sim.ctmap import CTMap

# A schedule that repeats faster than this is played at its mean rate: its segments are shorter than any
# GC interval or sample, and playing each would cost a run per segment.
MIN_PERIOD_SECONDS = 60.0


class ConnectionChurn:
    """Opens connections into a map at their own times, without a process of its own.

    Opening only adds entries, and nothing reads the map between the events
    that walk or sample it, so the connections are opened when the map is
    read: ``catch_up(now)`` opens every one due by ``now`` as one run per
    segment. A quiet year costs its reads, not its connections.
    """

    def __init__(
        self,
        ctmap: CTMap,
        schedule: ChurnSchedule,
        conn_seconds: float,
        until: float,
        close_timeout: float = CT_TIMEOUT_TCP_FIN,
    ) -> None:
        """``close_timeout``: an entry's life after its flow ends (the TCP FIN timeout; 60 s for non-TCP)."""
        if math.isinf(until):
            raise ValueError("an unbounded churn needs an end")
        if not schedule.constant and schedule.period < MIN_PERIOD_SECONDS:
            mean = left_sum(rate * duration for rate, duration in schedule.segments) / schedule.period
            schedule = ChurnSchedule(((mean, math.inf),))
        self.ctmap, self.schedule, self.until = ctmap, schedule, until
        self.lifetime = conn_seconds + close_timeout
        self.segment, self.start, self.carry = 0, 0.0, 0.0
        self._enter_segment()

    def _enter_segment(self) -> None:
        """The segment from ``self.start``: connections ``origin + j * step``, ``total`` of them (None: unending)."""
        rate, duration = self.schedule.segments[self.segment]
        self.end = self.start + duration
        self.opened = 0
        self.step = 1.0 / rate if rate > 0 else 0.0
        if rate <= 0:
            self.total: int | None = 0
            return
        # The carry is the share of a connection owed from before: the next one comes when it is made whole.
        self.origin = self.start + (1.0 - self.carry) * self.step
        self.total = None if math.isinf(duration) else math.floor(self.carry + rate * duration)

    def _next_segment(self) -> None:
        rate, duration = self.schedule.segments[self.segment]
        owed = self.carry + rate * duration
        self.carry = owed - math.floor(owed)
        self.start = self.end
        self.segment = (self.segment + 1) % len(self.schedule.segments)
        self._enter_segment()

    def catch_up(self, now: float) -> None:
        """Opens the connections due by ``now``, one at ``now`` included; none at or after the end of the run."""
        limit, include = (now, True) if now < self.until else (self.until, False)
        while True:
            if self.step > 0:
                due = self._due(limit, include)
                if self.total is not None:
                    due = min(due, self.total)
                if due > self.opened:
                    self.ctmap.insert_arrivals(self.origin, self.opened, due - self.opened, self.step, self.lifetime)
                    self.opened = due
            if self.total is None or self.opened < self.total or self.end > limit:
                return
            self._next_segment()

    def _due(self, limit: float, include: bool) -> int:
        """How many of ``origin + j * step`` (j from 0) are before ``limit``, or at it if ``include``."""
        origin, step = self.origin, self.step
        # Connection j is due while ``origin + j * step`` is before the limit, or at it if ``include``; written
        # out (no helper): a GC pass reads every map, so this runs for each of them at every pass.
        if not (origin < limit or (include and origin == limit)):
            return 0
        n = math.floor((limit - origin) / step) + 1  # the exact float comparison decides at the edge
        while n > 1 and not ((t := origin + (n - 1) * step) < limit or (include and t == limit)):
            n -= 1
        while (t := origin + n * step) < limit or (include and t == limit):
            n += 1
        return n
