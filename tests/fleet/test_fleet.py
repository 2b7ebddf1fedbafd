"""``ctsim fleet`` against a real Prometheus scraping 240 fixture nodes of every kind.

Every figure of a row is checked against ``ctsim.core.projection`` on the facts
the fixture node was built from; ranking, merging, selectors, exit codes and
output formats through the command line, as a user runs them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctsim.core.defaults import CT_MAPS, DEFAULT_REGENERATION
from ctsim.core.projection import FamilyWalk, burst_seconds, level_of, safe_burst
from ctsim.core.sizing import ct_map_sizes
from tests.fleet.fleet_pages import POST_FIRST, REGENERATION_BUCKETS, Node, fleet, render, sd_targets
from tests.support.prometheus import pages, prometheus, wait_for

N = 240
WINDOW = "20s"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Node]]]:
    nodes = fleet(N)
    by = {n.name: n for n in nodes}
    with pages(lambda path: render(by, path)) as address:
        sd = sd_targets(address, nodes)
        with prometheus(tmp_path_factory.mktemp("prom"), sd, scrape_interval="2s") as url:
            wait_for(url, "count(up == 1)", len(sd))
            # deriv() over the window needs samples across it: every target scraped 6 times at least.
            wait_for(url, f"count(count_over_time(up[{WINDOW}]) >= 6)", len(sd), timeout_s=90)
            yield url, by


def fleet_cmd(url: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctsim", "fleet", "--prometheus-url", url, "--window", WINDOW, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def fleet_json(url: str, *args: str) -> dict[str, Any]:
    out = fleet_cmd(url, "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _walks(node: Node, now: float) -> list[FamilyWalk]:
    walks = []
    for family, names in CT_MAPS.items():
        counts = [node.entries(name, now) for name in names if name in node.maps]
        if counts:
            # whole entries/s, as --rate takes it and the fleet reads it
            walks.append(FamilyWalk(family, tuple(float(c) for c in counts), float(round(node.rate))))
    return walks


def test_every_node_once_ranked_worst_first_with_figures_from_the_projection(live: tuple[str, dict[str, Node]]) -> None:
    url, by = live
    doc = fleet_json(url)
    rows = doc["nodes"]
    assert sorted(r["node"] for r in rows) == sorted(by)  # ctwatch and Cilium series of a node are one row
    for r in rows:  # merged across the labels that name it: ctwatch's instance, Cilium's node
        node = by[r["node"]]
        seen = {"ctwatch"} if node.ctwatch else set()
        if node.cilium and (node.pressure or node.gc_interval or node.gc_mean):
            seen.add("cilium")
        assert set(r["sources"]) <= seen and (r["sources"] or not seen), (r["node"], r["sources"])
        if node.ctwatch and node.cilium and "bpf" not in node.down:
            assert r["sources"] == ["cilium", "ctwatch"]
    assert len(doc["sources"]["queries"]) == 27  # one query per metric, whatever the fleet's size
    ratios = [r["deadline_ratio"] for r in rows if r["deadline_ratio"] is not None]
    assert ratios == sorted(ratios, reverse=True)
    known = [r for r in rows if r["deadline_ratio"] is not None]
    assert rows[: len(known)] == known  # nodes that cannot be projected come last
    checked = 0
    for r in known:
        node = by[r["node"]]
        if node.slope or "bpf" in node.down or not node.ctwatch:
            continue  # growing (checked apart) or counted by Cilium alone (checked apart)
        walks = _walks(node, time.time())
        assert r["pods"] == node.burst and r["deadline"] == node.deadline
        for w in walks:
            assert r["walk_seconds"][w.family] == pytest.approx(w.seconds, rel=1e-12)
            assert r["walk_rate"][w.family]["entries_per_second"] == round(node.rate)
        # The node's own regeneration where Cilium measured one (scope="total" less the CT-clean wait).
        # In milliseconds, as --regeneration-time takes it: the run a row suggests models the row's figure.
        regen = round(node.regeneration, 3) if node.cilium and node.regeneration is not None else DEFAULT_REGENERATION
        assert r["regeneration"] == regen, r["regeneration_source"]
        burst = burst_seconds(walks, node.burst) + r["regeneration"]
        assert r["burst_seconds"] == pytest.approx(burst, rel=1e-12)
        assert r["deadline_ratio"] == pytest.approx(burst / node.deadline, rel=1e-12)
        assert r["safe_burst"] == safe_burst(walks, node.deadline, r["regeneration"])
        assert r["level"] == level_of(burst / node.deadline)
        for name, (entries, cap) in node.maps.items():
            assert r["maps"][name]["entries"] == entries and r["maps"][name]["max_entries"] == cap
        checked += 1
    assert checked >= 100


def test_nodes_without_what_a_projection_needs_say_why(live: tuple[str, dict[str, Node]]) -> None:
    url, by = live
    rows = {r["node"]: r for r in fleet_json(url)["nodes"]}
    for name, node in by.items():
        r = rows[name]
        if not node.pressure and not node.ctwatch and not node.gc_entries:
            assert r["level"] == "unknown" and "no CT map count" in r["unknown"][0]
        elif (not node.ctwatch or "bpf" in node.down) and node.pressure and not node.capacity:  # no capacity
            assert r["level"] == "unknown" and "capacity (run ctwatch" in r["unknown"][0]
        if node.down:
            assert any("sources down: bpf" in f for f in r["flags"])
        if not node.ctwatch and node.gc_interval:
            assert r["gc_interval"] == node.gc_interval
        elif "cilium" in r["sources"] and not node.gc_interval:  # before 1.18, or a fixed interval: said, not 0
            assert r["gc_interval"] is None and "1.18 on" in r["gc_interval_source"], r["gc_interval_source"]
        if r["sources"] and node.limiter_mean is None:  # no limiter series: none shown, the default regeneration
            assert r["limiter"] == {} and r["regeneration_source"].startswith("default")


def _known(url: str, nodes: list[Node]) -> Iterator[tuple[Node, dict[str, Any]]]:
    """Each of ``nodes`` (ten at least) with its row, which must be projected and name nothing unknown."""
    rows = {r["node"]: r for r in fleet_json(url)["nodes"]}
    assert len(nodes) >= 10
    for node in nodes:
        r = rows[node.name]
        assert r["level"] != "unknown" and not r["unknown"], r
        yield node, r


def test_a_cilium_only_node_from_1_15_on_gives_its_own_capacity(live: tuple[str, dict[str, Node]]) -> None:
    """cilium_bpf_map_capacity{map_group="cilium_ct4_global"} with the pressure: the count, no flag needed."""
    url, by = live
    sized = [n for n in by.values() if n.capacity]
    for node, r in _known(url, sized):
        for name, (_, cap) in node.maps.items():
            m = r["maps"][name]
            assert m["max_entries"] == cap and m["capacity_source"] == f'cilium_bpf_map_capacity{{map_group="{name}"}}'
            assert m["entries_source"].startswith("cilium_bpf_map_pressure")
            assert abs(m["entries"] - node.entries(name, time.time())) <= 1  # pressure x capacity, rounded
    # A flag is a fallback: the capacity the agent reports wins over --node-memory's.
    again = {r["node"]: r for r in fleet_json(url, "--node-memory", "256Gi", "--map-ratio", "0.005")["nodes"]}
    for node in sized:
        tcp = CT_MAPS["ipv4"][0]
        assert again[node.name]["maps"][tcp]["max_entries"] == node.maps[tcp][1]


def test_without_pressure_a_node_is_counted_by_its_last_gc_pass(live: tuple[str, dict[str, Node]]) -> None:
    """No cilium_bpf_map_pressure series: GC's alive count, said to be of the last completed pass."""
    url, by = live
    for node, r in _known(url, [n for n in by.values() if n.gc_entries]):
        for name in node.maps:
            m = r["maps"][name]
            assert m["entries"] == node.entries(name, time.time()) and m["max_entries"] is None
            assert m["entries_source"].startswith("cilium_datapath_conntrack_gc_entries{family=")
        assert any("end of the last completed GC pass" in f for f in r["flags"])
        assert r["walk_seconds"]["ipv4"] > 0


