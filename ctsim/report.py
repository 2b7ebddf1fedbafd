"""The human-readable reports of run and plan: plain lines, styled on a terminal (``ctsim.term``).

They read the Result (or plan's document) and nothing else.
"""

from __future__ import annotations

from ctsim.quantity import format_count, format_duration
from ctsim.sim.result import Result, Verdict, percentile
from ctsim.term import Terminal

_VERDICT_STYLE = {Verdict.OK: "bold green", Verdict.DEGRADED: "bold yellow", Verdict.COLLAPSE: "bold red"}


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


def render(r: Result, console: Terminal | None = None) -> None:
    console = console or Terminal()
    s, c, d = r.scenario, r.counters, r.to_dict()
    pods = d["pods"]
    b = console.style

    def bold(text: str) -> str:
        return b(text, "bold")

    inputs: list[tuple[str, str]] = []
    inputs.append(("preset / profile", f"{s.preset} / {s.profile} ({s.cores} cores)"))
    inputs.append(("agent", _agent_line(s.agent_state)))
    entries = f"{format_count(s.entries)}"
    if s.ipv6_entries is not None:
        entries = f"IPv4 {entries} + IPv6 {format_count(s.ipv6_entries)} (dual stack)"
    inputs.append(("entries at t=0", f"{entries}, {s.expired_fraction:.0%} expired"))
    capacity = f"{format_count(s.max_entries)} + non-TCP {format_count(s.any_max_entries)}"
    if s.ipv6_entries is not None:
        capacity += f" per family (IPv6 TCP {format_count(s.ipv6_max_entries)})"
    inputs.append(("map capacity", f"TCP {capacity} ({s.max_entries_source})"))
    inputs.append(("walk rate", f"{s.walk_rate:,.0f} entries/s — {s.rate_source}"))
    inputs.append(("churn", f"{s.churn.describe()} new connections, each open {format_duration(s.conn_seconds)}"))
    inputs.append(("GC", _gc_line(r)))
    inputs.append(("burst", f"{s.pods} pods at t=0, CNI deadline {format_duration(s.deadline)}"))
    inputs.append(("horizon / seed", f"{format_duration(s.horizon)} / {s.seed}"))
    console.grid(inputs)
    for note in s.notes:
        console.print(b(f"note: {note}", "dim"))
    console.print()

    per_family = ""
    if len(r.walks) > 1:
        per_family = "; " + ", then ".join(f"{w.family} {w.seconds:.1f} s" for w in r.walks)
    console.print(
        f"One full scrub at t=0: {bold(f'{r.walk_seconds:.1f} s')} "
        f"({r.entries_at_start:,} entries / {s.walk_rate:,.0f} entries/s{per_family})"
    )
    lat = r.ready_latencies
    ready = f"{pods['ready']}/{pods['requested']}"
    console.print(
        f"Pods Ready: {bold(ready)} "
        f"({pods['ready_first_attempt']} at the first attempt, {pods['retrying']} still retrying, "
        f"{pods['pending']} pending); time to Ready p50 {_s(percentile(lat, 0.5))}, "
        f"p90 {_s(percentile(lat, 0.9))}, p99 {_s(percentile(lat, 0.99))}, max {_s(max(lat) if lat else None)}"
    )
    retry = pods["retry_interval_s"]
    retries = "" if retry["p50"] is None else f"; retried every {_s(retry['p50'])} (p50), p90 {_s(retry['p90'])}"
    console.print(
        f"CNI ADD: {c.add_attempts:,} attempts, {c.add_ok:,} ok, "
        f"{bold(f'{c.add_timeouts:,}')} timed out at {format_duration(s.deadline)}, "
        f"{bold(f'{c.add_429:,}')} got HTTP 429 ({c.add_429_paced:,} after a paced sleep){retries}; "
        f"DEL: {c.del_calls:,} calls, {c.del_timeouts:,} timed out"
    )
    busy = ", ".join(
        f"{f.name} max queue {f.lock_max_queue}, held {format_duration(f.lock_held_seconds)}" for f in r.families
    )
    console.print(
        f"Locks: {busy} of {format_duration(s.horizon)} "
        f"({c.create_scrubs + c.delete_scrubs:,} scrubs, {len(r.gc.passes)} GC passes); "
        f"{bold(str(c.orphaned_walks))} walks ran for callers that had given up: "
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
    if r.verdict == Verdict.OK:
        why = "every pod Ready at its first attempt"
    elif r.verdict == Verdict.DEGRADED:
        why = f"every pod Ready, the last after {_s(r.recovered_at)}; some only after failed attempts"
    elif r.verdict == Verdict.COLLAPSE:
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
    console.print(f"Verdict: {b(r.verdict.upper(), style)} — {why}")

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


def render_plan(doc: dict, console: Terminal | None = None) -> None:
    """The capacity answers, then each mitigation with what the model says it does."""
    console = console or Terminal()
    b = console.style
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
    burst = doc["burst_at_peak"]
    style = _VERDICT_STYLE.get(burst["verdict"], "bold")
    console.print(
        f"A {doc['burst']}-pod burst at the peak: {b(burst['verdict'].upper(), style)} "
        f"({burst['pods_ready']} Ready, {burst['ready_first_attempt']} at the first attempt, "
        f"{burst['add_timeouts']} ADD timeouts, {burst['add_429']} HTTP 429)"
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
        mark = b("✔", "green") if rec["helps"] else b("✘", "red")
        console.print(
            f" {mark} {rec['action']}: table ≤ {rec['peak_entries']:,}, walk {o['walk_seconds']:.2f} s, "
            f"{doc['burst']}-pod burst {o['verdict']} ({o['pods_ready']} Ready, all by {ready}; "
            f"{o['add_429']} HTTP 429)"
        )
