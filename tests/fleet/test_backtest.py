"""``ctsim backtest`` against a real Prometheus whose TSDB holds a node's past, made on the real kernel.

The past is a ``ctsim emulate`` run (real BPF maps, a real lock, real
threads): its pods' creation and Ready times, and each failed ADD (HTTP 429 or
timeout) at the time it failed, scaled back to the node's clock and written the
way kube-state-metrics, Cilium's limiter and kubelet write them, then
backfilled with promtool. The node's state at the window's start is
ctwatch's series. A second node's past is planted: Ready came far later than
any model of that node allows, and the backtest must say so.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctsim.core.defaults import CT_KEY_SIZES
from ctsim.core.maptype import MapType
from ctsim.inputs.scenario import Scenario, resolve_flags
from ctsim.kernel import calibrate as cal
from ctsim.kernel import emulate as em
from ctsim.sim.result import percentile
from tests.support.needs import need_bpf
from tests.support.prometheus import Points, backfill, openmetrics, prometheus

TIME_SCALE = 30.0
STEP = 15.0
SEED = 3
# The emulation against the model at this scale (tests/kernel/test_emulate.py): within 10 %, or within what
# thread wake-ups add (0.15 s scaled, 4.5 s of node time); kube-state-metrics' whole seconds add up to 2 s more.
WITHIN_SHARE, WITHIN_S = 0.10, 0.15 * TIME_SCALE + 2.0


@dataclass(frozen=True)
class Past:
    url: str
    start: float  # --from
    end: float  # --to
    scenario: Scenario  # the node, full size
    emulation: em.Emulation
    created: list[float]  # as kube_pod_created says: whole unix seconds
    ready: list[float | None]


def _node_series(node: str, s: Scenario, start: float, end: float) -> list[Points]:
    """ctwatch's page of a node with this scenario's maps, counts, walk rate and deadline, over the window."""
    times = [start - 300 + k * STEP for k in range(int((end - start + 300) / STEP) + 2)]
    tcp = {"node": node, "source": "bpf", "family": "ipv4", "map": "cilium_ct4_global"}
    any_ = {**tcp, "map": "cilium_ct_any4_global"}
    flat = [
        ("ctwatch_entries", tcp, s.map(MapType.IPV4_TCP).entries),
        ("ctwatch_entries", any_, s.map(MapType.IPV4_ANY).entries),
        ("ctwatch_max_entries", tcp, s.map(MapType.IPV4_TCP).max_entries),
        ("ctwatch_max_entries", any_, s.map(MapType.IPV4_ANY).max_entries),
        ("ctwatch_walk_rate_entries_per_second", {"node": node, "family": "ipv4", "source": "measured"}, s.walk_rate),
        ("ctwatch_deadline_seconds", {"node": node}, s.deadline),
    ]
    return [(name, labels, [(t, float(v)) for t in times]) for name, labels, v in flat]


def _pod_series(node: str, name: str, created: float, ready: float | None, end: float) -> list[Points]:
    """kube-state-metrics' series of one pod: from its creation (scraped every STEP) to the window's end."""
    pod = {"namespace": "default", "pod": name, "uid": f"uid-{node}-{name}"}
    times = [created + k * STEP for k in range(int((end - created) / STEP) + 1)]
    out: list[Points] = [
        ("kube_pod_info", {**pod, "node": node, "host_ip": "10.0.0.1"}, [(t, 1.0) for t in times]),
        ("kube_pod_created", pod, [(t, created) for t in times]),
    ]
    if ready is not None:
        out.append(("kube_pod_status_ready_time", pod, [(t, ready) for t in times if t >= ready] or [(ready, ready)]))
    return out


def _counter(metric: str, labels: dict[str, str], events: list[float], start: float, end: float) -> Points:
    """A counter of ``events`` (unix times), sampled every STEP over the window (0 at its start)."""
    times = [start - 60 + k * STEP for k in range(int((end - start + 60) / STEP) + 2)]
    return (metric, labels, [(t, float(sum(e <= t for e in events))) for t in times])


@pytest.fixture(scope="module")
def past(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Past]:
    need_bpf()
    with cal.new_ct_map(1 << 17, CT_KEY_SIZES["ipv4"]) as m:
        rate = statistics.median(cal.per_entry_rate(m) for _ in range(5))
        delete_s = cal.delete_seconds(m, CT_KEY_SIZES["ipv4"], 5000)
    # Walks at 41 % of the deadline: two fit, the third pod's first ADD times out and retries.
    s = resolve_flags(
        entries=str(round(0.41 * 90 * 100_000)), rate="100000", pods="6", horizon="2m", expired_fraction="0", seed=SEED
    )
    emulation = em.run(s, time_scale=TIME_SCALE, real_rate=rate, delete_seconds=delete_s)
    end = float(int(time.time()) - 30)  # an instant query at --to sees the last samples
    start = end - s.horizon
    series = _node_series("node-a", s, start, end)
    created: list[float] = []
    ready: list[float | None] = []
    refused: list[float] = []
    paced: list[float] = []
    failed: list[float] = []
    for pod in emulation.emulated.pods:
        c = float(round(start + pod.created_at * TIME_SCALE))
        r = None if pod.ready_at is None else float(round(start + pod.ready_at * TIME_SCALE))
        created.append(c)
        ready.append(r)
        series += _pod_series("node-a", f"web-{pod.index:02d}", c, r, end)
        for t, outcome in pod.failures:
            at = start + t * TIME_SCALE
            if at > end:  # a thread's last failure as the emulation stopped: after the window
                continue
            failed.append(at)
            (paced if outcome == "429 paced" else refused if outcome == "429" else []).append(at)
    limiter = {"node": "node-a", "api_call": "endpoint-create", "return_code": "429"}
    series += [
        _counter("cilium_api_limiter_processed_requests_total", {**limiter, "outcome": "fail-parallel-wait"},
                 refused, start, end),
        _counter("cilium_api_limiter_processed_requests_total", {**limiter, "outcome": "fail-limit-wait"},
                 paced, start, end),
        _counter("kubelet_run_podsandbox_errors_total", {"node": "node-a", "runtime_handler": ""},
                 failed, start, end),
    ]  # fmt: skip
    # node-b: a small table (a walk of 0.1 s), so every pod is Ready within seconds in any model; it saw 100 s.
    small = resolve_flags(entries="10000", rate="100000", pods="4", horizon="2m", expired_fraction="0")
    series += _node_series("node-b", small, start, end)
    for i in range(4):
        c = start + 5 + i
        series += _pod_series("node-b", f"api-{i}", c, c + 100, end)
    series += _pod_series("node-b", "stuck", start - 200, None, end)  # created before --from, never Ready
    # node-b's kubelet restarted in the window: its counter went 7 -> 0, then counted 2.
    restarted = [(t, 7.0 if t < start + 40 else 0.0 if t < start + 60 else 2.0)
                 for t in (start - 60 + k * STEP for k in range(int((end - start + 60) / STEP) + 1))]  # fmt: skip
    series.append(("kubelet_run_podsandbox_errors_total", {"node": "node-b", "runtime_handler": ""}, restarted))
    series += _pod_series("node-c", "elsewhere", start + 10, start + 12, end)  # another node's pod
    # node-d: dual stack, but nothing counts its IPv6 TCP map (Cilium's pressure is absent while 0).
    series += _node_series("node-d", small, start, end)
    any6 = {"node": "node-d", "source": "cilium_metrics", "family": "ipv6", "map": "cilium_ct_any6_global"}
    series.append(("ctwatch_entries", any6, [(t, 5000.0) for t in (start + k * STEP for k in range(9))]))
    series += _node_e(start, end, small)
    tmp = tmp_path_factory.mktemp("backtest")
    data = backfill(tmp, openmetrics(series))
    with prometheus(tmp / "server", tsdb=data) as url:
        yield Past(url, start, end, s, emulation, created, ready)


# node-e's own figures: 3 successful regenerations' waitingForCTClean in the window (one in (0.1, 1], two in
# (1, 10] seconds: a p50 of 1 + 9 x (1.5 - 1) / 2 = 3.25 s), endpoint-create's max wait 12 s, and its GC runs.
NODE_E_BUCKETS = {"0.1": 0.0, "1": 1.0, "10": 3.0, "60": 3.0, "+Inf": 3.0}
NODE_E_WAIT_MAX = 12.0
NODE_E_RUNS = 9.0


def _node_e(start: float, end: float, small: Scenario) -> list[Points]:
    """A node whose history holds the series the model's figures correspond to."""
    out = _node_series("node-e", small, start, end)
    for i in range(3):
        out += _pod_series("node-e", f"job-{i}", start + 5 + i, start + 8 + i, end)
    times = [start - 60 + k * STEP for k in range(int((end - start + 60) / STEP) + 2)]
    regen = {"node": "node-e", "scope": "waitingForCTClean", "outcome": "success"}
    for le, count in NODE_E_BUCKETS.items():
        out.append(("cilium_endpoint_regeneration_time_stats_seconds_bucket", {**regen, "le": le},
                    [(t, 5.0 + (count if t > start + 30 else 0.0)) for t in times]))  # fmt: skip
    wait = {"node": "node-e", "api_call": "endpoint-create", "value": "max"}
    out.append(("cilium_api_limiter_wait_duration_seconds", wait,
                [(t, NODE_E_WAIT_MAX if start < t < start + 60 else 1.0) for t in times]))  # fmt: skip
    runs = {"node": "node-e", "family": "ipv4", "protocol": "TCP", "status": "completed"}
    out.append(_counter("cilium_datapath_conntrack_gc_runs_total", runs,
                        [start + 1 + k for k in range(int(NODE_E_RUNS))], start, end))  # fmt: skip
    return out


