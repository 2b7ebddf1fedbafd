"""The human-readable reports of run and plan: plain lines, styled on a terminal (``ctsim.cli.term``).

They read the Result (or plan's document) and nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctsim.cli.term import Terminal
from ctsim.core.printable import printable
from ctsim.core.quantity import format_count, format_duration
from ctsim.core.rate import APILimiterParameters
from ctsim.sim.model import STORM_SETTLE
from ctsim.sim.result import STALL, Result, Verdict, percentile

if TYPE_CHECKING:
    from ctsim.capacity.mitigations import Mitigation
    from ctsim.capacity.plan import CapacityPlan

_VERDICT_STYLE = {Verdict.OK: "bold green", Verdict.DEGRADED: "bold yellow", Verdict.COLLAPSE: "bold red"}


def _s(value: float | None) -> str:
    return "—" if value is None else format_duration(value)


def _spread3(figure: dict[str, float | None] | None) -> str:
    """p50/p90/max of one ``latency_s`` figure, or — where nothing was observed."""
    if figure is None:
        return "—"
    return "/".join(_s(figure[q]) for q in ("p50", "p90", "max"))


def _latency_line(lat: dict[str, Any]) -> str:
    """The figures a node shows, as Cilium and the runtime name them (JSON ``latency_s``, ``latency_series``)."""
    waits = ", ".join(f"{call} {_spread3(w)}" for call, w in lat["limiter_wait"].items())
    return (
        f"Latency p50/p90/max: CNI ADD {_spread3(lat['cni_add'])}, DEL {_spread3(lat['cni_del'])}; "
        f"waitingForCTClean {_spread3(lat['ct_clean_wait_ok'])} "
        f"(failed creates {_spread3(lat['ct_clean_wait_failed'])}); limiter wait {waits}"
    )


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
        if s.gc_max_interval and s.gc_max_interval < s.gc_initial_interval:
            policy += f" (passes at most {format_duration(s.gc_max_interval)} apart: conntrack-gc-max-interval)"
    first = "first pass now" if s.gc_first_pass == 0 else f"next pass in {format_duration(s.gc_first_pass)}"
    if r.agent is not None:
        first = "first pass as the agent starts (see its start-up below)"
    return f"{policy}, {first}"


def _n(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _pods(n: int) -> str:
    return _n(n, "pod", "pods")


def _story(r: Result) -> str:
    """What happened to the burst, and what ended it: the verdict's reason, told no further than the run saw."""
    s, pods = r.scenario, r.pods
    if r.verdict == Verdict.OK:
        return f"every pod Ready at its first attempt, the last after {_s(r.recovered_at)}"
    if r.verdict == Verdict.UNFINISHED:
        waiting = sum(not p.ready and not p.failures for p in pods)
        if waiting:
            return (
                f"the run ended at {format_duration(r.ended_at)} before {_pods(waiting)} saw a first attempt end; "
                "run longer (--horizon)"
            )
        last = max((p.ready_at for p in pods if p.ready_at is not None), default=None)
        since = "none yet" if last is None else f"the last at {format_duration(last)}"
        return (
            f"{r.pods_ready}/{len(pods)} Ready at {format_duration(r.ended_at)}, still draining ({since}; "
            f"no stall of {format_duration(STALL)} with none Ready): run longer (--horizon)"
        )
    st = r.stall
    if r.verdict == Verdict.DEGRADED:
        return (
            f"every pod Ready, the last after {_s(r.recovered_at)}; some only after failed attempts: "
            "the burst drained on its own"
        )
    failing = sum(not p.ready for p in pods)
    if r.recovered_at is not None and st is not None and st.ended_by is not None and st.until is not None:
        stuck = "no pod" if st.since == 0 else "no further pod"
        return (
            f"{stuck} Ready for {format_duration(st.until - st.since)}, until the GC pass at "
            f"{format_duration(st.ended_by.start)} shrank the table; all Ready by {format_duration(r.recovered_at)}: "
            "only an outside event ended the storm"
        )
    after = [g for g in r.gc.passes if g.end <= r.ended_at]
    if after and r.ended_because == "settled":
        last = after[-1]
        return (
            f"{_pods(failing)} still not Ready at {format_duration(r.ended_at)} while attempts keep failing: "
            f"none became Ready in the last {format_duration(STORM_SETTLE)}, past the GC pass at "
            f"{format_duration(last.start)}: the node does not recover on its own"
        )
    if after and r.ended_because == "horizon":
        last = after[-1]
        return (
            f"{_pods(failing)} still not Ready at --horizon {format_duration(r.ended_at)} while attempts keep "
            f"failing, {format_duration(r.ended_at - last.end)} after the GC pass at {format_duration(last.start)}: "
            "drop --horizon to see whether the node recovers"
        )
    if r.ended_because == "cap":
        passes = f"{len(after)} GC passes came" if after else "no GC pass came"
        return (
            f"{_pods(failing)} still not Ready after {format_duration(r.ended_at)} (the longest a run waits) "
            f"while attempts keep failing, and {passes}"
        )
    next_pass = (
        f"the next GC pass (at {format_duration(s.gc_first_pass)})" if s.gc_first_pass > r.ended_at else "a GC pass"
    )
    return (
        f"{_pods(failing)} still not Ready at --horizon {format_duration(r.ended_at)} while attempts keep failing; "
        f"{next_pass} was past the run's end: drop --horizon to see what follows"
    )


