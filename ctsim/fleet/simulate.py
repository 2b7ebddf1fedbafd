"""``fleet --simulate K``: the model on the K riskiest nodes, each with its own facts, in parallel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctsim.capacity.pool import run_all
from ctsim.capacity.sweep import run_point
from ctsim.fleet.live import node_inputs
from ctsim.fleet.risk import NodeRisk


def node_flags(risk: NodeRisk, base: dict[str, Any]) -> dict[str, Any]:
    """resolve()'s flags for this node: its own facts over ``base`` (the fleet-wide profile and fallbacks:
    a --rate given to the fleet is for nodes whose ctwatch measured none, as in the row)."""
    flags = dict(base)
    flags.update({flag: value for flag, (value, _) in node_inputs(risk).items()})
    flags["pods"] = str(risk.pods)
    return flags


def simulate(
    rows: list[NodeRisk],
    k: int,
    base: dict[str, Any],
    processes: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[NodeRisk]:
    """Runs the model on the first ``k`` projected rows (rows are ranked); sets each one's ``simulated``."""
    chosen = [r for r in rows if r.known][:k]
    results = run_all(run_point, [node_flags(r, base) for r in chosen], processes, scheduler, progress)
    for risk, row in zip(chosen, results, strict=True):
        risk.simulated = {
            "verdict": str(row["verdict"]),
            "recovered_at_s": row["recovered_at_s"],
            "latency_p90_s": row["latency_p90_s"],
            "add_timeouts": row["add_timeouts"],
            "command": row["command"],
        }
    return chosen
