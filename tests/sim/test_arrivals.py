"""Pods at their own arrival times (``Given.arrivals``, what ``ctsim backtest`` plays)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctsim.core.errors import InputError
from ctsim.inputs.given import parse_given
from ctsim.inputs.scenario import resolve
from ctsim.sim.model import Model, simulate
from ctsim.sim.parking import Parking
from tests.sim.test_parking import _fingerprint


def _scenario(arrivals: list[float], entries: str = "4Mi", horizon: str = "1h", seed: int = 1):  # type: ignore[no-untyped-def]
    g = parse_given(entries=entries, horizon=horizon, seed=seed, expired_fraction="0")
    return resolve(dataclasses.replace(g, pods=len(arrivals), arrivals=tuple(arrivals)))


def test_each_pod_reaches_its_first_add_at_its_own_time() -> None:
    arrivals = [0.0, 0.0, 5.0, 300.0, 1200.0]
    model = Model(_scenario(arrivals, entries="256Ki"))
    result = model.run()
    assert [p.created_at for p in result.pods] == arrivals
    # A small table: each pod is Ready a regeneration after it came, whenever that was.
    assert all(p.ready_at is not None and p.ready_at - p.created_at < 10 for p in result.pods)
    assert result.to_dict()["inputs"]["arrivals"] == arrivals


def test_a_run_without_arrivals_is_unchanged() -> None:
    doc = simulate(resolve(parse_given(entries="4Mi", pods="20"))).to_dict()
    assert "arrivals" not in doc["inputs"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(0, 600), min_size=1, max_size=80).map(lambda xs: sorted(float(x) for x in xs)),
    st.sampled_from(["1Mi", "4Mi", "16M"]),
    st.integers(0, 2**16),
)
def test_parking_plays_arrivals_as_the_processes_would(arrivals: list[float], entries: str, seed: int) -> None:
    """Whole-second arrivals, many at one instant (kube_pod_created's resolution): parked or played, the same."""
    s = _scenario(arrivals, entries=entries, seed=seed)
    worth_it = Parking.worth_it
    Parking.worth_it = lambda self, pod: True  # type: ignore[method-assign]  # park wherever it may
    try:
        parked = _fingerprint(Model(s))
    finally:
        Parking.worth_it = worth_it  # type: ignore[method-assign]
    assert parked == _fingerprint(Model(s, parking=False))


def test_a_late_arrival_is_not_settled_away() -> None:
    """Without a horizon a run ends once the storm settles; a pod still to come is not settled."""
    g = parse_given(entries="256Ki", expired_fraction="0")
    s = resolve(dataclasses.replace(g, pods=2, arrivals=(0.0, 5000.0)))
    result = simulate(s)
    assert all(p.ready for p in result.pods) and result.ended_because == "resolved"


@pytest.mark.parametrize(("arrivals", "pods"), [((5.0, 1.0), 2), ((0.0, 1.0), 3), ((-1.0,), 1), ((0.0, 7200.0), 2)])
def test_arrivals_out_of_order_or_out_of_the_run_are_refused(arrivals: tuple[float, ...], pods: int) -> None:
    g = dataclasses.replace(parse_given(entries="1Mi", horizon="1h"), pods=pods, arrivals=arrivals)
    with pytest.raises(InputError, match="arrivals"):
        resolve(g)
