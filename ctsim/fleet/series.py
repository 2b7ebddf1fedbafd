"""What the fleet's series say about each node: one query per metric, never one per node.

Sources, best first: ctwatch's own series (counts and capacity per map, the
walk rate it measured, its deadline and burst), then Cilium's
(``cilium_bpf_map_pressure`` per CT map, which with a capacity gives the
count; ``cilium_bpf_map_capacity`` per CT map, from 1.15 on; the GC interval
where the version exports it; GC and CT-clean durations it observed). A
node is the value of the first of ``node_label``'s labels that a series
carries (``node,instance``: Cilium's Helm chart puts the node name in
``node``, and so do ctwatch's shipped monitors); series of every source with
the same value are one node.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ctsim.core.bounds import check
from ctsim.core.defaults import CILIUM_PRESSURE_MAPS, CT_MAPS, FAMILY_OF_MAP
from ctsim.core.errors import InputError
from ctsim.core.releases import Release, parse_release
from ctsim.fleet import kube_proxy
from ctsim.fleet.prometheus import Client, Sample

OBSERVED_WINDOW = "1d"  # how far back Cilium's own durations are averaged: GC passes can be 12h apart
DEFAULT_NODE_LABEL = "node,instance"
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_WINDOW = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


@dataclass
class MapFacts:
    """One CT map of one node: its count, capacity and growth, each with the series it came from."""

    entries: float | None = None
    entries_series: str = ""
    max_entries: int | None = None
    capacity_series: str = ""
    growth: float | None = None  # entries per second over the window
    pressure: float | None = None  # Cilium's count/max, kept until a capacity is known
    at_last_pass: bool = False  # the count is GC's, at the end of the last completed pass (no pressure series)


# A wait for CT clean longer than this is a first build's, behind a scrub: after an endpoint's first
# regeneration its ctCleaned channel is closed and every later one records microseconds (pkg/endpoint/bpf.go).
LONG_WAIT = 1.0


@dataclass(frozen=True)
class CTCleanWaits:
    """waitingForCTClean over the window, split at the largest bucket bound up to ``LONG_WAIT``: the
    regenerations, those that waited longer (first builds behind a scrub), and bounds on their mean
    (the histogram holds no wait's exact length; the short waits' sum lies between their buckets' bounds)."""

    regenerations: float
    long_waits: float
    split_at: float
    long_mean_low: float | None
    long_mean_high: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {
            "regenerations": self.regenerations,
            "waits_over_split": self.long_waits,
            "split_s": self.split_at,
            "share_over_split": self.long_waits / self.regenerations if self.regenerations else None,
            "mean_over_split_s_at_least": self.long_mean_low,
            "mean_over_split_s_at_most": self.long_mean_high,
        }


def ct_clean_waits(buckets: dict[float, float], total: float) -> CTCleanWaits | None:
    """From cumulative bucket counts (upper bound -> count) and the waits' sum; None without a bucket to
    split at (a bound from 0 to ``LONG_WAIT``) or without any regeneration."""
    n = buckets.get(float("inf"))
    bounds = sorted(b for b in buckets if 0 < b <= LONG_WAIT)
    if not n or not bounds:
        return None
    split = bounds[-1]
    short_low = short_high = 0.0
    below, count_below = 0.0, 0.0
    for b in bounds:
        in_bucket = max(0.0, buckets[b] - count_below)
        short_low += in_bucket * below
        short_high += in_bucket * b
        below, count_below = b, buckets[b]
    long = max(0.0, n - buckets[split])
    if not long:
        return CTCleanWaits(n, 0.0, split, None, None)
    low = max(split, (total - short_high) / long)
    high = max(low, (total - short_low) / long)
    return CTCleanWaits(n, long, split, low, high)


@dataclass
class NodeFacts:
    node: str
    maps: dict[str, MapFacts] = field(default_factory=dict)  # pinned map name -> facts
    rates: dict[str, tuple[float, str]] = field(default_factory=dict)  # family -> (entries/s, ctwatch's source)
    deadline: float | None = None
    burst: int | None = None
    ctwatch_level: int | None = None  # the worst family's, as ctwatch reported it
    gc_interval: float | None = None
    gc_interval_series: str = ""
    observed_gc: dict[str, float] = field(default_factory=dict)  # family -> mean completed GC pass, both maps
    observed_ct_clean: CTCleanWaits | None = None  # waitingForCTClean's histogram over the observed window
    regeneration: float | None = None  # mean regeneration time less its CT-clean wait, over the observed window
    limiter: dict[str, float] = field(default_factory=dict)  # endpoint-create's limiter now: LIMITER's keys
    sources: set[str] = field(default_factory=set)  # "ctwatch", "cilium"
    release: Release | None = None  # the agent's Cilium release, from cilium_version{version}
    release_series: str = ""
    down: list[str] = field(default_factory=list)  # ctwatch sources that did not answer
    implausible: list[str] = field(default_factory=list)  # series out of the bounds of the flag they stand for

    def map(self, name: str) -> MapFacts:
        return self.maps.setdefault(name, MapFacts())


@dataclass(frozen=True)
class Query:
    """The fleet's read: which label names a node, which series to keep, the growth window."""

    node_label: str = DEFAULT_NODE_LABEL  # comma-separated: the first a series carries names its node
    selector: str = ""  # PromQL label matchers, e.g. cluster="prod-eu"
    window: str = "1h"
    at: float | None = None  # evaluation time (unix seconds); None: the server's now

    def __post_init__(self) -> None:
        if not all(_LABEL.match(label) for label in self.node_label.split(",")):
            raise InputError(f"Prometheus label names, comma-separated; got {self.node_label!r}", "node_label")
        if not _WINDOW.match(self.window):
            raise InputError(f"a PromQL duration such as 30m, 1h or 1d, got {self.window!r}", "window")
        if "{" in self.selector or "}" in self.selector:
            raise InputError(
                f'label matchers without braces, e.g. cluster="prod-eu"; got {self.selector!r}', "selector"
            )

    def of(self, metric: str, *matchers: str) -> str:
        """``metric{matchers, selector}``."""
        inner = ",".join(m for m in (*matchers, self.selector.strip()) if m)
        return f"{metric}{{{inner}}}"

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.node_label.split(","))

    def node_of(self, labels: dict[str, str]) -> str | None:
        return next((labels[k] for k in self.labels if labels.get(k)), None)

    def by(self, *labels: str) -> str:
        return "by (" + ", ".join((*self.labels, *labels)) + ")"


