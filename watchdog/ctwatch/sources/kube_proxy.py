"""kube-proxy's nftables table, counted over netlink, and its sync metrics: the second hazard, watched.

The table (``table ip kube-proxy``) is counted with pyroute2's nftables
support, in-process: one ``NFT_MSG_GETTABLE`` (its use count is its chains
plus its named sets) and one dump of its sets (each anonymous map is a
Service's ``numgen`` vmap). Not ``nft -j``: the sidecar would need the
binary, and ``nft`` formats every rule and element as JSON where two counts
are all the projection needs. Rules and elements are not dumped at all: at
40,000 Services a rule dump costs seconds of CPU. The sets dump still grows
with the Services, so it runs at most every ``--kube-proxy.count-every``.

From the counts, the layout and its Services (``core.nft_layout.infer``)
go into the same cost law ``ctsim nft run`` uses, against kube-proxy's own
``/healthz`` threshold. A node without the table (Cilium's kube-proxy
replacement, iptables mode) is no fault: the source stays up and says so.

kube-proxy's metrics are read where they are reachable; where they are
not, their series are absent from the page (never zeros) and
``ctwatch_kube_proxy_metrics_up`` is 0.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctsim.core.errors import InputError
from ctsim.core.kube_proxy_sync import Deadlines, SyncProjection, project
from ctsim.core.nft_layout import infer
from ctwatch import scrape
from ctwatch.collector import Collector, Cycle, Setting, register_collector
from ctwatch.readings import SourceResult

if TYPE_CHECKING:
    from prometheus_client.core import GaugeMetricFamily

    from ctsim.core.nft_cost import NftCalibration

NAME = "kube_proxy"
TABLE = "kube-proxy"
FAMILIES = {"ip": 2, "ip6": 10}  # NFPROTO_IPV4, NFPROTO_IPV6


@dataclass(frozen=True)
class NftTable:
    """kube-proxy's table as counted: None everywhere when the node has none."""

    family: str
    present: bool
    chains: int = 0
    named_sets: int = 0
    anonymous_maps: int = 0
    endpoints_map: bool = False  # the redesign's shared @endpoints map


@dataclass(frozen=True)
class KubeProxySyncs:
    """kube-proxy's own figures, from its metrics page: means over its lifetime; None where absent."""

    full_mean_s: float | None = None
    partial_mean_s: float | None = None
    all_mean_s: float | None = None
    programming_mean_s: float | None = None
    last_sync_timestamp_s: float | None = None


@dataclass(frozen=True)
class Projected:
    projection: SyncProjection | None
    why_not: str = ""  # why no projection ("" when there is one)


def count_table(family: str, netns: str | None) -> NftTable:
    """The counts, in a thread of its own that enters ``netns`` first (setns changes only the calling thread)."""
    box: dict[str, object] = {}

    def work() -> None:
        try:
            if netns:
                from pyroute2 import netns as pyroute2_netns

                pyroute2_netns.setns(netns, flags=0)  # flags=0: never create it
            box["table"] = _count(family)
        except Exception as exc:  # handed to the caller's thread, which marks the source down
            box["error"] = exc

    t = threading.Thread(target=work, name="ctwatch-nftables", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["table"]  # type: ignore[return-value]


def _count(family: str) -> NftTable:
    from pyroute2.nftables.main import NFTables

    nft = NFTables(nfgen_family=FAMILIES[family])
    try:
        tables = [t for t in nft.get_tables() if t.get("NFTA_TABLE_NAME") == TABLE]
        if not tables:
            return NftTable(family, present=False)
        use = int(tables[0].get("NFTA_TABLE_USE") or 0)
        named = anonymous = 0
        endpoints_map = False
        for s in nft.get_sets():
            if s.get("NFTA_SET_TABLE") != TABLE:
                continue
            flags = s.get("NFTA_SET_FLAGS") or frozenset()
            if "NFT_SET_ANONYMOUS" in flags:
                anonymous += "NFT_SET_MAP" in flags
            else:
                named += 1
                endpoints_map = endpoints_map or s.get("NFTA_SET_NAME") == "endpoints"
        # The table's use count is its chains and its named sets (anonymous ones are bound to rules).
        return NftTable(family, True, max(use - named, 0), named, anonymous, endpoints_map)
    finally:
        nft.close()


def parse_metrics(page: str) -> KubeProxySyncs:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        families = list(text_string_to_metric_families(page))
    except Exception as exc:  # the parser raises several types on garbage
        raise scrape.BadMetrics(f"unparsable metrics page: {exc}") from exc
    sums: dict[str, float] = {}
    for family in families:
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)

    def mean(base: str) -> float | None:
        count = sums.get(f"{base}_count")
        return sums[f"{base}_sum"] / count if count and f"{base}_sum" in sums else None

    syncs = KubeProxySyncs(
        full_mean_s=mean("kubeproxy_sync_full_proxy_rules_duration_seconds"),
        partial_mean_s=mean("kubeproxy_sync_partial_proxy_rules_duration_seconds"),
        all_mean_s=mean("kubeproxy_sync_proxy_rules_duration_seconds"),
        programming_mean_s=mean("kubeproxy_network_programming_duration_seconds"),
        last_sync_timestamp_s=sums.get("kubeproxy_sync_proxy_rules_last_timestamp_seconds"),
    )
    if syncs == KubeProxySyncs():
        raise scrape.BadMetrics("no kubeproxy_sync_proxy_rules_* series on the page")
    return syncs


