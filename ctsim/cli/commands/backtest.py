"""``ctsim backtest``: the model held to a node's own past, observed beside predicted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ctsim.cli.options import (
    given_options,
    prometheus_options,
)
from ctsim.cli.term import print_json

if TYPE_CHECKING:
    from ctsim.fleet.prometheus import Transport
    from ctsim.inputs.given import Given

SHORT_HELP = "Hold the model to a node's own past: its pods as they came, observed vs predicted."


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
