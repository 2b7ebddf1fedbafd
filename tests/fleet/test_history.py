"""Growth and ETA against known slopes (a TSDB backfilled by promtool), and ``run --from-prometheus``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from ctsim.core.defaults import DEFAULT_REGENERATION
from ctsim.core.projection import FamilyWalk, max_entries_for_burst
from tests.support.prometheus import Series, backfill, history, prometheus

STEP = 15.0
HOUR = 3600.0
# node -> (TCP entries at END, slope entries/s, TCP capacity, non-TCP entries, walk rate, burst)
NODES = {
    "steady": (4_000_000, 0.0, 16_777_216, 1_000_000, 200_000.0, 10),
    "slow": (3_000_000, 25.0, 16_777_216, 500_000, 180_000.0, 10),
    "fast": (2_000_000, 400.0, 8_388_608, 250_000, 160_000.0, 20),
    "shrinking": (6_000_000, -100.0, 16_777_216, 0, 200_000.0, 10),
    "full": (16_000_000, 10.0, 16_777_216, 2_000_000, 150_000.0, 10),
}


def series(end: float) -> list[Series]:
    """An hour of ctwatch's series for NODES up to ``end``: the TCP count grows by its slope."""
    out: list[Series] = []
    for node, (tcp, slope, cap, any_, walk, pods) in NODES.items():
        tcp_map = {"instance": node, "source": "bpf", "family": "ipv4", "map": "cilium_ct4_global"}
        any_map = {**tcp_map, "map": "cilium_ct_any4_global"}
        out += [
            ("ctwatch_entries", tcp_map, lambda t, tcp=tcp, slope=slope: tcp - slope * (end - t)),
            ("ctwatch_entries", any_map, lambda t, any_=any_: any_),
            ("ctwatch_max_entries", tcp_map, lambda t, cap=cap: cap),
            ("ctwatch_max_entries", any_map, lambda t, cap=cap: cap // 2),
            ("ctwatch_walk_rate_entries_per_second", {"instance": node, "family": "ipv4", "source": "measured"},
             lambda t, walk=walk: walk),
            ("ctwatch_burst_pods", {"instance": node}, lambda t, pods=pods: pods),
        ]  # fmt: skip
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float]]:
    """The server and the last sample's time: 20 s ago, so that an instant query at now still sees it."""
    tmp = tmp_path_factory.mktemp("backfill")
    end = float(int(time.time()) - 20)
    data = backfill(tmp, history(series(end), end, STEP, int(HOUR / STEP) + 1))
    with prometheus(tmp / "server", tsdb=data) as url:
        yield url, end


def ctsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctsim", *args], capture_output=True, text=True, check=False)


def test_growth_and_eta_equal_the_known_slopes(served: tuple[str, float]) -> None:
    url, end = served
    out = ctsim("fleet", "--prometheus-url", url, "--time", f"{end:.0f}", "--window", "1h", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["node"]: r for r in json.loads(out.stdout)["nodes"]}
    assert set(rows) == set(NODES)
    for node, (tcp, slope, cap, any_, walk, pods) in NODES.items():
        r = rows[node]
        assert r["maps"]["cilium_ct4_global"]["entries"] == tcp
        assert r["maps"]["cilium_ct4_global"]["max_entries"] == cap
        assert r["growth_per_hour"] == pytest.approx(slope * 3600, abs=1e-6)
        walks = [FamilyWalk("ipv4", (float(tcp), float(any_)), walk)]
        limit = max_entries_for_burst(walks, pods, 90.0, DEFAULT_REGENERATION)
        total = tcp + any_
        eta = r["seconds_until_deadline"]
        if total >= limit:
            assert eta == 0.0, node
        elif slope <= 0:
            assert eta is None, node  # +Inf: not growing towards it (null in JSON)
        else:
            assert eta == pytest.approx((limit - total) / slope, rel=1e-9), node


def test_a_shorter_window_sees_the_same_linear_slope(served: tuple[str, float]) -> None:
    url, end = served
    out = ctsim("fleet", "--prometheus-url", url, "--time", f"{end:.0f}", "--window", "10m", "--json")
    rows = {r["node"]: r for r in json.loads(out.stdout)["nodes"]}
    assert rows["fast"]["growth_per_hour"] == pytest.approx(400 * 3600, rel=1e-9)