_IN_FLIGHT = threading.Semaphore(1)


def projected(table: NftTable, cal: NftCalibration, deadlines: Deadlines) -> Projected:
    if not table.present:
        return Projected(None, f"no table {table.family} {TABLE} on this node")
    inferred = infer(table.chains, table.anonymous_maps, table.endpoints_map)
    if inferred is None:
        return Projected(None, "the table's layout or its Services cannot be told from its counts")
    layout, services, mix = inferred
    if layout not in cal.fits:
        return Projected(None, f"the calibration has no fit for layout {layout.value}")
    return Projected(project(cal, layout, services, mix, deadlines))


def _collect(cycle: Cycle, result: SourceResult) -> None:
    config = cycle.config
    now = cycle.clock()
    last = cycle.state.get(NAME)
    if last is None or now - last[0] >= config["kube_proxy_count_every_s"]:
        table = count_table(config["kube_proxy_family"], config["kube_proxy_netns"])
        cycle.state[NAME] = (now, table)
    else:
        table = last[1]
    deadlines = Deadlines.of(config["kube_proxy_sync_period_s"])
    cal = config["kube_proxy_calibration"] or _packaged()
    result.readings = [table, projected(table, cal, deadlines), deadlines]
    url = config["kube_proxy_metrics_url"]
    if url:
        try:
            page = scrape.fetch(url, config["kube_proxy_metrics_timeout_s"], _IN_FLIGHT)
            result.readings.append(parse_metrics(page))
        except Exception as exc:  # the metrics are extra: the table's projection stands without them
            result.readings.append(MetricsDown(str(exc)))


@dataclass(frozen=True)
class MetricsDown:
    why: str


def _expose(result: SourceResult) -> Iterator[GaugeMetricFamily]:
    from prometheus_client.core import GaugeMetricFamily

    for table in result.of(NftTable):
        labels = ["family", "table"]
        values = [table.family, TABLE]
        present = GaugeMetricFamily(
            "ctwatch_kube_proxy_table_present", "1 if kube-proxy's nftables table exists on the node.", labels=labels
        )
        present.add_metric(values, 1.0 if table.present else 0.0)
        yield present
        if not table.present:
            continue
        for name, help_text, value in (
            ("chains", "Chains in kube-proxy's table.", table.chains),
            ("named_sets", "Named sets and maps in kube-proxy's table.", table.named_sets),
            ("anonymous_maps", "Anonymous maps (a Service's numgen vmap each) in kube-proxy's table.",
             table.anonymous_maps),
        ):  # fmt: skip
            g = GaugeMetricFamily(f"ctwatch_kube_proxy_table_{name}", help_text, labels=labels)
            g.add_metric(values, float(value))
            yield g
    for deadlines in result.of(Deadlines):
        yield GaugeMetricFamily(
            "ctwatch_kube_proxy_healthz_deadline_seconds",
            "kube-proxy's /healthz threshold: 2 x syncPeriod without a sync.",
            value=deadlines.healthz_s,
        )
    for p in result.of(Projected):
        if p.projection is None:
            continue
        q = p.projection
        g = GaugeMetricFamily(
            "ctwatch_kube_proxy_projected_sync_seconds",
            "kube-proxy's sync time projected from the table's counts and the nft cost law.",
            labels=["sync", "layout"],
        )
        g.add_metric(["full", q.layout.value], q.full_sync_s)
        g.add_metric(["partial", q.layout.value], q.partial_sync_s)
        yield g
        yield GaugeMetricFamily(
            "ctwatch_kube_proxy_full_sync_deadline_ratio",
            "Projected full sync over /healthz's threshold: 1 or more fails /healthz on every start-up.",
            value=q.full_sync_s / q.deadlines.healthz_s,
        )
        yield GaugeMetricFamily(
            "ctwatch_kube_proxy_services_estimated", "Services the table's counts imply.", value=q.services
        )
    metrics_up = GaugeMetricFamily(
        "ctwatch_kube_proxy_metrics_up", "1 if kube-proxy's metrics page was read this cycle."
    )
    syncs = result.of(KubeProxySyncs)
    if result.of(MetricsDown) or syncs:
        metrics_up.add_metric([], 1.0 if syncs else 0.0)
        yield metrics_up
    for s in syncs:
        observed = GaugeMetricFamily(
            "ctwatch_kube_proxy_observed_sync_seconds",
            "kube-proxy's mean sync time over its lifetime (kubeproxy_sync_*proxy_rules_duration_seconds).",
            labels=["sync"],
        )
        for kind, value in (("full", s.full_mean_s), ("partial", s.partial_mean_s), ("all", s.all_mean_s)):
            if value is not None:
                observed.add_metric([kind], value)
        yield observed
        if s.programming_mean_s is not None:
            yield GaugeMetricFamily(
                "ctwatch_kube_proxy_observed_network_programming_seconds",
                "kube-proxy's mean network programming latency (kubeproxy_network_programming_duration_seconds).",
                value=s.programming_mean_s,
            )
        if s.last_sync_timestamp_s is not None:
            yield GaugeMetricFamily(
                "ctwatch_kube_proxy_last_sync_timestamp_seconds",
                "When kube-proxy last synced (kubeproxy_sync_proxy_rules_last_timestamp_seconds).",
                value=s.last_sync_timestamp_s,
            )