_CT_PRESSURE = 'map_name=~"' + "|".join(CILIUM_PRESSURE_MAPS) + '"'
# Capacity is by map group, and a map made by bpf.NewMap is its own group under its full pinned name; a map of
# exactly 65,536 entries is left to the "default" group (UpdateMapCapacity), so it is not read here.
_CT_CAPACITY = 'map_group=~"' + "|".join(FAMILY_OF_MAP) + '"'
# cilium_datapath_conntrack_gc_entries' (family, protocol) -> the pinned map (gcFamily, gcProtocol's strings)
_GC_MAP = {(family, proto): names[i] for family, names in CT_MAPS.items() for i, proto in enumerate(("TCP", "non-TCP"))}


# endpoint-create's limiter as the agent last set it (pkg/rate/metrics): (metric, value label) -> key
LIMITER = {
    ("cilium_api_limiter_processing_duration_seconds", "mean"): "mean_processing_s",
    ("cilium_api_limiter_processing_duration_seconds", "estimated"): "estimated_processing_s",
    ("cilium_api_limiter_requests_in_flight", "limit"): "parallel_requests",
    ("cilium_api_limiter_requests_in_flight", "in-flight"): "in_flight",
    ("cilium_api_limiter_rate_limit", "limit"): "rate_limit",
    ("cilium_api_limiter_rate_limit", "burst"): "rate_burst",
    ("cilium_api_limiter_adjustment_factor", ""): "adjustment_factor",
}
REFUSED = 'api_call="endpoint-create",outcome=~"fail-parallel-wait|fail-limit-wait"'
MEAN_PROCESSING_SERIES = 'cilium_api_limiter_processing_duration_seconds{api_call="endpoint-create",value="mean"}'


