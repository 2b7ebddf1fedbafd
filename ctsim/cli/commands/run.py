"""``ctsim run``: one node, a burst of pods, the verdict and the advice (each mitigation simulated)."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Annotated

import typer

from ctsim.cli.options import (
    Str,
    live_scenario_options,
)
from ctsim.cli.parallel import check_cluster, replications_option, scheduler_option
from ctsim.cli.progress import long_run, with_progress
from ctsim.cli.term import print_json

if TYPE_CHECKING:
    from ctsim.inputs.scenario import Scenario

_SHARES = "each verdict's share with a 95 % interval"
SHORT_HELP = "Simulate a pod burst on a node: verdict, retries, locks, advice."


@live_scenario_options
def run(
    scenario: Scenario,
    flags: dict[str, object],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    plot: Annotated[
        Str, typer.Option(metavar="FILE.png", help="Also draw table size and GC interval over time to this PNG.")
    ] = None,
    replications: Annotated[
        int,
        replications_option(
            "Also run R independent seeds drawn from --seed: each verdict's share with a 95 % interval."
        ),
    ] = 1,
    scheduler: Annotated[Str, scheduler_option("the replications")] = None,
) -> None:
    """Simulate a burst of pods on a node whose CT maps hold ENTRIES entries."""
    from ctsim.sim.model import Model
    from ctsim.sim.result import Verdict

    if plot is not None:
        from ctsim.cli.plots import check_plot  # matplotlib's check, loaded only for a plot

        check_plot(plot, "--plot")
    check_cluster(replications, scheduler, single=True)
    model = Model(scenario, trace_every=scenario.horizon / 600 if plot else None)
    result = with_progress(model.run) if long_run(scenario) else model.run()
    if plot:
        from ctsim.cli.plots import drift_of
        from ctsim.core.maptype import MapType

        churn = scenario.map(MapType.IPV4_TCP).churn
        drift_of(model, result, plot, title=f"{scenario.preset}: {churn.describe()} churn")
    del model  # its node, events and processes: only the result is read from here on
    if long_run(scenario):
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

        rows = with_progress(work)
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
