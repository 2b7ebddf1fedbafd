"""``ctsim fleet``: read the fleet, rank it, simulate the riskiest, print a table (rich), JSON or CSV."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from ctsim.cli.term import print_json
from ctsim.core.defaults import DEFAULT_DYNAMIC_SIZE_RATIO
from ctsim.core.errors import InputError
from ctsim.core.printable import printable
from ctsim.core.quantity import format_count, format_duration, parse_float
from ctsim.fleet.kube_proxy import ClusterSyncs
from ctsim.fleet.risk import Assumptions, NodeRisk
from ctsim.fleet.series import FleetRead
from ctsim.inputs.given import Given

if TYPE_CHECKING:
    from rich.console import Console

    from ctsim.fleet.prometheus import Transport

_LEVEL_STYLE = {"critical": "bold red", "warning": "bold yellow", "ok": "green", "unknown": "dim"}


def _total(r: NodeRisk, key: str) -> int | None:
    values = [getattr(m, key) for m in r.maps.values()]
    return sum(values) if values and all(v is not None for v in values) else None


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if math.isinf(seconds):
        return "not growing"
    return "already" if seconds == 0 else format_duration(seconds)


def _rate_sources(r: NodeRisk) -> str:
    return "; ".join(sorted({v.source for v in r.walk_rate.values()}))


def _short(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 999_500 else f"{n / 1e3:.0f}k" if n >= 1000 else str(n)


def _fill(r: NodeRisk) -> str:
    """Entries of capacity, every CT map together, in a narrow cell: ``2.6M/4.0M``."""
    entries, of = _total(r, "entries"), _total(r, "max_entries")
    return f"{_dash(entries, _short)}/{_dash(of, _short)}"


def _dash(value: object, show: Callable[[Any], str] = str) -> str:
    return "—" if value is None else show(value)


def _verdict(r: NodeRisk) -> str:
    sim = r.simulated
    if sim is None:
        return ""
    if sim.replications is None:
        return sim.verdict
    count = sim.replications["summary"]["verdicts"][sim.verdict]["count"]
    return f"{sim.verdict} {count}/{len(sim.replications['seeds'])}"


class Column(NamedTuple):
    """One figure of a node's row: its CSV name and value, its table header and cell (None: not there)."""

    csv: str | None
    value: Callable[[int, NodeRisk], Any] | None
    header: str | None = None
    cell: Callable[[int, NodeRisk], str] | None = None
    simulated: bool = False  # in the table only when some row was simulated
    table: str = "both"  # "narrow" (the default table, fit for 120 columns), "wide" (--wide) or both


def _limiter(r: NodeRisk) -> str:
    """endpoint-create's limiter as the agent last set it: parallel requests, and the mean create."""
    parallel, mean = r.limiter.get("parallel_requests"), r.limiter.get("mean_processing_s")
    if parallel is None and mean is None:
        return "—"
    refused = r.limiter.get("refused_over_window")
    day = "" if refused is None else f", {refused:,.0f} 429s/d"
    return f"{_dash(parallel, '{:.0f}'.format)} at once, {_dash(mean, '{:.1f}s'.format)} mean{day}"


def _ct_clean(r: NodeRisk, key: str) -> float | None:
    """A figure of the node's CT-clean waits (``fleet.series.CTCleanWaits``); None where Cilium gave none."""
    return None if r.observed_ct_clean is None else r.observed_ct_clean.to_dict()[key]


def _sim(key: str) -> Callable[[int, NodeRisk], Any]:
    return lambda i, r: getattr(r.simulated, key) if r.simulated is not None else None