def test_cilium_only_nodes_are_sized_from_node_memory(live: tuple[str, dict[str, Node]]) -> None:
    url, by = live
    rows = {r["node"]: r for r in fleet_json(url, "--node-memory", "256Gi", "--map-ratio", "0.005")["nodes"]}
    sizes = ct_map_sizes(256 << 30, 0.005)
    tcp, any_ = CT_MAPS["ipv4"]
    for name, node in by.items():
        if (node.ctwatch and "bpf" not in node.down) or not node.pressure or node.capacity:
            continue
        r = rows[name]
        assert tcp in r["maps"], (name, r)
        assert r["maps"][tcp]["max_entries"] == sizes.tcp and r["maps"][any_]["max_entries"] == sizes.any
        # Cilium's pressure is count / its own capacity; times the capacity given here:
        want = node.entries(tcp, time.time()) / node.maps[tcp][1] * sizes.tcp
        assert r["maps"][tcp]["entries"] == round(want)
        assert r["walk_rate"]["ipv4"]["source"] in (
            "profile cilium-1.16",
            'ctwatch_walk_rate_entries_per_second{source="measured"}',
        )


def test_growth_over_the_window_and_the_eta(live: tuple[str, dict[str, Node]]) -> None:
    url, by = live
    rows = {r["node"]: r for r in fleet_json(url)["nodes"]}
    growing = [n for n in by.values() if n.slope]
    assert len(growing) >= 20
    for node in growing:
        r = rows[node.name]
        # Prometheus stamps a sample when the scrape starts, the page counts when it answers: on a loaded
        # machine the delay varies, so the live slope is checked loosely. The exact check is
        # test_history's backfill (1e-6 per hour).
        assert r["growth_per_hour"] == pytest.approx(node.slope * 3600, rel=0.10)
        eta = r["seconds_until_deadline"]
        assert eta == 0.0 if r["deadline_ratio"] >= 1 else eta is None or eta > 0  # JSON: +Inf is null
    static = [n for n in by.values() if n.ctwatch and not n.slope and not n.down]
    assert all(rows[n.name]["growth_per_hour"] == 0 for n in static)