def render(r: Result, console: Terminal | None = None, mitigations: list[Mitigation] | None = None) -> None:
    console = console or Terminal()
    s, c, d = r.scenario, r.counters, r.to_dict()
    pods = d["pods"]
    b = console.style

    def bold(text: str) -> str:
        return b(text, "bold")

    def why(*names: str) -> str:
        """Each input's origin, dimmed, after its value."""
        said = [o for o in (s.origin(n) for n in names) if o]
        return b(printable(f"  [{'; '.join(said)}]"), "dim") if said else ""  # a series' node: outside text

    inputs: list[tuple[str, str]] = []
    inputs.append(("preset / release", f"{s.preset} / Cilium {s.release} ({s.cores} cores){why('release', 'cores')}"))
    inputs.append(("agent", _agent_line(s.agent_state)))
    if s.endpoint_create == APILimiterParameters():
        inputs.append(("endpoint-create", f"no limiter: every create goes through at once{why('limiter')}"))
    elif s.agent_state == "warm":
        lim = d["limiter"]["start"]
        inputs.append(
            (
                "endpoint-create",
                f"starts at {lim['endpoint_create_parallel']} parallel, burst {lim['endpoint_create_burst']}, "
                f"{lim['endpoint_create_rate_per_s']:.4g} tokens/s (mean create {_s(lim['mean_processing_s'])})"
                f"{why('limiter')}",
            )
        )
    (tcp4, any4), v6 = s.families()["ipv4"], s.families().get("ipv6")
    entries = (
        f"TCP {format_count(tcp4.entries)}{why('entries')}, non-TCP {format_count(any4.entries)}{why('any_entries')}"
    )
    if v6 is not None:
        v6_entries = f"IPv6 TCP {format_count(v6[0].entries)}, non-TCP {format_count(v6[1].entries)}"
        entries = f"IPv4 {entries}; {v6_entries} (dual stack)"
    inputs.append(("entries at t=0", entries))
    inputs.append(("expired at t=0", f"{s.expired_fraction:.0%} of them{why('expired_fraction')}"))
    capacity = f"{format_count(tcp4.max_entries)} + non-TCP {format_count(any4.max_entries)}"
    if v6 is not None:
        capacity += f" per family (IPv6 TCP {format_count(v6[0].max_entries)})"
    inputs.append(("map capacity", f"TCP {capacity}{why('capacity')}"))
    inputs.append(("walk rate", f"{s.walk_rate:,.0f} entries/s{why('walk_rate')}"))
    churn = f"TCP {tcp4.churn.describe()}{why('churn')}, non-TCP {any4.churn.describe()}{why('any_churn')}"
    if v6 is not None:
        churn += f"; IPv6 TCP {v6[0].churn.describe()}, non-TCP {v6[1].churn.describe()}"
    inputs.append(("churn", f"{churn}; each open {format_duration(s.conn_seconds)}{why('conn_duration')}"))
    inputs.append(("GC", _gc_line(r)))
    inputs.append(("burst", f"{s.pods} pods at t=0, CNI deadline {format_duration(s.deadline)}{why('deadline')}"))
    if s.arrival_schedule is not None:
        more = s.arrival_schedule
        inputs.append(("arrivals", f"{more.count:,} more pods: {more.describe()}, after the burst's  [given]"))
    if s.rollout:
        inputs.append(
            ("rollout", f"{s.rollout:,} pods replaced, max surge {s.max_surge}, max unavailable {s.max_unavailable}"
             "  [given]")
        )  # fmt: skip
    if s.delete_schedule is not None:
        gone = s.delete_schedule
        inputs.append(("deletes", f"{gone.count:,} running pods deleted: {gone.describe()}  [given]"))
    inputs.append(("regeneration", f"{format_duration(s.regeneration_seconds)} per endpoint{why('regeneration')}"))
    inputs.append(("horizon / seed", f"{format_duration(r.ended_at)}{why('horizon')} / {s.seed}"))
    console.grid(inputs)
    for note in s.notes:
        console.print(b(printable(f"note: {note}"), "dim"))
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
    console.print(_latency_line(r.latency_figures()))
    if r.agent is not None:
        console.print(_agent_start_line(r.agent, c.add_no_agent))
    if r.rollout is not None:
        ro = r.rollout
        done = "not done" if ro["done_at_s"] is None else f"done at {_s(ro['done_at_s'])}"
        console.print(
            f"Rollout: {ro['new_ready']:,} of {ro['replicas']:,} new pods Ready, {ro['old_deleted']:,} old deleted "
            f"({ro['old_deletes_asked']:,} asked); {done}"
        )
    if r.deletions:
        dl = r.deletes()
        console.print(
            f"Deletes: {dl['deleted']:,} of {dl['requested']:,} running pods deleted, {dl['pending']:,} still pending, "
            f"{dl['del_attempts']:,} DELs; from kubelet's ask to the DEL that succeeded p50/p90/max "
            f"{_spread3(dl['delete_latency_s'])}"
        )
    busy = ", ".join(
        f"{f.name} max queue {f.lock_max_queue}, held {format_duration(f.lock_held_seconds)}" for f in r.families
    )
    console.print(
        f"Locks: {busy} of {format_duration(r.ended_at)} "
        f"({c.create_scrubs + c.delete_scrubs:,} scrubs, {_n(len(r.gc.passes), 'GC pass', 'GC passes')}); "
        f"{bold(str(c.orphaned_walks))} walks ran for callers that had given up: "
        f"{format_duration(c.orphaned_walk_seconds)} of orphaned walk time"
    )
    intervals = [format_duration(i) for i in r.gc.intervals]
    if len(intervals) > 12:
        intervals = [*intervals[:6], "…", *intervals[-5:]]
    runs = ""
    if len(r.families) > 1 or r.signals is not None:
        per = ", ".join(f"{name} {n}" for name, n in r.gc.runs([f.name for f in r.families]).items())
        signalled = sum(p.woken_by == "signal" for p in r.gc.passes)
        runs = f" ({per}; {signalled} woken by a signal)" if r.signals is not None else f" ({per})"
    console.print(
        f"GC: {_n(len(r.gc.passes), 'pass', 'passes')}{runs}, "
        f"intervals {' → '.join(intervals) if intervals else '(no pass ran)'}; "
        f"table {r.entries_at_start:,} → {r.entries_at_end:,} entries ({r.expired_at_end:,} expired), "
        f"{r.live_evicted:,} live entries evicted by LRU"
    )
    console.print()

    style = _VERDICT_STYLE.get(r.verdict, "bold")
    console.print(f"Verdict: {b(r.verdict.upper(), style)} — {_story(r)}")

    a = r.advice
    fits = "any burst" if a.safe_burst is None else f"at most {_pods(a.safe_burst)}"
    if a.max_entries_for_burst >= sum(f.max_entries + f.any_max_entries for f in r.families):
        keep = f"any table these maps can hold fits {_pods(a.burst)}' scrubs"
    else:
        keep = (
            f"for {_pods(a.burst)}' scrubs to fit, keep the table ≤ {a.max_entries_for_burst:,} entries "
            f"(walk ≤ {a.walk_seconds_for_burst:.2f} s)"
        )
    console.print(
        f"Advice: this table fits {fits} within {format_duration(s.deadline)} "
        f"(scrubs of {r.walk_seconds:.1f} s queue on the CT lock); {keep}."
    )
    if r.verdict != Verdict.OK and (a.safe_burst is None or a.safe_burst >= a.burst) and r.counters.add_429:
        console.print(
            f"The scrubs fit: the API limiter, not the table, binds this burst ({r.counters.add_429:,} HTTP 429); "
            "`ctsim plan` on the same flags simulates a limiter setting that fits, where one does."
        )
    if mitigations:
        from ctsim.capacity.mitigations import HORIZON, describe

        best = mitigations[0]
        unchanged = r.recovered_at  # a fix must make every pod Ready sooner than changing nothing does
        if best.resolved_at is not None and (unchanged is None or best.resolved_at < unchanged):
            console.print(f"Soonest fix, simulated: {bold(best.flag)} — {best.action}: {describe(best, named=False)}.")
            rest = mitigations[1:]
        elif unchanged is not None:
            console.print(
                f"No simulated setting makes every pod Ready sooner than changing nothing (all by {_s(unchanged)})."
            )
            rest = mitigations
        else:
            console.print(f"No simulated setting resolves this burst within {HORIZON}.")
            rest = mitigations
        if rest:
            console.print("Also simulated: " + "; ".join(describe(m) for m in rest) + ".")