# Every column of a row, in order: a new figure is one entry here (its JSON key is NodeRisk's field).
COLUMNS: tuple[Column, ...] = (
    Column("rank", lambda i, r: i, "#", lambda i, r: str(i)),
    Column("node", lambda i, r: r.node, "node", lambda i, r: r.node),
    Column("level", lambda i, r: r.level, "level", lambda i, r: r.level),
    Column("sources", lambda i, r: " ".join(r.sources)),
    Column(
        "release",
        lambda i, r: str(r.release) if r.release is not None else None,
        "release",
        lambda i, r: str(r.release) if r.release is not None else "—",
        table="wide",
    ),
    Column(None, None, "entries", lambda i, r: _fill(r), table="narrow"),
    Column(
        "entries",
        lambda i, r: _total(r, "entries"),
        "entries",
        lambda i, r: _dash(_total(r, "entries"), format_count),
        table="wide",
    ),
    Column(
        "max_entries",
        lambda i, r: _total(r, "max_entries"),
        "of",
        lambda i, r: _dash(_total(r, "max_entries"), format_count),
        table="wide",
    ),
    Column("walk_seconds_ipv4", lambda i, r: r.walk_seconds.get("ipv4")),
    Column("walk_seconds_ipv6", lambda i, r: r.walk_seconds.get("ipv6")),
    Column(
        "scrub_seconds",
        lambda i, r: r.scrub_seconds,
        "walk s",
        lambda i, r: _dash(r.scrub_seconds, "{:.1f}".format),
        table="wide",
    ),
    Column("pods", lambda i, r: r.pods),
    Column("pods_source", lambda i, r: r.pods_source),
    Column(
        None,
        None,
        "burst",
        lambda i, r: _dash(r.burst_seconds, lambda b: f"{b:.0f}s ({r.pods})"),
        table="narrow",
    ),
    Column(
        "burst_seconds",
        lambda i, r: r.burst_seconds,
        "burst s",
        lambda i, r: _dash(r.burst_seconds, lambda b: f"{b:.0f} ({r.pods} pods)"),
        table="wide",
    ),
    Column("deadline_seconds", lambda i, r: r.deadline),
    Column(
        "deadline_ratio",
        lambda i, r: r.deadline_ratio,
        "of deadline",
        lambda i, r: _dash(r.deadline_ratio, lambda x: f"{x:.0%} of {r.deadline:g}s"),
    ),
    Column(
        "safe_burst",
        lambda i, r: r.safe_burst,
        "safe burst",
        lambda i, r: "—" if not r.known else "any" if r.safe_burst is None else str(r.safe_burst),
    ),
    Column(
        "growth_per_hour",
        lambda i, r: r.growth_per_hour,
        "growth/h",
        lambda i, r: _dash(r.growth_per_hour, "{:+,.0f}".format),
        table="wide",
    ),
    Column(
        "seconds_until_deadline",
        lambda i, r: "inf" if r.seconds_until_deadline == math.inf else r.seconds_until_deadline,
        "to deadline",
        lambda i, r: _eta(r.seconds_until_deadline),
    ),
    Column(
        "gc_interval_seconds",
        lambda i, r: r.gc_interval,
        "GC interval",
        lambda i, r: _dash(r.gc_interval, format_duration),
        table="wide",
    ),
    Column(
        "walk_rate_source",
        lambda i, r: _rate_sources(r),
        "rate from",
        lambda i, r: "; ".join(sorted({v.short for v in r.walk_rate.values()})) or "—",
        table="wide",
    ),
    Column(
        "regeneration_seconds",
        lambda i, r: r.regeneration,
        "regen s",
        lambda i, r: f"{r.regeneration:.1f}" + ("" if r.regeneration_source.is_series else " (default)"),
        table="wide",
    ),
    Column(
        "limiter_parallel_requests",
        lambda i, r: r.limiter.get("parallel_requests"),
        "create limiter",
        lambda i, r: _limiter(r),
        table="wide",
    ),
    Column("limiter_mean_processing_seconds", lambda i, r: r.limiter.get("mean_processing_s")),
    Column("limiter_429_per_day", lambda i, r: r.limiter.get("refused_over_window")),
    Column("observed_gc_seconds_ipv4", lambda i, r: r.observed_gc_seconds.get("ipv4")),
    Column("observed_ct_clean_long_waits", lambda i, r: _ct_clean(r, "waits_over_split")),
    Column("observed_ct_clean_long_mean_s_at_most", lambda i, r: _ct_clean(r, "mean_over_split_s_at_most")),
    Column("simulated_verdict", _sim("verdict"), "simulated", lambda i, r: _verdict(r), simulated=True),
    Column(
        "simulated_recovered_at_s",
        _sim("recovered_at_s"),
        "all Ready",
        lambda i, r: "" if (at := _sim("recovered_at_s")(i, r)) is None else format_duration(at),
        simulated=True,
    ),
    Column("flags", lambda i, r: " | ".join(r.flags)),
    Column("unknown", lambda i, r: " | ".join(r.unknown)),  # the table's notes go below it, a line a node
)
CSV_COLUMNS = tuple(c.csv for c in COLUMNS if c.csv)


