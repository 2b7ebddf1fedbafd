"""``fleet --simulate K``: the model on the K riskiest nodes, each with its own facts, in parallel.

With ``--replications R`` each node runs R seeds drawn from ``--seed`` (the
same R for every node), all nodes' runs in one pool or on one Dask
scheduler, and its row gets each verdict's share with a 95 % interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ctsim.capacity.pool import run_all
from ctsim.capacity.replications import seeds, summary
from ctsim.capacity.sweep import Point, command, run_point
from ctsim.core.profiles import profile_for
from ctsim.fleet.live import node_inputs, shown, uncounted
from ctsim.fleet.risk import NodeRisk, Simulated
from ctsim.inputs.given import Given


def node_point(risk: NodeRisk, base: Given, base_flags: dict[str, Any]) -> Point:
    """This node: its own facts over ``base`` (the fleet-wide profile and fallbacks: a --rate given to the
    fleet is for nodes whose ctwatch measured none, as in the row), and the flags that re-run it."""
    live = node_inputs(risk)
    given = replace(base, **{k: v for k, (v, _) in live.items()}, pods=risk.pods)
    flags = {**base_flags, **{k: shown(k, v) for k, (v, _) in live.items()}, "pods": str(risk.pods)}
    if risk.release is not None:  # the node's release line, whatever the fleet's --profile for other nodes
        line = profile_for(risk.release.line).name  # risk.release is the release played
        given, flags = replace(given, profile=line), {**flags, "profile": line}
    return Point(given, flags)


def simulate(
    rows: list[NodeRisk],
    k: int,
    base: Given,
    base_flags: dict[str, Any],
    processes: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    replications: int = 1,
    seed: int = 1,
) -> list[NodeRisk]:
    """Runs the model on the first ``k`` projected rows (rows are ranked); sets each one's ``simulated``."""
    chosen = []
    for r in rows:
        if len(chosen) == k:
            break
        if not r.known:
            continue
        missing = uncounted(r)
        if missing:  # a run would need a count no series gives: the row says so rather than model it as 0
            r.flags.append(f"not simulated: no series counts {', '.join(missing)} (give --ipv6-entries to run it)")
            continue
        chosen.append(r)
    nodes = [node_point(r, replace(base, seed=seed), {**base_flags, "seed": seed}) for r in chosen]
    drawn = seeds(seed, replications) if replications > 1 else [seed]
    points = [Point(replace(p.given, seed=s), {**p.flags, "seed": s}) for p in nodes for s in drawn]
    results = run_all(run_point, points, processes, scheduler, progress)
    n = len(drawn)
    for i, risk in enumerate(chosen):
        group = results[i * n : (i + 1) * n]
        first = group[0]
        risk.simulated = Simulated(
            verdict=str(first["verdict"]),
            recovered_at_s=first["recovered_at_s"],
            latency_p90_s=first["latency_p90_s"],
            add_timeouts=first["add_timeouts"],
            command=command(nodes[i].flags),
        )
        if n > 1:
            shares = summary(group)
            verdict, top = max(shares["verdicts"].items(), key=lambda kv: kv[1]["count"])
            risk.simulated = replace(
                risk.simulated,
                verdict=verdict,
                verdict_share=top["share"],
                verdict_ci95=top["ci95"],
                recovered_at_s=shares["quantiles"]["all_ready_s"]["p50"],
                replications={"seeds": drawn, "summary": shares},
            )
    return chosen