def render_replications(summary: dict, seed: int, console: Terminal | None = None) -> None:
    """One paragraph: each verdict's share with its 95 % interval, and the spread of what the runs measured."""
    console = console or Terminal()
    n = summary["replications"]
    shares = "; ".join(
        f"{v} in {s['count']:,}/{n:,} replications (95 % CI {s['ci95'][0]:.1%}–{s['ci95'][1]:.1%})"
        for v, s in summary["verdicts"].items()
    )
    console.print()
    console.print(f"Replications ({n:,} seeds drawn from --seed {seed}): {shares}.")
    q = summary["quantiles"]
    spread = []
    for name, label, show in (
        ("all_ready_s", "all Ready by", _s),
        ("add_attempts", "ADD attempts", lambda v: "—" if v is None else f"{v:,.0f}"),
        ("orphaned_walk_s", "orphaned walk time", _s),
    ):
        m = q[name]
        if m["replications"]:
            ready = f" ({m['replications']:,} of {n:,} runs)" if m["replications"] < n else ""
            spread.append(f"{label} p50 {show(m['p50'])}, p5–p95 {show(m['p5'])}–{show(m['p95'])}{ready}")
    if spread:
        console.print("Across them: " + "; ".join(spread) + ".")


def _binding_line(plan: CapacityPlan) -> str:
    """Which limit binds today's burst, the scrub or the API limiter, and the limiter setting that would fit."""
    bl, n, deadline = plan.binding, plan.burst, format_duration(plan.today.deadline)
    assert bl is not None
    e = bl.empty_table
    on_empty = (
        f"on an empty table the {n}-pod burst is {e.verdict} (all Ready by "
        f"{'—' if e.all_ready_s is None else format_duration(e.all_ready_s)}, {e.add_429:,} HTTP 429)"
    )
    if not bl.scrub and not bl.limiter:
        return f"Which limit binds: neither; today's scrubs fit {deadline} and {on_empty}."
    if bl.scrub and not bl.limiter:
        return f"Which limit binds: the scrub ({on_empty}): shrink the table, not the limiter."
    if bl.scrub:
        return (
            f"Which limit binds: both, the scrub and the API limiter ({on_empty}); no limiter setting fits while "
            f"the scrubs outlast {deadline}."
        )
    if bl.setting is None or bl.setting_outcome is None:
        return f"Which limit binds: the API limiter ({on_empty}); no setting plan tried fits (up to 20/s)."
    o = bl.setting_outcome
    ready = "—" if o.all_ready_s is None else format_duration(o.all_ready_s)
    return (
        f"Which limit binds: the API limiter ({on_empty}); --api-rate-limit '{bl.setting}' fits, simulated on "
        f"today's table: {o.verdict}, all Ready by {ready}."
    )


