"""Every answer is about the node the user describes: inputs and their origins, both maps, a warm
limiter, and time told no further than the run saw (issue "Your node, not the preset")."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctsim.cli.app import app
from ctsim.core.defaults import ENDPOINT_CREATE
from ctsim.core.errors import InputError
from ctsim.core.maptype import MapType
from ctsim.core.sizing import ct_map_sizes
from ctsim.inputs.scenario import UNTIL_RESOLVED_CAP, resolve_flags
from ctsim.sim.model import STORM_SETTLE
from ctsim.sim.result import STALL, Verdict
from tests.support.scenarios import run


def _run_json(*args: str) -> dict:
    r = CliRunner().invoke(app, ["run", *args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_given_memory_and_ratio_size_the_map_the_preset_only_fills_it() -> None:
    s = resolve_flags(node_memory="64Gi", map_ratio="0.0025", pods="10")
    sizes = ct_map_sizes(64 * 2**30, 0.0025)
    assert (
        (s.map(MapType.IPV4_TCP).max_entries, s.map(MapType.IPV4_ANY).max_entries)
        == (sizes.tcp, sizes.any)
        == (602_802, 301_401)
    )
    tcp = s.map(MapType.IPV4_TCP)
    assert tcp.entries == tcp.max_entries  # the analytics preset's map is full: so is this one
    assert s.origin("capacity").startswith("derived: dynamic sizing, --node-memory 64Gi x --map-ratio 0.0025")
    assert s.origin("entries").startswith("derived: preset analytics's share")
    assert run(node_memory="64Gi", map_ratio="0.0025", pods="10").verdict == Verdict.OK


def test_a_static_preset_sizes_a_given_memory_with_helms_ratio_and_says_so() -> None:
    s = resolve_flags(preset="standard", node_memory="64Gi")
    assert s.map(MapType.IPV4_TCP).max_entries == ct_map_sizes(64 * 2**30, 0.0025).tcp
    assert any("Helm chart's default" in n for n in s.notes)
    # The preset's share of its own 262,144-entry map, on the sized one.
    assert s.map(MapType.IPV4_TCP).entries == round(250_000 / 262_144 * s.map(MapType.IPV4_TCP).max_entries)
    off = resolve_flags(preset="standard", node_memory="64Gi", map_ratio="0")  # static: the preset's own limit
    assert off.map(MapType.IPV4_TCP).max_entries == 262_144 and any("sizes nothing" in n for n in off.notes)
    static = resolve_flags(node_memory="64Gi", map_ratio="0")
    assert static.map(MapType.IPV4_TCP).max_entries == 524_288  # analytics has none: Cilium's


def test_entries_beyond_a_sized_map_are_clamped_and_beyond_a_preset_map_raise_it() -> None:
    sized = resolve_flags(node_memory="64Gi", entries="2M")
    assert sized.maps[0].entries == sized.maps[0].max_entries == 1_205_604
    assert any("clamped" in n for n in sized.notes) and sized.origin("entries") == "given, clamped to the map"
    preset = resolve_flags(preset="standard", entries="1M")
    assert preset.maps[0].entries == preset.maps[0].max_entries == 1_000_000
    assert "raised" in preset.origin("capacity")


def test_the_non_tcp_map_is_walked_after_the_tcp_map() -> None:
    tcp_only = run(entries="8M", pods="1", horizon="5m")
    both = run(entries="8M", any_entries="8M", pods="1", horizon="5m")
    assert both.walk_seconds == pytest.approx(2 * tcp_only.walk_seconds)
    fam = both.to_dict()["families"]["ipv4"]
    assert (fam["tcp_entries_at_start"], fam["any_entries_at_start"]) == (8_000_000, 8_000_000)
    # One scrub past the deadline on its own: the lone pod's first attempt times out.
    alone = run(entries="16Mi", any_entries="16Mi", pods="1", horizon="10m", expired_fraction="0")
    assert alone.walk_seconds > 90 and alone.counters.add_timeouts >= 1


def test_non_tcp_churn_fills_the_non_tcp_map_for_60s_after_each_flow() -> None:
    r = run(entries="0", any_churn="600/min", churn="0/s", conn_duration="1s", pods="1", horizon="30m")
    fam = r.to_dict()["families"]["ipv4"]
    # 10 flows/s, each entry expiring 60 s after its last packet and left for GC: 30 min of them.
    assert fam["entries_at_end"] == pytest.approx(10 * (30 * 60 - 60), abs=600)
    assert r.families[0].expired_at_end == pytest.approx(fam["entries_at_end"] - 10 * 60, abs=600)


def test_ipv6_non_tcp_entries_need_a_dual_stack_node() -> None:
    with pytest.raises(InputError, match="--ipv6-any-entries: give --ipv6-entries"):
        resolve_flags(ipv6_any_entries="1M")
    s = resolve_flags(entries="1M", ipv6_entries="1M", ipv6_any_entries="2M")
    assert (s.map(MapType.IPV6_TCP).entries, s.map(MapType.IPV6_ANY).entries) == (1_000_000, 2_000_000)


def test_a_warm_agent_starts_endpoint_create_where_autoadjust_left_it() -> None:
    d = _run_json("--entries", "16M", "--pods", "2", "--horizon", "1m")
    start = d["limiter"]["start"]
    walk = 16_000_000 / d["inputs"]["walk_rate"]
    assert start["mean_processing_s"] == pytest.approx(walk + 2.0)
    f = ENDPOINT_CREATE.estimated_processing / start["mean_processing_s"]
    assert start["endpoint_create_parallel"] == 2  # 4 + (4f - 4) / 2, at least min 2
    assert start["endpoint_create_burst"] == 2
    assert start["endpoint_create_rate_per_s"] == pytest.approx(0.5 * f)
    fresh = _run_json("--entries", "16M", "--pods", "2", "--horizon", "1m", "--agent-state", "fresh")["limiter"]
    assert fresh["start"] == {
        "endpoint_create_parallel": 4,
        "endpoint_create_burst": 4,
        "endpoint_create_rate_per_s": 0.5,
        "mean_processing_s": 0.0,
    }


def test_the_incident_plays_until_the_gc_pass_ends_it_and_stays_a_collapse() -> None:
    r = run(entries="16M", pods="50")
    assert r.verdict == Verdict.COLLAPSE
    assert r.ended_because == "resolved" and r.recovered_at == r.ended_at
    st = r.stall
    assert st is not None and st.ended_by is not None
    assert st.ended_by.start == 6 * 3600  # the drifted agent's next pass
    assert st.since == 0.0 and st.until is not None and st.until - st.since >= STALL
    assert 6 * 3600 < r.recovered_at < 6.5 * 3600


def test_a_fixed_horizon_says_what_it_did_not_see() -> None:
    out = CliRunner().invoke(app, ["run", "--entries", "16M", "--pods", "50", "--horizon", "1h"]).stdout
    assert "the next GC pass (at 6h) was past the run's end" in out
    assert "does not recover" not in out


def test_does_not_recover_only_past_the_gc_pass() -> None:
    # Nothing to delete: the pass at 6h changes nothing, and the run ends an hour after it.
    r = run(entries="16M", expired_fraction="0", churn="0/s", pods="50")
    assert r.verdict == Verdict.COLLAPSE and r.ended_because == "settled"
    assert r.ended_at == pytest.approx(r.gc.passes[0].end + STORM_SETTLE)
    out = CliRunner().invoke(app, ["run", "--entries", "16M", "--expired-fraction", "0", "--churn", "0/s"]).stdout
    assert "does not recover on its own" in out


def test_a_burst_that_drains_on_its_own_is_degraded_and_a_quick_one_ends_early() -> None:
    r = run(preset="standard", pods="50")
    assert r.verdict in (Verdict.OK, Verdict.DEGRADED) and r.ended_because == "resolved"
    assert r.ended_at < 3600
    capped = run(entries="16M", expired_fraction="0", churn="0/s", pods="2", gc_next_pass="3d")
    assert capped.ended_because in ("resolved", "cap")
    assert capped.ended_at <= UNTIL_RESOLVED_CAP


def test_advice_never_offers_what_the_run_already_uses_and_ranks_what_it_simulated() -> None:
    d = _run_json("--entries", "16M", "--pods", "50")
    offered = [m["flag"] for m in d["advice"]["mitigations"]]
    assert "--gc-interval 60s" in offered and "--gc-max-interval 1h" in offered
    ready = [m["all_ready_s"] for m in d["advice"]["mitigations"] if m["all_ready_s"] is not None]
    assert ready == sorted(ready)
    used = _run_json("--entries", "16M", "--expired-fraction", "0", "--churn", "0/s", "--gc-interval", "60s")
    flags = [m["flag"] for m in used["advice"]["mitigations"]]
    assert "--gc-interval 60s" not in flags and "--gc-max-interval 1h" not in flags
    assert "1 pod within" in CliRunner().invoke(app, ["run", "--entries", "16M", "--pods", "50"]).stdout


def test_a_batched_walk_pays_for_every_bucket_of_its_maps() -> None:
    from ctsim.core.profiles import PROFILES

    prof = PROFILES["cilium-1.18"]
    empty = run(entries="0", profile="cilium-1.18", pods="1", horizon="5m")
    capacity = sum(m.max_entries for m in empty.scenario.maps)  # an IPv4-only node's two maps
    assert empty.walk_seconds == pytest.approx(capacity * prof.bucket_seconds) and empty.walk_seconds > 0
    assert run(entries="0", pods="1", horizon="5m").walk_seconds == 0.0  # per entry: an empty map is free


def test_the_table_advised_for_a_burst_fits_it_with_the_bucket_term() -> None:
    from ctsim.core.projection import FamilyWalk, burst_seconds, max_entries_for_burst

    walks = [FamilyWalk("ipv4", (4e6, 1e6), 3e6, (16 * 2**20, 8 * 2**20), 5e-9)]  # 0.13 s of buckets per walk
    n = max_entries_for_burst(walks, 50, 90.0, 2.0)
    share = n / 5e6

    def at(s: float) -> float:
        return burst_seconds([w._replace(map_entries=tuple(e * s for e in w.map_entries)) for w in walks], 50)

    assert at(share) <= 88.0 < at(share * 1.001)


def test_plan_takes_the_same_maps_non_tcp_and_dual_stack() -> None:
    from ctsim.capacity import plan as planner

    facts = planner.parse_facts(
        churn="30/s", any_churn="10/s", ipv6_entries="0", ipv6_churn="20/s", drift_horizon="1d", burst="5"
    )
    state = planner.steady_state(facts, 0.0)
    v4_tcp, v4_any, v6_tcp, v6_any = state.peak_maps
    assert v4_tcp > 0 and v4_any > 0 and v6_tcp > 0 and v6_any == 0
    assert sum(state.peak_maps) == state.peak_entries
    burst = planner.burst_at(facts, state)
    s = burst.scenario
    assert tuple(m.entries for m in s.maps) == state.peak_maps  # IPv4 TCP, non-TCP, IPv6 TCP, non-TCP
    assert len(burst.walks) == 2


def test_ipv6_churn_fills_the_ipv6_maps() -> None:
    r = run(entries="0", ipv6_entries="0", churn="0/s", ipv6_churn="10/s", pods="1", horizon="10m")
    assert r.families[0].entries_at_end == 0 and r.families[1].entries_at_end > 0
    with pytest.raises(InputError, match="--ipv6-churn: give --ipv6-entries"):
        resolve_flags(ipv6_churn="10/s")


def test_a_flag_with_no_effect_is_said() -> None:
    fixed = resolve_flags(gc_interval="60s", gc_max_interval="1h", gc_initial_interval="5m")
    assert sum("has no effect" in n for n in fixed.notes) == 2
    quiet = resolve_flags(churn="0/s", conn_duration="5m")
    assert any("--conn-duration has no effect" in n for n in quiet.notes)
    assert not any("no effect" in n for n in resolve_flags(churn="10/s", conn_duration="5m").notes)


def test_an_upgrade_is_not_offered_when_rate_fixes_every_walk() -> None:
    flags = [
        m["flag"] for m in _run_json("--entries", "16M", "--pods", "50", "--rate", "213000")["advice"]["mitigations"]
    ]
    assert "--profile cilium-1.18" not in flags and "--gc-interval 60s" in flags
