"""The datapath's fill-up signals and per-family GC passes, release by release (cilium #40820, #39504)."""

from __future__ import annotations

import pytest

from ctsim.core.errors import InputError
from ctsim.core.gc_interval import GCPolicy
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import simulate

# A dual-stack node whose IPv4 map signals every 10 minutes, its IPv6 map filling with short flows.
NODE = {
    "entries": "4M",
    "ipv6_entries": "2M",
    "ipv6_churn": "2000/min",
    "pods": "1",
    "agent_state": "fresh",
    "horizon": "2d",
}


def _run(version: str, **flags: str) -> dict[str, object]:
    return simulate(resolve_flags(**NODE, cilium_version=version, **flags)).to_dict()


@pytest.mark.parametrize("version", ["1.16.5", "1.17.8", "1.18.1"])
def test_before_the_fix_a_signalled_family_starves_the_other(version: str) -> None:
    """Every signalled IPv4 pass restarts the interval's timer: the full pass, and so IPv6's, never comes."""
    d = _run(version, ct_fill_signals="ipv4=6/h")
    gc = d["gc"]
    assert gc["runs"]["ipv4"] > 250 and gc["runs"]["ipv6"] <= 2
    assert gc["woken_by"].count("signal") > 250
    v6 = d["families"]["ipv6"]
    assert v6["expired_at_end"] > 0.9 * v6["entries_at_end"]  # IPv6's map is all expired entries, never collected


def test_from_1_18_2_a_partial_pass_keeps_the_full_pass_deadline() -> None:
    """529cdc9a96 (backport caa264c05c): IPv6 is collected at the full pass's interval however often IPv4 signals."""
    old, new = _run("1.18.1", ct_fill_signals="ipv4=6/h"), _run("1.18.2", ct_fill_signals="ipv4=6/h")
    assert new["gc"]["runs"]["ipv6"] > 50 * old["gc"]["runs"]["ipv6"]
    assert new["families"]["ipv6"]["entries_at_end"] < old["families"]["ipv6"]["entries_at_end"] / 5


def test_from_1_19_every_pass_walks_every_family_and_ct_fill_is_never_sent() -> None:
    nat = _run("1.19.4", nat_fill_signals="ipv4=6/h")
    assert nat["gc"]["runs"]["ipv4"] == nat["gc"]["runs"]["ipv6"] > 250  # 1b95bf097d
    assert all(families == ["ipv4", "ipv6"] for families in nat["gc"]["pass_families"])
    ct = _run("1.19.4", ct_fill_signals="ipv4=6/h")  # 01dbe8dae0: the datapath sends none
    assert "signals" not in ct["gc"] and "woken_by" in ct["gc"] and "signal" not in ct["gc"]["woken_by"]
    assert any("never sends a CT-fill signal" in n for n in ct["inputs"]["notes"])


def test_signals_sent_while_a_pass_runs_are_dropped() -> None:
    d = simulate(resolve_flags(entries="16M", pods="1", horizon="1h", ct_fill_signals="ipv4=1/min")).to_dict()
    signals = d["gc"]["signals"]
    # One a minute from 1m; the one at the horizon is not played (a run stops before its horizon's events).
    assert sum(signals["handled"].values()) + sum(signals["dropped_while_a_pass_ran"].values()) == 59
    assert signals["dropped_while_a_pass_ran"]["ipv4"] > 0  # the first pass walks 16M entries for over a minute
    assert d["gc"]["woken_by"][0] == "signal"  # a warm agent's next pass was 6h away


def test_a_partial_pass_counts_down_to_the_full_pass_or_caches_a_shorter_interval() -> None:
    p = GCPolicy(capped_cache=True)
    assert p.after_pass(0.0, 0.0, full=True, now=0.0) == 300.0  # the first full pass: 5m, cached, due at 300 s
    assert p.after_pass(100.0, 0.0, full=False, now=100.0) == 200.0  # partial: the rest of the full pass's wait
    assert p.cached_interval == 300.0
    # Its own interval, shorter than the 100 s left: 0.5 scaled by 300/100 caps at 0.9, 300 s x 0.1; cached.
    assert p.after_pass(100.0, 0.5, full=False, now=200.0) == 30.0
    assert p.cached_interval == 30.0
    a = GCPolicy(capped_cache=False)  # up to 1.18.1 every pass waits a fresh interval
    assert a.after_pass(0.0, 0.0, full=True, now=0.0) == 300.0
    assert a.after_pass(100.0, 0.0, full=False, now=100.0) == 300.0


def test_a_family_the_node_lacks_cannot_be_signalled() -> None:
    with pytest.raises(InputError, match="no IPv6 family"):
        resolve_flags(pods="1", nat_fill_signals="ipv6=1/h")
    with pytest.raises(InputError, match="cannot read"):
        resolve_flags(pods="1", ct_fill_signals="ipv5=1/h")
