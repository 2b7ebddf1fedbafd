"""``ctsim fleet``'s kube-proxy section against a real Prometheus scraping ctwatch's and kube-proxy's pages.

The pages are prometheus-client's rendering of the series ctwatch's kube_proxy source and kube-proxy export;
kube-proxy's histograms grow at every scrape, as a syncing kube-proxy's do.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

from tests.support.prometheus import pages, prometheus, wait_for

# node -> (projected full, projected partial, services) from ctwatch; (full, partial) each sync from kube-proxy
CTWATCH = {"node-a": (120.0, 2.5, 30_000), "node-b": (20.0, 0.6, 30_000), "node-c": (5.0, 0.2, 30_000)}
KUBE_PROXY = {"node-a": (118.0, 2.4), "node-b": (45.0, 0.9)}  # node-c's kube-proxy is not scraped


def _ctwatch_page(node: str) -> str:
    r = CollectorRegistry()
    full, partial, services = CTWATCH[node]
    Gauge("ctwatch_entries", "", ["source", "family", "map"], registry=r).labels(
        "bpf", "ipv4", "cilium_ct4_global"
    ).set(1000)
    Gauge("ctwatch_max_entries", "", ["source", "family", "map"], registry=r).labels(
        "bpf", "ipv4", "cilium_ct4_global"
    ).set(65536)
    g = Gauge("ctwatch_kube_proxy_projected_sync_seconds", "", ["sync", "layout"], registry=r)
    g.labels("full", "today").set(full)
    g.labels("partial", "today").set(partial)
    Gauge("ctwatch_kube_proxy_healthz_deadline_seconds", "", registry=r).set(60.0)
    Gauge("ctwatch_kube_proxy_services_estimated", "", registry=r).set(services)
    return generate_latest(r).decode()


class KubeProxy:
    """One kube-proxy's histograms: every scrape finds one more full and one more partial sync."""

    def __init__(self, full: float, partial: float) -> None:
        self.r = CollectorRegistry()
        buckets = [0.001 * 2**i for i in range(18)]
        self.full = Histogram("kubeproxy_sync_full_proxy_rules_duration_seconds", "", buckets=buckets, registry=self.r)
        self.partial = Histogram(
            "kubeproxy_sync_partial_proxy_rules_duration_seconds", "", buckets=buckets, registry=self.r
        )
        self.all = Histogram("kubeproxy_sync_proxy_rules_duration_seconds", "", buckets=buckets, registry=self.r)
        self.values = (full, partial)

    def page(self) -> str:
        full, partial = self.values
        for h, v in ((self.full, full), (self.partial, partial), (self.all, full), (self.all, partial)):
            h.observe(v)
        return generate_latest(self.r).decode()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proxies = {node: KubeProxy(*v) for node, v in KUBE_PROXY.items()}

    def render(path: str) -> str | None:
        kind, _, node = path.strip("/").partition("/")
        if kind == "ctwatch" and node in CTWATCH:
            return _ctwatch_page(node)
        if kind == "kube-proxy" and node in proxies:
            return proxies[node].page()
        return None

    with pages(render) as address:
        sd: list[dict[str, Any]] = []
        for node in CTWATCH:
            labels = {"job": "ctwatch", "instance": node, "__metrics_path__": f"/ctwatch/{node}"}
            sd.append({"targets": [address], "labels": labels})
        for node in KUBE_PROXY:
            labels = {"job": "kube-proxy", "node": node, "__metrics_path__": f"/kube-proxy/{node}"}
            sd.append({"targets": [address], "labels": labels})
        with prometheus(tmp_path_factory.mktemp("prom"), sd, scrape_interval="1s") as url:
            wait_for(url, "count(up == 1)", len(sd))
            wait_for(url, "count(count_over_time(kubeproxy_sync_full_proxy_rules_duration_seconds_count[1m]) >= 3)", 2)
            yield url


def _fleet(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctsim", "fleet", "--prometheus-url", url, *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_cluster_section_ranks_nodes_by_their_full_sync(live: str) -> None:
    p = _fleet(live, "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert len(doc["sources"]["queries"]) == 27
    section = doc["kube_proxy"]
    assert section["services"] == 30_000
    assert section["verdict"].startswith("critical")
    nodes = {n["node"]: n for n in section["nodes"]}
    assert [n["node"] for n in section["nodes"]] == ["node-a", "node-b", "node-c"]
    assert nodes["node-a"]["projected_full_s"] == 120.0 and nodes["node-a"]["deadline_ratio"] == 2.0
    # node-b: kube-proxy's own mean (45 s) is worse than ctwatch's projection (20 s), and counts
    assert nodes["node-b"]["observed_full_s"] == pytest.approx(45.0)
    assert nodes["node-b"]["deadline_ratio"] == pytest.approx(0.75)
    # node-c: no kube-proxy series, so no observed figure: None, never 0
    assert nodes["node-c"]["observed_full_s"] is None and nodes["node-c"]["sync_p99_s"] is None
    # the node ranking holds the CT nodes only: no row for a kube-proxy-only series
    assert sorted(r["node"] for r in doc["nodes"]) == sorted(CTWATCH)


def test_the_text_has_the_section_within_120_columns(live: str) -> None:
    p = _fleet(live)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kube-proxy (nftables)"))
    assert "~30,000 Services" in lines[start] and "critical" in lines[start]
    assert lines[start + 2].split()[0] == "node-a"
    assert all(len(line) <= 120 for line in lines[: start - 1]), "the node table stays within 120 columns"
