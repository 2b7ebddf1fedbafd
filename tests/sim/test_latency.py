"""The latency figures a run reports (``latency_s``): exact while small, bounded when large, and what a storm shows."""

from __future__ import annotations

import random

import pytest

from ctsim.inputs.scenario import resolve_flags
from ctsim.sim import latency
from ctsim.sim.latency import Latencies
from ctsim.sim.model import simulate
from ctsim.sim.result import percentile


def test_a_figure_is_numpys_percentile_while_every_value_is_kept() -> None:
    rng = random.Random(7)
    values = [rng.expovariate(0.1) for _ in range(1_000)]
    figure = Latencies()
    for v in values:
        figure.add(v)
    assert figure.to_dict() == {"p50": percentile(values, 0.5), "p90": percentile(values, 0.9), "max": max(values)}


def test_past_exact_a_percentile_is_its_keys_smallest_value_and_the_max_stays_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(latency, "EXACT", 1 << 12)  # the rule at a small scale: a fold every few thousand
    rng = random.Random(11)
    values = [rng.uniform(0.0, 90.0) for _ in range(latency.EXACT * 3 + 17)]
    figure = Latencies()
    for i, v in enumerate(values):
        figure.add(v)
        if i % 3_000 == 0:
            figure.fold()  # as a run does between its slices: nothing folds below EXACT
    figure.fold()
    assert len(figure) == len(values)
    assert figure.top() == max(values)
    for q in (0.5, 0.9):
        exact = sorted(values)[round((len(values) - 1) * q)]
        got = figure.percentile(q)
        assert got is not None and got <= exact and (exact - got) / exact < 2**-12


def test_repeated_values_are_counted_not_sorted_and_give_the_same_percentiles() -> None:
    """A storm's figures are mostly a few values (0 s, 60 s to an ulp): counted by value, as exact as a sort."""
    rng = random.Random(3)
    for _ in range(100):
        n = rng.randint(1, 2000)
        pool = [
            rng.choice([0.0, 60.0, 59.99999999999909, 90.0]) if rng.random() < 0.9 else rng.random() * 100
            for _ in range(n)
        ]
        figure = Latencies()
        for v in pool:
            figure.add(v)
        assert figure.to_dict() == {"p50": percentile(pool, 0.5), "p90": percentile(pool, 0.9), "max": max(pool)}


@pytest.mark.parametrize("exact", [1 << 20, 1 << 8], ids=["kept", "folded"])
def test_zeros_counted_are_zeros_observed(monkeypatch: pytest.MonkeyPatch, exact: int) -> None:
    """``add_zeros(n)`` (a storm's 404s, counted in bulk) is ``n`` times ``add(0.0)``, kept or folded."""
    monkeypatch.setattr(latency, "EXACT", exact)
    rng = random.Random(5)
    for _ in range(60):
        counted, observed = Latencies(), Latencies()
        for _ in range(rng.randint(1, 12)):
            zeros = rng.choice([0, 1, 3, rng.randint(0, 700)])
            values = [rng.choice([0.0, 60.0, rng.random() * 90]) for _ in range(rng.randint(0, 300))]
            for v in values:
                counted.add(v)
                observed.add(v)
            counted.add_zeros(zeros)
            for _ in range(zeros):
                observed.add(0.0)
            counted.fold()
            observed.fold()
        assert len(counted) == len(observed)
        assert counted.to_dict() == observed.to_dict()
        assert counted.top() == observed.top()


def test_an_empty_figure_is_null() -> None:
    assert Latencies().to_dict() is None


@pytest.fixture(scope="module")
def incident() -> dict[str, object]:
    return simulate(resolve_flags(entries="16M", pods="50")).to_dict()


def test_the_incidents_figures_are_the_storms_own(incident: dict[str, object]) -> None:
    lat = incident["latency_s"]
    assert isinstance(lat, dict)
    # Refused ADDs are answered at endpoint-create's 60 s max wait; none outlasts cilium-cni's 90 s.
    assert lat["cni_add"]["p50"] == pytest.approx(60.0)
    assert lat["cni_add"]["max"] == pytest.approx(90.0)
    assert lat["limiter_wait"]["endpoint-create"]["max"] <= 60.0
    # containerd's DEL gives up at 60 s; most DELs (no endpoint) are answered 404 at once.
    assert lat["cni_del"]["p50"] == 0.0 and lat["cni_del"]["max"] == pytest.approx(60.0)
    # A failed create's regeneration held its permit behind queued 75 s scrubs; the successes came after the GC.
    assert lat["ct_clean_wait_failed"]["p50"] > 75.0
    assert lat["ct_clean_wait_ok"]["max"] < lat["ct_clean_wait_failed"]["p50"]
    assert set(incident["latency_series"]) == set(lat)


def test_a_quiet_burst_waits_only_for_its_own_scrub() -> None:
    lat = simulate(resolve_flags(entries="100000", pods="2")).to_dict()["latency_s"]
    assert lat["ct_clean_wait_failed"] is None
    assert lat["cni_del"] is None  # nothing was torn down
    assert 0 < lat["ct_clean_wait_ok"]["max"] < 2.0
