"""Properties that hold for every scenario (hypothesis)."""

from __future__ import annotations

from collections.abc import Generator

import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import Model

scenarios = st.fixed_dictionaries(
    {
        "entries": st.integers(0, 16_777_216).map(str),
        "pods": st.integers(1, 60).map(str),
        "expired_fraction": st.sampled_from(["0", "0.5", "0.9", "0.99", "1"]),
        "churn": st.sampled_from(["0/s", "30/s", "500/min", "50000/min", "2000/s"]),
        "gc_interval": st.sampled_from(["auto", "60s", "10s"]),
        "profile": st.sampled_from(["cilium-1.16", "cilium-1.17", "cilium-1.18"]),
        "agent_state": st.sampled_from(["warm", "fresh"]),
        "ipv6_entries": st.one_of(st.none(), st.integers(0, 4_000_000).map(str)),
        "preset": st.sampled_from(["analytics", "standard"]),
        "horizon": st.sampled_from(["5m", "20m"]),
        "seed": st.integers(0, 2**16),
    }
)


def _watch(model: Model, seen: dict[str, int]) -> Generator[simpy.Event, None, None]:
    """Samples the node every 5 s: capacity and mutual exclusion must hold throughout."""
    while True:
        for family in model.node.families:
            for ctmap in family.maps:
                seen["over_capacity"] += ctmap.present > ctmap.max_entries
            seen["two_holders"] += not 0 <= family.lock.holders <= 1
        create = model.node.endpoint_create.core
        seen["too_many_in_flight"] += create.in_flight > create.params.skip_initial + create.params.parallel_requests
        yield model.env.timeout(5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_every_run_keeps_its_invariants(flags: dict[str, object]) -> None:
    model = Model(resolve_flags(**flags))  # type: ignore[arg-type]
    seen = {"over_capacity": 0, "two_holders": 0, "too_many_in_flight": 0}
    model.env.process(_watch(model, seen))
    result = model.run()
    assert seen == {"over_capacity": 0, "two_holders": 0, "too_many_in_flight": 0}
    assert len(result.families) == (1 if not result.scenario.dual_stack else 2)
    assert result.lock_max_holders <= 1
    # No pod is lost: each is Ready, failed-and-retrying, or still pending.
    states = [p.state for p in result.pods]
    assert len(states) == result.scenario.pods
    assert set(states) <= {"ready", "retrying", "pending"}
    d = result.to_dict()
    assert d["pods"]["ready"] + d["pods"]["retrying"] + d["pods"]["pending"] == result.scenario.pods
    # Every ADD ends exactly one way, once its client is done.
    c = result.counters
    ended = c.add_ok + c.add_timeouts + c.add_429 + c.add_no_agent  # no_agent: a starting agent's, never answered
    assert ended <= c.add_attempts <= ended + len(result.pods)
    assert c.add_ok == d["pods"]["ready"]
    assert c.add_429_paced <= c.add_429
    for f in result.families:
        assert f.entries_at_end <= f.max_entries + f.any_max_entries
    # Errors never re-tune: the delete limiter can only shrink towards its minimum of 4.
    assert d["limiter"]["endpoint_delete_parallel"] == 4
    # Consecutive attempts of one pod are at least kubelet's back-off apart.
    assert all(dt >= 10.0 for dt in result.retry_intervals)


@settings(max_examples=15, deadline=None)
@given(scenarios)
def test_same_seed_same_result(flags: dict[str, object]) -> None:
    a = Model(resolve_flags(**flags)).run().to_dict()  # type: ignore[arg-type]
    b = Model(resolve_flags(**flags)).run().to_dict()  # type: ignore[arg-type]
    assert a == b


def test_a_run_with_progress_ends_where_one_without_does() -> None:
    """A run played until resolved ends at its burst's resolution, not at the end of the slice it fell in.

    SimPy reschedules a stop event instead of marking it processed: read as "not stopped", a run with a
    progress bar (every run of more than 1,000 pods) went on to the next hundredth of its horizon
    (34,560 s instead of 34,188.7 s for 1,500 pods, with the churn of the extra minutes in its figures).
    """
    flags = {"entries": "7M", "pods": "80", "profile": "cilium-1.16", "map_ratio": "0.005", "seed": "846"}
    ticks: list[int] = []
    shown = Model(resolve_flags(**flags)).run(progress=lambda _, n, total: ticks.append(n))
    plain = Model(resolve_flags(**flags)).run()
    assert shown.ended_because == plain.ended_because == "resolved"
    assert shown.to_dict() == plain.to_dict()
    assert sum(ticks) == 100 and len(ticks) < 100  # it stopped early, and said the rest was done
