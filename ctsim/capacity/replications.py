"""Monte Carlo: one scenario under R independent seeds, and each answer with its uncertainty.

A single seed's verdict on a stochastic node (kubelet's jitter, the pods'
start spread) is one sample. ``--replications R`` runs R seeds derived
from ``--seed`` (the same R seeds on every machine and CPython: Python's
Mersenne Twister is part of its stable API), and reports the share of each
verdict with a 95 % Wilson score interval, and quantiles across the
replications of time to all Ready, attempts and orphaned walk time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ctsim.capacity.pool import run_all
from ctsim.capacity.sweep import Point, Row, run_point
from ctsim.core.errors import InputError
from ctsim.inputs.given import MAX_SEED, Given
from ctsim.sim.result import Verdict, percentile

MAX_REPLICATIONS = 10_000
Z95 = 1.959963984540054  # the standard normal's 97.5th percentile
QUANTILES = (0.05, 0.5, 0.95)
MEASURES = {  # row key → what the summary calls it
    "recovered_at_s": "all_ready_s",
    "latency_max_s": "slowest_ready_s",
    "add_attempts": "add_attempts",
    "orphaned_walk_seconds": "orphaned_walk_s",
}


def check(r: int, maximum: int = MAX_REPLICATIONS) -> None:
    if not 1 <= r <= maximum:
        raise InputError(f"from 1 to {maximum:,}, got {r}", "replications")


def seeds(seed: int, r: int) -> list[int]:
    """R seeds drawn from ``seed``: reproducible, and never the same run twice by accident."""
    rng = random.Random(seed)
    return [rng.randrange(MAX_SEED) for _ in range(r)]


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials (sound at 0 and at n, unlike k/n ± …)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def replicate(
    given: Given,
    flags: dict[str, Any],
    seed: int,
    r: int,
    processes: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Row]:
    """One row per replication of ``given`` (shown as ``flags``), in the order of ``seeds(seed, r)`` (sweep's row)."""
    points = [Point(replace(given, seed=s), {**flags, "seed": s}) for s in seeds(seed, r)]
    return run_all(run_point, points, processes, scheduler, progress)


def by_point(rows: list[Row], axes: list[str], r: int) -> list[dict[str, Any]]:
    """A sweep's rows, ``r`` per point in grid order: each point's axis values and its ``summary``."""
    return [{**{a: rows[i][a] for a in axes}, "summary": summary(rows[i : i + r])} for i in range(0, len(rows), r)]


def summary(rows: list[Row]) -> dict[str, Any]:
    """Verdict shares with their 95 % intervals, and quantiles of each measure across replications."""
    n = len(rows)
    verdicts: dict[str, Any] = {}
    for v in Verdict:
        k = sum(row["verdict"] == v for row in rows)
        if k:
            low, high = wilson(k, n)
            verdicts[str(v)] = {"count": k, "share": k / n, "ci95": [low, high]}
    measures: dict[str, Any] = {}
    for key, name in MEASURES.items():
        values = [float(row[key]) for row in rows if row[key] is not None]
        measures[name] = {
            "replications": len(values),
            **{f"p{round(q * 100)}": percentile(values, q) for q in QUANTILES},
        }
    return {"replications": n, "verdicts": verdicts, "quantiles": measures}