def queries(q: Query) -> dict[str, str]:
    """Every query of one fleet read, by what it answers; the count does not depend on the fleet's size."""
    entries = q.of("ctwatch_entries", 'source!="nf_conntrack"')
    pressure = q.of("cilium_bpf_map_pressure", _CT_PRESSURE)
    gc_sum = q.of("cilium_datapath_conntrack_gc_duration_seconds_sum", 'status="completed"')
    gc_count = q.of("cilium_datapath_conntrack_gc_duration_seconds_count", 'status="completed"')
    clean = 'scope="waitingForCTClean"'
    clean_sum = q.of("cilium_endpoint_regeneration_time_stats_seconds_sum", clean)
    clean_bucket = q.of("cilium_endpoint_regeneration_time_stats_seconds_bucket", clean)
    total_sum = q.of("cilium_endpoint_regeneration_time_stats_seconds_sum", 'scope="total"')
    total_count = q.of("cilium_endpoint_regeneration_time_stats_seconds_count", 'scope="total"')
    names = "|".join(sorted({metric.removeprefix("cilium_api_limiter_") for metric, _ in LIMITER}))
    limiter = q.of("", f'__name__=~"cilium_api_limiter_({names})"', 'api_call="endpoint-create"')
    w = OBSERVED_WINDOW
    by_proto = q.by("family", "protocol")
    return {
        "entries": entries,
        "max_entries": q.of("ctwatch_max_entries", 'source="bpf"'),
        "growth": f"deriv({entries}[{q.window}])",
        "rate": q.of("ctwatch_walk_rate_entries_per_second"),
        "deadline": q.of("ctwatch_deadline_seconds"),
        "burst": q.of("ctwatch_burst_pods"),
        "level": q.of("ctwatch_level"),
        "source_up": q.of("ctwatch_source_up"),
        "ctwatch_gc_interval": q.of("ctwatch_cilium_gc_interval_seconds"),
        "pressure": pressure,
        "capacity": q.of("cilium_bpf_map_capacity", _CT_CAPACITY),
        "gc_entries": q.of("cilium_datapath_conntrack_gc_entries", 'status="alive"'),
        "pressure_growth": f"deriv({pressure}[{q.window}])",
        "gc_interval": q.of("cilium_datapath_conntrack_gc_interval_seconds"),
        "gc_duration": (f"sum {by_proto} (increase({gc_sum}[{w}])) / sum {by_proto} (increase({gc_count}[{w}])) > 0"),
        "ct_clean_sum": f"sum {q.by()} (increase({clean_sum}[{w}]))",
        "ct_clean_buckets": f"sum {q.by('le')} (increase({clean_bucket}[{w}]))",
        # Each regeneration's time apart from its wait for CT clean (the model's regeneration): both sums
        # over the count; absent where either scope is (an unknown wait is not subtracted as 0).
        "regeneration": (
            f"(sum {q.by()} (increase({total_sum}[{w}])) - sum {q.by()} (increase({clean_sum}[{w}]))) "
            f"/ sum {q.by()} (increase({total_count}[{w}])) >= 0"
        ),
        "limiter": limiter,
        "version": q.of("cilium_version"),
        # The limiter's refusals over the day (Wait's max-wait outcomes, answered 429: pkg/rate/api_limiter.go)
        "refused": f"sum {q.by()} (increase({q.of('cilium_api_limiter_processed_requests_total', REFUSED)}[{w}]))",
        # The second hazard, the cluster's: kube-proxy's nftables syncs (fleet/kube_proxy.py).
        **kube_proxy.queries(q, w),
    }


Each = Callable[[str], Iterable[tuple[NodeFacts, Sample]]]  # a query's name -> its samples, by node


@dataclass
class FleetRead:
    nodes: dict[str, NodeFacts]
    queried_at: float
    queries: dict[str, str]
    series: dict[str, int]  # query -> series returned
    unlabelled: int  # series without the node label, left out
    warnings: tuple[str, ...] = ()  # what Prometheus warned of while answering (a partial answer)
    kube_proxy: dict[str, kube_proxy.KubeProxyFacts] = field(default_factory=dict)  # node -> its kube-proxy


def read_fleet(client: Client, q: Query, only: str | None = None) -> FleetRead:
    """One read of the whole fleet, or with ``only`` of that node (one read per node label);
    raises PrometheusError when the API cannot answer."""
    at = q.at if q.at is not None else time.time()
    exprs = queries(q)
    if only is None:
        answers = {name: client.query(expr, at) for name, expr in exprs.items()}
    else:
        answers = {name: [] for name in exprs}
        value = only.replace("\\", "\\\\").replace('"', '\\"')
        seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()  # a series both labels select, once
        for label in q.labels:
            selector = ",".join(m for m in (f'{label}="{value}"', q.selector) if m)
            for name, expr in queries(dataclasses.replace(q, selector=selector)).items():
                for s in client.query(expr, at):
                    key = (name, frozenset(s.labels.items()))
                    if q.node_of(s.labels) == only and key not in seen:
                        seen.add(key)
                        answers[name].append(s)
    nodes: dict[str, NodeFacts] = {}
    unlabelled = 0

    def each(name: str) -> Iterable[tuple[NodeFacts, Sample]]:
        nonlocal unlabelled
        for s in answers[name]:
            node = q.node_of(s.labels)
            if not node:
                unlabelled += 1
                continue
            facts = nodes.get(node)
            if facts is None:
                facts = nodes[node] = NodeFacts(node)
            yield facts, s

    _ctwatch(each)
    _cilium(each)
    series = {name: len(a) for name, a in answers.items()}
    syncs = kube_proxy.read(answers, q)  # rows of their own: a node with kube-proxy alone is no CT row
    return FleetRead(nodes, at, exprs, series, unlabelled, tuple(client.warnings), syncs)


