"""Same seed, same result, on every CPython the package allows: ``--json`` byte for byte across interpreters.

``.ci/run`` sets ``CTSIM_PYTHONS`` to the other interpreters it installed
ctsim into (the newest CPython on the machine); without it this skips.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.scenarios import varied_runs

ROOT = Path(__file__).resolve().parents[1]
OTHERS = [p for p in os.environ.get("CTSIM_PYTHONS", "").split(os.pathsep) if p]


def _json(python: str, args: list[str]) -> bytes:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    p = subprocess.run([python, "-m", "ctsim", "run", *args, "--json"], capture_output=True, env=env, check=False)
    assert p.returncode == 0, (python, args, p.stderr[-500:])
    return p.stdout


@pytest.mark.skipif(not OTHERS, reason="CTSIM_PYTHONS names no other interpreter (.ci/run sets it)")
@pytest.mark.parametrize("other", OTHERS)
def test_json_is_byte_identical_across_interpreters(other: str) -> None:
    version = subprocess.run([other, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    assert version.returncode == 0, f"{other}: {version.stderr}"
    runs = varied_runs(60)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        here = list(pool.map(lambda a: _json(sys.executable, a), runs))
        there = list(pool.map(lambda a: _json(other, a), runs))
    differ = [" ".join(a) for a, h, t in zip(runs, here, there, strict=True) if h != t]
    assert not differ, f"{len(differ)} of {len(runs)} differ on {version.stdout.strip()}:\n" + "\n".join(differ[:5])
