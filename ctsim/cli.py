"""The ``ctsim`` command line (typer). Bad input: one line on stderr, exit code 2."""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from typing import Annotated

import typer

from ctsim.errors import InputError, run_cli
from ctsim.options import Str, scenario_options
from ctsim.scenario import Scenario

app = typer.Typer(
    help="Model Cilium's conntrack GC drift and the scrub convoy that stalls pod start-up.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """ctsim: will pod start-up stall behind a conntrack scrub on this node?"""


@app.command()
@scenario_options
def run(
    scenario: Scenario,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Simulate a burst of pods on a node whose CT maps hold ENTRIES entries."""
    from ctsim.model import simulate

    result = simulate(scenario)
    if as_json:
        _print_json(result.to_dict())
        return
    from ctsim.report import render

    render(result)


@app.command()
@scenario_options
def emulate(
    scenario: Scenario,
    time_scale: Annotated[
        float, typer.Option(min=1.0, help="Run this many times faster than the node's clock.")
    ] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Run the scenario, scaled down, on the real kernel and beside the simulator (needs root or CAP_BPF)."""
    from ctsim import calibrate as cal
    from ctsim import emulate as em

    cal.probe()
    if scenario.rate_source.startswith("calibrated"):
        real_rate, delete_s, how = scenario.walk_rate, scenario.delete_seconds, "the calibration file"
    else:
        with cal.new_ct_map(1 << 18, cal.KEY_SIZES["ipv4"]) as m:
            real_rate = statistics.median(cal.per_entry_rate(m) for _ in range(3))
            delete_s = cal.delete_seconds(m, cal.KEY_SIZES["ipv4"], 20_000)
        how = "measured now on a 256Ki map (pass --calibration to use a calibration file)"
    if scenario.churn.peak > 0:
        scenario = dataclasses.replace(
            scenario, notes=(*scenario.notes, "churn is not emulated: both sides run without it")
        )
    report = em.run(scenario, time_scale, real_rate, delete_s)
    report["rate"] = {"entries_per_s": real_rate, "source": how}
    if as_json:
        _print_json(report)
        return
    from ctsim.report import render_emulation

    render_emulation(report)


def _print_json(doc: object) -> None:
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


@app.command()
def calibrate(
    entries: Annotated[str, typer.Option(help="Entries in the measured map.")] = "1Mi",
    trials: Annotated[int, typer.Option(min=1, max=100, help="Repeated walks; median and spread are reported.")] = 5,
    family: Annotated[str, typer.Option(help="ipv4 (14-byte keys) or ipv6 (38-byte keys).")] = "ipv4",
    sizes: Annotated[str, typer.Option(help="Map sizes for the per-entry cost curve.")] = "64Ki,256Ki,1Mi",
    nf_entries: Annotated[str, typer.Option(help="nf_conntrack entries to add in a throwaway netns (0: skip).")] = "5k",
    output: Annotated[Str, typer.Option("--output", "-o", help="Write the calibration file here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the measurements as JSON.")] = False,
) -> None:
    """Measure this kernel's CT walk rates on real, throwaway BPF maps (needs root or CAP_BPF)."""
    from ctsim import calibrate as cal
    from ctsim.calibration import dump
    from ctsim.quantity import parse_count

    if family not in cal.KEY_SIZES:
        raise InputError(f"--family: must be ipv4 or ipv6, got {family!r}")
    plan = cal.Plan(
        entries=parse_count(entries, "--entries", minimum=1024),
        trials=trials,
        family=family,
        sizes=tuple(parse_count(s, "--sizes", minimum=1024) for s in sizes.split(",") if s.strip()),
        nf_entries=parse_count(nf_entries, "--nf-entries"),
    )
    cal.probe()
    doc = _with_progress(lambda progress: cal.calibrate(plan, progress))
    if output:
        dump(doc, output)
    if as_json:
        _print_json(doc)
        return
    from ctsim.report import render_calibration

    render_calibration(doc, output)


def _with_progress(work):  # type: ignore[no-untyped-def]
    """Runs ``work(progress)`` under a rich progress bar on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description:>14}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, int] = {}

        def progress(name: str, advance: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], advance=advance)

        return work(progress)


def main() -> None:
    run_cli(app, "ctsim")
