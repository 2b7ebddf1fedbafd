"""``ctsim emulate``: the scenario scaled down on the real kernel (root), beside the model, pod by pod."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from ctsim.cli.options import (
    scenario_options,
)
from ctsim.cli.progress import heartbeat
from ctsim.cli.term import print_json

if TYPE_CHECKING:
    from ctsim.inputs.scenario import Scenario

SHORT_HELP = "Run the scenario scaled down on the real kernel beside the model (root)."


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
    from ctsim.core.maptype import MapType

    if scenario.map(MapType.IPV4_TCP).churn.peak > 0:
        scenario = dataclasses.replace(
            scenario, notes=(*scenario.notes, "churn is not emulated: both sides run without it")
        )
    with heartbeat("emulate", scenario.horizon / time_scale):
        report = em.run(scenario, time_scale, real_rate, delete_s, rate_source=how)
    if as_json:
        print_json(report.to_dict())
        return
    from ctsim.cli.tables import render_emulation

    render_emulation(report)
