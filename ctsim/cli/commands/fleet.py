"""``ctsim fleet``: every node a Prometheus knows, ranked by scrub risk; the riskiest simulated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ctsim.cli.command import whole_number
from ctsim.cli.options import (
    Str,
    fallback_options,
    prometheus_options,
)
from ctsim.cli.parallel import replications_option, scheduler_option
from ctsim.cli.progress import with_progress

if TYPE_CHECKING:
    from ctsim.fleet.prometheus import Transport
    from ctsim.inputs.given import Given

SHORT_HELP = "Rank every node a Prometheus knows by scrub risk; simulate the riskiest."


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
            metavar="K",
            help="Run the model on the K riskiest nodes, each with its own facts.",
            click_type=whole_number("--simulate", 0, 10_000),
        ),
    ] = 0,
    replications: Annotated[
        int,
        replications_option(
            "With --simulate: R seeds per node drawn from --seed, each verdict's share with a 95 % interval."
        ),
    ] = 1,
    seed: Annotated[
        int, typer.Option(metavar="INT", help="Random seed of --simulate's runs.", click_type=whole_number("--seed"))
    ] = 1,
    processes: Annotated[
        int, typer.Option(metavar="INT", min=0, max=256, help="Worker processes for --simulate (0: one per core).")
    ] = 0,
    scheduler: Annotated[Str, scheduler_option("--simulate")] = None,
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
        as_json=as_json, csv_path=csv_path, fail_on=fail_on, progress=with_progress,
    )  # fmt: skip
    raise typer.Exit(code)
