"""Shared fixtures."""

from __future__ import annotations

import pytest

from ctsim.sim.result import Result
from tests.support.scenarios import run


@pytest.fixture(scope="session")
def incident() -> Result:
    """The main job: ``ctsim run --entries 16M --pods 50``."""
    return run(entries="16M", pods="50")