def backtest(past: Past, node: str, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["backtest", "--prometheus-url", past.url, "--node", node, "--from", f"{past.start:.0f}"]
    args += ["--to", f"{past.end:.0f}", "--expired-fraction", "0", "--seed", str(SEED), *extra]
    return subprocess.run([sys.executable, "-m", "ctsim", *args], capture_output=True, text=True, check=False)


def test_observed_figures_are_exact_and_the_model_agrees_with_the_kernel(past: Past) -> None:
    out = backtest(past, "node-a", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["node"] == "node-a" and doc["window"]["seconds"] == past.end - past.start
    lats = [r - c for c, r in zip(past.created, past.ready, strict=True) if r is not None]
    observed = doc["ready_latency_s"]["observed"]
    assert observed == {"p50": percentile(lats, 0.5), "p90": percentile(lats, 0.9), "max": max(lats)}
    e = past.emulation.emulated
    assert doc["observed"]["pods"] == len(e.pods) == doc["predicted"]["pods"]
    assert doc["observed"]["not_ready_at_end"] == sum(r is None for r in past.ready)
    failures = [o for p in e.pods for t, o in p.failures if t * TIME_SCALE <= past.end - past.start]
    assert doc["observed"]["add_429"] == sum(o.startswith("429") for o in failures)
    assert doc["observed"]["sandbox_failures"] == len(failures)
    assert "cilium_api_limiter_processed_requests_total" in doc["observed"]["sources"]["add_429"]
    # The node as its series were at --from: every input they give came from them.
    live = doc["inputs"]["live"]
    assert set(live) >= {"entries", "any_entries", "max_entries", "rate", "deadline"}
    assert live["entries"]["value"] == str(past.scenario.map(MapType.IPV4_TCP).entries)
    assert doc["inputs"]["entries"] == past.scenario.map(MapType.IPV4_TCP).entries
    assert doc["inputs"]["walk_rate"] == past.scenario.walk_rate
    # Predicted: the full-size model of that node, with the pods at their own creation times, against what
    # the real kernel did (at 30x, scaled back), within the emulation's own tolerance.
    predicted = doc["ready_latency_s"]["predicted"]
    truth = [p.ready_at * TIME_SCALE - p.created_at * TIME_SCALE for p in e.pods if p.ready_at is not None]
    for q, at in (("p50", 0.5), ("p90", 0.9), ("max", 1.0)):
        want = percentile(truth, at)
        assert abs(predicted[q] - want) <= max(WITHIN_SHARE * want, WITHIN_S), (q, predicted, truth)
    assert doc["predicted"]["not_ready_at_end"] == sum(p.ready_at is None for p in e.pods)
    assert doc["verdict"] == "agrees", doc["agreement"]


def test_a_planted_mismatch_is_reported(past: Past) -> None:
    out = backtest(past, "node-b", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["observed"]["pods"] == 4  # not the pod created before --from, not node-c's
    assert doc["observed"]["created_before_not_ready"] == 1
    assert doc["ready_latency_s"]["observed"] == {"p50": 100.0, "p90": 100.0, "max": 100.0}
    assert doc["ready_latency_s"]["predicted"]["max"] < 10
    assert doc["agreement"]["ready_latency_max"] == "slower"
    assert doc["verdict"] == "slower than the model"
    # No limiter series for node-b: said, never 0.
    assert doc["observed"]["add_429"] is None
    assert "no series" in doc["observed"]["sources"]["add_429"]
    # Its kubelet's counter reset in the window: Prometheus's increase(), and the row says so.
    assert "counter reset" in doc["observed"]["sources"]["sandbox_failures"]
    assert 2 <= doc["observed"]["sandbox_failures"] <= 4
    text = backtest(past, "node-b")
    assert text.returncode == 0, text.stderr
    assert "slower than the model" in text.stdout and "— (no series)" in text.stdout
    assert "created before --from" in text.stdout


def test_a_window_without_pods_or_a_bad_time_is_one_line(past: Past) -> None:
    empty = backtest(past, "node-c", "--json")  # node-c has a pod but no CT series
    assert empty.returncode == 2 and len(empty.stderr.strip().splitlines()) == 1, empty.stderr
    nowhere = subprocess.run(
        [sys.executable, "-m", "ctsim", "backtest", "--prometheus-url", past.url, "--node", "node-z",
         "--from", f"{past.start:.0f}", "--to", f"{past.end:.0f}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert nowhere.returncode == 2 and "no pod created" in nowhere.stderr, nowhere.stderr
    for start, end, says in (("yesterday", "1", "--from"), ("2026-12-01T10:00:00", "1", "time zone"),
                             (f"{past.end:.0f}", f"{past.start:.0f}", "after --from")):  # fmt: skip
        bad = subprocess.run(
            [sys.executable, "-m", "ctsim", "backtest", "--prometheus-url", past.url, "--node", "node-a",
             "--from", start, "--to", end],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_the_rfc3339_window_is_the_unix_one(past: Past, tmp_path: Path) -> None:
    import datetime

    def iso(t: float) -> str:
        return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    a = backtest(past, "node-b", "--json")
    b = subprocess.run(
        [sys.executable, "-m", "ctsim", "backtest", "--prometheus-url", past.url, "--node", "node-b",
         "--from", iso(past.start), "--to", iso(past.end), "--expired-fraction", "0", "--seed", str(SEED), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert a.returncode == b.returncode == 0, b.stderr
    assert json.loads(a.stdout) == json.loads(b.stdout)


def test_an_uncounted_ipv6_tcp_map_is_asked_for_not_run_as_empty(past: Past) -> None:
    args = ["run", "--from-prometheus", past.url, "--node", "node-d", "--json"]
    out = subprocess.run([sys.executable, "-m", "ctsim", *args], capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "give --ipv6-entries" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    given = subprocess.run(
        [sys.executable, "-m", "ctsim", *args, "--ipv6-entries", "20000"], capture_output=True, text=True, check=False
    )
    assert given.returncode == 0, given.stderr
    doc = json.loads(given.stdout)["inputs"]
    assert doc["ipv6_entries"] == 20000 and doc["ipv6_any_entries"] == 5000


def test_the_models_figures_are_held_to_the_nodes_own_series(past: Past) -> None:
    """waitingForCTClean, the limiter's wait and GC runs, where the node's history has them; said where not."""
    out = backtest(past, "node-e", "--json")
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)["figures"]
    p50 = figures["ct_clean_wait_ok_p50"]
    assert p50["observed"] == pytest.approx(3.25) and "histogram_quantile(0.5" in p50["source"]
    assert p50["predicted"] is not None and p50["agreement"] in ("agrees", "slower", "faster")
    wait = figures["limiter_wait_endpoint_create_max"]
    assert wait["observed"] == NODE_E_WAIT_MAX and "max_over_time" in wait["source"]
    runs = figures["gc_runs_ipv4"]
    assert runs["observed"] == pytest.approx(NODE_E_RUNS) and runs["agreement"] is None
    assert runs["predicted"] >= 3  # at least each pod's create scrub
    none = json.loads(backtest(past, "node-b", "--json").stdout)["figures"]
    assert all(f["observed"] is None and "no series" in f["source"] for f in none.values()), none
    text = backtest(past, "node-e")
    assert text.returncode == 0 and "waitingForCTClean p50" in text.stdout and "3.2 s" in text.stdout
