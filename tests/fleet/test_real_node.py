"""The whole chain on a real node: pinned BPF maps -> ctwatch -> a real Prometheus -> ``ctsim fleet``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from ctsim.core.defaults import DEFAULT_REGENERATION
from ctsim.core.projection import FamilyWalk, burst_seconds
from tests.ctwatch.env import bpffs, copy_procfs, pin_ct_map
from tests.support.http import free_port
from tests.support.prometheus import prometheus, wait_for


def test_a_real_ctwatch_on_real_pinned_maps_read_back_through_prometheus(tmp_path: Path) -> None:
    with bpffs() as root:
        pin_ct_map(root, "cilium_ct4_global", entries=30_000, max_entries=65_536)
        pin_ct_map(root, "cilium_ct_any4_global", entries=4_000, max_entries=32_768)
        port = free_port()
        ctwatch = subprocess.Popen(
            [sys.executable, "-m", "ctwatch", "--path.procfs", str(copy_procfs(tmp_path)), "--path.bpffs", str(root),
             "--no-collector.cilium_metrics", "--interval", "1s", "--burst", "12",
             "--web.listen-address", f"127.0.0.1:{port}"],
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            sd = [{"targets": [f"127.0.0.1:{port}"], "labels": {"instance": "worker-1", "job": "ctwatch"}}]
            with prometheus(tmp_path / "p", sd) as url:
                wait_for(url, 'count(ctwatch_entries{map="cilium_ct_any4_global"})', 1.0)
                # The row projects what ctwatch published: read its rate in the same instant.
                out = subprocess.run(
                    [sys.executable, "-m", "ctsim", "fleet", "--prometheus-url", url, "--json"],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
                assert out.returncode == 0, out.stderr
                doc = json.loads(out.stdout)
                at = str(doc["queried_at"])
                query = {"query": 'ctwatch_walk_rate_entries_per_second{family="ipv4"}', "time": at}
                rate_doc = httpx.post(f"{url}/api/v1/query", data=query, timeout=10).json()
        finally:
            ctwatch.terminate()
            ctwatch.wait(timeout=30)
    (row,) = doc["nodes"]
    assert row["node"] == "worker-1" and row["sources"] == ["ctwatch"]
    assert row["maps"]["cilium_ct4_global"] == {
        "family": "ipv4",
        "entries": 30_000,
        "max_entries": 65_536,
        "entries_source": 'ctwatch_entries{map="cilium_ct4_global",source="bpf"}',
        "capacity_source": 'ctwatch_max_entries{map="cilium_ct4_global"}',
    }
    assert row["maps"]["cilium_ct_any4_global"]["entries"] == 4_000
    rate = float(round(float(rate_doc["data"]["result"][0]["value"][1])))  # whole entries/s, as --rate takes it
    assert row["walk_rate"]["ipv4"] == {
        "entries_per_second": rate,
        "source": 'ctwatch_walk_rate_entries_per_second{source="measured"}',
        "short": "ctwatch (measured)",
    }
    walks = [FamilyWalk("ipv4", (30_000.0, 4_000.0), rate)]
    assert row["pods"] == 12 and row["pods_source"] == "ctwatch_burst_pods"
    assert row["burst_seconds"] == burst_seconds(walks, 12) + DEFAULT_REGENERATION
