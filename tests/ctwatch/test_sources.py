"""ctwatch's sources against the real things: netns conntrack, pinned maps, HTTP servers."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ctwatch.assess import Assessor, Thresholds
from ctwatch.readings import MapReading, Pressure
from ctwatch.sources.cilium_metrics import AgentGC
from ctwatch.watcher import Config, Watcher
from prometheus_client.parser import text_string_to_metric_families

from ctsim.kernel import netns_conntrack as nfct
from ctsim.kernel.bpf import BPFError, BPFMap
from tests.ctwatch.env import FIXTURES, bpffs, copy_procfs, http_server, pin_ct_map, serve_text
from tests.support.http import free_port
from tests.support.needs import need_netns


def samples(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
    }


def ctwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctwatch", "--once", *args], capture_output=True, text=True, timeout=120, check=False
    )


def watcher(**config: object) -> Watcher:
    return Watcher(Config(**config), Assessor(Thresholds(), 213_000.0))  # type: ignore[arg-type]


# nf_conntrack
def test_procfs_fixture_is_read_like_node_exporter(tmp_path: Path) -> None:
    p = ctwatch("--path.procfs", str(copy_procfs(tmp_path)), "--no-collector.bpf", "--no-collector.cilium_metrics")
    assert p.returncode == 0, p.stderr
    s = samples(p.stdout)
    labels = (("family", "all"), ("map", "nf_conntrack"), ("source", "nf_conntrack"))
    assert s[("ctwatch_entries", labels)] == 183421
    assert s[("ctwatch_max_entries", labels)] == 262144
    assert s[("ctwatch_source_up", (("source", "nf_conntrack"),))] == 1


def test_netns_count_equals_the_kernels() -> None:
    need_netns()
    with nfct.temporary_netns("ctwatch-test") as name:
        nfct.fill(name, 321)
        kernel_count, kernel_max = nfct.stats(name)
        p = ctwatch("--netns", name, "--no-collector.bpf", "--no-collector.cilium_metrics")
    assert p.returncode == 0, p.stderr
    s = samples(p.stdout)
    labels = (("family", "all"), ("map", "nf_conntrack"), ("source", "nf_conntrack"))
    assert s[("ctwatch_entries", labels)] == kernel_count == 321
    assert s[("ctwatch_max_entries", labels)] == kernel_max


def test_netns_gone_marks_the_source_down_and_recovers() -> None:
    need_netns()
    with nfct.temporary_netns("ctwatch-test") as name:
        w = watcher(netns=name, toggles={"bpf": False, "cilium_metrics": False})
        assert w.collect().results["nf_conntrack"].up
    down = w.collect().results["nf_conntrack"]
    assert not down.up and down.error
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert w.collect().results["nf_conntrack"].up
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


# BPF maps
def test_counts_and_capacity_of_pinned_maps_match() -> None:
    with bpffs() as root:
        pin_ct_map(root, "cilium_ct4_global", entries=50_000, max_entries=65_536)
        pin_ct_map(root, "cilium_ct_any4_global", entries=1_000, max_entries=16_384)
        pin_ct_map(root, "cilium_ct6_global", entries=2_000, max_entries=8_192, key_size=38)
        p = ctwatch("--path.bpffs", str(root), "--no-collector.nf_conntrack", "--no-collector.cilium_metrics")
    assert p.returncode == 0, p.stderr
    s = samples(p.stdout)
    for name, family, n, cap in [
        ("cilium_ct4_global", "ipv4", 50_000, 65_536),
        ("cilium_ct_any4_global", "ipv4", 1_000, 16_384),
        ("cilium_ct6_global", "ipv6", 2_000, 8_192),
    ]:
        labels = (("family", family), ("map", name), ("source", "bpf"))
        assert s[("ctwatch_entries", labels)] == n
        assert s[("ctwatch_max_entries", labels)] == cap
    rate = s[("ctwatch_walk_rate_entries_per_second", (("family", "ipv4"), ("source", "measured")))]
    walk = s[("ctwatch_projected_walk_seconds", (("family", "ipv4"),))]
    assert walk == pytest.approx(51_000 / rate)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with BPFMap.open_pinned(str(path)) as m:
        for key in m.walk():
            h.update(key)
            h.update(m.last_value)
    return h.hexdigest()


def test_maps_are_opened_read_only_and_never_written() -> None:
    with bpffs() as root:
        pin_ct_map(root, "cilium_ct4_global", entries=20_000, max_entries=32_768)
        path = root / "tc" / "globals" / "cilium_ct4_global"
        before = _digest(path)
        with BPFMap.open_pinned(str(path), read_only=True) as m, pytest.raises(BPFError) as refused:
            m.update(b"\x01" * 14, b"\x02" * 56)
        assert refused.value.errno == errno.EPERM
        p = ctwatch("--path.bpffs", str(root), "--no-collector.nf_conntrack", "--no-collector.cilium_metrics")
        assert p.returncode == 0
        assert _digest(path) == before


def test_unexpected_key_size_is_a_down_source_not_a_crash() -> None:
    with bpffs() as root:
        pin_ct_map(root, "cilium_ct4_global", entries=10, max_entries=64, key_size=38)  # IPv6 key in the v4 slot
        p = ctwatch("--path.bpffs", str(root), "--no-collector.nf_conntrack", "--no-collector.cilium_metrics")
    assert p.returncode == 0
    assert samples(p.stdout)[("ctwatch_source_up", (("source", "bpf"),))] == 0
    assert "not a Cilium CT map" in p.stderr
    assert p.stderr.count("source down") == 1


def test_bpffs_unmounted_and_map_deleted_then_back() -> None:
    with bpffs() as root:
        pin_ct_map(root, "cilium_ct4_global", entries=1_000, max_entries=4_096)
        w = watcher(bpffs=str(root), toggles={"nf_conntrack": False, "cilium_metrics": False})
        assert w.collect().results["bpf"].up
        (root / "tc" / "globals" / "cilium_ct4_global").unlink()  # the agent deletes the map
        assert not w.collect().results["bpf"].up
        pin_ct_map(root, "cilium_ct4_global", entries=2_000, max_entries=4_096)
        again = w.collect().results["bpf"]
        assert again.up and again.of(MapReading)[0].entries == 2_000
    # bpffs itself is gone now (unmounted and removed)
    assert not w.collect().results["bpf"].up


# Cilium agent metrics
FIXTURE_PAGE = (FIXTURES / "cilium-metrics.txt").read_text()


def test_a_realistic_metrics_page_is_parsed() -> None:
    with http_server(serve_text(FIXTURE_PAGE)) as url:
        r = watcher(metrics_url=url, toggles={"nf_conntrack": False, "bpf": False}).collect().results["cilium_metrics"]
    assert r.up
    assert {p.map: p.ratio for p in r.of(Pressure)} == {"cilium_ct4_global": 0.75, "cilium_ct_any4_global": 0.125}
    assert [gc.interval_s for gc in r.of(AgentGC)] == [43200]


@pytest.mark.parametrize(
    ("name", "respond"),
    [
        ("slow", serve_text(FIXTURE_PAGE, delay_s=3.0)),
        ("garbage", serve_text("<html>502 Bad Gateway</html>\n\x00\x01 not metrics {{{")),
        ("empty", serve_text("")),
    ],
)
def test_a_bad_agent_is_a_down_source(name: str, respond: object) -> None:
    with http_server(respond) as url:  # type: ignore[arg-type]
        w = watcher(metrics_url=url, metrics_timeout_s=0.5, toggles={"nf_conntrack": False, "bpf": False})
        r = w.collect().results["cilium_metrics"]
    assert not r.up, name
    assert r.duration_s < 2.5


def test_an_agent_that_is_down_is_a_down_source() -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    r = watcher(metrics_url=url, toggles={"nf_conntrack": False, "bpf": False}).collect().results["cilium_metrics"]
    assert not r.up and "Connection refused" in r.error


def test_cilium_pressure_is_the_cheaper_source_and_skips_our_count() -> None:
    with bpffs() as root, http_server(serve_text(FIXTURE_PAGE)) as url:
        pin_ct_map(root, "cilium_ct4_global", entries=1_000, max_entries=65_536)
        pin_ct_map(root, "cilium_ct_any4_global", entries=10, max_entries=16_384)
        snap = watcher(bpffs=str(root), metrics_url=url, toggles={"nf_conntrack": False}).collect()
    (v4,) = [f for f in snap.families if f.family == "ipv4"]
    assert v4.entries_source == "cilium_metrics"
    assert v4.entries == round(0.75 * 65_536) + round(0.125 * 16_384)
    assert all(r.entries is None for r in snap.results["bpf"].of(MapReading))  # never counted


def test_a_new_source_is_one_registration_its_toggle_and_config_follow() -> None:
    """No field or flag to add by hand: ``Config(toggles=...)`` and ``--collector.<name>`` read the registry."""
    import inspect

    from ctwatch.cli import collector_toggles
    from ctwatch.collector import REGISTRY, Collector, register_collector

    register_collector(Collector("test_extra", "A source made by this test.", lambda cycle, result: None))
    try:
        assert "test_extra" in Config().enabled()
        assert "test_extra" not in Config(toggles={"test_extra": False}).enabled()

        def command(collectors: dict[str, bool | None]) -> dict[str, bool | None]:
            return collectors

        wrapped = collector_toggles(command)
        assert "collector_test_extra" in inspect.signature(wrapped).parameters
        flags = {f"collector_{n}": None for n in REGISTRY} | {"collector_test_extra": False}
        assert wrapped(**flags)["test_extra"] is False
    finally:
        REGISTRY.pop("test_extra")


def test_once_says_the_same_sample_count_on_the_page_and_in_the_log(tmp_path: Path) -> None:
    """--once takes a whole window of walk-rate samples in its one cycle: the page's count is that window's."""
    import re
    import subprocess
    import sys

    with bpffs() as root:
        pin_ct_map(root, "cilium_ct4_global", entries=20_000, max_entries=32_768)
        p = subprocess.run(
            [sys.executable, "-m", "ctwatch", "--once", "--path.procfs", str(copy_procfs(tmp_path)),
             "--path.bpffs", str(root), "--no-collector.cilium_metrics"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert p.returncode == 0, p.stderr
    page = re.search(r'^ctwatch_walk_rate_samples\{family="ipv4"\} (\S+)$', p.stdout, re.M)
    logged = re.search(r"msg=\"walk rate\".* samples=(\d+)", p.stderr)
    assert page and logged, (p.stdout[-800:], p.stderr)
    assert float(page.group(1)) == int(logged.group(1)) > 1, (page.group(0), logged.group(0))


def test_an_implausible_pressure_is_left_out_and_named() -> None:
    """A pressure of 1e30 is a broken exporter, not a full map: the source is down, and its error names the series."""
    from prometheus_client import generate_latest
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.registry import Collector, CollectorRegistry

    class Broken(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            g = GaugeMetricFamily("cilium_bpf_map_pressure", "Map pressure.", labels=["map_name"])
            g.add_metric(["ct4_global"], 1e30)
            yield g

    registry = CollectorRegistry()
    registry.register(Broken())
    with http_server(serve_text(generate_latest(registry).decode())) as url:
        r = watcher(metrics_url=url, toggles={"nf_conntrack": False, "bpf": False}).collect().results["cilium_metrics"]
    assert not r.up and r.readings == []
    assert 'cilium_bpf_map_pressure{map_name="ct4_global"} = 1e+30 is implausible' in (r.error or ""), r.error


THROWAWAY = """
import sys
from ctsim.core.quantity import parse_count
from ctwatch.collector import Collector, Setting, register_collector
from ctwatch.readings import MapReading, WalkRate


