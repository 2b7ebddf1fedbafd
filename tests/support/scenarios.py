"""Scenarios resolved exactly as the CLI resolves them."""

from __future__ import annotations

import random

from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import Model, simulate
from ctsim.sim.result import Result


def run(**flags: object) -> Result:
    return simulate(resolve_flags(**flags))  # type: ignore[arg-type]


def scheduled(model: Model) -> int:
    """Runs ``model``, counting the SimPy events it schedules (tests, ``benchmarks/bench_run.py``)."""
    env, count = model.env, [0]
    schedule = env.schedule

    def counting(*args: object, **kwargs: object) -> None:
        count[0] += 1
        schedule(*args, **kwargs)  # type: ignore[arg-type]

    env.schedule = counting  # type: ignore[method-assign]
    model.run()
    return count[0]


def varied_runs(n: int, seed: int = 20261201) -> list[list[str]]:
    """``n`` varied ``ctsim run`` argument lists (presets, profiles, churn, dual stack, GC settings), seeded."""
    r = random.Random(seed)
    options: list[tuple[float, str, list[str]]] = [
        (0.3, "--preset", ["analytics", "standard"]),
        (0.3, "--profile", ["cilium-1.16", "cilium-1.17", "cilium-1.18"]),
        (0.3, "--agent-state", ["warm", "fresh"]),
        (0.3, "--gc-interval", ["auto", "60s", "5m", "1h"]),
        (0.25, "--churn", ["500/min", "50000/min", "2000/s", "50000/min for 8h, 500/min for 16h"]),
        (0.2, "--conn-duration", ["30s", "5m", "1h"]),
        (0.2, "--ipv6-entries", ["0", "1M", "4M"]),
        (0.2, "--expired-fraction", ["0", "0.5", "0.99"]),
        (0.2, "--horizon", ["10m", "30m", "2h", "6h"]),
        (0.15, "--deadline", ["30s", "90s", "120s"]),
        (0.15, "--rate", ["100000", "426000", "50000"]),
        (0.15, "--max-entries", ["4Mi", "16Mi", "1Mi"]),
        (0.1, "--gc-next-pass", ["0", "10m", "2h"]),
        (0.1, "--gc-max-interval", ["1h", "12h"]),
        (0.1, "--regeneration-time", ["0", "2s", "10s"]),
        (0.1, "--cores", ["4", "16", "128"]),
        (0.1, "--node-memory", ["64Gi", "512Gi", "2Ti"]),
        (0.1, "--map-ratio", ["0.0025", "0.005"]),
    ]
    runs = []
    for _ in range(n):
        args = ["--entries", r.choice(["0", "100K", "1M", "3.7M", "7M", "16M", "256Ki", "2M"])]
        args += ["--pods", str(r.choice([1, 2, 5, 10, 25, 50, 80, 120]))]
        for share, flag, values in options:
            if r.random() < share:
                args += [flag, r.choice(values)]
        runs.append([*args, "--seed", str(r.randrange(1000))])
    return runs
