"""The ``ctsim`` command line (typer). Bad input: one line on stderr, exit code 2."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctsim.cli.command import run_cli
from ctsim.cli.options import (
    Str,
    fallback_options,
    given_options,
    live_scenario_options,
    prometheus_options,
    scenario_options,
)
from ctsim.cli.term import print_json
from ctsim.core.errors import InputError
from ctsim.core.files import STDOUT, check_distinct, check_writable, write_atomic
from ctsim.core.maptype import MapType

if TYPE_CHECKING:
    from ctsim.fleet.prometheus import Transport
    from ctsim.inputs.given import Given
    from ctsim.inputs.scenario import Scenario

app = typer.Typer(
    help="Model Cilium's conntrack GC drift and the scrub convoy that stalls pod start-up.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion: typer installs it for bash, zsh, fish
    pretty_exceptions_enable=False,
    # Plain (click-style) help: rendering it with rich imports rich.markdown and friends, twice the
    # cost of the help itself; the report still uses rich.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from ctsim import __version__

        print(f"ctsim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """ctsim: will pod start-up stall behind a conntrack scrub on this node?"""


def _replications(help_text: str) -> Any:
    """``--replications R``; its bounds are checked by ``ctsim.capacity.replications.check`` (loaded only if used)."""
    return typer.Option(metavar="R", help=help_text)


def _scheduler(what: str) -> Any:
    return typer.Option(metavar="ADDRESS", help=f"Run {what} on this Dask scheduler (tcp://host:8786).")


def _check_cluster(replications: int, scheduler: str | None, single: bool) -> None:
    """Before any work: R within bounds, a scheduler address that is there (and, for ``run``, worth it)."""
    from ctsim.capacity.pool import check_scheduler

    check_scheduler(scheduler)
    if replications != 1:
        from ctsim.capacity.replications import check

        check(replications)
    if single and scheduler is not None and replications == 1:
        raise InputError("--scheduler: give --replications too (one run is not worth a cluster)")


@app.command(short_help="Simulate a pod burst on a node: verdict, retries, locks, advice.")
@live_scenario_options
def run(
    scenario: Scenario,
    flags: dict[str, object],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    plot: Annotated[
        Str, typer.Option(metavar="FILE.png", help="Also draw table size and GC interval over time to this PNG.")
    ] = None,
    replications: Annotated[
        int, _replications("Also run R independent seeds drawn from --seed: each verdict's share with a 95 % interval.")
    ] = 1,
    scheduler: Annotated[Str, _scheduler("the replications")] = None,
) -> None:
    """Simulate a burst of pods on a node whose CT maps hold ENTRIES entries."""
    from ctsim.sim.model import Model
    from ctsim.sim.result import Verdict

    if plot is not None:
        _check_plot(plot, "--plot")
    _check_cluster(replications, scheduler, single=True)
    model = Model(scenario, trace_every=scenario.horizon / 600 if plot else None)
    result = _with_progress(model.run) if _long(scenario) else model.run()
    if plot:
        from ctsim.cli.plots import drift_of

        churn = scenario.map(MapType.IPV4_TCP).churn
        drift_of(model, result, plot, title=f"{scenario.preset}: {churn.describe()} churn")
    del model  # its node, events and processes: only the result is read from here on
    if _long(scenario):
        gc.collect()  # their reference cycles, before the mitigations build their own
    mitigations = []
    if result.verdict != Verdict.OK:
        from ctsim.capacity.mitigations import simulate_mitigations

        mitigations = simulate_mitigations(scenario)
    replicated = None
    if replications > 1:
        from ctsim.capacity import replications as mc

        def work(progress):  # type: ignore[no-untyped-def]
            return mc.replicate(
                scenario.given,
                flags,
                scenario.seed,
                replications,
                scheduler=scheduler,
                progress=lambda done, total: progress("replications", 1, total),
            )

        rows = _with_progress(work)
        replicated = {"seeds": mc.seeds(scenario.seed, replications), "summary": mc.summary(rows), "rows": rows}
    if as_json:
        doc = result.to_dict()
        doc["advice"]["mitigations"] = [m.to_dict() for m in mitigations]
        if replicated is not None:
            doc["replications"] = replicated
        print_json(doc)
        return
    from ctsim.cli.report import render, render_replications

    render(result, mitigations=mitigations)
    if replicated is not None:
        render_replications(replicated["summary"], scenario.seed)


@app.command(short_help="Run the scenario scaled down on the real kernel beside the model (root).")
@scenario_options
def emulate(
    scenario: Scenario,
    time_scale: Annotated[
        float,
        typer.Option(
            metavar="FACTOR", min=1.0, max=1000.0, help="Run this many times faster than the node's clock (1-1000)."
        ),
    ] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Run the scenario, scaled down, on the real kernel and beside the simulator (needs root or CAP_BPF)."""
    from ctsim.core.defaults import CT_KEY_SIZES
    from ctsim.kernel import calibrate as cal
    from ctsim.kernel import emulate as em

    scenario = em.fixed_horizon(scenario)
    em.check(scenario, time_scale)
    cal.probe()
    if scenario.calibration is not None:
        from ctsim.core.calibration import load
        from ctsim.core.profiles import WalkKind

        c = load(scenario.calibration)
        real_rate, delete_s, how = c.per_entry_entries_per_s, c.delete_seconds_per_entry, c.describe(WalkKind.PER_ENTRY)
    else:
        with cal.new_ct_map(1 << 18, CT_KEY_SIZES["ipv4"]) as m:
            import statistics

            real_rate = statistics.median(cal.per_entry_rate(m) for _ in range(3))
            delete_s = cal.delete_seconds(m, CT_KEY_SIZES["ipv4"], 20_000)
        how = "measured now on a 256Ki map (pass --calibration to use a calibration file)"
    if scenario.map(MapType.IPV4_TCP).churn.peak > 0:
        scenario = dataclasses.replace(
            scenario, notes=(*scenario.notes, "churn is not emulated: both sides run without it")
        )
    with _heartbeat("emulate", scenario.horizon / time_scale):
        report = em.run(scenario, time_scale, real_rate, delete_s, rate_source=how)
    if as_json:
        print_json(report.to_dict())
        return
    from ctsim.cli.tables import render_emulation

    render_emulation(report)


