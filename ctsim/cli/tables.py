"""The reports of calibrate, emulate and sweep: tables, with rich.

The run and plan reports (``ctsim.cli.report``) stay plain: importing rich would
cost a sixth of the main job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from ctsim.sim.result import Verdict

if TYPE_CHECKING:
    from ctsim.kernel.calibrate import Measurement
    from ctsim.kernel.emulate import Emulation

_VERDICT_STYLE = {Verdict.OK: "bold green", Verdict.DEGRADED: "bold yellow", Verdict.COLLAPSE: "bold red"}


def plain_console() -> Console:
    """rich on a terminal; piped or redirected, full lines and full words (rich would wrap and cut at 80)."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=10_000, soft_wrap=True)
    return console


def render_calibration(measured: Measurement, output: str | None, console: Console | None = None) -> None:
    """The measurements of ``ctsim calibrate``, medians first, spreads beside them."""
    console = console or plain_console()
    bpf = measured.bpf
    console.print(
        f"Kernel {measured.kernel} ({measured.machine}, {measured.cpus} CPUs); "
        f"LRU hash map, {bpf.key_size}-byte keys, {bpf.value_size}-byte values, {bpf.present:,} entries"
    )
    table = Table("walk", "entries/s (median)", "spread", "vs published 213,000/s")
    pe = bpf.per_entry
    table.add_row(
        "get_next_key + lookup (1.16)", f"{pe.median:,.0f}", f"{pe.spread:.0%}", f"{pe.median / 213_000:.2f}x"
    )
    for size, b in bpf.batch.items():
        table.add_row(
            f"LOOKUP_BATCH x{size} (1.18)", f"{b.median:,.0f}", f"{b.spread:.0%}", f"{b.median / 213_000:.2f}x"
        )
    console.print(table)
    console.print(
        f"syscalls/s (per-entry walk): {2 * pe.median:,.0f}; "
        f"delete: {bpf.delete_seconds_per_entry * 1e6:.2f} µs per entry"
    )
    scaling = Table("map entries", "per-entry walk /s", "batched walk /s")
    for row in bpf.scaling:
        scaling.add_row(f"{row.entries:,}", f"{row.per_entry_entries_per_s:,.0f}", f"{row.batch_entries_per_s:,.0f}")
    console.print(scaling)
    nf = measured.nf_conntrack
    if nf:
        console.print(
            f"nf_conntrack ({nf.entries:,} entries in a throwaway netns, via pyroute2): dump "
            f"{nf.dump_entries_per_s.median:,.0f} entries/s; count query (CT_GET_STATS) "
            f"{nf.count_query_seconds.median * 1e3:.2f} ms"
        )
    if output:
        console.print(f"Wrote {output}: use it with `ctsim run --calibration {output}`.")


def render_emulation(report: Emulation, console: Console | None = None) -> None:
    """Emulated (real kernel) beside simulated, pod by pod."""
    console = console or plain_console()
    console.print(f"Scaling: {report.scaling.describe()}")
    for note in report.scaled.notes:
        console.print(f"[dim]note: {note}[/dim]")
    paced = report.table_rate
    console.print(f"Walk rate: {paced.estimated_entries_per_s:,.0f} entries/s — {report.rate_source}")
    console.print(
        f"Walker: {paced.headroom:.1f}x headroom over its paced rate, scheduled {paced.walker_scheduling}"
        + (" (not root: busy neighbours can slow it)" if paced.walker_scheduling != "SCHED_FIFO" else "")
    )
    e = report.emulated
    console.print(
        f"Agent threads: scheduled {e.thread_scheduling}; stalled {e.stalled_s:.2f} s in all"
        + (f" (worst {e.max_stall_s:.2f} s): latencies can differ from the model's by that much" if e.stalled_s else "")
    )
    table = Table("pod", "emulated", "simulated", "emulated s", "simulated s")
    for row in report.pods:
        table.add_row(
            str(row.pod),
            row.emulated,
            row.simulated,
            "—" if row.emulated_latency_s is None else f"{row.emulated_latency_s:.2f}",
            "—" if row.simulated_latency_s is None else f"{row.simulated_latency_s:.2f}",
            style="" if row.matches else "bold red",
        )
    console.print(table)
    e, s = report.emulated, report.simulated.counters
    console.print(
        f"ADD timeouts {e.add_timeouts} vs {s.add_timeouts}, HTTP 429 {e.add_429} vs {s.add_429}, "
        f"orphaned walks {e.orphaned_walks} vs {s.orphaned_walks} (emulated vs simulated)"
    )
    err = report.latency_error

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{x:.1%}"

    if e.walks_overran:
        console.print(
            f"[bold red]{e.walks_overran} real walk(s) outlasted their paced time by more than 2 % of the "
            f"deadline[/bold red] (up to {e.max_overrun * 1e3:.0f} ms): the machine was too busy for this "
            "emulation"
        )
    console.print(
        f"Mismatched pods: [bold]{report.mismatched_pods}[/bold] of {len(report.pods)}; latency error "
        f"p50 {pct(err['p50'])}, p90 {pct(err['p90'])}, max {pct(err['max'])}"
    )


def render_sweep_replications(
    points: list[dict], axes: list[str], r: int, runs: int, seconds: float, console: Console | None = None
) -> None:
    """One line per grid point: each verdict's share of its ``r`` seeds with the 95 % interval."""
    console = console or plain_console()
    table = Table(*axes, "collapse", "degraded", "ok", "all Ready p50 s", "ADD attempts p50")
    for p in points:
        s = p["summary"]

        def share(verdict: str, s: dict = s) -> str:
            v = s["verdicts"].get(verdict)
            if v is None:
                return f"0/{r}"
            return f"{v['count']}/{r} ({v['ci95'][0]:.0%}–{v['ci95'][1]:.0%})"

        ready = s["quantiles"]["all_ready_s"]["p50"]
        attempts = s["quantiles"]["add_attempts"]["p50"]
        table.add_row(
            *(str(p[a]) for a in axes),
            share("collapse"),
            share("degraded"),
            share("ok"),
            "—" if ready is None else f"{ready:.0f}",
            "—" if attempts is None else f"{attempts:.0f}",
        )
    console.print(table)
    console.print(
        f"{runs} runs ({len(points)} points x {r} seeds, 95 % Wilson intervals) in {seconds:.1f} s "
        f"({runs / seconds:.0f} runs/s)"
    )


def render_sweep(rows: list[dict], axes: list[str], seconds: float, console: Console | None = None) -> None:
    """One line per grid point: its axes and what happened."""
    console = console or plain_console()
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
