"""ctwatch you can page on: a rate that holds under load, levels that do not flap, no silent gaps, an HTTP face."""

from __future__ import annotations

import concurrent.futures
import re
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from ctwatch import runbook
from ctwatch.assess import Assessor, FamilyAssessment, Thresholds
from ctwatch.readings import MapReading, SourceResult, WalkRate
from ctwatch.rules import RuleSettings, alerts, render
from ctwatch.watcher import Config, Watcher

from ctsim.core.projection import Level
from tests.ctwatch.env import bpffs, copy_procfs, pin_ct_map
from tests.support.http import free_port
from tests.support.load import busy

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "watchdog" / "deploy"


def _bpf_result(entries: int, rate: float | None, up: bool = True) -> dict[str, SourceResult]:
    readings = [MapReading("bpf", "ipv4", "cilium_ct4_global", entries, 16_777_216)] if up else []
    rates = [WalkRate("ipv4", rate)] if rate else []
    return {"bpf": SourceResult("bpf", up, 0.0, [*readings, *rates])}


def _walks(watcher: Watcher, cycles: int) -> list[FamilyAssessment]:
    return [watcher.collect().families[0] for _ in range(cycles)]


def test_the_projection_holds_with_four_busy_processes(tmp_path: Path) -> None:
    """Walk rate timed in CPU time, the fast end of a window: load must not inflate the projection.

    Paging on a busy CPU is the failure: a loaded projection more than 10 %
    above the idle ones around it. This VM's own speed drifts by half within
    seconds, and idle is its slow side: fresh-clone CI runs saw idle
    0.52-0.89 s around loaded 0.52-0.63 s. So each trial compares the loaded
    projection with the slower of its two idle ones; up to five trials run
    and one must hold. Load that inflated the projection fails them all.
    """
    with bpffs() as root:
        pin_ct_map(root, "cilium_ct4_global", entries=200_000, max_entries=262_144)
        config = Config(bpffs=str(root), toggles={"nf_conntrack": False, "cilium_metrics": False})

        def projection() -> FamilyAssessment:
            return _walks(Watcher(config, Assessor(Thresholds(), 213_000.0)), 12)[-1]

        trials = []
        for _ in range(5):
            before = projection()
            with busy(4):
                loaded = projection()
            after = projection()
            idle = max(before, after, key=lambda f: f.walk_seconds)
            trials.append((before.walk_seconds, loaded.walk_seconds, after.walk_seconds))
            if loaded.walk_seconds <= 1.10 * idle.walk_seconds:
                break
        else:
            pytest.fail(f"load inflated every trial (idle, loaded, idle projections in s): {trials}")
    assert idle.rate_source == loaded.rate_source == "measured"
    assert idle.rate_samples == loaded.rate_samples == 12
    assert loaded.burst_seconds <= 1.10 * idle.burst_seconds, trials
    assert loaded.level == idle.level


def test_an_explicit_rate_wins_over_sampling() -> None:
    a = Assessor(Thresholds(), 100_000.0, "configured", pinned=True)
    f = a.assess(0.0, _bpf_result(1_000_000, rate=900_000.0))[0]
    assert (f.rate, f.rate_source, f.rate_samples) == (100_000.0, "configured", 0)


def test_one_sample_cannot_move_the_rate() -> None:
    a = Assessor(Thresholds(), 213_000.0)
    for t in range(10):
        a.assess(float(t), _bpf_result(1_000_000, rate=400_000.0))
    f = a.assess(10.0, _bpf_result(1_000_000, rate=1_800.0))[0]  # one sample from a starved thread
    assert f.rate == 400_000.0 and f.rate_samples == 11
    f = a.assess(11.0, _bpf_result(1_000_000, rate=9_000_000.0))[0]  # one implausibly fast one
    assert f.rate == 400_000.0
    # Slow samples only (a busy node): the rate keeps the fast end of the window.
    for t in range(12, 20):
        f = a.assess(float(t), _bpf_result(1_000_000, rate=230_000.0))[0]
    assert f.rate == 400_000.0


def test_levels_hold_for_three_cycles_before_they_change() -> None:
    # At 213,000 entries/s a 10-pod burst is 10 walks + 2 s: 100k entries ~0.07 of 90 s, 2M ~1.07.
    calm, hot = 100_000, 2_000_000
    a = Assessor(Thresholds(), 213_000.0)
    levels = [a.assess(float(t), _bpf_result(n, None))[0].level.rank for t, n in enumerate([calm, hot, hot, hot, hot])]
    assert levels == [0, 0, 0, 2, 2]  # the first level at once; a change after 3 agreeing cycles
    # A projection flapping across the threshold never changes the reported level.
    b = Assessor(Thresholds(), 213_000.0)
    flaps = [b.assess(float(t), _bpf_result(hot if t % 2 else calm, None))[0].level for t in range(12)]
    assert set(flaps) == {Level.OK}


def test_a_failed_source_keeps_the_last_good_projection() -> None:
    a = Assessor(Thresholds(), 213_000.0)
    good = a.assess(100.0, _bpf_result(16_000_000, None))[0]
    assert good.level is Level.CRITICAL and good.age_s == 0
    kept = a.assess(160.0, _bpf_result(0, None, up=False))
    assert len(kept) == 1
    assert kept[0].level is Level.CRITICAL and kept[0].burst_seconds == good.burst_seconds
    assert kept[0].age_s == 60.0


