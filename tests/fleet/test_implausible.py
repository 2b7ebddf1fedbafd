"""A series no node could give (a map of 1e30 entries) is left out and named in its row, never ranked."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from tests.support.prometheus import pages, prometheus, wait_for

NODES = {"broken": (1e30, 1e30), "fine": (100_000.0, 1_000_000.0)}  # node -> (entries, capacity) of its TCP map


class _Exporter(Collector):
    def __init__(self, node: str) -> None:
        self.entries, self.capacity = NODES[node]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        entries = GaugeMetricFamily("ctwatch_entries", "Present entries.", labels=["map", "source"])
        entries.add_metric(["cilium_ct4_global", "bpf"], self.entries)
        capacity = GaugeMetricFamily("ctwatch_max_entries", "Capacity.", labels=["map", "source"])
        capacity.add_metric(["cilium_ct4_global", "bpf"], self.capacity)
        yield entries
        yield capacity


def _page(path: str) -> str | None:
    node = path.strip("/").split("/")[0]
    if node not in NODES:
        return None
    registry = CollectorRegistry()
    registry.register(_Exporter(node))
    return generate_latest(registry).decode()


def test_an_implausible_series_is_named_and_left_out(tmp_path: Path) -> None:
    with pages(_page) as address:
        sd = [
            {"targets": [address], "labels": {"instance": node, "__metrics_path__": f"/{node}/metrics"}}
            for node in NODES
        ]
        with prometheus(tmp_path / "p", sd) as url:
            wait_for(url, "count(ctwatch_entries)", 2.0)
            out = subprocess.run(
                [sys.executable, "-m", "ctsim", "fleet", "--prometheus-url", url, "--json"],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = {r["node"]: r for r in json.loads(out.stdout)["nodes"]}
    broken, fine = rows["broken"], rows["fine"]
    assert broken["level"] == "unknown" and broken["maps"] == {}, broken
    said = " ".join(broken["flags"])
    assert 'ctwatch_entries{map="cilium_ct4_global",source="bpf"} = 1e+30 is implausible' in said, said
    assert 'ctwatch_max_entries{map="cilium_ct4_global"} = 1e+30 is implausible' in said, said
    assert fine["level"] == "ok" and fine["maps"]["cilium_ct4_global"]["entries"] == 100_000
    assert [r["node"] for r in json.loads(out.stdout)["nodes"]] == ["fine", "broken"]  # the unknown row last