def test_a_projection_the_agent_disagrees_with_is_flagged(live: tuple[str, dict[str, Node]]) -> None:
    url, by = live
    rows = {r["node"]: r for r in fleet_json(url)["nodes"]}
    for name, node in by.items():
        if not node.gc_mean.get("ipv4") or not node.ctwatch:
            continue
        r = rows[name]
        assert r["observed_gc_seconds"]["ipv4"] == pytest.approx(node.gc_mean["ipv4"], rel=1e-6)
        off = node.gc_mean["ipv4"] / r["walk_seconds"]["ipv4"]
        assert any("GC passes took" in f for f in r["flags"]) == (not 0.5 <= off <= 2), (name, off, r["flags"])
        # The mean over every regeneration would be ~1/21 of a first build's wait; the buckets keep them apart.
        waits = r["observed_ct_clean"]
        first_builds = waits["regenerations"] / (POST_FIRST + 1)
        assert waits["regenerations"] == pytest.approx(first_builds * (POST_FIRST + 1), rel=1e-9)
        if node.ct_clean_mean > 1.0:
            assert waits["waits_over_split"] == pytest.approx(first_builds, rel=1e-6)
            low, high = waits["mean_over_split_s_at_least"], waits["mean_over_split_s_at_most"]
            # The short waits' sum is known to within their bucket (0, 5 ms]: that, per first build, is the spread.
            assert low - 1e-6 <= node.ct_clean_mean <= high + 1e-6, (name, waits)
            assert high - low <= POST_FIRST * REGENERATION_BUCKETS[0] + 1e-6, (name, waits)
            flagged = any("waited over 1s for CT clean" in f for f in r["flags"])
            assert flagged == (high < r["scrub_seconds"] / 2), (name, waits, r["scrub_seconds"])
            assert flagged == (int(name.split("-")[1]) % 24 == 9)
        else:  # a wait under the split: no first build is told from the rest, and nothing is flagged
            assert waits["waits_over_split"] == 0 and waits["mean_over_split_s_at_most"] is None
            assert not any("CT clean" in f for f in r["flags"])


def test_selector_pods_and_fail_on(live: tuple[str, dict[str, Node]]) -> None:
    url, by = live
    eu = fleet_json(url, "--selector", 'cluster="prod-eu"', "--pods", "3")
    assert sorted(r["node"] for r in eu["nodes"]) == sorted(n for n, v in by.items() if v.cluster == "prod-eu")
    assert all(r["pods"] == 3 and r["pods_source"] == "--pods" for r in eu["nodes"])
    crit = fleet_cmd(url, "--fail-on", "critical", "--limit", "3")
    assert crit.returncode == 1, crit.stderr
    # The least risky ok node: the first one is the nearest to warning, and a growing one can cross it between reads.
    one = [r for r in fleet_json(url)["nodes"] if r["level"] == "ok"][-1]
    ok = fleet_cmd(url, "--fail-on", "warning", "--selector", f'instance="{one["node"]}"')
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert one["node"] in ok.stdout


