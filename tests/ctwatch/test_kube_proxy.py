"""ctwatch's kube_proxy source: a table programmed with the real `nft` in a namespace, and a real metrics page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ctwatch.sources import kube_proxy
from prometheus_client.parser import text_string_to_metric_families

from ctsim.core.kube_proxy_sync import Deadlines
from ctsim.core.nft_cost import packaged
from ctsim.core.nft_layout import EndpointMix, Layout, infer, shape
from ctsim.kernel import nft_ruleset
from ctsim.kernel.netns_conntrack import temporary_netns
from tests.ctwatch.env import FIXTURES, http_server, serve_text
from tests.support.needs import need_binary, need_netns


def _page(*args: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    p = subprocess.run(
        [sys.executable, "-m", "ctwatch", "--once", "--no-collector.bpf", "--no-collector.cilium_metrics", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(p.stdout)
        for s in family.samples
    }


@pytest.fixture
def nft() -> None:
    need_netns()
    need_binary("nft")
    need_binary("nsenter")


def _program(ns: str, script: str) -> None:
    subprocess.run(["nsenter", f"--net=/run/netns/{ns}", "nft", "-f", "-"], input=script.encode(), check=True)


@pytest.mark.parametrize(("layout", "mix"), [(Layout.TODAY, "2"), (Layout.TODAY, "1:50%,3:50%"), (Layout.STOPGAP, "1")])
def test_the_source_counts_a_table_the_test_programmed(nft: None, layout: Layout, mix: str) -> None:
    m = EndpointMix.parse(mix)
    expected = shape(layout, 300, m)
    with temporary_netns("ctwatch-kp") as ns:
        _program(ns, nft_ruleset.full(layout, 300, m))
        table = kube_proxy.count_table("ip", ns)
    assert table.present
    assert table.chains == expected.chains
    assert table.named_sets == expected.sets
    assert table.anonymous_maps == expected.anonymous_maps
    inferred = infer(table.chains, table.anonymous_maps, table.endpoints_map)
    assert inferred is not None
    assert inferred[0] is layout and inferred[1] == 300
    assert shape(layout, 300, inferred[2]).chains == expected.chains  # the mix it implies has the same chains


def test_the_redesigns_table_is_counted_but_not_projected(nft: None) -> None:
    with temporary_netns("ctwatch-kp") as ns:
        _program(ns, nft_ruleset.full(Layout.DISPATCH, 100, EndpointMix.every(3)))
        table = kube_proxy.count_table("ip", ns)
    assert table.present and table.endpoints_map and table.anonymous_maps == 0
    p = kube_proxy.projected(table, packaged(), Deadlines.of())
    assert p.projection is None and "cannot be told" in p.why_not


def test_a_node_without_the_table_is_up_and_says_so(nft: None) -> None:
    with temporary_netns("ctwatch-kp") as ns:
        table = kube_proxy.count_table("ip", ns)
        page = _page("--kube-proxy.netns", ns, "--kube-proxy.metrics-url", "")
    assert not table.present
    assert page[("ctwatch_source_up", (("source", "kube_proxy"),))] == 1
    assert page[("ctwatch_kube_proxy_table_present", (("family", "ip"), ("table", "kube-proxy")))] == 0
    assert not any(name.startswith("ctwatch_kube_proxy_projected") for name, _ in page)


def test_the_page_projects_the_table_and_shows_kube_proxys_own_figures(nft: None) -> None:
    body = (FIXTURES / "kube-proxy-metrics.txt").read_text()
    with temporary_netns("ctwatch-kp") as ns, http_server(serve_text(body)) as url:
        _program(ns, nft_ruleset.full(Layout.TODAY, 500, EndpointMix.every(1)))
        page = _page("--kube-proxy.netns", ns, "--kube-proxy.metrics-url", url)
    labels = (("family", "ip"), ("table", "kube-proxy"))
    assert page[("ctwatch_kube_proxy_table_anonymous_maps", labels)] == 500
    assert page[("ctwatch_kube_proxy_services_estimated", ())] == 500
    full = page[("ctwatch_kube_proxy_projected_sync_seconds", (("layout", "today"), ("sync", "full")))]
    # one table, one answer: ctwatch's projection is `ctsim nft run --services 500`'s
    from ctsim.core.kube_proxy_sync import project

    assert full == pytest.approx(
        project(packaged(), Layout.TODAY, 500, EndpointMix.every(1), Deadlines.of()).full_sync_s
    )
    assert page[("ctwatch_kube_proxy_full_sync_deadline_ratio", ())] == pytest.approx(full / 60.0)
    assert page[("ctwatch_kube_proxy_metrics_up", ())] == 1
    # the fixture's means: (60.2 + 61.9) / 2 and (1.1 + 1.2 + 1.3 + 1.2) / 4
    assert page[("ctwatch_kube_proxy_observed_sync_seconds", (("sync", "full"),))] == pytest.approx(61.05)
    assert page[("ctwatch_kube_proxy_observed_sync_seconds", (("sync", "partial"),))] == pytest.approx(1.2)
    assert page[("ctwatch_kube_proxy_observed_network_programming_seconds", ())] == pytest.approx(2.5667, rel=1e-3)


def test_unreachable_metrics_are_absent_not_zero(nft: None) -> None:
    with temporary_netns("ctwatch-kp") as ns:
        page = _page("--kube-proxy.netns", ns, "--kube-proxy.metrics-url", "http://127.0.0.1:9/metrics")
    assert page[("ctwatch_kube_proxy_metrics_up", ())] == 0
    assert page[("ctwatch_source_up", (("source", "kube_proxy"),))] == 1
    assert not any(name.startswith("ctwatch_kube_proxy_observed") for name, _ in page)


def test_a_missing_netns_marks_the_source_down_and_ctwatch_lives() -> None:
    page = _page("--kube-proxy.netns", "ctwatch-no-such-netns", "--kube-proxy.metrics-url", "")
    assert page[("ctwatch_source_up", (("source", "kube_proxy"),))] == 0


def test_a_page_without_kube_proxys_series_is_refused() -> None:
    with pytest.raises(Exception, match="no kubeproxy_sync_proxy_rules"):
        kube_proxy.parse_metrics((FIXTURES / "cilium-metrics.txt").read_text())


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--kube-proxy.family", "arp"], "ip or ip6"),
        (["--kube-proxy.metrics-url", "file:///etc/passwd"], "only http:// or https://"),
        (["--kube-proxy.sync-period", "0s"], "--kube-proxy.sync-period"),
        (["--kube-proxy.calibration", "/nonexistent.json"], "no such file"),
    ],
)
def test_bad_flags_are_one_line(args: list[str], words: str, tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "ctwatch", "--once", *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert words in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
