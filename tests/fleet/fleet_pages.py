"""A fixture fleet: each node's pages as ctwatch and a Cilium agent would serve them.

ctwatch pages come from ctwatch's own code (readings -> Assessor ->
SnapshotCollector -> prometheus-client), Cilium pages from prometheus-client
metric families: no exposition text is written by hand. Each node's facts
are kept (``Node``) so a test can project them with ``ctsim.core.projection``
and compare with what ``ctsim fleet`` read back through Prometheus.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from ctwatch.assess import Assessor, Thresholds
from ctwatch.exposition import SnapshotCollector, new_registry
from ctwatch.readings import FAMILY_OF_MAP, MapReading, SourceResult, WalkRate
from ctwatch.sources.cilium_metrics import AgentGC
from ctwatch.watcher import Snapshot
from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from ctsim.core.defaults import CILIUM_PRESSURE_MAPS, CT_MAPS, ENDPOINT_CREATE
from ctsim.core.rate import LimiterCore

T0 = time.time()
PRESSURE_NAME = {pinned: label for label, pinned in CILIUM_PRESSURE_MAPS.items()}
TCP_MAPS = {names[0] for names in CT_MAPS.values()}


@dataclass
class Node:
    """One node's facts. ``maps``: pinned name -> (entries at T0, capacity); ``slope``: entries/s on the TCP map."""

    name: str
    cluster: str
    ctwatch: bool
    cilium: bool
    maps: dict[str, tuple[int, int]]
    rate: float = 213_000.0
    burst: int = 10
    deadline: float = 90.0
    slope: float = 0.0
    down: tuple[str, ...] = ()  # ctwatch sources that fail
    gc_mean: dict[str, float] = field(default_factory=dict)  # family -> mean completed GC pass (Cilium)
    ct_clean_mean: float | None = None
    regeneration: float | None = None  # mean regeneration less its CT-clean wait (Cilium's scope="total")
    limiter_mean: float | None = None  # endpoint-create's meanProcessingDuration (cilium_api_limiter_*)
    limiter_parallel: int = 0  # its ParallelRequests as the agent reports it
    limiter_rate: tuple[float, int] | None = None  # its rate limit and burst as the agent reports them (exported)
    gc_interval: float | None = None
    pressure: bool = True  # Cilium exports CT map pressure
    capacity: bool = False  # Cilium exports cilium_bpf_map_capacity (1.15 on)
    gc_entries: bool = False  # Cilium exports cilium_datapath_conntrack_gc_entries (a GC pass completed)
    version: str | None = None  # cilium_version{version}: the agent's release

    def entries(self, name: str, now: float) -> int:
        e, cap = self.maps[name]
        grown = e + round(self.slope * (now - T0)) if name == CT_MAPS["ipv4"][0] else e
        return max(0, min(cap, grown))


def ctwatch_page(node: Node, now: float) -> str:
    results: dict[str, SourceResult] = {}
    bpf = SourceResult("bpf", up="bpf" not in node.down, duration_s=0.01)
    if bpf.up:
        bpf.readings = [
            MapReading("bpf", FAMILY_OF_MAP[name], name, node.entries(name, now), cap)
            for name, (_, cap) in node.maps.items()
        ]
        families = dict.fromkeys(FAMILY_OF_MAP[name] for name in node.maps)
        bpf.readings += [WalkRate(family, node.rate) for family in families]
    results["bpf"] = bpf
    metrics = SourceResult("cilium_metrics", up="cilium_metrics" not in node.down and node.cilium, duration_s=0.01)
    if metrics.up and node.gc_interval is not None:
        metrics.readings.append(AgentGC(interval_s=node.gc_interval))
    results["cilium_metrics"] = metrics
    thresholds = Thresholds(burst=node.burst, deadline_s=node.deadline)
    families = Assessor(thresholds, 213_000.0).assess(now, results)
    collector = SnapshotCollector(thresholds)
    collector.update(Snapshot(results, families, 0.001, 1.0, 1, {}))
    return generate_latest(new_registry(collector)).decode()