def collect(cycle, result):
    n = cycle.config["throwaway_entries"]
    result.readings = [MapReading("throwaway", "ipv4", "cilium_ct4_global", n, 1 << 20), WalkRate("ipv4", 1e5)]


def expose(result):
    from prometheus_client.core import GaugeMetricFamily

    yield GaugeMetricFamily("ctwatch_throwaway_readings", "Readings the throwaway source made.", value=2)


setting = Setting(
    "throwaway_entries", 0, "--throwaway.entries", "COUNT", "What the throwaway source counts.", "7",
    lambda text: parse_count(text, "--throwaway.entries", maximum=1 << 20),
)
register_collector(Collector("throwaway", "A source of this test.", collect, settings=(setting,), expose=expose))
from ctwatch.cli import main

sys.argv = ["ctwatch", *sys.argv[1:]]
main()
"""


def test_a_new_source_with_a_flag_that_feeds_the_projection_is_one_registration(tmp_path: Path) -> None:
    """A source that is one file's worth of code: its flag on --help, parsed by its parser, its readings projected.

    No other module names it: the toggle, the setting, the tables, the walk
    projection and its own series all follow from ``register_collector``.
    """
    script = tmp_path / "throwaway.py"
    script.write_text(THROWAWAY)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), *args], capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip

    helped = run("--help")
    assert helped.returncode == 0, helped.stderr
    assert "--throwaway.entries COUNT" in helped.stdout and "What the throwaway source counts." in helped.stdout
    assert "--collector.throwaway" in helped.stdout
    off = ("--no-collector.bpf", "--no-collector.cilium_metrics", "--path.procfs", str(copy_procfs(tmp_path)))
    p = run("--once", "--throwaway.entries", "400,000", *off)
    assert p.returncode == 0, p.stderr
    s = samples(p.stdout)
    table = (("family", "ipv4"), ("map", "cilium_ct4_global"), ("source", "throwaway"))
    assert s[("ctwatch_entries", table)] == 400_000
    assert s[("ctwatch_source_up", (("source", "throwaway"),))] == 1
    assert s[("ctwatch_throwaway_readings", ())] == 2
    assert s[("ctwatch_walk_rate_entries_per_second", (("family", "ipv4"), ("source", "measured")))] == 1e5
    assert s[("ctwatch_projected_walk_seconds", (("family", "ipv4"),))] == 4.0  # 400,000 at 100,000/s
    default = samples(run("--once", *off).stdout)
    assert default[("ctwatch_entries", table)] == 7
    bad = run("--once", "--throwaway.entries", "lots", *off)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--throwaway.entries" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    off_too = samples(run("--once", "--no-collector.throwaway", "--throwaway.entries", "lots", *off).stdout)
    assert ("ctwatch_source_up", (("source", "throwaway"),)) not in off_too  # an off source's flag is not read


def _agent_page(version: str) -> str:
    return (
        "# TYPE cilium_version gauge\n"
        f'cilium_version{{arch="amd64",revision="abc",version="{version}"}} 1\n'
        "# TYPE cilium_datapath_conntrack_gc_interval_seconds gauge\n"
        'cilium_datapath_conntrack_gc_interval_seconds{global="global"} 300\n'
    )


def test_the_walk_is_timed_as_the_nodes_agent_walks_it() -> None:
    """The same pinned map, an agent saying 1.16.5 then 1.20.2: sampled per entry, then in the agent's batches.

    On 1.16 the projection is get_next_key + lookup per entry; on 1.18 and later it is BPF_MAP_LOOKUP_BATCH in
    Cilium's chunks, the buckets between entries included: several times cheaper on the same kernel.
    """
    page = {"text": _agent_page("1.16.5")}

    def respond(handler):  # type: ignore[no-untyped-def]
        serve_text(page["text"])(handler)

    projected = {}
    with bpffs() as root, http_server(respond) as url:
        pin_ct_map(root, "cilium_ct4_global", entries=200_000, max_entries=262_144)
        for version in ("1.16.5", "1.20.2"):
            page["text"] = _agent_page(version)
            config = Config(bpffs=str(root), metrics_url=url, bpf_sample_budget_s=0.02, once=True,
                            toggles={"nf_conntrack": False})  # fmt: skip
            (v4,) = Watcher(config, Assessor(Thresholds(), 213_000.0)).collect().families
            assert (v4.rate_source, v4.release) == ("measured", f"v{version}")
            projected[version] = (v4.walk, v4.walk_seconds)
    assert projected["1.16.5"][0] == "per-entry" and projected["1.20.2"][0] == "batched"
    factor = projected["1.16.5"][1] / projected["1.20.2"][1]
    assert factor > 3, projected  # the VM measured ~14x per entry (docs/calibration.md)


def test_cilium_version_gives_the_walk_where_the_agents_metrics_are_off(tmp_path: Path) -> None:
    with bpffs() as root:
        pin_ct_map(root, "cilium_ct4_global", entries=20_000, max_entries=32_768)
        p = ctwatch("--path.bpffs", str(root), "--no-collector.cilium_metrics", "--no-collector.nf_conntrack",
                    "--cilium.version", "1.19.4")  # fmt: skip
        bad = ctwatch("--path.bpffs", str(root), "--no-collector.cilium_metrics", "--cilium.version", "1.15")
    assert p.returncode == 0, p.stderr
    walk = (("family", "ipv4"), ("release", "v1.19.4"), ("walk", "batched"))
    assert samples(p.stdout)[("ctwatch_walk_info", walk)] == 1
    assert bad.returncode == 2 and "--cilium.version" in bad.stderr and bad.stderr.count("\n") == 1