def _family(text: str) -> str:
    if text not in FAMILIES:
        raise InputError(f"--kube-proxy.family: ip or ip6, got {text!r}")
    return text


def _duration(flag: str, minimum: float, maximum: float):  # type: ignore[no-untyped-def]
    def parse(text: str) -> float:
        from ctsim.core.quantity import parse_duration

        return parse_duration(text, flag, minimum=minimum, maximum=maximum)

    return parse


def _calibration(text: str) -> NftCalibration:
    from ctsim.core import nft_cost

    return nft_cost.load(text, "--kube-proxy.calibration") if text else _packaged()


@functools.cache
def _packaged() -> NftCalibration:
    """ctsim's packaged calibration, read on first use (ctwatch's start-up stays light)."""
    from ctsim.core import nft_cost

    return nft_cost.packaged()


DEFAULT_URL = "http://127.0.0.1:10249/metrics"  # kube-proxy's metricsBindAddress default
SETTINGS = (
    Setting("kube_proxy_family", "ip", "--kube-proxy.family", "ip|ip6", "The table's family.", "ip", _family),
    Setting(
        "kube_proxy_netns", None, "--kube-proxy.netns", "NAME",
        "Count the table in this named netns (default: ctwatch's own, the node's with hostNetwork).", "", str,
    ),
    Setting(
        "kube_proxy_count_every_s", 600.0, "--kube-proxy.count-every", "DURATION",
        "Count the table at most this often: its sets dump grows with the Services.", "10m",
        _duration("--kube-proxy.count-every", 0.0, 86400.0),
    ),
    Setting(
        "kube_proxy_calibration", None, "--kube-proxy.calibration", "FILE",
        "A `ctsim nft calibrate -o` file for this kernel (default: ctsim's packaged one).", "", _calibration,
    ),
    Setting(
        "kube_proxy_sync_period_s", 30.0, "--kube-proxy.sync-period", "DURATION",
        "kube-proxy's syncPeriod: /healthz fails after twice it.", "30s",
        _duration("--kube-proxy.sync-period", 1.0, 86400.0),
    ),
    Setting(
        "kube_proxy_metrics_url", DEFAULT_URL, "--kube-proxy.metrics-url", "URL",
        "kube-proxy's metrics (http or https; '' to skip them).", DEFAULT_URL,
        scrape.url_setting("--kube-proxy.metrics-url", optional=True),
    ),
    Setting(
        "kube_proxy_metrics_timeout_s", 2.0, "--kube-proxy.metrics-timeout", "DURATION",
        "Give up on kube-proxy after this.", "2s", _duration("--kube-proxy.metrics-timeout", 0.01, 60.0),
    ),
)  # fmt: skip
register_collector(
    Collector(NAME, "kube-proxy's nftables table and sync metrics.", _collect, settings=SETTINGS, expose=_expose)
)
