"""Sweep throughput: runs per second per core for 50-pod bursts over 1 h, and the gain of a second process.

Runs per second per core are counted in CPU time of one process (no pool),
the fastest of three passes, split by outcome: a run costs its events, and a collapse is an hour of
kubelet retries waiting on the limiter. Then the same grid through
``ctsim.capacity.sweep.sweep`` on 1 and on 2 processes (wall time; needs two free
cores to mean anything).

Targets (issue "Performance II"): collapse >= 150 runs/s/core,
non-collapsing >= 300, 2 processes >= 1.7x one; (issue "Performance IV")
the collapse-only grid <= 5x its bare loop, the mixed one <= 7x.

Beside each grid it times bench_run.py's bare retry loop over that grid's
own CNI ADDs and DELs (50 pods a run): the rate no model that plays a
storm's retries one by one can pass on this machine, in the same run.
"""

from __future__ import annotations

import os
import time

from bench_run import bare_retries

from ctsim.capacity.sweep import Point, points, run_point, sweep
from ctsim.inputs.given import parse_given
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import simulate

GRIDS = {
    "non-collapsing (standard node, 64Ki..256Ki)": (
        {"preset": "standard"},
        {"entries": ["64Ki", "128Ki", "256Ki"], "seed": ["1", "2", "3", "4", "5", "6"]},
    ),
    "mixed (analytics, 256Ki..16Mi)": ({}, {"entries": ["256Ki", "1Mi", "4Mi", "16Mi"], "seed": ["1", "2", "3"]}),
    "collapse only (analytics, 16Mi)": ({}, {"entries": ["16Mi"], "seed": ["1", "2", "3", "4", "5", "6"]}),
}
TARGETS = {
    "non-collapsing (standard node, 64Ki..256Ki)": "no target: few retries, a run costs its events",
    "mixed (analytics, 256Ki..16Mi)": "target <= 7x",
    "collapse only (analytics, 16Mi)": "target <= 5x",
}


def main() -> None:
    for name, (base, axes) in GRIDS.items():
        grid = [{**base, "pods": "50", "horizon": "1h", **p} for p in points(axes)]
        seconds = float("inf")
        for _ in range(3):  # the fastest pass: a neighbour on this shared VM only ever slows one
            start = time.process_time()
            rows = [run_point(Point(parse_given(**flags), flags)) for flags in grid]  # parsed as sweep does
            seconds = min(seconds, time.process_time() - start)
        verdicts = {v: sum(r["verdict"] == v for r in rows) for v in ("ok", "degraded", "collapse")}
        print(f"{name:>44}: {len(rows) / seconds:6.1f} runs/s/core  ({len(rows)} runs, {verdicts})")
        counters = [simulate(resolve_flags(**flags)).counters for flags in grid]
        steps = sum(c.add_attempts + c.del_calls for c in counters)
        bare = min(bare_retries(50, steps) for _ in range(3))
        per_run = steps / len(rows)
        print(f"{'its bare retry loop':>44}: {len(rows) / bare:6.1f} runs/s/core  ({per_run:,.0f} retries a run)")
        print(f"{'the grid / its bare loop':>44}: {seconds / bare:6.2f}x  ({TARGETS[name]})")
    if (os.cpu_count() or 1) < 2:
        print("one core: no scaling to measure")
        return
    base, axes = {}, {"entries": ["256Ki", "1Mi", "4Mi", "16Mi"], "seed": [str(s) for s in range(1, 13)]}
    wall = {}
    for n in (1, 2, 1, 2):
        start = time.perf_counter()
        sweep(base, axes, processes=n)
        wall.setdefault(n, []).append(time.perf_counter() - start)
    one, two = min(wall[1]), min(wall[2])
    size = len(points(axes))
    print(f"{size} mixed runs: 1 process {one:.2f} s, 2 processes {two:.2f} s: {one / two:.2f}x (best of 2 each)")


if __name__ == "__main__":
    main()