def csv_text(rows: list[NodeRisk]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for i, r in enumerate(rows, 1):
        writer.writerow([c.value(i, r) for c in COLUMNS if c.csv and c.value])
    return out.getvalue()


def json_doc(rows: list[NodeRisk], read: FleetRead, url: str, node_label: str, query_seconds: float) -> dict[str, Any]:
    return {
        "prometheus_url": url,
        "queried_at": read.queried_at,
        "node_label": node_label,
        "nodes": [{"rank": i, **r.to_dict()} for i, r in enumerate(rows, 1)],
        "sources": {
            "queries": read.queries,
            "series": read.series,
            "unlabelled_series": read.unlabelled,
            "query_seconds": query_seconds,
            "prometheus_warnings": list(read.warnings),
        },
        "kube_proxy": ClusterSyncs.of(read.kube_proxy).to_dict() if read.kube_proxy else None,
    }


def table_columns(rows: list[NodeRisk], wide: bool) -> list[Column]:
    """The table's columns: simulated ones only when a row was simulated, wide ones only with --wide."""
    simulated = any(r.simulated for r in rows)
    table = "wide" if wide else "narrow"
    return [c for c in COLUMNS if c.header and c.cell and (simulated or not c.simulated) and c.table in (table, "both")]


def render(
    rows: list[NodeRisk],
    read: FleetRead,
    url: str,
    limit: int | None = None,
    wide: bool = False,
    console: Console | None = None,
) -> None:
    """The ranking: worst first, one line a node (kubectl's layout), its notes below, then what the read saw."""
    from rich.table import Table
    from rich.text import Text

    from ctsim.cli.tables import plain_console

    console = console or plain_console()
    columns = table_columns(rows, wide)
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0))  # two spaces between columns, as kubectl
    for c in columns:
        table.add_column(c.header, no_wrap=c.header == "node")  # a node's name is never cut
    shown = rows if limit is None else rows[:limit]
    for i, r in enumerate(shown, 1):
        # Every cell escaped and never markup: a node's name, its release, a label are outside text (a newline
        # would forge a row, "[red]" restyle it).
        table.add_row(*(Text(printable(c.cell(i, r))) for c in columns if c.cell), style=_LEVEL_STYLE.get(r.level, ""))
    console.print(table)
    noted = [(i, r) for i, r in enumerate(shown, 1) if r.unknown or r.flags]
    if noted:
        console.print("notes:")
    for i, r in noted:
        console.print(printable(f"  {i} {r.node}: {'; '.join(r.unknown + r.flags)}"), markup=False)  # wrapped at words
    levels = {lv: sum(r.level == lv for r in rows) for lv in ("critical", "warning", "ok", "unknown")}
    counts = ", ".join(f"{n} {lv}" for lv, n in levels.items() if n)
    more = f" (the first {len(shown)} shown; --limit)" if len(shown) < len(rows) else ""
    console.print(f"{len(rows)} nodes{more}: {counts}. Read from {url} in {len(read.queries)} queries.")
    if read.unlabelled:
        console.print(f"{read.unlabelled} series carried no node label and were left out (--node-label).")
    if read.warnings:  # a partial answer: some rows may lack what a down store held
        said = "; ".join(read.warnings)
        console.print(printable(f"Prometheus warned, so its answers may be partial: {said}"), markup=False)
    if read.kube_proxy:
        for line in kube_proxy_lines(ClusterSyncs.of(read.kube_proxy), limit or 5):
            console.print(printable(line), markup=False)