def _finite(v: float) -> bool:
    return v == v and abs(v) != float("inf")


REGENERATION_SERIES = (
    'cilium_endpoint_regeneration_time_stats_seconds{scope="total"} less {scope="waitingForCTClean"}, '
    f"mean over {OBSERVED_WINDOW}"
)


# Figures the fleet's queries compute as a ratio over a window: NaN there is 0/0, nothing happened, not a bad series.
_RATIOS = frozenset({"regeneration"})


def _plausible(facts: NodeFacts, kind: str, series: str, value: float) -> bool:
    """``value`` a plausible ``kind`` (``core.bounds``); else named on the node: it exists and is unusable."""
    if not _finite(value):
        if value != value and kind in _RATIOS:  # an empty window's mean: absent
            return False
        facts.implausible.append(f"{series} = {value} is not a usable number: left out")
        return False
    why = check(kind, value)
    if why is None:
        return True
    facts.implausible.append(f"{series} = {value:.6g} is implausible ({why}): left out")
    return False


def _ctwatch(each: Each) -> None:
    """ctwatch's series: per map, Cilium's pressure x capacity where ctwatch had it (its own choice), else its count."""
    rank = {"cilium_metrics": 2, "bpf": 1}
    chosen: dict[tuple[str, str], str] = {}
    for facts, s in each("entries"):
        name, source = s.labels.get("map", ""), s.labels.get("source", "")
        if name not in FAMILY_OF_MAP:
            continue
        series = f'ctwatch_entries{{map="{name}",source="{source}"}}'
        if not _plausible(facts, "entries", series, s.value):
            continue
        facts.sources.add("ctwatch")
        key = (facts.node, name)
        if rank.get(source, 0) >= rank.get(chosen.get(key, ""), 0):
            chosen[key] = source
            m = facts.map(name)
            m.entries = s.value
            m.entries_series = series
    for facts, s in each("growth"):
        name = s.labels.get("map", "")
        if chosen.get((facts.node, name)) == s.labels.get("source") and _finite(s.value):
            facts.map(name).growth = s.value
    for facts, s in each("max_entries"):
        name = s.labels.get("map", "")
        if name in FAMILY_OF_MAP and _plausible(facts, "max_entries", f'ctwatch_max_entries{{map="{name}"}}', s.value):
            facts.sources.add("ctwatch")
            m = facts.map(name)
            m.max_entries = int(s.value)
            m.capacity_series = f'ctwatch_max_entries{{map="{name}"}}'
    for facts, s in each("rate"):
        family = s.labels.get("family", "")
        series = f'ctwatch_walk_rate_entries_per_second{{family="{family}"}}'
        if family in CT_MAPS and _plausible(facts, "rate", series, s.value):
            facts.sources.add("ctwatch")
            # whole entries/s, as --rate takes it: the row and the run it suggests model one rate
            facts.rates[family] = (float(round(s.value)), s.labels.get("source", ""))
    for facts, s in each("deadline"):
        if _plausible(facts, "deadline", "ctwatch_deadline_seconds", s.value):
            facts.deadline = s.value
    for facts, s in each("burst"):
        if _plausible(facts, "burst", "ctwatch_burst_pods", s.value):
            facts.burst = int(s.value)
    for facts, s in each("level"):
        if s.labels.get("family") in CT_MAPS and _finite(s.value):
            facts.ctwatch_level = max(int(s.value), facts.ctwatch_level or 0)
    for facts, s in each("source_up"):
        if s.value == 0:
            facts.down.append(s.labels.get("source", "?"))
    for facts, s in each("ctwatch_gc_interval"):
        if _plausible(facts, "gc_interval", "ctwatch_cilium_gc_interval_seconds", s.value):
            facts.gc_interval, facts.gc_interval_series = s.value, "ctwatch_cilium_gc_interval_seconds"