def test_run_from_prometheus_models_the_node_its_series_describe(served: tuple[str, float]) -> None:
    history, end = served
    assert time.time() - end < 290, "the last sample must be inside the 5-minute lookback of a query at now"
    tcp, _, cap, any_, walk, _ = NODES["fast"]
    out = ctsim("run", "--from-prometheus", history, "--node", "fast", "--pods", "20", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    s = doc["inputs"]
    assert s["entries"] == tcp and s["any_entries"] == any_ and s["max_entries"] == cap
    assert s["any_max_entries"] == cap // 2  # ctwatch_max_entries{map="cilium_ct_any4_global"}, not the preset's
    assert s["walk_rate"] == round(walk)
    origins = s["origins"]
    assert origins["entries"].startswith('live: ctwatch_entries{map="cilium_ct4_global",source="bpf"} of fast')
    assert origins["walk_rate"].startswith("live: ctwatch_walk_rate_entries_per_second")
    assert origins["capacity"].startswith("live: ctwatch_max_entries")
    assert 'non-TCP live: ctwatch_max_entries{map="cilium_ct_any4_global"} of fast' in origins["capacity"]
    assert origins["churn"].startswith("preset")  # still assumed, and said so
    # The fleet's row for that node says what the run says: one node, one answer.
    fleet = json.loads(ctsim("fleet", "--prometheus-url", history, "--pods", "20", "--json").stdout)
    (row,) = [r for r in fleet["nodes"] if r["node"] == "fast"]
    assert row["safe_burst"] == doc["advice"]["safe_burst"], (row["safe_burst"], doc["advice"])
    assert row["scrub_seconds"] == pytest.approx(doc["walk_seconds"], rel=1e-6)  # run takes --rate's whole entries/s
    given = ctsim("run", "--from-prometheus", history, "--node", "fast", "--entries", "1000", "--json")
    assert json.loads(given.stdout)["inputs"]["entries"] == 1000  # what the user gives wins
    assert json.loads(given.stdout)["inputs"]["origins"]["entries"] == "given"
    missing = ctsim("run", "--from-prometheus", history, "--node", "nosuch")
    assert missing.returncode == 2 and "--node: no ctwatch or Cilium CT series" in missing.stderr
    alone = ctsim("run", "--node", "fast")
    assert alone.returncode == 2 and "--from-prometheus" in alone.stderr
    text = ctsim("run", "--from-prometheus", history, "--node", "fast", "--pods", "20")
    assert "live: ctwatch_entries" in text.stdout and "from Prometheus: fast's series gave" in text.stdout
    gave = text.stdout.split("series gave ")[1].split(";")[0].split(", ")
    assert "capacity" in gave and len(gave) == len(set(gave)), gave  # both maps' capacities: said once


def test_plan_from_prometheus_takes_the_capacity_and_rate(served: tuple[str, float]) -> None:
    url, end = served
    assert time.time() - end < 290
    _, _, cap, _, walk, _ = NODES["slow"]
    out = ctsim("plan", "--from-prometheus", url, "--node", "slow", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["max_entries"] == cap and doc["inputs"]["walk_rate"] == walk
    assert doc["live"]["max_entries"]["series"] == 'ctwatch_max_entries{map="cilium_ct4_global"}'
    given = json.loads(ctsim("plan", "--from-prometheus", url, "--node", "slow", "--rate", "99000", "--json").stdout)
    assert given["inputs"]["walk_rate"] == 99000 and "rate" not in given["live"]
    text = ctsim("plan", "--from-prometheus", url, "--node", "slow")
    assert "--max-entries 16777216: live, ctwatch_max_entries" in text.stdout
    for args, word in ((["--node", "slow"], "--from-prometheus"), (["--from-prometheus", url], "--node")):
        bad = ctsim("plan", *args)
        assert bad.returncode == 2 and word in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
        bad = ctsim("run", *args)
        assert bad.returncode == 2 and word in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_simulate_with_replications_gives_each_node_its_verdict_shares(served: tuple[str, float]) -> None:
    url, end = served
    at = f"{end:.0f}"
    out = ctsim("fleet", "--prometheus-url", url, "--time", at, "--simulate", "2", "--replications", "6", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["nodes"]
    for r in rows[:2]:
        sim = r["simulated"]
        reps = sim["replications"]
        assert len(reps["seeds"]) == 6 and reps["summary"]["replications"] == 6
        counts = {v: s["count"] for v, s in reps["summary"]["verdicts"].items()}
        assert sum(counts.values()) == 6 and counts[sim["verdict"]] == max(counts.values())
        low, high = sim["verdict_ci95"]
        assert low <= sim["verdict_share"] <= high
    assert rows[2]["simulated"] is None
    again = ctsim("fleet", "--prometheus-url", url, "--time", at, "--simulate", "2", "--replications", "6", "--json")
    assert json.loads(again.stdout)["nodes"][:2] == rows[:2]  # same seed, same shares
    table = ctsim("fleet", "--prometheus-url", url, "--time", at, "--simulate", "1", "--replications", "4")
    assert "/4 " in table.stdout
    alone = ctsim("fleet", "--prometheus-url", url, "--replications", "4")
    assert alone.returncode == 2 and "--simulate" in alone.stderr