def kube_proxy_lines(cluster: ClusterSyncs, limit: int) -> list[str]:
    """The cluster's section: the hazard is every node's at once (each programs every Service)."""
    from ctsim.core.quantity import format_duration as d

    def sec(v: float | None) -> str:
        return "-" if v is None else d(v)

    worst = cluster.worst
    assert worst is not None
    services = f"~{cluster.services:,} Services" if cluster.services is not None else "Services unknown"
    lines = [
        "",
        f"kube-proxy (nftables), the cluster's: every node programs every Service. {services}; {cluster.verdict}.",
        f"  {'node':<20} {'layout':<8} {'full proj.':>10} {'full seen':>10} {'partial':>8} {'sync p99':>9} "
        f"{'/healthz':>9}",
    ]
    for f in cluster.nodes[:limit]:
        ratio = "-" if f.ratio is None else f"{f.ratio:.0%}"
        lines.append(
            f"  {f.node[:20]:<20} {f.layout or '-':<8} {sec(f.projected_full_s):>10} {sec(f.observed_full_s):>10} "
            f"{sec(f.projected_partial_s if f.observed_partial_s is None else f.observed_partial_s):>8} "
            f"{sec(f.sync_p99_s):>9} {ratio:>9}"
        )
    if len(cluster.nodes) > limit:
        lines.append(f"  ... {len(cluster.nodes) - limit} more nodes (--json has them all)")
    lines.append(
        "  full proj.: ctwatch_kube_proxy_projected_sync_seconds; full seen: kube-proxy's mean full sync "
        "(kubeproxy_sync_full_proxy_rules_duration_seconds); /healthz: the worse of the two over 2 x syncPeriod"
    )
    return lines


# The node the fleet's fallbacks size: Cilium's own defaults (static maps; --node-memory alone takes the Helm
# chart's ratio), as `ctsim run --preset standard` sizes them.
FALLBACK_PRESET = "standard"


def _assumptions(fallback: Given, pods: str | None) -> Assumptions:
    """The fleet-wide inputs, by run's rules for the walk rate and the maps' size; checked before any query."""
    from ctsim.core.calibration import walk_rate
    from ctsim.core.origin import Origin
    from ctsim.core.profiles import get_profile
    from ctsim.core.quantity import format_bytes, parse_count
    from ctsim.inputs.given import MAX_PODS
    from ctsim.inputs.scenario import map_capacity

    prof = get_profile(fallback.profile)
    a = Assumptions(profile=prof, pods=parse_count(pods, "--pods", minimum=1, maximum=MAX_PODS) if pods else None)
    if fallback.rate is not None or fallback.calibration is not None:
        w = walk_rate(prof, fallback.rate, fallback.calibration)  # parsed once, by parse_given
        a = replace(a, rate=w.entries_per_s, rate_source=w.source, rate_short=w.short, bucket_seconds=w.bucket_seconds)
    if fallback.map_ratio is not None and fallback.node_memory is None:
        raise InputError("--map-ratio: give --node-memory too (the fleet's nodes have no memory of their own)")
    if fallback.max_entries is None and fallback.node_memory is None:
        return a
    tcp, any_ = map_capacity(replace(fallback, preset=FALLBACK_PRESET))
    how = []
    if fallback.max_entries is not None:
        how.append(f"--max-entries {format_count(tcp)}")
    if fallback.node_memory is not None:
        ratio = fallback.map_ratio if fallback.map_ratio is not None else DEFAULT_DYNAMIC_SIZE_RATIO
        how.append(f"sized from --node-memory {format_bytes(fallback.node_memory)} x {ratio:g}")
    else:
        how.append(f"non-TCP Cilium's static {format_count(any_)}")
    return replace(a, capacity=(tcp, any_), capacity_source=Origin.flag("; ".join(how)))


