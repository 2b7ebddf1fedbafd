"""Churn at each connection's own time, played as runs, against a map of single entries (hypothesis).

The oracle opens one connection at a time into a list-based LRU map and
judges each eviction at the instant of the connection that caused it. The
fast path (runs of connections, evictions counted in closed form) must give
the same integers, read for read.
"""

from __future__ import annotations

import math
from collections import deque
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from ctsim.core.defaults import CT_TIMEOUT_TCP_FIN
from ctsim.inputs.churn import ChurnSchedule
from ctsim.sim.connections import ConnectionChurn
from ctsim.sim.ctmap import CTMap, new_map


class EntryMap:
    """An LRU map of single entries: [float expiry, exact expiry (None: garbage from t=0)], oldest first."""

    def __init__(self, max_entries: int, established: int, expired: int) -> None:
        self.max_entries, self.established, self.live_evicted = max_entries, established, 0
        self.garbage = expired
        self.entries: deque[tuple[float, Fraction]] = deque()

    @property
    def present(self) -> int:
        return self.established + self.garbage + len(self.entries)

    def arrive(self, t0: float, index: int, step: float, lifetime: float) -> None:
        at = Fraction(t0) + index * Fraction(step)
        if self.present == self.max_entries:
            if self.garbage:
                self.garbage -= 1
            elif self.entries:
                _, exact = self.entries.popleft()
                self.live_evicted += exact > at
            else:
                self.established -= 1
                self.live_evicted += 1
        self.entries.append(((t0 + index * step) + lifetime, at + Fraction(lifetime)))

    def expired(self, now: float) -> int:
        return self.garbage + sum(1 for e, _ in self.entries if e <= now)

    def delete_expired(self, now: float) -> int:
        deleted = self.expired(now)
        self.garbage = 0
        self.entries = deque(e for e in self.entries if e[0] > now)
        return deleted


class Recorded(CTMap):
    """The fast map, handing each connection it is given to the oracle too."""

    oracle: EntryMap

    def insert_arrivals(self, t0: float, i0: int, m: int, step: float, lifetime: float) -> None:
        for j in range(m):
            self.oracle.arrive(t0, i0 + j, step, lifetime)
        super().insert_arrivals(t0, i0, m, step, lifetime)


def recorded(max_entries: int, established: int, expired: int) -> Recorded:
    fast = new_map("ct", max_entries, established=established, expired=expired)
    m = Recorded(name="ct", max_entries=max_entries, established=fast.established, _runs=fast._runs)
    m.oracle = EntryMap(max_entries, established, expired)
    return m


def same(fast: Recorded, at: float) -> None:
    o = fast.oracle
    assert (fast.present, fast.live_evicted, fast.established) == (o.present, o.live_evicted, o.established)
    assert fast.expired(at) == o.expired(at)


# The oracle holds one object per connection: at most ~10 per second for ~1,000 s.
rates = st.one_of(
    st.integers(0, 10).map(float),  # whole connections per second
    st.integers(0, 640).map(lambda k: k / 64),  # on a binary grid
    st.floats(0, 10, allow_nan=False),  # anything
    st.sampled_from([500 / 60, 0.01, 7.0, 1 / 3, 1 / 24]),
)


@settings(max_examples=300, deadline=None)
@given(
    segments=st.lists(st.tuples(rates, st.floats(1, 900, allow_nan=False)), min_size=1, max_size=3),
    constant=st.booleans(),
    max_entries=st.one_of(st.integers(1, 300), st.integers(1, 20_000)),  # small: LRU evicts live entries
    established=st.integers(0, 2_000),
    expired=st.integers(0, 2_000),
    conn_seconds=st.sampled_from([0.0, 0.5, 30.0, 120.0, 3600.0]),
    reads=st.lists(st.tuples(st.floats(0, 1_200), st.booleans()), max_size=25),
    horizon=st.floats(1, 1_200),
)
def test_catch_up_opens_what_one_connection_at_a_time_would(
    segments: list[tuple[float, float]],
    constant: bool,
    max_entries: int,
    established: int,
    expired: int,
    conn_seconds: float,
    reads: list[tuple[float, bool]],
    horizon: float,
) -> None:
    established = min(established, max_entries)
    expired = min(expired, max_entries - established)
    schedule = ChurnSchedule(((segments[0][0], math.inf),) if constant else tuple(segments))
    fast = recorded(max_entries, established, expired)
    churn = ConnectionChurn(fast, schedule, conn_seconds, until=horizon)
    for at, delete in sorted(reads):
        churn.catch_up(at)
        same(fast, at)
        if delete:
            assert fast.delete_expired(at) == fast.oracle.delete_expired(at)
    churn.catch_up(horizon)
    same(fast, horizon)