def test_csv_and_the_piped_table(live: tuple[str, dict[str, Node]], tmp_path: Path) -> None:
    url, _by = live
    at = f"{time.time() - 2:.3f}"  # one evaluation time for both reads: growing nodes move in the ranking
    out = fleet_cmd(url, "--csv", str(tmp_path / "fleet.csv"), "--time", at)
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO((tmp_path / "fleet.csv").read_text())))
    assert len(rows) == N and rows[0]["rank"] == "1"
    doc = fleet_json(url, "--time", at)
    assert doc["queried_at"] == float(at)
    assert [r["node"] for r in rows] == [r["node"] for r in doc["nodes"]]
    first = doc["nodes"][0]
    assert float(rows[0]["deadline_ratio"]) == pytest.approx(first["deadline_ratio"], rel=1e-12)
    lines = out.stdout.splitlines()  # piped: one full line per node, no cut words
    assert f"{N} nodes" in out.stdout and "…" not in out.stdout
    table = lines[: lines.index("notes:")] if "notes:" in lines else lines
    assert sum(1 for line in table if " node-" in line) == N
    notes = lines[len(table) + 1 : -1]  # below the table, a whole line a node: "  RANK NODE: note; note"
    assert all(re.match(r"  \d+ node-\S+: \S", line) for line in notes if not line.startswith(f"{N} nodes"))
    assert not math.isnan(float(rows[0]["walk_seconds_ipv4"]))


def test_simulate_runs_the_model_on_the_riskiest_nodes_with_their_own_facts(live: tuple[str, dict[str, Node]]) -> None:
    url, _by = live
    doc = fleet_json(url, "--simulate", "3", "--processes", "2", "--selector", 'cluster="prod-us"')
    simulated = [r for r in doc["nodes"] if r["simulated"]]
    assert [r["node"] for r in simulated] == [r["node"] for r in doc["nodes"][:3]]
    for r in simulated:
        cmd = r["simulated"]["command"]
        assert f"--entries {r['maps']['cilium_ct4_global']['entries']}" in cmd and f"--pods {r['pods']}" in cmd
        again = subprocess.run(
            [sys.executable, "-m", "ctsim", *shlex.split(cmd)[1:], "--json"], capture_output=True, text=True, check=True
        )
        assert json.loads(again.stdout)["verdict"] == r["simulated"]["verdict"]


def test_run_from_prometheus_starts_where_the_node_s_limiter_and_regeneration_are(
    live: tuple[str, dict[str, Node]],
) -> None:
    url, by = live
    rows = {r["node"]: r for r in fleet_json(url)["nodes"]}
    node = next(n for n in by.values() if n.limiter_mean is not None and n.ctwatch and not n.down and n.burst == 10)
    r = rows[node.name]
    assert r["limiter"]["mean_processing_s"] == round(node.limiter_mean, 3)  # ms, as the flag takes it
    assert r["limiter"]["parallel_requests"] == node.limiter_parallel
    assert r["limiter"]["refused_over_window"] > 0  # fail-parallel-wait's increase, not request-cancelled's
    out = subprocess.run(
        [sys.executable, "-m", "ctsim", "run", "--from-prometheus", url, "--node", node.name, "--pods", "10", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    inputs = doc["inputs"]
    assert inputs["regeneration_seconds"] == round(node.regeneration, 3)  # type: ignore[arg-type]
    assert inputs["origins"]["regeneration"].startswith("live: cilium_endpoint_regeneration_time_stats_seconds")
    assert inputs["create_mean_processing"] == round(node.limiter_mean, 3)
    # The limiter starts where the node reports it (parallel, rate, burst), the mean feeding its next AutoAdjust.
    assert inputs["origins"]["limiter"].startswith("live: cilium_api_limiter_requests_in_flight")
    assert doc["limiter"]["start"]["endpoint_create_parallel"] == node.limiter_parallel
    assert node.limiter_rate is not None and doc["limiter"]["start"]["endpoint_create_burst"] == node.limiter_rate[1]
    # One node, one answer: the row's safe burst and largest table are run's, on the same facts, to the entry
    # (a regeneration of 1.750437 s is 1.75 s in both, not 1.750437 s in one and 1.75 s in the other).
    assert doc["advice"]["safe_burst"] == r["safe_burst"], (doc["advice"], r["safe_burst"])
    assert doc["advice"]["max_entries_for_burst"] == r["max_entries_for_burst"], (doc["advice"], r)
    fresh = subprocess.run(
        [sys.executable, "-m", "ctsim", "run", "--from-prometheus", url, "--node", node.name, "--agent-state",
         "fresh", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(fresh.stdout)["inputs"]["origins"]["limiter"].startswith("default: a fresh agent")


def test_a_limiter_tuned_away_from_the_defaults_is_flagged(live: tuple[str, dict[str, Node]]) -> None:
    url, by = live
    rows = {r["node"]: r for r in fleet_json(url)["nodes"]}
    told = [n for n in by.values() if n.limiter_mean is not None and (n.cilium and "cilium" in rows[n.name]["sources"])]
    assert len(told) >= 20
    for node in told:
        flagged = any("endpoint-create: the agent reports" in f for f in rows[node.name]["flags"])
        assert flagged == (int(node.name.split("-")[1]) % 24 == 2), (node.name, rows[node.name]["flags"])
