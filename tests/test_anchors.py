"""The published figures, asserted from the model's own output (spec §1)."""

import pytest

from ctsim.projection import walk_seconds
from ctsim.sizing import LIMIT_TABLE_MAX, ct_map_sizes

from .conftest import run


def test_walk_of_7m_entries() -> None:
    r = run(entries="7M", pods="1", horizon="1m")
    assert round(r.walk_seconds, 1) == 32.9


def test_walk_of_a_full_16mi_map() -> None:
    r = run(entries="16Mi", pods="1", horizon="1m")
    assert round(r.walk_seconds, 1) == 78.8


def test_standard_node_walk_is_one_to_two_seconds() -> None:
    r = run(preset="standard", entries="262144", pods="1", horizon="1m")
    assert 1.0 <= r.walk_seconds <= 2.0


def test_stop_growth_threshold_on_a_full_map() -> None:
    # 5 % of 16,777,216 must be deleted per pass to stop the interval growing.
    assert int(LIMIT_TABLE_MAX * 0.05) + 1 == 838_861


def test_dynamic_sizing_of_the_incident_node() -> None:
    sizes = ct_map_sizes(2 * 2**40, 0.005)
    assert sizes.tcp == sizes.any == LIMIT_TABLE_MAX
    assert ct_map_sizes(16 * 2**30, 0.0025).tcp == 1_060_485


def test_the_analytics_burst_collapses(incident) -> None:
    d = incident.to_dict()
    assert d["verdict"] == "collapse"
    assert d["pods"]["ready_first_attempt"] <= 1
    assert d["cni"]["add_timeouts"] > 0
    assert d["lock"]["orphaned_walk_seconds"] > 0
    # No recovery while the table stays large: the GC pass is hours away.
    assert d["pods"]["ready"] < d["pods"]["requested"]
    assert d["table"]["entries_at_end"] >= d["table"]["entries_at_start"]


def test_the_analytics_preset_collapses_too() -> None:
    d = run(preset="analytics").to_dict()
    assert d["verdict"] == "collapse"
    assert d["pods"]["ready_first_attempt"] <= 1


def test_fixed_60s_gc_recovers_under_the_same_churn() -> None:
    d = run(entries="16M", pods="50", gc_interval="60s").to_dict()
    assert d["verdict"] in ("ok", "degraded")
    assert d["pods"]["ready"] == 50
    assert d["gc"]["intervals_s"][0] == 60


def test_the_standard_node_takes_the_burst() -> None:
    d = run(preset="standard", pods="50").to_dict()
    assert d["verdict"] in ("ok", "degraded")
    assert d["pods"]["ready"] == 50


def test_batched_walk_is_faster() -> None:
    per_entry = run(entries="16M", pods="1", horizon="1m")
    batched = run(entries="16M", pods="1", horizon="1m", profile="cilium-1.17")
    assert batched.walk_seconds == pytest.approx(per_entry.walk_seconds / 10)


def test_projection_is_the_models_walk() -> None:
    r = run(entries="5M", pods="1", horizon="1m")
    assert r.walk_seconds == walk_seconds(5_000_000, 213_000)


def test_advice_is_checked_by_the_model() -> None:
    incident = run(entries="16M", pods="50", horizon="10m")
    assert incident.advice.safe_burst == 1
    # A table just under the advised size for a 10-pod burst takes that burst.
    advised = run(entries="16M", pods="10", horizon="1m").advice.max_entries_for_burst
    fits = run(entries=str(int(advised * 0.95)), expired_fraction="0", pods="10", horizon="10m")
    assert fits.verdict == "ok"
    # And one twice that size does not.
    too_big = run(entries=str(advised * 2), expired_fraction="0", pods="10", horizon="10m")
    assert too_big.to_dict()["pods"]["ready_first_attempt"] < 10
