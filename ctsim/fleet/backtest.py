"""``ctsim backtest``: the model held to what one node saw, pod by pod, over a window of its past.

The node's state at the window's start is read as ``run --from-prometheus``
reads it now (its maps, counts, walk rate, deadline, at that time); the pods
are kube-state-metrics' (``kube_pod_info{node}`` for where each ran,
``kube_pod_created`` and ``kube_pod_status_ready_time`` for when it was
created and became Ready: unix seconds, whole ones). The model plays those
pods at their own creation times, and each figure is shown beside the one
the node's series give, with the series it came from. A figure whose series
is missing is said to be missing, never taken as 0.

What the model leaves out shows up as agreement's slack: kube_pod_created is
the API server's, not kubelet's ADD, so scheduling, image pulls and container
start are in the observed latency and not in the predicted one.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field, replace
from typing import Any

from ctsim.core.errors import InputError, shorten
from ctsim.fleet.live import from_prometheus
from ctsim.fleet.prometheus import Client, Transport
from ctsim.fleet.series import REFUSED
from ctsim.inputs.given import Given
from ctsim.inputs.scenario import UNTIL_RESOLVED_CAP
from ctsim.sim.result import Result, percentile

MAX_WINDOW = UNTIL_RESOLVED_CAP  # the longest window: the longest a run plays
# Observed and predicted agree within this: the observed latency holds what the model leaves out (scheduling,
# image pull, container start: seconds on a quiet node), and a retry's jittered back-off moves a pod by up to 5 s.
TOLERANCE_S = 15.0
TOLERANCE_SHARE = 0.20  # ... plus this share of the predicted figure
QUANTILES = {"p50": 0.50, "p90": 0.90, "max": 1.0}
POD_NODE_LABEL = "node"  # kube_pod_info's: the pod's spec.nodeName
# The limiter's refusals (fleet.series.REFUSED): a cancelled wait (outcome request-cancelled, also 429) is the
# client giving up, the model's add_gave_up_in_limiter, and is not counted.


def parse_time(text: str, flag: str) -> float:
    """RFC 3339 or unix seconds, as Prometheus's API takes a time."""
    value = text.strip()
    try:
        t = float(value)
    except ValueError:
        try:
            when = datetime.datetime.fromisoformat(value)
        except ValueError:
            raise InputError(
                f"{flag}: RFC 3339 (2026-12-01T10:00:00Z) or unix seconds, got {shorten(text)!r}"
            ) from None
        if when.tzinfo is None:
            raise InputError(f"{flag}: {shorten(text)!r} has no time zone (add Z or +01:00)") from None
        t = when.timestamp()
    if not math.isfinite(t) or not 0 < t < 1e11:
        raise InputError(f"{flag}: {shorten(text)!r} is not a time Prometheus holds")
    return t


@dataclass(frozen=True)
class Window:
    start: float
    end: float

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise InputError("must be after {param:start}", "end")
        if self.end - self.start > MAX_WINDOW:
            raise InputError(f"a window of at most {MAX_WINDOW / 86400:g} d (the longest a run plays)", "end")

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def lookback(self) -> str:
        """A range that holds every sample of the window and the 5 minutes before (a pod's first scrape)."""
        return f"{math.ceil(self.seconds) + 300}s"

    def to_dict(self) -> dict[str, Any]:
        iso = {
            k: datetime.datetime.fromtimestamp(v, datetime.UTC).isoformat()
            for k, v in (("from", self.start), ("to", self.end))
        }
        return {"from": self.start, "to": self.end, "seconds": self.seconds, "from_rfc3339": iso["from"],
                "to_rfc3339": iso["to"]}  # fmt: skip


@dataclass(frozen=True)
class SeenPod:
    """One pod as kube-state-metrics recorded it."""

    namespace: str
    pod: str
    uid: str
    created: float
    ready: float | None  # None: not Ready by the window's end

    @property
    def latency(self) -> float | None:
        return None if self.ready is None else self.ready - self.created


def _key(labels: dict[str, str]) -> tuple[str, str, str]:
    return labels.get("namespace", ""), labels.get("pod", ""), labels.get("uid", "")