@app.command(short_help="Run the model over a grid of scenarios.")
@scenario_options
def sweep(
    scenario: Scenario,
    flags: dict[str, object],
    grid: Annotated[
        list[str] | None, typer.Option(metavar="NAME=V1,V2", help="An axis: NAME=V1,V2,... (repeat for more axes).")
    ] = None,
    grid_file: Annotated[Str, typer.Option(metavar="FILE.toml", help="TOML with [base] flags and [grid] axes.")] = None,
    processes: Annotated[
        int, typer.Option(metavar="INT", min=0, max=256, help="Worker processes (0: one per core).")
    ] = 0,
    csv_path: Annotated[
        Str, typer.Option("--csv", metavar="FILE", help="Write the rows as CSV to this file ('-': stdout).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the rows, base and grid as one JSON document.")
    ] = False,
    output: Annotated[
        Str, typer.Option("--output", "-o", metavar="FILE", help="Write that JSON document to this file ('-': stdout).")
    ] = None,
    heatmap: Annotated[
        Str, typer.Option(metavar="FILE.png", help="Draw a heatmap PNG of --value over --x and --y.")
    ] = None,
    x: Annotated[str, typer.Option(metavar="AXIS", help="Heatmap x axis (a grid axis).")] = "entries",
    y: Annotated[str, typer.Option(metavar="AXIS", help="Heatmap y axis (a grid axis).")] = "pods",
    value: Annotated[
        str, typer.Option(metavar="OUTPUT", help="Heatmap colour: a row output.")
    ] = "ready_first_attempt_fraction",
    scheduler: Annotated[Str, _scheduler("the points")] = None,
    replications: Annotated[
        int,
        _replications(
            "Run every point with R seeds drawn from --seed: each point's verdict shares with 95 % intervals."
        ),
    ] = 1,
) -> None:
    """Run the model over a grid of scenarios (the other flags are the base of every point)."""
    from ctsim.capacity import sweep as sw

    _check_cluster(replications, scheduler, single=False)
    base = dict(flags)
    axes: dict[str, list[str]] = {}
    if grid_file:
        file_base, axes = sw.load_grid_file(grid_file)
        base.update(file_base)
    for axis in grid or []:
        name, values = sw.parse_axis(axis)
        if name in axes:
            raise InputError(f"--grid: axis {name!r} given twice (by --grid or --grid-file); give each axis once")
        axes[name] = values
    if not axes:
        raise InputError("sweep: give at least one --grid NAME=V1,V2,... or a --grid-file")
    if "seed" in axes and replications > 1:
        raise InputError(
            "--grid seed: --replications draws every point's seeds from --seed; sweep the seed or replicate, not both"
        )
    if heatmap and (x not in axes or y not in axes):
        raise InputError(f"--heatmap: --x {x!r} and --y {y!r} must both be grid axes ({', '.join(axes)})")
    if heatmap and replications > 1:
        raise InputError("--heatmap: one colour per point; drop --replications (or draw from the --json rows)")
    if heatmap and value not in sw.HEATMAP_VALUES:
        raise InputError(f"--value: {value!r} is not a numeric row output ({', '.join(sw.HEATMAP_VALUES)})")
    # Every output is checked before the work starts: no traceback after minutes of simulating.
    check_distinct({"--csv": csv_path, "--output": output, "--heatmap": heatmap})
    to_stdout = next((flag for flag, path in (("--csv", csv_path), ("--output", output), ("--heatmap", heatmap))
                      if path == STDOUT), None)  # fmt: skip
    if to_stdout and as_json:
        raise InputError(f"{to_stdout} - and --json: both would go to standard output; give {to_stdout} a file")
    if csv_path is not None:
        check_writable(csv_path, "--csv")
    if output is not None:
        check_writable(output, "--output")
    if heatmap is not None:
        _check_plot(heatmap, "--heatmap")

    from ctsim.capacity import replications as mc

    seeds = mc.seeds(scenario.seed, replications) if replications > 1 else None

    def work(progress):  # type: ignore[no-untyped-def]
        return sw.sweep(
            base,
            axes,
            processes or None,
            lambda done, total: progress("sweep", 1, total),
            scheduler=scheduler,
            seeds=seeds,
        )

    start = time.perf_counter()
    rows = _with_progress(work)
    seconds = time.perf_counter() - start
    extra = None if seeds is None else {"seeds": seeds, "points": mc.by_point(rows, list(axes), replications)}
    if csv_path:
        sw.write_csv(rows, csv_path)
    if output:
        write_atomic(output, sw.to_json(rows, base, axes, extra))
    if heatmap:
        from ctsim.cli.plots import heatmap as draw

        draw(rows, x, y, value, heatmap)
    if as_json:
        sys.stdout.write(sw.to_json(rows, base, axes, extra))
        return
    if to_stdout:  # standard output holds that file: no table beside it
        return
    from ctsim.cli.tables import render_sweep, render_sweep_replications

    if extra is None:
        render_sweep(rows, list(axes), seconds)
    else:
        render_sweep_replications(extra["points"], list(axes), replications, len(rows), seconds)