def render_plan(plan: CapacityPlan, console: Terminal | None = None) -> None:
    """The capacity answers, then each mitigation with what the model says it does."""
    console = console or Terminal()
    b = console.style
    today = plan.today
    for flag, live in (plan.live or {}).items():
        console.print(
            printable(f"--{flag.replace('_', '-')} {live['value']}: live, {live['series']} of {live['node']}")
        )
    tcp4, any4 = today.families()["ipv4"]
    console.print(
        f"CT maps: TCP {tcp4.max_entries:,} + non-TCP {any4.max_entries:,} entries "
        f"{'per family, dual stack ' if today.dual_stack else ''}"
        f"({today.max_entries_source}); ~{plan.map_memory_bytes / 2**20:,.0f} MiB of keys and values"
    )
    a, f = plan.adaptive, plan.fixed_60s
    drift = (
        f"the interval stays under 12h for {plan.drift_horizon}"
        if a.drift_to_cap_s is None
        else f"interval reaches 12h after {format_duration(a.drift_to_cap_s)}"
    )
    churn = tcp4.churn.describe()
    if any4.churn.segments[0][0] or len(any4.churn.segments) > 1:
        churn = f"{churn} TCP + {any4.churn.describe()} non-TCP"

    def fits(n: int | None) -> str:
        return "any burst" if n is None else f"{n} pod{'' if n == 1 else 's'}"

    # Today's table first: it is the one a burst meets now (#52).
    console.print(
        f"Today's table: {plan.entries:,.0f} entries, one scrub walks for {plan.walk_seconds:.1f} s at "
        f"{today.walk_rate:,.0f} entries/s; the largest burst whose scrubs fit {format_duration(today.deadline)}: "
        f"{fits(plan.safe_burst)} (as `ctsim run` advises on the same flags)"
    )
    now = plan.burst_today
    console.print(
        f"A {plan.burst}-pod burst on today's table: {b(now.verdict.upper(), _VERDICT_STYLE.get(now.verdict, 'bold'))} "
        f"({now.pods_ready} Ready, {now.ready_first_attempt} at the first attempt, {now.add_timeouts} ADD timeouts, "
        f"{now.add_429} HTTP 429)"
    )
    peak = f"the table peaks at {a.peak_entries:,} entries under the adaptive GC ({drift})"
    if not plan.peak_reached_from_today:
        peak = (
            f"the table peaks at {a.peak_entries:,} entries from an empty one under the adaptive GC ({drift}), "
            f"below today's {plan.entries:,.0f}: the churn alone never brings today's table down to it, only a GC "
            "pass collecting what it holds does"
        )
    console.print(f"Churn {churn}: {peak}; {f.peak_entries:,} with conntrack-gc-interval 60s")
    console.print(
        f"At the peak one scrub walks for {plan.peak_walk_seconds:.1f} s; the largest burst whose scrubs fit: "
        f"{fits(plan.peak_safe_burst)}"
    )
    burst = plan.burst_at_peak
    style = _VERDICT_STYLE.get(burst.verdict, "bold")
    console.print(
        f"A {plan.burst}-pod burst at the peak: {b(burst.verdict.upper(), style)} "
        f"({burst.pods_ready} Ready, {burst.ready_first_attempt} at the first attempt, "
        f"{burst.add_timeouts} ADD timeouts, {burst.add_429} HTTP 429)"
    )
    from ctsim.capacity.plan import MAX_BURST_SEARCHED

    collapse, r = plan.smallest_collapsing_burst, plan.replications
    half = f" in at least half of {r} seeds" if r > 1 else ""
    console.print(
        f"No burst of up to {MAX_BURST_SEARCHED} pods collapses the node at the peak{half}."
        if collapse is None
        else f"The node collapses from a burst of {collapse} pods at the peak table{half}."
    )
    if plan.binding is not None:
        console.print(_binding_line(plan))
    console.print()
    console.print("Mitigations (each simulated at the table it leads to):")
    for rec in plan.recommendations:
        o = rec.outcome
        ready = "—" if o.all_ready_s is None else format_duration(o.all_ready_s)
        mark = b("✔", "green") if rec.helps else b("✘", "red")
        console.print(
            f" {mark} {rec.action}: table ≤ {rec.peak_entries:,}, walk {o.walk_seconds:.2f} s, "
            f"{plan.burst}-pod burst {o.verdict} ({o.pods_ready} Ready, all by {ready}; "
            f"{o.add_429} HTTP 429)"
        )


def _agent_start_line(agent: dict, no_agent: int) -> str:
    """A fresh agent's start-up: when its API answered, and what the initial scan's log.Fatal cost."""
    served = agent["api_served_at_s"]
    answered = "never answered" if served is None else f"answered at {format_duration(served)}"
    exits = agent["fatal_exits_at_s"]
    fatal = ""
    if exits:
        fatal = (
            f'; the initial CT scan outlasted 30 s {_n(len(exits), "time", "times")} (log.Fatal "Timeout while '
            f"waiting for initial conntrack scan\", restarted after kubelet's back-off), last at "
            f"{format_duration(exits[-1])}; the killed scans deleted {agent['deleted_by_killed_scans']:,} entries"
        )
    return (
        f"Agent start-up: API {answered}{fatal}; {no_agent:,} ADDs found no agent within 30 s, "
        f"{agent['deletes_queued']:,} DELs queued for it"
    )