def read_pods(client: Client, node: str, w: Window) -> tuple[list[SeenPod], int, dict[str, str]]:
    """The pods created on ``node`` within the window, oldest first; the pods created before it and not yet
    Ready at its start (a storm already under way, which the model's start does not hold); the queries."""
    on = f'{POD_NODE_LABEL}="{node}"'
    info = f"last_over_time(kube_pod_info{{{on}}}[{w.lookback}])"
    exprs = {
        "pods": info,
        "created": f"last_over_time(kube_pod_created[{w.lookback}]) and on (namespace, pod) {info}",
        "ready": f"last_over_time(kube_pod_status_ready_time[{w.lookback}]) and on (namespace, pod) {info}",
    }
    on_node = {_key(s.labels) for s in client.query(exprs["pods"], w.end)}
    created = {_key(s.labels): s.value for s in client.query(exprs["created"], w.end) if _key(s.labels) in on_node}
    ready = {_key(s.labels): s.value for s in client.query(exprs["ready"], w.end)}
    pods: list[SeenPod] = []
    before = 0
    for key, t in created.items():
        r = ready.get(key)
        r = r if r is not None and t <= r <= w.end else None
        if w.start <= t <= w.end:
            pods.append(SeenPod(*key, created=t, ready=r))
        elif t < w.start and (r is None or r > w.start):
            before += 1
    pods.sort(key=lambda p: (p.created, p.namespace, p.pod, p.uid))
    return pods, before, exprs


@dataclass(frozen=True)
class Figure:
    value: float | None
    source: str


def _selector(client: Client, node: str, node_label: str, metric: str, matchers: str, at: float) -> str | None:
    """``metric{matchers, <label>="node"}`` for the first of the node labels whose series exist at ``at``."""
    for label in node_label.split(","):
        inner = ",".join(m for m in (matchers, f'{label}="{node}"') if m)
        series = f"{metric}{{{inner}}}"
        if client.query(f"sum({series})", at):
            return series
    return None


def counted(client: Client, node: str, node_label: str, metric: str, matchers: str, w: Window) -> Figure:
    """A counter's increase over the window: its value at the end less its value at the start."""
    series = _selector(client, node, node_label, metric, matchers, w.end)
    if series is None:
        return Figure(None, f"{metric}{{{matchers}}}: no series for this node, so none is shown")
    end = client.query(f"sum({series})", w.end)[0].value
    start_samples = client.query(f"sum({series})", w.start)
    if not start_samples:
        return Figure(end, f"{series} at the window's end (no series at its start: counted from 0)")
    start = start_samples[0].value
    if end >= start:
        return Figure(end - start, f"{series}, its end less its start")
    inc = client.query(f"sum(increase({series}[{math.ceil(w.seconds)}s]))", w.end)
    return Figure(inc[0].value if inc else None, f"increase({series}): a counter reset in the window, extrapolated")


def histogram_quantile(
    client: Client, node: str, node_label: str, metric: str, matchers: str, q: float, w: Window
) -> Figure:
    """A histogram's ``q``-quantile over the window: ``histogram_quantile`` of its buckets' increase."""
    series = _selector(client, node, node_label, f"{metric}_bucket", matchers, w.end)
    if series is None:
        return Figure(None, f"{metric}{{{matchers}}}: no series for this node, so none is shown")
    span = f"{math.ceil(w.seconds)}s"
    samples = client.query(f"histogram_quantile({q}, sum by (le) (increase({series}[{span}])))", w.end)
    value = samples[0].value if samples else None
    if value is None or not math.isfinite(value):
        return Figure(None, f"{series}: no observation in the window")
    return Figure(value, f"histogram_quantile({q}, increase({series}[{span}]))")


def gauge_max(client: Client, node: str, node_label: str, metric: str, matchers: str, w: Window) -> Figure:
    """A gauge's largest value over the window."""
    series = _selector(client, node, node_label, metric, matchers, w.end)
    if series is None:
        return Figure(None, f"{metric}{{{matchers}}}: no series for this node, so none is shown")
    span = f"{math.ceil(w.seconds)}s"
    samples = client.query(f"max(max_over_time({series}[{span}]))", w.end)
    return Figure(samples[0].value if samples else None, f"max_over_time({series}[{span}])")