@app.command(short_help="Size a node: maps, steady table, walk time, safe burst, mitigations.")
@live_scenario_options
def plan(
    scenario: Scenario,
    live: dict[str, dict[str, str]] | None = None,
    burst: Annotated[
        Str, typer.Option(metavar="COUNT", help="The largest pod burst to tolerate (default: --pods).")
    ] = None,
    drift_horizon: Annotated[str, typer.Option(metavar="DURATION", help="How long to let the table grow.")] = "4d",
    replications: Annotated[
        int,
        typer.Option(
            metavar="R",
            help="Seeds per candidate burst: the smallest collapsing burst is the first to collapse in half of them.",
        ),
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Size a node: today's table, the steady-state table, walk time, safe burst, and simulated mitigations.

    The node is the one `ctsim run` takes with the same flags: the same preset, sizing, counts and walk rate.
    """
    from ctsim.capacity import plan as planner

    facts = planner.facts_for(scenario.given, burst=burst, drift_horizon=drift_horizon, replications=replications)
    answer = dataclasses.replace(planner.plan(facts), live=live)
    if as_json:
        print_json(answer.to_dict())
        return
    from ctsim.cli.report import render_plan

    render_plan(answer)


@app.command(short_help="Rank every node a Prometheus knows by scrub risk; simulate the riskiest.")
@prometheus_options
@fallback_options
def fleet(
    transport: Transport,
    fallback: Given,
    fallback_flags: dict[str, str | None],
    prometheus_url: Annotated[
        str,
        typer.Option(
            metavar="URL", help="Prometheus, Thanos, VictoriaMetrics or Mimir query API (with its path prefix)."
        ),
    ],
    pods: Annotated[
        Str,
        typer.Option(metavar="COUNT", help="The burst to project (default: each node's ctwatch_burst_pods, else 10)."),
    ] = None,
    window: Annotated[str, typer.Option(metavar="DURATION", help="Growth over this PromQL window (deriv).")] = "1h",
    node_label: Annotated[
        str,
        typer.Option(
            metavar="LABEL[,LABEL]",
            help="The label that names a node; of several, the first a series has (Cilium's chart and ctwatch's "
            "monitors set node; a plain scrape has instance).",
        ),
    ] = "node,instance",
    selector: Annotated[
        Str, typer.Option(metavar="MATCHERS", help="Only series matching these, e.g. 'cluster=\"prod-eu\"'.")
    ] = None,
    at: Annotated[
        Str, typer.Option("--time", metavar="UNIX", help="Evaluate at this time (unix seconds; default: now).")
    ] = None,
    simulate: Annotated[
        int,
        typer.Option(
            metavar="K", min=0, max=10_000, help="Run the model on the K riskiest nodes, each with its own facts."
        ),
    ] = 0,
    replications: Annotated[
        int,
        _replications(
            "With --simulate: R seeds per node drawn from --seed, each verdict's share with a 95 % interval."
        ),
    ] = 1,
    seed: Annotated[int, typer.Option(metavar="INT", help="Random seed of --simulate's runs.")] = 1,
    processes: Annotated[
        int, typer.Option(metavar="INT", min=0, max=256, help="Worker processes for --simulate (0: one per core).")
    ] = 0,
    scheduler: Annotated[Str, _scheduler("--simulate")] = None,
    limit: Annotated[Str, typer.Option(metavar="COUNT", help="Print only the first COUNT rows of the table.")] = None,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column in the table (walk s, growth/h, GC interval, rate from).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    csv_path: Annotated[
        Str, typer.Option("--csv", metavar="FILE", help="Write the rows as CSV to this file ('-': stdout).")
    ] = None,
    fail_on: Annotated[
        Str, typer.Option(metavar="warning|critical", help="Exit 1 when a node is at this level or worse.")
    ] = None,
) -> None:
    """Read every node's CT maps from Prometheus in a handful of queries and rank them by scrub risk.

    Each node's figures come from its own series (ctwatch's, else Cilium's), projected with the
    same arithmetic as `ctsim run` and ctwatch; what a node's series do not say is named in its row.
    """
    from ctsim.cli.fleet_view import run_fleet

    code = run_fleet(
        transport, prometheus_url, pods=pods, window=window, node_label=node_label, selector=selector, at=at,
        fallback=fallback, fallback_flags=fallback_flags, simulate=simulate, replications=replications, seed=seed,
        processes=processes,
        scheduler=scheduler, limit=limit, wide=wide,
        as_json=as_json, csv_path=csv_path, fail_on=fail_on, progress=_with_progress,
    )  # fmt: skip
    raise typer.Exit(code)


@app.command(short_help="Hold the model to a node's own past: its pods as they came, observed vs predicted.")
@prometheus_options
@given_options
def backtest(
    transport: Transport,
    given: Given,
    prometheus_url: Annotated[
        str, typer.Option(metavar="URL", help="The Prometheus that holds the node's Cilium and kube-state-metrics.")
    ],
    node: Annotated[str, typer.Option(metavar="NAME", help="The node (its --node-label value; kube_pod_info's node).")],
    start: Annotated[str, typer.Option("--from", metavar="TIME", help="The window's start: RFC 3339 or unix s.")],
    end: Annotated[str, typer.Option("--to", metavar="TIME", help="The window's end: RFC 3339 or unix seconds.")],
    node_label: Annotated[
        str, typer.Option(metavar="LABEL[,LABEL]", help="The label that names a node in Cilium's and ctwatch's series.")
    ] = "node,instance",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Play the pods created on NODE between --from and --to in the model, from the node as its series were
    at --from, and print what the node saw beside what the model predicts, each with its series."""
    from ctsim.fleet.backtest import Window, backtest, parse_time
    from ctsim.fleet.live import check_node

    check_node(node)
    window = Window(parse_time(start, "--from"), parse_time(end, "--to"))
    report = backtest(given, prometheus_url, node, node_label, transport, window)
    if as_json:
        print_json(report.to_dict())
        return
    from ctsim.cli.backtest_view import render

    render(report)


@app.command(short_help="Measure this kernel's CT walk rates on throwaway BPF maps (root).")
def calibrate(
    entries: Annotated[str, typer.Option(metavar="COUNT", help="Entries in the measured map.")] = "1Mi",
    trials: Annotated[
        int, typer.Option(metavar="INT", min=1, max=100, help="Repeated walks; median and spread are reported.")
    ] = 5,
    family: Annotated[
        str, typer.Option(metavar="ipv4|ipv6", help="ipv4 (14-byte keys) or ipv6 (38-byte keys).")
    ] = "ipv4",
    sizes: Annotated[
        str, typer.Option(metavar="COUNT,COUNT,...", help="Map sizes for the per-entry cost curve.")
    ] = "64Ki,256Ki,1Mi",
    nf_entries: Annotated[
        str, typer.Option(metavar="COUNT", help="nf_conntrack entries to add in a throwaway netns (0: skip).")
    ] = "5k",
    output: Annotated[
        Str, typer.Option("--output", "-o", metavar="FILE", help="Write the calibration file here ('-': stdout).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the measurements as JSON.")] = False,
) -> None:
    """Measure this kernel's CT walk rates on real, throwaway BPF maps (needs root or CAP_BPF)."""
    from ctsim.core.calibration import dump
    from ctsim.core.defaults import CT_KEY_SIZES
    from ctsim.core.quantity import parse_count, split_list
    from ctsim.kernel import calibrate as cal

    if family not in CT_KEY_SIZES:
        raise InputError(f"--family: must be ipv4 or ipv6, got {family!r}")
    size_list = split_list(sizes, "--sizes")
    plan = cal.Plan(
        entries=parse_count(entries, "--entries", minimum=1024, maximum=cal.MAX_ENTRIES),
        trials=trials,
        family=family,
        sizes=tuple(parse_count(s, "--sizes", minimum=1024, maximum=cal.MAX_ENTRIES) for s in size_list),
        nf_entries=parse_count(nf_entries, "--nf-entries", maximum=cal.MAX_NF_ENTRIES),
    )
    if output == STDOUT and as_json:
        raise InputError("--output - and --json: both would print the measurements; give --output a file")
    if output is not None:
        check_writable(output, "--output")
    cal.probe()
    measured = _with_progress(lambda progress: cal.calibrate(plan, progress), announce=True)
    if output:
        dump(measured.to_dict(), output)
    if as_json:
        print_json(measured.to_dict())
        return
    if output == STDOUT:  # the calibration file is on standard output: no table beside it
        return
    from ctsim.cli.tables import render_calibration

    render_calibration(measured, output)


def _check_plot(path: str, flag: str) -> None:
    """A PNG path that can be written, and matplotlib to draw it, before any work."""
    check_writable(path, flag, suffix=".png")
    from ctsim.cli.plots import require_matplotlib

    require_matplotlib(flag)


def _long(scenario: Scenario) -> bool:
    """Runs that may take more than a few seconds get a progress bar (on stderr)."""
    return scenario.pods > 1_000 or scenario.horizon > 30 * 86400


PROGRESS_EVERY = 10.0  # seconds between progress lines on a stderr that is not a terminal (a log)


@contextlib.contextmanager
def _heartbeat(name: str, expected_s: float) -> Iterator[None]:
    """For work that reports no steps (an emulation sleeps out its horizon): off a terminal, a line every
    ``PROGRESS_EVERY`` seconds of how long it has run against how long it should."""
    if sys.stderr is None or sys.stderr.isatty():
        yield
        return
    import threading

    from ctsim.core.quantity import format_duration

    stop, start = threading.Event(), time.monotonic()

    def beat() -> None:
        while not stop.wait(PROGRESS_EVERY):
            spent = time.monotonic() - start
            with contextlib.suppress(OSError, ValueError):
                print(f"ctsim: {name} {format_duration(round(spent))} of about {format_duration(round(expected_s))}",
                      file=sys.stderr, flush=True)  # fmt: skip

    thread = threading.Thread(target=beat, name="ctsim-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _with_progress(work, announce: bool = False):  # type: ignore[no-untyped-def]
    """Runs ``work(progress)`` under a rich progress bar on stderr (a terminal's only).

    Off a terminal (a log, CI) long work is not silent: a line every
    ``PROGRESS_EVERY`` seconds with done/total and what is left; work that
    ends sooner prints nothing. ``announce``: also one line as each step
    starts (calibrate's steps are each a minute).
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    from ctsim.core.quantity import format_duration

    columns = (TextColumn("{task.description:>14}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    console = Console(stderr=True)  # a bar for a terminal only: piped stderr got a stray blank line before an error
    start = time.monotonic()
    said = [start]  # when the last line was printed
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        tasks: dict[str, int] = {}
        done: dict[str, int] = {}

        def progress(name: str, advance: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
                if announce and not console.is_terminal:
                    print(f"ctsim: {name} ({total:,} steps)...", file=sys.stderr, flush=True)
            bar.update(tasks[name], advance=advance)
            done[name] = done.get(name, 0) + advance
            now = time.monotonic()
            if not console.is_terminal and now - said[0] >= PROGRESS_EVERY:
                said[0] = now
                n, spent = done[name], now - start
                left = f", about {format_duration(round(spent * (total - n) / n))} left" if 0 < n < total else ""
                print(
                    f"ctsim: {name} {n:,}/{total:,} ({n / max(total, 1):.0%}), {format_duration(round(spent))}{left}",
                    file=sys.stderr,
                    flush=True,
                )

        return work(progress)


def main() -> None:
    run_cli(_app_for(sys.argv[1:]), "ctsim")


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the command asked for: typer reads every command's options before it
    parses any, which was a quarter of the main job's start-up. Help and errors about the
    command name itself come from the whole app."""
    name = args[0] if args else ""
    for info in app.registered_commands:
        if info.callback is not None and (info.name or info.callback.__name__) == name:
            one = typer.Typer(
                help=app.info.help, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                rich_markup_mode=None,
            )  # fmt: skip
            one.registered_callback = app.registered_callback
            one.registered_commands = [info]
            return one
    return app
