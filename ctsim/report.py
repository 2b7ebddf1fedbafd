"""The human-readable report of one run (rich); it reads the Result and nothing else."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ctsim.quantity import format_count, format_duration
from ctsim.result import COLLAPSE, DEGRADED, OK, Result, percentile

_VERDICT_STYLE = {OK: "bold green", DEGRADED: "bold yellow", COLLAPSE: "bold red"}


def _s(value: float | None) -> str:
    return "—" if value is None else format_duration(value)


def _agent_line(state: str) -> str:
    if state == "fresh":
        return "fresh: just (re)started, its first 4 creates skip the API limiter"
    return "warm: up for days, the API limiter's skip-initial requests long spent"


def _gc_line(r: Result) -> str:
    s = r.scenario
    if s.gc_interval:
        policy = f"fixed conntrack-gc-interval {format_duration(s.gc_interval)}"
    elif s.gc_initial_interval == 0:
        policy = "adaptive, no interval computed yet (the next one grows from 5m)"
    else:
        policy = f"adaptive, interval {format_duration(s.gc_initial_interval)}"
    first = "first pass now" if s.gc_first_pass == 0 else f"next pass in {format_duration(s.gc_first_pass)}"
    return f"{policy}, {first}"


def render(r: Result, console: Console | None = None) -> None:
    console = console or Console(highlight=False)
    s, c, d = r.scenario, r.counters, r.to_dict()
    pods = d["pods"]

    inputs = Table.grid(padding=(0, 2))
    inputs.add_column(style="dim")
    inputs.add_column()
    inputs.add_row("preset / profile", f"{s.preset} / {s.profile} ({s.cores} cores)")
    inputs.add_row("agent", _agent_line(s.agent_state))
    entries = f"{format_count(s.entries)}"
    if s.ipv6_entries is not None:
        entries = f"IPv4 {entries} + IPv6 {format_count(s.ipv6_entries)} (dual stack)"
    inputs.add_row("entries at t=0", f"{entries}, {s.expired_fraction:.0%} expired")
    capacity = f"{format_count(s.max_entries)} + non-TCP {format_count(s.any_max_entries)}"
    if s.ipv6_entries is not None:
        capacity += f" per family (IPv6 TCP {format_count(s.ipv6_max_entries)})"
    inputs.add_row("map capacity", f"TCP {capacity} ({s.max_entries_source})")
    inputs.add_row("walk rate", f"{s.walk_rate:,.0f} entries/s — {s.rate_source}")
    inputs.add_row("churn", f"{s.churn.describe()} new connections, each open {format_duration(s.conn_seconds)}")
    inputs.add_row("GC", _gc_line(r))
    inputs.add_row("burst", f"{s.pods} pods at t=0, CNI deadline {format_duration(s.deadline)}")
    inputs.add_row("horizon / seed", f"{format_duration(s.horizon)} / {s.seed}")
    console.print(inputs)
    for note in s.notes:
        console.print(f"[dim]note: {note}[/dim]")
    console.print()

    per_family = ""
    if len(r.walks) > 1:
        per_family = "; " + ", then ".join(f"{w.family} {w.seconds:.1f} s" for w in r.walks)
    console.print(
        f"One full scrub at t=0: [bold]{r.walk_seconds:.1f} s[/bold] "
        f"({r.entries_at_start:,} entries / {s.walk_rate:,.0f} entries/s{per_family})"
    )
    lat = r.ready_latencies
    console.print(
        f"Pods Ready: [bold]{pods['ready']}/{pods['requested']}[/bold] "
        f"({pods['ready_first_attempt']} at the first attempt, {pods['retrying']} still retrying, "
        f"{pods['pending']} pending); time to Ready p50 {_s(percentile(lat, 0.5))}, "
        f"p90 {_s(percentile(lat, 0.9))}, p99 {_s(percentile(lat, 0.99))}, max {_s(max(lat) if lat else None)}"
    )
    retry = pods["retry_interval_s"]
    retries = "" if retry["p50"] is None else f"; retried every {_s(retry['p50'])} (p50), p90 {_s(retry['p90'])}"
    console.print(
        f"CNI ADD: {c.add_attempts:,} attempts, {c.add_ok:,} ok, "
        f"[bold]{c.add_timeouts:,}[/bold] timed out at {format_duration(s.deadline)}, "
        f"[bold]{c.add_429:,}[/bold] got HTTP 429 ({c.add_429_paced:,} after a paced sleep){retries}; "
        f"DEL: {c.del_calls:,} calls, {c.del_timeouts:,} timed out"
    )
    busy = ", ".join(
        f"{f.name} max queue {f.lock_max_queue}, held {format_duration(f.lock_held_seconds)}" for f in r.families
    )
    console.print(
        f"Locks: {busy} of {format_duration(s.horizon)} "
        f"({c.create_scrubs + c.delete_scrubs:,} scrubs, {len(r.gc.passes)} GC passes); "
        f"[bold]{c.orphaned_walks}[/bold] walks ran for callers that had given up: "
        f"{format_duration(c.orphaned_walk_seconds)} of orphaned walk time"
    )
    intervals = [format_duration(i) for i in r.gc.intervals]
    if len(intervals) > 12:
        intervals = [*intervals[:6], "…", *intervals[-5:]]
    console.print(
        f"GC: {len(r.gc.passes)} passes, intervals {' → '.join(intervals) if intervals else '(no pass ran)'}; "
        f"table {r.entries_at_start:,} → {r.entries_at_end:,} entries ({r.expired_at_end:,} expired), "
        f"{r.live_evicted:,} live entries evicted by LRU"
    )
    console.print()

    style = _VERDICT_STYLE.get(r.verdict, "bold")
    if r.verdict == OK:
        why = "every pod Ready at its first attempt"
    elif r.verdict == DEGRADED:
        why = f"every pod Ready, the last after {_s(r.recovered_at)}; some only after failed attempts"
    elif r.verdict == COLLAPSE:
        why = (
            f"{pods['requested'] - pods['ready']} pods still not Ready after {format_duration(s.horizon)} "
            "while attempts keep failing: the node does not recover"
        )
    else:
        waiting = pods["pending"]
        why = (
            f"the horizon ({format_duration(s.horizon)}) ended before {waiting} pod(s) saw their first attempt end; "
            "run longer (--horizon)"
        )
    console.print(f"Verdict: [{style}]{r.verdict.upper()}[/{style}] — {why}")

    a = r.advice
    fits = "any burst" if a.safe_burst is None else f"at most {a.safe_burst} pod(s)"
    if a.max_entries_for_burst >= sum(f.max_entries + f.any_max_entries for f in r.families):
        keep = f"any table these maps can hold fits {a.burst} pods' scrubs"
    else:
        keep = (
            f"for {a.burst} pods' scrubs to fit, keep the table ≤ {a.max_entries_for_burst:,} entries "
            f"(walk ≤ {a.walk_seconds_for_burst:.2f} s), e.g. with --gc-interval 60s"
        )
    console.print(
        f"Advice: this table fits {fits} within {format_duration(s.deadline)} "
        f"(scrubs of {r.walk_seconds:.1f} s queue on the CT lock); {keep}."
    )


def render_calibration(doc: dict, output: str | None, console: Console | None = None) -> None:
    """The measurements of ``ctsim calibrate``, medians first, spreads beside them."""
    console = console or Console(highlight=False)
    bpf = doc["bpf"]
    host = doc["host"]
    console.print(
        f"Kernel {host['kernel']} ({host['machine']}, {host['cpus']} CPUs); "
        f"LRU hash map, {bpf['key_size']}-byte keys, {bpf['value_size']}-byte values, {bpf['present']:,} entries"
    )
    table = Table("walk", "entries/s (median)", "spread", "vs published 213,000/s")
    pe = bpf["per_entry"]
    table.add_row(
        "get_next_key + lookup (1.16)",
        f"{pe['median']:,.0f}",
        f"{pe['spread']:.0%}",
        f"{pe['median'] / 213_000:.2f}x",
    )
    for size, b in bpf["batch"].items():
        table.add_row(
            f"LOOKUP_BATCH x{size} (1.18)", f"{b['median']:,.0f}", f"{b['spread']:.0%}", f"{b['median'] / 213_000:.2f}x"
        )
    console.print(table)
    console.print(
        f"syscalls/s (per-entry walk): {pe['syscalls_per_s']:,.0f}; "
        f"delete: {bpf['delete']['seconds_per_entry'] * 1e6:.2f} µs per entry"
    )
    scaling = Table("map entries", "per-entry walk /s", "batched walk /s")
    for row in bpf["scaling"]:
        scaling.add_row(
            f"{row['entries']:,}", f"{row['per_entry_entries_per_s']:,.0f}", f"{row['batch_entries_per_s']:,.0f}"
        )
    console.print(scaling)
    nf = doc.get("nf_conntrack")
    if nf:
        console.print(
            f"nf_conntrack ({nf['entries']:,} entries in a throwaway netns, via pyroute2): dump "
            f"{nf['dump_entries_per_s']['median']:,.0f} entries/s; count query (CT_GET_STATS) "
            f"{nf['count_query_seconds']['median'] * 1e3:.2f} ms"
        )
    if output:
        console.print(f"Wrote {output}: use it with `ctsim run --calibration {output}`.")


def render_emulation(report: dict, console: Console | None = None) -> None:
    """Emulated (real kernel) beside simulated, pod by pod."""
    console = console or Console(highlight=False)
    console.print(f"Scaling: {report['scaling']['description']}")
    for note in report["scaled_inputs"]["notes"]:
        console.print(f"[dim]note: {note}[/dim]")
    rate = report["rate"]
    console.print(f"Walk rate: {rate['entries_per_s']:,.0f} entries/s — {rate['source']}")
    table = Table("pod", "emulated", "simulated", "emulated s", "simulated s")
    for row in report["pods"]:
        style = "" if row["emulated"] == row["simulated"] else "bold red"
        table.add_row(
            str(row["pod"]),
            row["emulated"],
            row["simulated"],
            "—" if row["emulated_latency_s"] is None else f"{row['emulated_latency_s']:.2f}",
            "—" if row["simulated_latency_s"] is None else f"{row['simulated_latency_s']:.2f}",
            style=style,
        )
    console.print(table)
    e, s = report["emulated"], report["simulated"]
    console.print(
        f"ADD timeouts {e['add_timeouts']} vs {s['add_timeouts']}, HTTP 429 {e['add_429']} vs {s['add_429']}, "
        f"orphaned walks {e['orphaned_walks']} vs {s['orphaned_walks']} (emulated vs simulated)"
    )
    err = report["latency_error"]

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{x:.1%}"

    if e["walks_overran"]:
        console.print(
            f"[bold red]{e['walks_overran']} real walk(s) outlasted their paced time by more than 2 % of the "
            f"deadline[/bold red] (up to {e['max_overrun_s'] * 1e3:.0f} ms): the machine was too busy for this "
            "emulation"
        )
    console.print(
        f"Mismatched pods: [bold]{report['mismatched_pods']}[/bold] of {len(report['pods'])}; latency error "
        f"p50 {pct(err['p50'])}, p90 {pct(err['p90'])}, max {pct(err['max'])}"
    )


def render_sweep(rows: list[dict], axes: list[str], seconds: float, console: Console | None = None) -> None:
    """One line per grid point: its axes and what happened."""
    console = console or Console(highlight=False)
    table = Table(*axes, "verdict", "walk s", "ready", "1st try", "p50 s", "max s", "timeouts", "429")
    for r in rows:
        table.add_row(
            *(str(r[a]) for a in axes),
            r["verdict"],
            f"{r['walk_seconds']:.1f}",
            str(r["pods_ready"]),
            str(r["ready_first_attempt"]),
            "—" if r["latency_p50_s"] is None else f"{r['latency_p50_s']:.0f}",
            "—" if r["latency_max_s"] is None else f"{r['latency_max_s']:.0f}",
            str(r["add_timeouts"]),
            str(r["add_429"]),
            style=_VERDICT_STYLE.get(r["verdict"], ""),
        )
    console.print(table)
    console.print(f"{len(rows)} runs in {seconds:.1f} s ({len(rows) / seconds:.0f} runs/s)")


def render_plan(doc: dict, console: Console | None = None) -> None:
    """The capacity answers, then each mitigation with what the model says it does."""
    console = console or Console(highlight=False)
    i = doc["inputs"]
    mem = doc["map_memory_bytes"] / 2**20
    console.print(
        f"CT maps: TCP {doc['max_entries']:,} + non-TCP {doc['any_max_entries']:,} entries "
        f"({i['max_entries_source']}); ~{mem:,.0f} MiB of keys and values"
    )
    a, f = doc["steady_state"]["adaptive"], doc["steady_state"]["fixed_60s"]
    drift = (
        f"the interval stays under 12h for {i['drift_horizon']}"
        if a["drift_to_cap_s"] is None
        else f"interval reaches 12h after {format_duration(a['drift_to_cap_s'])}"
    )
    console.print(
        f"Churn {i['churn']['schedule']}: the table peaks at {a['peak_entries']:,} entries under the adaptive GC "
        f"({drift}), {f['peak_entries']:,} with conntrack-gc-interval 60s"
    )
    fits = "any burst" if doc["safe_burst"] is None else f"{doc['safe_burst']} pods"
    console.print(
        f"At the peak one scrub walks for {doc['walk_seconds']:.1f} s at {i['walk_rate']:,.0f} entries/s; "
        f"the largest burst whose scrubs fit {format_duration(i['deadline'])}: {fits}"
    )
    b = doc["burst_at_peak"]
    style = _VERDICT_STYLE.get(b["verdict"], "bold")
    console.print(
        f"A {doc['burst']}-pod burst at the peak: [{style}]{b['verdict'].upper()}[/{style}] "
        f"({b['pods_ready']} Ready, {b['ready_first_attempt']} at the first attempt, "
        f"{b['add_timeouts']} ADD timeouts, {b['add_429']} HTTP 429)"
    )
    collapse = doc["collapse"]["smallest_burst"]
    console.print(
        "No burst of up to 400 pods collapses the node at the peak."
        if collapse is None
        else f"The node collapses from a burst of {collapse} pods at the peak table."
    )
    console.print()
    console.print("Mitigations (each simulated at the table it leads to):")
    for rec in doc["recommendations"]:
        o = rec["outcome"]
        ready = "—" if o["all_ready_s"] is None else format_duration(o["all_ready_s"])
        mark = "[green]✔[/green]" if rec["helps"] else "[red]✘[/red]"
        console.print(
            f" {mark} {rec['action']}: table ≤ {rec['peak_entries']:,}, walk {o['walk_seconds']:.2f} s, "
            f"{doc['burst']}-pod burst {o['verdict']} ({o['pods_ready']} Ready, all by {ready}; "
            f"{o['add_429']} HTTP 429)"
        )
