"""Scenarios resolved exactly as the CLI resolves them."""

from __future__ import annotations

from ctsim.scenario import resolve
from ctsim.sim.model import simulate
from ctsim.sim.result import Result


def run(**flags: object) -> Result:
    return simulate(resolve(**flags))  # type: ignore[arg-type]
