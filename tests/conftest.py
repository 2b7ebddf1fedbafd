"""Shared helpers: scenarios resolved exactly as the CLI resolves them."""

from __future__ import annotations

import pytest

from ctsim.model import simulate
from ctsim.result import Result
from ctsim.scenario import resolve


def run(**flags: object) -> Result:
    return simulate(resolve(**flags))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def incident() -> Result:
    """The main job: ``ctsim run --entries 16M --pods 50``."""
    return run(entries="16M", pods="50")