class _Cilium(Collector):
    def __init__(self, node: Node, now: float) -> None:
        self.node, self.now = node, now

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily | CounterMetricFamily]:
        n, now = self.node, self.now
        if n.pressure:
            p = GaugeMetricFamily("cilium_bpf_map_pressure", "Fill percentage of map", labels=["map_name"])
            for name, (_, cap) in n.maps.items():
                p.add_metric([PRESSURE_NAME[name]], n.entries(name, now) / cap)
            p.add_metric(["lb4_services_v2"], 0.001)
            yield p
        if n.capacity:  # UpdateMapCapacity: a map's group is its pinned name; 65,536 entries is "default"
            c = GaugeMetricFamily("cilium_bpf_map_capacity", "Capacity of map", labels=["map_group"])
            for name, (_, cap) in n.maps.items():
                if cap != 65_536:
                    c.add_metric([name], cap)
            c.add_metric(["endpoint_policy"], 16_384)
            yield c
        if n.gc_entries:  # gcStats.finish: alive and deleted entries of each map's last completed pass
            g = GaugeMetricFamily(
                "cilium_datapath_conntrack_gc_entries", "Alive and deleted", labels=["family", "protocol", "status"]
            )
            for name in n.maps:
                family, protocol = FAMILY_OF_MAP[name], "TCP" if name in TCP_MAPS else "non-TCP"
                g.add_metric([family, protocol, "alive"], n.entries(name, now))
                g.add_metric([family, protocol, "deleted"], 1234)
            yield g
        if n.gc_interval is not None:
            yield GaugeMetricFamily("cilium_datapath_conntrack_gc_interval_seconds", "GC interval", value=n.gc_interval)
        if n.version is not None:
            v = GaugeMetricFamily("cilium_version", "Cilium version", labels=["arch", "revision", "version"])
            v.add_metric(["amd64", "0123abcd", n.version], 1.0)
            yield v
        passes = (now - T0 + 3600.0) / 60.0  # a pass a minute, so increase() over any window sees some
        gc = HistogramMetricFamily(
            "cilium_datapath_conntrack_gc_duration_seconds", "GC duration", labels=["family", "protocol", "status"]
        )
        for family, mean in n.gc_mean.items():
            for protocol in ("TCP", "non-TCP"):
                share = mean / 2  # each map's pass takes half the family's walk
                gc.add_metric([family, protocol, "completed"], [("+Inf", passes)], sum_value=passes * share)
        yield gc
        if n.ct_clean_mean is not None:
            regen = HistogramMetricFamily(
                "cilium_endpoint_regeneration_time_stats_seconds", "Regeneration", labels=["scope", "status"]
            )
            # Each minute one first build waits ct_clean_mean behind a scrub and POST_FIRST later regenerations
            # of endpoints already built wait microseconds: the buckets hold both, as an agent's do.
            short, wait = 2e-4, n.ct_clean_mean
            cumulative = [
                (repr(b), passes * (POST_FIRST * (short <= b) + (wait <= b))) for b in REGENERATION_BUCKETS
            ] + [("+Inf", passes * (POST_FIRST + 1))]
            total = passes * (POST_FIRST * short + wait)
            regen.add_metric(["waitingForCTClean", "success"], cumulative, sum_value=total)
            if n.regeneration is not None:  # every regeneration's whole time: its wait plus the rest
                count = passes * (POST_FIRST + 1)
                regen.add_metric(["total", "success"], [("+Inf", count)], sum_value=total + count * n.regeneration)
            yield regen
        if n.limiter_mean is not None:  # pkg/rate/metrics: the limiter's state after its last request
            state = {
                "processing_duration_seconds": {"mean": n.limiter_mean, "estimated": 2.0},
                "requests_in_flight": {"limit": float(n.limiter_parallel), "in-flight": 1.0},
                **(
                    {"rate_limit": {"limit": n.limiter_rate[0], "burst": float(n.limiter_rate[1])}}
                    if n.limiter_rate is not None
                    else {}
                ),
            }
            for name, values in state.items():
                g = GaugeMetricFamily(f"cilium_api_limiter_{name}", name, labels=["api_call", "value"])
                for value, v in values.items():
                    g.add_metric(["endpoint-create", value], v)
                yield g
            f = GaugeMetricFamily("cilium_api_limiter_adjustment_factor", "factor", labels=["api_call"])
            f.add_metric(["endpoint-create"], 0.05)
            yield f
            done = CounterMetricFamily(
                "cilium_api_limiter_processed_requests", "processed", labels=["api_call", "outcome", "return_code"]
            )
            done.add_metric(["endpoint-create", "success", "200"], now - T0)
            done.add_metric(["endpoint-create", "fail-parallel-wait", "429"], 3 * (now - T0))
            done.add_metric(["endpoint-create", "request-cancelled", "429"], now - T0)  # the client gave up: not a 429
            yield done


# prometheus-client's (and client_golang's) default buckets: Cilium's regeneration histogram sets none.
REGENERATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
POST_FIRST = 20  # regenerations of built endpoints (policy, identity churn) per first build