# The model's figures that a node's own series hold (``sim.result.LATENCY_SERIES``), read over the window.
CT_CLEAN = ("cilium_endpoint_regeneration_time_stats_seconds", 'scope="waitingForCTClean"')
LIMITER_WAIT_MAX = ("cilium_api_limiter_wait_duration_seconds", 'api_call="endpoint-create",value="max"')
GC_RUNS = "cilium_datapath_conntrack_gc_runs_total"


def read_figures(client: Client, node: str, node_label: str, w: Window, families: list[str]) -> dict[str, Figure]:
    """Each figure the model computes that the node's series hold; a figure without a series says so."""
    out = {
        "ct_clean_wait_ok_p50": histogram_quantile(client, node, node_label, *CT_CLEAN, 0.5, w),
        "ct_clean_wait_ok_p90": histogram_quantile(client, node, node_label, *CT_CLEAN, 0.9, w),
        "limiter_wait_endpoint_create_max": gauge_max(client, node, node_label, *LIMITER_WAIT_MAX, w),
    }
    for family in families:
        matchers = f'family="{family}",protocol="TCP",status="completed"'
        out[f"gc_runs_{family}"] = counted(client, node, node_label, GC_RUNS, matchers, w)
    return out


def predicted_figures(r: Result) -> dict[str, float | None]:
    """The model's side of ``read_figures``: Cilium counts each scrub as a GC run of every family it walks."""
    lat = r.latency_figures()
    ok = lat["ct_clean_wait_ok"]
    wait = lat["limiter_wait"]["endpoint-create"]
    scrubs = r.counters.create_scrubs + r.counters.delete_scrubs
    runs = r.gc.runs([f.name for f in r.families])
    return {
        "ct_clean_wait_ok_p50": None if ok is None else ok["p50"],
        "ct_clean_wait_ok_p90": None if ok is None else ok["p90"],
        "limiter_wait_endpoint_create_max": None if wait is None else wait["max"],
        **{f"gc_runs_{family}": float(n + scrubs) for family, n in runs.items()},
    }


@dataclass
class Backtest:
    node: str
    window: Window
    seen: list[SeenPod]
    created_before: int  # pods created before the window and not Ready at its start
    result: Result
    live: dict[str, tuple[str, str]]  # field -> (value as a flag, series) from the node at the window's start
    refused: Figure
    sandbox_failures: Figure
    queries: dict[str, str]
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Figure] = field(default_factory=dict)  # the node's side of ``predicted_figures``

    def compared_figures(self) -> dict[str, dict[str, Any]]:
        """JSON ``figures``: each of the model's figures a node's series hold, observed beside predicted."""
        predicted = predicted_figures(self.result)
        out: dict[str, dict[str, Any]] = {}
        for name, seen in self.figures.items():
            p = predicted.get(name)
            agreement = None
            if seen.value is not None and p is not None and not name.startswith("gc_runs_"):
                agreement = _compare(seen.value, p)
            out[name] = {"observed": seen.value, "predicted": p, "source": seen.source, "agreement": agreement}
        return out

    @property
    def observed_latency(self) -> dict[str, float | None]:
        return _quantiles([p.latency for p in self.seen if p.latency is not None])

    @property
    def predicted_latency(self) -> dict[str, float | None]:
        return _quantiles(self.result.ready_latencies)

    @property
    def observed_not_ready(self) -> int:
        return sum(p.ready is None for p in self.seen)

    @property
    def predicted_not_ready(self) -> int:
        return len(self.result.pods) - self.result.pods_ready

    @property
    def predicted_sandbox_failures(self) -> int:
        return sum(p.failures for p in self.result.pods)

    def agreement(self) -> dict[str, str]:
        """Each compared figure: "agrees", "slower" (the node did worse than the model) or "faster"; a figure
        without a value on either side is left out."""
        out: dict[str, str] = {}
        o, p = self.observed_latency, self.predicted_latency
        for q in QUANTILES:
            if o[q] is not None and p[q] is not None:
                out[f"ready_latency_{q}"] = _compare(o[q], p[q])
        for name, f in self.compared_figures().items():
            if f["agreement"] is not None:
                out[name] = f["agreement"]
        n = len(self.seen)
        slack = max(1, math.ceil(0.1 * n))
        gap = self.observed_not_ready - self.predicted_not_ready
        out["not_ready"] = "agrees" if abs(gap) <= slack else ("slower" if gap > 0 else "faster")
        return out

    @property
    def verdict(self) -> str:
        a = self.agreement().values()
        if all(v == "agrees" for v in a):
            return "agrees"
        if "slower" in a:
            return "slower than the model"
        return "faster than the model"

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "node": self.node,
            "window": self.window.to_dict(),
            "inputs": {
                **r.scenario.to_dict(),
                "live": {k: {"value": v, "series": s} for k, (v, s) in self.live.items()},
            },
            "observed": {
                "pods": len(self.seen),
                "not_ready_at_end": self.observed_not_ready,
                "created_before_not_ready": self.created_before,
                "add_429": self.refused.value,
                "sandbox_failures": self.sandbox_failures.value,
                "sources": {
                    "pods": self.queries["created"],
                    "ready": self.queries["ready"],
                    "add_429": self.refused.source,
                    "sandbox_failures": self.sandbox_failures.source,
                },
            },
            "predicted": {
                "pods": len(r.pods),
                "not_ready_at_end": self.predicted_not_ready,
                "add_429": r.counters.add_429,
                "sandbox_failures": self.predicted_sandbox_failures,
                "verdict": str(r.verdict),
            },
            "ready_latency_s": {"observed": self.observed_latency, "predicted": self.predicted_latency},
            "figures": self.compared_figures(),
            "tolerance": {"seconds": TOLERANCE_S, "share_of_predicted": TOLERANCE_SHARE},
            "agreement": self.agreement(),
            "verdict": self.verdict,
            "notes": self.notes,
        }


