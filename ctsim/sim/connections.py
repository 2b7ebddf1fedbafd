"""Connection churn into a CT map: one cohort of new connections per tick.

Each connection holds a live entry while open; after it closes the entry lives
on for the TCP close timeout (``bpf-ct-timeout-regular-tcp-fin``, 10 s) and is
then *expired*: it stays in the map until a GC pass deletes it or LRU evicts
it (``bpf-ct-timeout-*`` defaults). A non-TCP flow (UDP, DNS) is the same
with ``bpf-ct-timeout-regular-any`` (60 s) after its last packet. Arrivals
are batched into one cohort per tick.
"""

from __future__ import annotations

import math

from ctsim.core.defaults import CT_TIMEOUT_TCP_FIN
from ctsim.inputs.churn import ChurnSchedule
from ctsim.sim.ctmap import CTMap

TICK_SECONDS = 60.0


class ConnectionChurn:
    """Opens connections into a map, one cohort per tick, without a process of its own.

    A tick only adds entries, and nothing reads the map between the events
    that walk or sample it, so the ticks are played when the map is read:
    ``catch_up(now)`` plays every tick up to ``now`` in the order and with the
    arithmetic a per-tick process would. A quiet year costs its reads, not
    its 525,600 minutes of events.
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
        self.ctmap, self.schedule, self.until = ctmap, schedule, until
        self.lifetime = conn_seconds + close_timeout
        self.next_tick = TICK_SECONDS
        self.carry = 0.0

    def catch_up(self, now: float, *, inclusive: bool = True) -> None:
        """Plays the ticks before ``now``, and the one at ``now`` if ``inclusive``.

        A tick's event would be scheduled one tick earlier, so at a shared
        instant it goes first unless the reader's own event was scheduled
        before that: a sampler's timer longer than a tick, a walk of a tick
        or more, the end of the run. A walk starts after its lock request's
        event, always after the tick.
        """
        t = self.next_tick
        if t > now or t >= self.until:
            return
        tick, half = TICK_SECONDS, TICK_SECONDS / 2
        # Ticks at or after the end of the run never happen: the run stops before its last instant.
        if now < self.until and t + tick > now:  # only the tick at t can be due (t <= now): _ticks' answer
            n = 1 if t < now or inclusive else 0
        else:
            n = _ticks(t, tick, now, inclusive) if now < self.until else _ticks(t, tick, self.until, False)
        carry, lifetime = self.carry, self.lifetime
        if n == 1 and self.schedule.constant:  # one tick since the last read: the loop below, unrolled
            carry += self.schedule.segments[0][0] * tick
            count = int(carry)
            self.ctmap.insert_ticks(t, 1, count, tick, lifetime)
            self.next_tick, self.carry = t + tick, carry - count
            return
        while n > 0:
            # Ticks at one rate: each adds rate * tick to the carry and opens its whole part, as one
            # cohort per tick would; equal counts go to the map together.
            span = self.schedule.same_rate_run(t - half, tick, n)
            x = self.schedule.rate_at(t - half) * tick
            done = 0
            while done < span:
                carry += x
                count = int(carry)
                carry -= count
                same, carry = _same_count(carry, x, count, span - done - 1)
                self.ctmap.insert_ticks(t + done * tick, 1 + same, count, tick, lifetime)
                done += 1 + same
            t += span * tick
            n -= span
        self.next_tick, self.carry = t, carry


def _same_count(carry: float, x: float, count: int, limit: int) -> tuple[int, float]:
    """How many more ticks (at most ``limit``) open ``count`` again, and the carry after them.

    Each tick does ``carry += x; count = int(carry); carry -= count`` in floats.
    When those operations are exact (carry and x on one binary grid, sums
    below 2**53 grid steps) the carry moves by the same amount every tick,
    and the run's length is one division; otherwise the ticks are played.
    """
    if limit == 0:  # a single tick: nothing to count (and the carry is the one given)
        return 0, carry
    (cn, cd), (xn, xd) = carry.as_integer_ratio(), x.as_integer_ratio()
    grid = max(cd, xd)  # powers of two
    if (count + 1) * grid <= 2**53:
        c, xs, low, high = cn * (grid // cd), xn * (grid // xd), count * grid, (count + 1) * grid
        d = xs - low  # how far each tick moves the carry, in grid steps
        if not low <= c + xs < high:
            return 0, carry
        if d == 0:
            k = limit
        elif d > 0:
            k = min(limit, (high - 1 - c - xs) // d + 1)
        else:
            k = min(limit, (c + xs - low) // -d + 1)
        return k, (c + k * d) / grid
    k = 0
    while k < limit and int(carry + x) == count:
        carry = (carry + x) - count
        k += 1
    return k, carry


def _ticks(first: float, step: float, limit: float, inclusive: bool) -> int:
    """How many of ``first, first+step, ...`` are below ``limit`` (or at it, if ``inclusive``)."""
    if math.isinf(limit):
        raise ValueError("an unbounded churn needs an end")
    n = max(math.floor((limit - first) / step) + 1, 0)
    while n > 0 and not (first + (n - 1) * step < limit or (inclusive and first + (n - 1) * step == limit)):
        n -= 1
    while first + n * step < limit or (inclusive and first + n * step == limit):
        n += 1
    return n
