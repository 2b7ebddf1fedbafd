"""``ctsim sweep``: the model over a grid of scenarios, rows as CSV or JSON, a heatmap."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Annotated

import typer

from ctsim.cli.options import (
    Str,
    scenario_options,
)
from ctsim.cli.parallel import check_cluster, replications_option, scheduler_option
from ctsim.cli.progress import with_progress
from ctsim.core.errors import InputError
from ctsim.core.files import STDOUT, check_distinct, check_not_an_input, check_writable, write_atomic

if TYPE_CHECKING:
    from ctsim.inputs.scenario import Scenario

SHORT_HELP = "Run the model over a grid of scenarios."


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
    scheduler: Annotated[Str, scheduler_option("the points")] = None,
    replications: Annotated[
        int,
        replications_option(
            "Run every point with R seeds drawn from --seed: each point's verdict shares with 95 % intervals."
        ),
    ] = 1,
) -> None:
    """Run the model over a grid of scenarios (the other flags are the base of every point)."""
    from ctsim.capacity import sweep as sw

    check_cluster(replications, scheduler, single=False)
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
    check_not_an_input(
        {"--csv": csv_path, "--output": output, "--heatmap": heatmap},
        {"--grid-file": grid_file, "--calibration": scenario.calibration},
    )
    to_stdout = next((flag for flag, path in (("--csv", csv_path), ("--output", output), ("--heatmap", heatmap))
                      if path == STDOUT), None)  # fmt: skip
    if to_stdout and as_json:
        raise InputError(f"{to_stdout} - and --json: both would go to standard output; give {to_stdout} a file")
    if csv_path is not None:
        check_writable(csv_path, "--csv")
    if output is not None:
        check_writable(output, "--output")
    if heatmap is not None:
        from ctsim.cli.plots import check_plot  # matplotlib's check, loaded only for a heatmap

        check_plot(heatmap, "--heatmap")

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
    rows = with_progress(work)
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
