"""A fleet mid-upgrade, in a real Prometheus: each Cilium-only node projected with its own release."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ctsim.core.defaults import CT_MAPS
from tests.fleet.fleet_pages import Node, render, sd_targets
from tests.support.prometheus import pages, prometheus, wait_for

TCP, ANY = CT_MAPS["ipv4"]
MAPS = {TCP: (4_000_000, 1 << 23), ANY: (1_000_000, 1 << 22)}
VERSIONS = {"old": "1.16.5", "mid": "1.19.4", "new": "1.20.2", "unread": None}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    nodes = [
        Node(f"n-{name}", "prod", ctwatch=False, cilium=True, maps=dict(MAPS), capacity=True, version=version)
        for name, version in VERSIONS.items()
    ]
    # A tuned agent reporting where its limiter is (parallel 3, burst 3, 0.02/s), and one exporting only the mean.
    nodes[0].limiter_mean, nodes[0].limiter_parallel, nodes[0].limiter_rate = 10.0, 3, (0.02, 3)
    nodes[2].limiter_mean, nodes[2].limiter_parallel = 10.0, 2
    by = {n.name: n for n in nodes}
    with pages(lambda path: render(by, path)) as address:
        sd = sd_targets(address, nodes)
        with prometheus(tmp_path_factory.mktemp("prom"), sd, scrape_interval="2s") as prom:
            wait_for(prom, "count(up == 1)", len(sd))
            wait_for(prom, "count(cilium_version)", 3)
            yield prom


def _run(*args: str) -> dict[str, Any]:
    p = subprocess.run([sys.executable, "-m", "ctsim", *args, "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_each_node_is_projected_with_its_own_release(url: str) -> None:
    rows = {r["node"]: r for r in _run("fleet", "--prometheus-url", url)["nodes"]}
    assert {n: rows[f"n-{n}"]["release"] for n in VERSIONS} == {
        "old": "v1.16.5", "mid": "v1.19.4", "new": "v1.20.2", "unread": None
    }  # fmt: skip
    old, new, unread = rows["n-old"], rows["n-new"], rows["n-unread"]
    assert old["release_source"] == 'cilium_version{version="1.16.5"}'
    # The same maps: per entry at 213,000/s on 1.16.5, in batches on 1.20.2; without a release, the fleet's --profile.
    assert old["walk_seconds"]["ipv4"] == pytest.approx(5_000_000 / 213_000)
    assert new["walk_seconds"]["ipv4"] < old["walk_seconds"]["ipv4"] / 5
    assert unread["walk_seconds"] == old["walk_seconds"]
    assert old["walk_rate"]["ipv4"]["short"] == "cilium-1.16" and new["walk_rate"]["ipv4"]["short"] == "cilium-1.20"
    assert any("no GC duration: v1.19.4 observes 0 s" in u for u in rows["n-mid"]["unknown"])
    assert not any("no GC duration" in u for u in old["unknown"] + new["unknown"])


def test_the_wide_table_shows_each_release(url: str) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "ctsim", "fleet", "--prometheus-url", url, "--wide"],
        capture_output=True, text=True, timeout=120, env={"COLUMNS": "250", "PATH": ""}, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "v1.20.2" in p.stdout and "v1.16.5" in p.stdout


def test_run_from_prometheus_plays_the_node_s_release(url: str) -> None:
    doc = _run("run", "--from-prometheus", url, "--node", "n-new", "--pods", "10")
    assert doc["inputs"]["release"] == "v1.20.2" and doc["inputs"]["profile"] == "cilium-1.20"
    assert doc["inputs"]["origins"]["release"] == 'live: cilium_version{version="1.20.2"} of n-new'
    assert not any("upgrade" in m["action"] for m in doc["advice"]["mitigations"])  # it walks in batches already
    old = _run("run", "--from-prometheus", url, "--node", "n-old", "--pods", "10")
    assert old["inputs"]["release"] == "v1.16.5"
    given = _run("run", "--from-prometheus", url, "--node", "n-new", "--pods", "10", "--profile", "cilium-1.18")
    assert given["inputs"]["release"] == "v1.18.12"  # a --profile given names the release: the node's is not taken


def test_run_from_prometheus_starts_the_limiter_where_the_node_reports_it(url: str) -> None:
    """limit, burst and parallel from the node's series, the origin the series; only a mean: AutoAdjust's, said."""
    doc = _run("run", "--from-prometheus", url, "--node", "n-old", "--pods", "10")
    start = doc["limiter"]["start"]
    assert (start["endpoint_create_parallel"], start["endpoint_create_burst"]) == (3, 3)
    assert start["endpoint_create_rate_per_s"] == 0.02
    assert doc["inputs"]["origins"]["limiter"].startswith("live: cilium_api_limiter_requests_in_flight")
    assert doc["inputs"]["create_limiter"] == {"parallel_requests": 3, "rate_limit": 0.02, "rate_burst": 3}
    mean_only = _run("run", "--from-prometheus", url, "--node", "n-new", "--pods", "10")
    assert "create_limiter" not in mean_only["inputs"]
    assert any("not all exported" in n for n in mean_only["inputs"]["notes"])
    rows = {r["node"]: r for r in _run("fleet", "--prometheus-url", url, "--simulate", "4")["nodes"]}
    command = rows["n-old"]["simulated"]["command"]
    assert "--create-limiter parallel-requests:3,rate-limit:0.02/s,rate-burst:3" in command, command