def _quantiles(values: list[float]) -> dict[str, float | None]:
    return {
        q: (max(values) if values else None) if at == 1.0 else percentile(values, at) for q, at in QUANTILES.items()
    }


def _compare(observed: float, predicted: float) -> str:
    slack = TOLERANCE_S + TOLERANCE_SHARE * predicted
    if abs(observed - predicted) <= slack:
        return "agrees"
    return "slower" if observed > predicted else "faster"


def backtest(
    given: Given,
    url: str,
    node: str,
    node_label: str,
    transport: Transport,
    w: Window,
) -> Backtest:
    """Reads the node at the window's start and its pods over the window, then plays them in the model."""
    from ctsim.sim.model import simulate

    with Client(url, transport) as client:
        seen, before, queries = read_pods(client, node, w)
        if not seen:
            raise InputError(
                f"--node {node}: kube-state-metrics recorded no pod created on it between --from and --to "
                f"(kube_pod_info{{{POD_NODE_LABEL}}} and kube_pod_created at {client.shown})"
            )
        refused = counted(client, node, node_label, "cilium_api_limiter_processed_requests_total", REFUSED, w)
        sandbox = counted(client, node, POD_NODE_LABEL + "," + node_label, "kubelet_run_podsandbox_errors_total", "", w)
    arrivals = tuple(p.created - w.start for p in seen)
    at_start = replace(given, pods=len(seen), arrivals=arrivals, horizon=w.seconds)
    scenario, live = from_prometheus(at_start, url, node, node_label, transport, at=w.start)
    with Client(url, transport) as client:
        figures = read_figures(client, node, node_label, w, list(scenario.families()))
    notes = list(scenario.notes)
    if before:
        notes.append(
            f"{before} pod(s) created before --from were not Ready at it: a storm already under way, "
            "which the model's start does not hold (its pods and their retries are not played)"
        )
    notes.append(
        "observed latency is kube_pod_created to kube_pod_status_ready_time (whole seconds): it holds scheduling, "
        "image pulls and container start, which the model leaves out"
    )
    notes.append(
        "waitingForCTClean is Cilium's histogram of successful regenerations (a first build's wait, later builds' "
        "microseconds); GC runs count each map walk, endpoint scrubs included, as the model's passes plus scrubs"
    )
    return Backtest(node, w, seen, before, simulate(scenario), live, refused, sandbox, queries, notes, figures)
