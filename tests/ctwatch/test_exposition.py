"""ctwatch's whole metrics page, its HTTP server, node_exporter's textfile collector, and the alerts."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
import tracemalloc
import urllib.request
from pathlib import Path

import yaml
from ctwatch.assess import Assessor, Thresholds
from ctwatch.exposition import SnapshotCollector, new_registry
from ctwatch.watcher import Config, Watcher
from prometheus_client import generate_latest

from ctsim.core.nft_layout import EndpointMix, Layout
from tests.ctwatch.env import FIXTURES, bpffs, copy_procfs, http_server, kube_proxy_table, pin_ct_map, serve_text
from tests.support.http import free_port
from tests.support.needs import need_binary

DEPLOY = Path(__file__).parents[2] / "watchdog" / "deploy"
GOLDEN = FIXTURES / "ctwatch-golden.prom"


def test_the_whole_metrics_page_matches_the_golden_file(tmp_path: Path) -> None:
    """As node_exporter does: fixtures in, the full page out, compared byte for byte."""
    kube_proxy_page = serve_text((FIXTURES / "kube-proxy-metrics.txt").read_text())
    with (
        bpffs() as root,
        http_server(serve_text((FIXTURES / "cilium-metrics.txt").read_text())) as url,
        http_server(kube_proxy_page) as kube_proxy_url,
        kube_proxy_table(Layout.TODAY, 300, EndpointMix.every(2)) as netns,
    ):
        pin_ct_map(root, "cilium_ct4_global", entries=30_000, max_entries=65_536)
        pin_ct_map(root, "cilium_ct_any4_global", entries=500, max_entries=16_384)
        pin_ct_map(root, "cilium_ct6_global", entries=7_000, max_entries=8_192, key_size=38)
        config = Config(
            procfs=str(copy_procfs(tmp_path)),
            bpffs=str(root),
            metrics_url=url,
            bpf_sample_budget_s=0.0,  # the configured rate, so the page is the same every run
            kube_proxy_netns=netns,
            kube_proxy_metrics_url=kube_proxy_url,
        )
        thresholds = Thresholds(burst=10, deadline_s=90.0)
        w = Watcher(
            config,
            Assessor(thresholds, 213_000.0),
            timer=lambda: 0.0,
            clock=lambda: 0.0,
            cpu_timer=lambda: 0.0,
            wall_clock=lambda: 1_800_000_000.0,
        )
        collector = SnapshotCollector(thresholds)
        collector.update(w.collect())
        page = generate_latest(new_registry(collector)).decode()
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(page)
    assert page == GOLDEN.read_text()


def test_serves_logs_once_and_recovers(tmp_path: Path) -> None:
    """A live ctwatch keeps serving while a source breaks, says so once, and recovers."""
    procfs = copy_procfs(tmp_path)
    count = procfs / "sys" / "net" / "netfilter" / "nf_conntrack_count"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctwatch", "--path.procfs", str(procfs), "--no-collector.bpf",
         "--no-collector.cilium_metrics", "--web.listen-address", f"127.0.0.1:{port}", "--interval", "1s"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:

        def up() -> str:
            """The page once a collection has run (the server answers before the first one ends)."""
            deadline = time.monotonic() + 10
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                        page = r.read().decode()
                    if 'ctwatch_source_up{source="nf_conntrack"}' in page or time.monotonic() > deadline:
                        return page
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                time.sleep(0.1)

        assert 'ctwatch_source_up{source="nf_conntrack"} 1.0' in up()
        count.unlink()  # the file disappears
        time.sleep(2.5)
        assert 'ctwatch_source_up{source="nf_conntrack"} 0.0' in up()
        count.write_text("17\n")  # and comes back
        time.sleep(2.5)
        page = up()
        assert 'ctwatch_source_up{source="nf_conntrack"} 1.0' in page
        assert 'ctwatch_entries{family="all",map="nf_conntrack",source="nf_conntrack"} 17.0' in page
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert err.count('"source down"') == 1  # once, not every cycle
    assert err.count('"source up"') == 1


def test_node_exporter_reads_the_textfile(tmp_path: Path) -> None:
    exporter = need_binary("prometheus-node-exporter")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    prom = textdir / "ctwatch.prom"
    p = subprocess.run(
        [sys.executable, "-m", "ctwatch", "--once", "--path.procfs", str(copy_procfs(tmp_path)),
         "--no-collector.bpf", "--no-collector.cilium_metrics", "--textfile", str(prom)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert not list(textdir.glob("*.tmp*"))  # written atomically: no temp file left behind
    port = free_port()
    node = subprocess.Popen(
        [exporter, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
         "--collector.textfile", f"--collector.textfile.directory={textdir}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    page = r.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        node.terminate()
        node.wait(timeout=10)
    assert 'ctwatch_entries{family="all",map="nf_conntrack",source="nf_conntrack"} 183421' in page
    assert "node_textfile_scrape_error 0" in page


def test_promtool_checks_and_unit_tests_the_alerts() -> None:
    promtool = need_binary("promtool")
    check = subprocess.run(
        [promtool, "check", "rules", "ctwatch-rules.yml"], cwd=DEPLOY, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    unit = subprocess.run(
        [promtool, "test", "rules", "ctwatch-rules.test.yml"], cwd=DEPLOY, capture_output=True, text=True
    )
    assert unit.returncode == 0, unit.stdout + unit.stderr


def test_the_prometheusrule_carries_the_same_groups() -> None:
    rules = yaml.safe_load((DEPLOY / "ctwatch-rules.yml").read_text())
    crd = yaml.safe_load((DEPLOY / "prometheusrule.yaml").read_text())
    assert crd["kind"] == "PrometheusRule"
    assert crd["spec"]["groups"] == rules["groups"]


def test_the_daemonset_is_least_privilege() -> None:
    ds = yaml.safe_load((DEPLOY / "daemonset.yaml").read_text())
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    (container,) = pod["containers"]
    caps = container["securityContext"]["capabilities"]
    assert caps == {"drop": ["ALL"], "add": ["BPF"]}
    assert all(m["readOnly"] for m in container["volumeMounts"])
    port = container["ports"][0]["containerPort"]
    assert not 9100 <= port <= 9999


def test_many_fast_cycles_keep_memory_flat(tmp_path: Path) -> None:
    with bpffs() as root, http_server(serve_text((FIXTURES / "cilium-metrics.txt").read_text())) as url:
        pin_ct_map(root, "cilium_ct4_global", entries=5_000, max_entries=8_192)
        config = Config(procfs=str(copy_procfs(tmp_path)), bpffs=str(root), metrics_url=url, bpf_sample_budget_s=0.001)
        w = Watcher(config, Assessor(Thresholds(), 213_000.0))
        collector = SnapshotCollector(Thresholds())
        registry = new_registry(collector)

        def cycles(n: int) -> None:
            for _ in range(n):
                collector.update(w.collect())
                generate_latest(registry)

        # Warm up: growth history and caches reach their bounds.
        cycles(300)
        tracemalloc.start()
        cycles(200)

        def held() -> int:
            """What ctwatch still references. Not what the cyclic collector has yet to free (urllib's
            request/response cycles), nor CPython's type-attribute cache: it keeps the last name
            looked up in each of its 4,096 slots, and the f-string names collector.py looks up
            fill it slowly (measured: 40-78 KB over 800 cycles on a busy host; ~4 KB without)."""
            gc.collect()
            sys._clear_type_cache()
            return tracemalloc.get_traced_memory()[0]

        first = held()
        cycles(800)
        second = held()
        tracemalloc.stop()
    assert second - first < 64 * 1024, (first, second)
