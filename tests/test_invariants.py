"""Properties that hold for every scenario (hypothesis)."""

from __future__ import annotations

from collections.abc import Generator

import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctsim.model import Model
from ctsim.scenario import resolve

scenarios = st.fixed_dictionaries(
    {
        "entries": st.integers(0, 16_777_216).map(str),
        "pods": st.integers(1, 60).map(str),
        "expired_fraction": st.sampled_from(["0", "0.5", "0.9", "0.99", "1"]),
        "churn": st.sampled_from(["0/s", "30/s", "500/min", "50000/min", "2000/s"]),
        "gc_interval": st.sampled_from(["auto", "60s", "10s"]),
        "profile": st.sampled_from(["cilium-1.16", "cilium-1.17"]),
        "preset": st.sampled_from(["analytics", "standard"]),
        "horizon": st.sampled_from(["5m", "20m"]),
        "seed": st.integers(0, 2**16),
    }
)


def _watch(model: Model, seen: dict[str, int]) -> Generator[simpy.Event, None, None]:
    """Samples the node every 5 s: capacity and mutual exclusion must hold throughout."""
    family = model.node.families[0]
    while True:
        for ctmap in family.maps:
            seen["over_capacity"] += ctmap.present > ctmap.max_entries
        seen["two_holders"] += len(family.lock.users) > 1
        yield model.env.timeout(5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_every_run_keeps_its_invariants(flags: dict[str, object]) -> None:
    model = Model(resolve(**flags))  # type: ignore[arg-type]
    seen = {"over_capacity": 0, "two_holders": 0}
    model.env.process(_watch(model, seen))
    result = model.run()
    assert seen == {"over_capacity": 0, "two_holders": 0}
    assert result.lock_max_holders <= 1
    # No pod is lost: each is Ready, failed-and-retrying, or still pending.
    states = [p.state for p in result.pods]
    assert len(states) == result.scenario.pods
    assert set(states) <= {"ready", "retrying", "pending"}
    d = result.to_dict()
    assert d["pods"]["ready"] + d["pods"]["retrying"] + d["pods"]["pending"] == result.scenario.pods
    # Every ADD ends exactly one way, once its client is done.
    c = result.counters
    assert (
        c.add_ok + c.add_timeouts + c.add_429
        <= c.add_attempts
        <= c.add_ok + c.add_timeouts + c.add_429 + len(result.pods)
    )
    assert c.add_ok == d["pods"]["ready"]
    assert result.entries_at_end <= result.scenario.max_entries + result.scenario.any_max_entries


@settings(max_examples=15, deadline=None)
@given(scenarios)
def test_same_seed_same_result(flags: dict[str, object]) -> None:
    a = Model(resolve(**flags)).run().to_dict()  # type: ignore[arg-type]
    b = Model(resolve(**flags)).run().to_dict()  # type: ignore[arg-type]
    assert a == b


def _close(a: object, b: object) -> bool:
    """Equal, floats to 1e-9 relative: the fast-forward sums retry times in another order."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_fast_forwarded_storms_are_the_step_by_step_run(flags: dict[str, object]) -> None:
    """ctsim.storm skips certain 429s in bulk; every outcome must be the one of playing them out."""
    scenario = resolve(**flags)  # type: ignore[arg-type]
    step = Model(scenario, fast_forward=False).run()
    fast = Model(scenario, fast_forward=True).run()
    a, b = step.to_dict(), fast.to_dict()
    a.pop("sim"), b.pop("sim")
    assert _close(a, b)
    for p, q in zip(step.pods, fast.pods, strict=True):
        assert (p.attempts, [o for _, o in p.failures]) == (q.attempts, [o for _, o in q.failures])
        assert _close([t for t, _ in p.failures], [t for t, _ in q.failures])