@settings(max_examples=300, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.integers(0, 400),  # connections
            st.sampled_from([0.001, 0.25, 1.0, 1 / 3, 7.0, 0.1]),  # apart
            st.booleans(),  # the same segment as the batch before
            st.floats(0, 50),  # gap before a new segment
        ),
        max_size=12,
    ),
    lifetime=st.sampled_from([0.0, 0.5, 10.0, 70.0, 1e3]),  # one per map, so expiries ascend as entries age
    max_entries=st.integers(1, 600),
    established=st.integers(0, 300),
    expired=st.integers(0, 300),
)
def test_evictions_by_a_run_of_arrivals_are_judged_one_by_one(
    batches: list[tuple[int, float, bool, float]], lifetime: float, max_entries: int, established: int, expired: int
) -> None:
    established = min(established, max_entries)
    expired = min(expired, max_entries - established)
    fast = recorded(max_entries, established, expired)
    t0, i0, step, now = 0.0, 0, 1.0, 0.0
    for m, new_step, same_segment, gap in batches:
        if not same_segment:
            t0, i0, step = now + gap, 0, new_step
        fast.insert_arrivals(t0, i0, m, step, lifetime)
        i0 += m
        now = t0 + i0 * step
        same(fast, now)


def test_a_gc_pass_every_10s_finds_10s_of_closed_flows() -> None:
    """cilium #46626's shape: with connections at their own times, every pass deletes alike, none finds nothing."""
    m = new_map("ct", 1 << 20)
    churn = ConnectionChurn(m, ChurnSchedule(((64.0, math.inf),)), conn_seconds=5.0, until=3600.0)
    deleted = []
    for k in range(1, 60):
        churn.catch_up(10.0 * k)
        deleted.append(m.delete_expired(10.0 * k))
    assert deleted[0] == 0  # nothing has closed and timed out 10 s in (5 s open, 10 s FIN timeout)
    assert deleted[1] == 5 * 64  # those opened in the first 5 s
    assert all(d == 640 for d in deleted[2:]), deleted  # 10 s of flows at 64/s, every pass
    assert m.runs == 1


def test_a_segment_owes_its_share_of_a_connection_to_the_next() -> None:
    """``30/min for 2h`` opens 3,600, and a segment's fraction is carried, not lost."""
    m = new_map("ct", 1 << 20)
    schedule = ChurnSchedule(((0.5, 7200.0), (1 / 3, 1.5), (0.0, 100.0)))
    churn = ConnectionChurn(m, schedule, conn_seconds=1e9, until=3 * schedule.period)
    churn.catch_up(7200.0)
    assert m.present == 3600
    churn.catch_up(3 * schedule.period)
    assert m.present == math.floor(3 * (3600 + 0.5))
    assert CT_TIMEOUT_TCP_FIN == 10.0


def test_a_schedule_faster_than_a_minute_is_played_at_its_mean() -> None:
    m = new_map("ct", 1 << 20)
    churn = ConnectionChurn(m, ChurnSchedule(((8.0, 1.0), (0.0, 1.0))), conn_seconds=1e9, until=1e6)
    churn.catch_up(1000.0)
    assert m.present == 4000 and m.runs == 1  # 4/s, every 0.25 s
