"""``ctsim plan``: a node's maps, the table its churn leads to, its safe burst, and what helps, simulated."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from ctsim.cli.options import (
    Str,
    live_scenario_options,
)
from ctsim.cli.term import print_json

if TYPE_CHECKING:
    from ctsim.inputs.scenario import Scenario

SHORT_HELP = "Size a node: maps, steady table, walk time, safe burst, mitigations."


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