def run_fleet(
    transport: Transport,
    url: str,
    *,
    pods: str | None,
    window: str,
    node_label: str,
    selector: str | None,
    at: str | None,
    fallback: Given,
    fallback_flags: dict[str, str | None],
    simulate: int,
    replications: int,
    seed: int,
    processes: int,
    scheduler: str | None,
    limit: str | None,
    wide: bool,
    as_json: bool,
    csv_path: str | None,
    fail_on: str | None,
    progress: Callable[..., Any],
) -> int:
    """The whole command; returns its exit code (1: a node at --fail-on's level or worse)."""
    from ctsim.capacity.pool import check_scheduler
    from ctsim.core.files import check_not_an_input, check_writable, write_atomic
    from ctsim.core.quantity import parse_count
    from ctsim.fleet.prometheus import Client
    from ctsim.fleet.risk import assess, rank
    from ctsim.fleet.series import Query, read_fleet

    if fail_on is not None and fail_on not in FAIL_ON:
        raise InputError(f"--fail-on: warning or critical, got {fail_on!r}")
    if csv_path == "-" and as_json:
        raise InputError("--csv - and --json: both would go to stdout; give --csv a file")
    if csv_path is not None and csv_path != "-":
        check_writable(csv_path, "--csv")
    inputs = {
        "--bearer-token-file": transport.bearer_token_file,
        "--basic-auth-password-file": transport.basic_auth_password_file,
        "--ca-file": transport.ca_file,
        "--cert-file": transport.cert_file,
        "--key-file": transport.key_file,
        "--calibration": fallback.calibration.path if fallback.calibration is not None else None,
    }
    check_not_an_input({"--csv": csv_path}, inputs)
    check_scheduler(scheduler)
    if replications != 1:
        from ctsim.capacity.replications import check

        check(replications)
        if not simulate:
            raise InputError("--replications: give --simulate K too (the replications are of the model's runs)")
    from ctsim.inputs.given import MAX_SEED

    parse_count(seed, "--seed", maximum=MAX_SEED)
    shown = parse_count(limit, "--limit", minimum=1) if limit is not None else None
    when = parse_float(at, "--time", low=0.0, high=1e11) if at is not None else None
    assumptions = _assumptions(fallback, pods)
    query = Query(node_label=node_label, selector=selector or "", window=window, at=when)
    with Client(url, transport) as client:
        read = read_fleet(client, query)
        query_seconds = client.seconds
    url = client.shown  # from here on the URL is only shown: never with its password
    if not read.nodes:
        where = f" matching {selector}" if selector else ""
        why = (
            f"{read.unlabelled} series have no {node_label!r} label: --node-label"
            if read.unlabelled
            else "nothing scrapes ctwatch or the agents, or the selector matches nothing"
        )
        raise InputError(f"--prometheus-url: no ctwatch or Cilium CT series{where} at {url} ({why})")
    rows = rank([assess(facts, assumptions) for facts in read.nodes.values()])
    if simulate:
        from ctsim.fleet.simulate import simulate as run_model

        # A simulated node is its own: only the walk's fallbacks carry over (its row holds its maps' sizes).
        walk = ("profile", "calibration", "rate")
        base = {k: fallback_flags[k] for k in walk}
        given = Given(**{k: getattr(fallback, k) for k in walk})
        progress(
            lambda bar: run_model(
                rows,
                simulate,
                given,
                base,
                processes or None,
                scheduler,
                lambda done, total: bar("simulate", 1, total),
                replications=replications,
                seed=seed,
            )
        )
    if csv_path is not None:
        text = csv_text(rows)
        if csv_path == "-":
            print(text, end="")
        else:
            write_atomic(csv_path, text)
    if as_json:
        print_json(json_doc(rows, read, url, node_label, query_seconds), allow_nan=False)
    elif csv_path != "-":
        render(rows, read, url, shown, wide)
    if fail_on is not None and any(r.level in FAIL_ON[: FAIL_ON.index(fail_on) + 1] for r in rows):
        return 1
    return 0


FAIL_ON = ("critical", "warning")  # --fail-on warning also fails on critical