def _ctwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctwatch", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_shipped_rules_are_what_ctwatch_rules_prints() -> None:
    assert (DEPLOY / "ctwatch-rules.yml").read_text() == render(RuleSettings())
    assert (DEPLOY / "prometheusrule.yaml").read_text() == render(
        RuleSettings(), "prometheusrule", " --format prometheusrule"
    )
    p = _ctwatch("rules", "--warning-ratio", "0.3", "--critical-ratio", "0.8", "--source-down-for", "5m")
    assert p.returncode == 0, p.stderr
    assert "ctwatch_burst_deadline_ratio >= 0.3\n" in p.stdout
    assert "ctwatch_burst_deadline_ratio >= 0.8\n" in p.stdout
    assert "for: 5m" in p.stdout


def _heading_anchors(doc: str) -> set[str]:
    """GitHub's anchors for a Markdown page's headings."""
    headings = re.findall(r"^#+ (.+)$", doc, re.M)
    return {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _runbook_urls(settings: RuleSettings) -> list[str]:
    rules = yaml.safe_load(render(settings))["groups"][0]["rules"]
    return [r["annotations"]["runbook_url"] for r in rules if "runbook_url" in r["annotations"]]


def test_the_runbook_ctwatch_serves_is_the_one_the_docs_show() -> None:
    doc = (ROOT / "docs" / "watchdog.md").read_text()
    assert runbook.text() in doc  # the same sections, word for word
    assert list(runbook.sections()) == alerts() and all(runbook.sections().values())


def test_every_runbook_url_opens_a_section_that_exists(served: str) -> None:
    """By default each link is a ctwatch's own /runbook page; with --runbook-base, the docs' sections."""
    status, page = _get(served + "/runbook")
    assert status == 200
    ids = set(re.findall(r'<h2 id="([a-z]+)">', page))
    assert "<code>conntrackGCInterval: 60s</code>" in page and "<script" not in page
    urls = _runbook_urls(RuleSettings())
    assert len(urls) == len(alerts()) - 1  # CtwatchAbsent: no ctwatch answers, no link
    for url in urls:
        base, _, anchor = url.partition("#")
        assert base.startswith("http://{{") and base.endswith("/runbook") and anchor in ids, url
    doc_anchors = _heading_anchors((ROOT / "docs" / "watchdog.md").read_text())
    based = _runbook_urls(RuleSettings(runbook_base="https://wiki.example/watchdog.md"))
    assert len(based) == len(alerts())
    for url in based:
        base, _, anchor = url.partition("#")
        assert base == "https://wiki.example/watchdog.md" and anchor in doc_anchors and anchor in ids, url


def test_version() -> None:
    p = _ctwatch("--version")
    assert p.returncode == 0 and re.fullmatch(r"ctwatch \d+\.\d+\.\d+\n", p.stdout)


@pytest.fixture
def served(tmp_path: Path):  # type: ignore[no-untyped-def]
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctwatch", "--path.procfs", str(copy_procfs(tmp_path)), "--collector.disable-defaults",
         "--collector.nf_conntrack", "--web.listen-address", f"127.0.0.1:{port}", "--interval", "1s",
         "--log.format", "json"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 15
    while True:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.1)
    try:
        yield base
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        assert '"msg": "listening"' in err  # --log.format json


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_exporter_has_node_exporters_http_face(served: str) -> None:
    status, page = _get(served + "/")
    assert status == 200 and 'href="/metrics"' in page
    assert _get(served + "/healthz") == (200, "ok\n")
    assert _get(served + "/foo")[0] == 404
    status, page = _get(served + "/metrics")
    assert status == 200
    assert "ctwatch_source_up" in page and "process_cpu_seconds_total" in page
    assert "ctwatch_cycle_cpu_seconds_total" in page and "ctwatch_last_success_timestamp_seconds" in page


def test_fifty_concurrent_scrapers_all_get_the_page(served: str) -> None:
    """The benchmark's target is p99 < 100 ms (benchmarks/bench_ctwatch_http.py); here, a looser 1 s."""

    def scrape(_: int) -> tuple[int, float]:
        start = time.perf_counter()
        status, _page = _get(served + "/metrics")
        return status, time.perf_counter() - start

    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        results = list(pool.map(scrape, range(200)))
    assert all(status == 200 for status, _ in results)
    latencies = sorted(t for _, t in results)
    assert statistics.quantiles(latencies, n=100)[98] < 1.0


def test_a_level_change_is_logged_and_collection_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    """A level change must log, never stop the watchdog (it once raised inside the logger)."""
    with bpffs() as root:
        pin_ct_map(root, "cilium_ct4_global", entries=100_000, max_entries=131_072)
        config = Config(bpffs=str(root), toggles={"nf_conntrack": False, "cilium_metrics": False})
        watcher = Watcher(config, Assessor(Thresholds(), 1_000.0, "configured", pinned=True))  # 100 s walks
        first, second = watcher.collect(), watcher.collect()
    assert first.families[0].level is second.families[0].level is Level.CRITICAL
    err = capsys.readouterr().err
    assert err.count('msg="level changed"') == 1 and "to=critical" in err


def test_the_docs_fill_figures_are_the_projections() -> None:
    """docs/watchdog.md: when a 10-pod burst on a 16Mi map warns and outgrows the deadline."""
    from ctsim.core.defaults import DEFAULT_REGENERATION
    from ctsim.core.profiles import PUBLISHED_ENTRIES_PER_S
    from ctsim.core.projection import FamilyWalk, max_entries_for_burst

    walks = [FamilyWalk("ipv4", (1,), PUBLISHED_ENTRIES_PER_S)]
    text = " ".join((ROOT / "docs" / "watchdog.md").read_text().split())
    t = Thresholds()
    assert t.burst == 10 and "a 10-pod burst" in text
    for ratio in (t.warning_ratio, t.critical_ratio):
        entries = max_entries_for_burst(walks, t.burst, ratio * t.deadline_s, DEFAULT_REGENERATION)
        assert f"at {entries:,} entries" in text, entries