def cilium_page(node: Node, now: float) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Cilium(node, now))
    return generate_latest(registry).decode()


def fleet(n: int = 240) -> list[Node]:
    """``n`` nodes of every kind, deterministic: ctwatch and Cilium, ctwatch only, Cilium only, partial."""
    tcp, any_ = CT_MAPS["ipv4"]
    tcp6, any6 = CT_MAPS["ipv6"]
    nodes = []
    for i in range(n):
        kind = i % 8
        cluster = "prod-eu" if i % 2 == 0 else "prod-us"
        cap = 1 << (18 + i % 7)  # 256Ki .. 16Mi
        entries = (i * 7919) % cap
        maps = {tcp: (entries, cap), any_: (entries // 4, cap // 2)}
        node = Node(f"node-{i:03d}", cluster, ctwatch=True, cilium=True, maps=maps, rate=150_000.4 + 1_000 * (i % 50))
        if kind in (0, 1, 2):  # both sources
            node.gc_mean = {"ipv4": (entries + entries // 4) / node.rate * (10.0 if i % 24 == 0 else 1.0)}
            # Waits of 1.5 scrubs (behind another's), or on every twelfth node a fifth of one (a wrong rate).
            node.ct_clean_mean = (entries + entries // 4) / node.rate * (0.2 if i % 24 == 9 else 1.5)
            # Not whole milliseconds, as a measured mean never is: the row and the run it suggests must round alike.
            node.regeneration = 1.5 + 0.25 * (i % 5) + 0.000_437
            node.limiter_mean = (entries + entries // 4) / node.rate + node.regeneration
            # What AutoAdjust makes of that mean on v1.16.5's defaults; every 24th node's agent was tuned otherwise.
            core = LimiterCore("endpoint-create", ENDPOINT_CREATE)
            core.warm(node.limiter_mean)
            node.limiter_parallel = core.parallel_requests + (3 if i % 24 == 2 else 0)
            node.limiter_rate = (core.rate_limit, core.rate_burst)
        elif kind == 3:  # dual stack, ctwatch only
            node.cilium = False
            node.maps = {**maps, tcp6: (entries // 2, cap), any6: (entries // 8, cap // 2)}
            node.burst = 20
        elif kind == 4:  # ctwatch only, growing: on a 16Mi map with room for hours of it (a full map stops growing)
            node.cilium = False
            node.slope = 50.0 + i
            node.maps = {tcp: (entries % (1 << 20), 1 << 24), any_: (entries // 4 % (1 << 20), 1 << 23)}
        elif kind == 5:  # Cilium only: 1.15 on exports each CT map's capacity, before that it comes from flags
            node.ctwatch = False
            node.gc_interval = 3600.0 * (1 + i % 12)
            node.capacity = i % 16 == 5
        elif kind == 6:  # ctwatch's bpf source down: counts from Cilium only
            node.down = ("bpf",)
        else:  # Cilium without CT pressure: nothing to project, unless a GC pass left its counts
            node.ctwatch = False
            node.pressure = False
            node.gc_interval = 43_200.0
            node.gc_entries = i % 16 == 15
        nodes.append(node)
    return nodes


def render(nodes: dict[str, Node], path: str) -> str | None:
    """``/ctwatch/<node>`` and ``/cilium/<node>``."""
    _, kind, name = ([*path.split("?")[0].split("/"), "", ""])[:3]
    node = nodes.get(name)
    if node is None:
        return None
    now = time.time()
    if kind == "ctwatch" and node.ctwatch:
        return ctwatch_page(node, now)
    if kind == "cilium" and node.cilium:
        return cilium_page(node, now)
    return None


def sd_targets(address: str, nodes: list[Node]) -> list[dict[str, object]]:
    """As the shipped monitors label them: ctwatch's ``instance`` is the node name; Cilium's chart keeps the
    pod's address in ``instance`` and puts the node name in ``node``."""
    out: list[dict[str, object]] = []
    for i, n in enumerate(nodes):
        common = {"cluster": n.cluster}
        if n.ctwatch:
            labels = {"job": "ctwatch", "instance": n.name, "__metrics_path__": f"/ctwatch/{n.name}", **common}
            out.append({"targets": [address], "labels": labels})
        if n.cilium:
            pod = f"10.{i // 250}.{i % 250}.1:9962"
            labels = {"job": "cilium-agent", "instance": pod, "node": n.name, "__metrics_path__": f"/cilium/{n.name}"}
            out.append({"targets": [address], "labels": {**labels, **common}})
    return out
