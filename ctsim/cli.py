"""The ``ctsim`` command line (typer). Bad input: one line on stderr, exit code 2."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from ctsim.errors import InputError

app = typer.Typer(
    help="Model Cilium's conntrack GC drift and the scrub convoy that stalls pod start-up.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

Str = Optional[str]  # noqa: UP045 - typer reads Optional at runtime


@app.callback()
def _root() -> None:
    """ctsim: will pod start-up stall behind a conntrack scrub on this node?"""


@app.command()
def run(
    entries: Annotated[Str, typer.Option(help="Present CT entries at t=0 (16M, 16Mi, 262144).")] = None,
    pods: Annotated[str, typer.Option(help="Pods scheduled onto the node at once.")] = "50",
    max_entries: Annotated[Str, typer.Option(help="CT map capacity (default: the preset's).")] = None,
    expired_fraction: Annotated[Str, typer.Option(help="Share of the t=0 entries already expired.")] = None,
    rate: Annotated[Str, typer.Option(help="Walk rate, entries/s (default: the profile's published rate).")] = None,
    churn: Annotated[
        Str, typer.Option(help="New connections: 50000/min, or '50000/min for 8h, 500/min for 16h'.")
    ] = None,
    conn_duration: Annotated[Str, typer.Option(help="How long each connection stays open.")] = None,
    deadline: Annotated[Str, typer.Option(help="cilium-cni's API client timeout.")] = None,
    gc_interval: Annotated[str, typer.Option(help="conntrack-gc-interval: 'auto' (adaptive) or a duration.")] = "auto",
    gc_initial_interval: Annotated[Str, typer.Option(help="Start a fresh agent with this GC interval (5m).")] = None,
    gc_next_pass: Annotated[Str, typer.Option(help="When the next GC pass starts.")] = None,
    gc_max_interval: Annotated[Str, typer.Option(help="conntrack-gc-max-interval.")] = None,
    regeneration_time: Annotated[Str, typer.Option(help="Endpoint BPF compile and load time.")] = None,
    cores: Annotated[Str, typer.Option(help="Node cores (build permits).")] = None,
    node_memory: Annotated[Str, typer.Option(help="Node memory for dynamic map sizing (2Ti).")] = None,
    map_ratio: Annotated[Str, typer.Option(help="bpf-map-dynamic-size-ratio (0.0025).")] = None,
    horizon: Annotated[Str, typer.Option(help="How much node time to simulate (1h).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed: same seed, same result.")] = 1,
    preset: Annotated[Str, typer.Option(help="analytics (the incident, default) or standard.")] = None,
    profile: Annotated[
        str, typer.Option(help="cilium-1.16 (per-entry walk) or cilium-1.17 (batched).")
    ] = "cilium-1.16",
    calibration: Annotated[Str, typer.Option(help="Walk rates from `ctsim calibrate --output FILE`.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Simulate a burst of pods on a node whose CT maps hold ENTRIES entries."""
    from ctsim.model import simulate
    from ctsim.scenario import resolve

    scenario = resolve(
        preset=preset,
        profile=profile,
        entries=entries,
        max_entries=max_entries,
        expired_fraction=expired_fraction,
        pods=pods,
        rate=rate,
        churn=churn,
        conn_duration=conn_duration,
        deadline=deadline,
        gc_interval=gc_interval,
        gc_initial_interval=gc_initial_interval,
        gc_next_pass=gc_next_pass,
        gc_max_interval=gc_max_interval,
        regeneration=regeneration_time,
        cores=cores,
        node_memory=node_memory,
        map_ratio=map_ratio,
        horizon=horizon,
        seed=seed,
        calibration=calibration,
    )
    result = simulate(scenario)
    if as_json:
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from ctsim.report import render

    render(result)


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
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
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
    """Entry point: typer parses; every input error becomes one line and exit code 2."""
    try:
        rv = app(standalone_mode=False)
    except InputError as exc:
        _fail(str(exc))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("ctsim: interrupted (what it had created is removed)", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:
        # typer's (vendored or real) click usage errors: they carry their own message.
        message = getattr(exc, "format_message", None)
        if message is None:
            raise
        _fail(message(), getattr(exc, "exit_code", 2))
    sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str, code: int = 2) -> None:
    if message:  # typer's no-args help carries none: the help is the message
        print(f"ctsim: error: {message}", file=sys.stderr)
    sys.exit(code)
