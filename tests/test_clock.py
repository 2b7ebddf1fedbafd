"""A timer at an absolute instant fires at that very float, where now + delay cannot reach it."""

from __future__ import annotations

import simpy
from hypothesis import given
from hypothesis import strategies as st

from ctsim.clock import timeout_at


def _fires_at(now: float, t: float) -> float:
    env = simpy.Environment(initial_time=now)
    fired: list[float] = []
    timeout_at(env, t).callbacks.append(lambda _: fired.append(env.now))  # type: ignore[union-attr]
    env.run()
    return fired[0]


def test_a_deadline_no_delay_reaches() -> None:
    now, t = 8.20284366197183, 61.68677771850212  # a context deadline parking re-created
    assert now + (t - now) != t
    assert _fires_at(now, t) == t


@given(st.floats(0, 1e7), st.floats(0, 1e6))
def test_it_fires_at_the_instant_given(now: float, ahead: float) -> None:
    t = now + ahead
    assert _fires_at(now, t) == t


@given(st.floats(0, 1e6), st.floats(0, 10), st.floats(0, 10))
def test_it_keeps_its_place_among_timeouts(now: float, a: float, b: float) -> None:
    """Ordered by instant, then by when it was made, as SimPy orders its own timeouts."""
    env = simpy.Environment(initial_time=now)
    log: list[str] = []
    env.timeout(a).callbacks.append(lambda _: log.append("timeout"))  # type: ignore[union-attr]
    timeout_at(env, now + b).callbacks.append(lambda _: log.append("at"))  # type: ignore[union-attr]
    env.run()
    assert log == (["at", "timeout"] if now + b < now + a else ["timeout", "at"])