def _cilium(each: Each) -> None:
    """Cilium's own series: pressure where ctwatch gave no count, its GC interval, and what it observed."""
    for facts, s in each("pressure"):
        name = CILIUM_PRESSURE_MAPS.get(s.labels.get("map_name", ""))
        series = f'cilium_bpf_map_pressure{{map_name="{s.labels.get("map_name", "")}"}}'
        if name is None or not _plausible(facts, "pressure", series, s.value):
            continue
        facts.sources.add("cilium")
        m = facts.map(name)
        if m.entries is None:
            m.pressure = s.value
            m.entries_series = series
    for facts, s in each("capacity"):
        name = s.labels.get("map_group", "")
        series = f'cilium_bpf_map_capacity{{map_group="{name}"}}'
        if name not in FAMILY_OF_MAP or not _plausible(facts, "max_entries", series, s.value):
            continue
        facts.sources.add("cilium")
        m = facts.map(name)
        if m.max_entries is None:  # ctwatch's, read from the map itself, came first
            m.max_entries, m.capacity_series = int(s.value), series
    for facts, s in each("gc_entries"):  # every version: alive entries at the end of each completed GC pass
        family, protocol = s.labels.get("family", ""), s.labels.get("protocol", "")
        name = _GC_MAP.get((family, protocol))
        series = f'cilium_datapath_conntrack_gc_entries{{family="{family}",protocol="{protocol}",status="alive"}}'
        if name is None or not _plausible(facts, "entries", series, s.value):
            continue
        facts.sources.add("cilium")
        m = facts.map(name)
        if m.entries is None and m.pressure is None:  # the pressure is now; this count is of the last pass
            m.entries, m.entries_series, m.at_last_pass = s.value, series, True
    for facts, s in each("pressure_growth"):
        name = CILIUM_PRESSURE_MAPS.get(s.labels.get("map_name", ""))
        if name is not None and facts.map(name).pressure is not None and _finite(s.value):
            facts.map(name).growth = s.value  # a share of the map per second, until a capacity is known
    for facts, s in each("gc_interval"):
        if _plausible(facts, "gc_interval", "cilium_datapath_conntrack_gc_interval_seconds", s.value):
            facts.sources.add("cilium")
            facts.gc_interval = s.value
            facts.gc_interval_series = "cilium_datapath_conntrack_gc_interval_seconds"
    for facts, s in each("gc_duration"):
        family = s.labels.get("family", "")
        if family in CT_MAPS and _finite(s.value):
            facts.observed_gc[family] = facts.observed_gc.get(family, 0.0) + s.value
    sums = {facts.node: s.value for facts, s in each("ct_clean_sum") if _finite(s.value)}
    buckets: dict[str, tuple[NodeFacts, dict[float, float]]] = {}
    for facts, s in each("ct_clean_buckets"):
        try:
            le = float(s.labels.get("le", ""))
        except ValueError:
            continue
        if _finite(s.value) and le == le:
            buckets.setdefault(facts.node, (facts, {}))[1][le] = s.value
    for node, (facts, by_le) in buckets.items():
        if node in sums:
            facts.observed_ct_clean = ct_clean_waits(by_le, sums[node])
    for facts, s in each("regeneration"):
        if _plausible(facts, "regeneration", REGENERATION_SERIES, s.value):
            facts.sources.add("cilium")
            # To the millisecond: two reads a moment apart (a fleet row, then run --from-prometheus) see this
            # windowed mean move in its last digits; so rounded, both model the same figure.
            facts.regeneration = round(s.value, 3)
    for facts, s in each("version"):  # a version ctsim cannot read (1.15, a dev build) is no release
        with contextlib.suppress(InputError):
            version = s.labels.get("version", "")
            facts.release = parse_release(version.split("-")[0])  # 1.18.0-rc.1: 1.18.0
            facts.release_series = f'cilium_version{{version="{version}"}}'
            facts.sources.add("cilium")
    for facts, s in each("refused"):
        if _finite(s.value) and s.value >= 0:
            facts.limiter["refused_over_window"] = s.value
    for facts, s in each("limiter"):
        key = LIMITER.get((s.labels.get("__name__", ""), s.labels.get("value", "")))
        series = f'{s.labels.get("__name__", "")}{{api_call="endpoint-create",value="{s.labels.get("value", "")}"}}'
        if key is not None and _plausible(facts, "limiter", series, s.value):
            facts.sources.add("cilium")
            # the mean create to the millisecond, as the regeneration (one node, one answer across reads)
            facts.limiter[key] = round(s.value, 3) if key == "mean_processing_s" else s.value
