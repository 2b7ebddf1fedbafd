"""Churn played at reads (runs of cohorts, whole runs of ticks) against one cohort per tick (hypothesis).

The oracle is the model as it was: a process that wakes every 60 s, adds
``rate * 60`` to a carry, and opens its whole part as one ``[expiry, count]``
cohort of a list-based LRU map. The fast path must give the same integers,
read for read.
"""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from ctsim.core.defaults import CT_TIMEOUT_TCP_FIN
from ctsim.inputs.churn import ChurnSchedule
from ctsim.sim.connections import TICK_SECONDS, ConnectionChurn
from ctsim.sim.ctmap import new_map


class CohortMap:
    """The former CTMap: a deque of [expiry, count] cohorts, LRU first."""

    def __init__(self, max_entries: int, established: int, expired: int) -> None:
        self.max_entries, self.established, self.live_evicted = max_entries, established, 0
        self.cohorts: deque[list[float]] = deque([[-float("inf"), expired]] if expired else [])
        self.present = established + expired

    def insert(self, now: float, count: int, expiry: float) -> None:
        if count > self.max_entries:  # inserted one by one, the tick's first flows are evicted by its last: live
            self.live_evicted += count - self.max_entries
            count = self.max_entries
        n = self.present + count - self.max_entries
        while n > 0 and self.cohorts:
            head = self.cohorts[0]
            take = min(n, int(head[1]))
            if head[0] > now:
                self.live_evicted += take
            head[1] -= take
            if head[1] <= 0:
                self.cohorts.popleft()
            n -= take
            self.present -= take
        if n > 0:
            take = min(n, self.established)
            self.established -= take
            self.live_evicted += take
            self.present -= take
        self.cohorts.append([expiry, count])
        self.present += count

    def expired(self, now: float) -> int:
        return int(sum(c[1] for c in self.cohorts if c[0] <= now))

    def delete_expired(self, now: float) -> int:
        deleted = self.expired(now)
        self.cohorts = deque(c for c in self.cohorts if c[0] > now)
        self.present -= deleted
        return deleted


rates = st.one_of(
    st.integers(0, 200_000).map(float),  # whole connections per tick: a fixed point
    st.integers(0, 20_000).map(lambda k: k / 64),  # on a binary grid: the carry's steps are exact
    st.floats(0, 3_000, allow_nan=False),  # anything: the carry's steps round
    st.sampled_from([50_000 / 60, 500 / 60, 0.01, 7.0, 1 / 3, 1 / 24]),
)


@settings(max_examples=500, deadline=None)
@given(
    segments=st.lists(st.tuples(rates, st.floats(1, 4 * 3600, allow_nan=False)), min_size=1, max_size=3),
    constant=st.booleans(),
    max_entries=st.one_of(st.integers(1, 3_000), st.integers(1, 5_000_000)),  # small: LRU evicts live entries
    established=st.integers(0, 100_000),
    expired=st.integers(0, 100_000),
    conn_seconds=st.sampled_from([0.0, 30.0, 50.0, 120.0, 3600.0]),
    reads=st.lists(
        st.tuples(
            st.one_of(st.integers(0, 2_000).map(lambda k: k * 60.0), st.floats(0, 120_000)),
            st.booleans(),
            st.booleans(),
        ),
        max_size=25,
    ),
    horizon=st.floats(60, 130_000),
)
def test_catch_up_opens_what_one_cohort_per_tick_would(
    segments: list[tuple[float, float]],
    constant: bool,
    max_entries: int,
    established: int,
    expired: int,
    conn_seconds: float,
    reads: list[tuple[float, bool, bool]],
    horizon: float,
) -> None:
    established = min(established, max_entries)
    expired = min(expired, max_entries - established)
    schedule = ChurnSchedule(((segments[0][0], float("inf")),) if constant else tuple(segments))
    fast = new_map("ct", max_entries, established=established, expired=expired)
    churn = ConnectionChurn(fast, schedule, conn_seconds, until=horizon)
    oracle = CohortMap(max_entries, established, expired)
    tick, half, lifetime = TICK_SECONDS, TICK_SECONDS / 2, conn_seconds + CT_TIMEOUT_TCP_FIN
    next_tick, carry = tick, 0.0
    for at, inclusive, delete in sorted(reads):
        churn.catch_up(at, inclusive=inclusive)
        while next_tick < min(at, horizon) or (inclusive and next_tick == at and next_tick < horizon):
            carry += schedule.rate_at(next_tick - half) * tick
            count = int(carry)
            carry -= count
            if count:
                oracle.insert(next_tick, count, next_tick - half + lifetime)
            next_tick += tick
        assert (fast.present, fast.live_evicted, fast.established) == (
            oracle.present,
            oracle.live_evicted,
            oracle.established,
        )
        assert fast.expired(at) == oracle.expired(at)
        assert fast.cohorts == len(oracle.cohorts)
        if delete:
            assert fast.delete_expired(at) == oracle.delete_expired(at)
    assert churn.carry == carry
