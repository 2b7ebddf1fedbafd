"""Sweep throughput: runs per second per core for 50-pod bursts over a 1 h horizon (issue #5).

Target: >= 50 runs/s/core. Measured in one process (no pool), so per-core;
split by outcome because the cost of a run is its events, and a collapse is
mostly kubelet retries answered with HTTP 429 (thousands per hour).
"""

from __future__ import annotations

import cProfile
import pstats
import time

from ctsim.sweep import points, run_point

GRIDS = {
    "no collapse (standard node, 64Ki..256Ki)": (
        {"preset": "standard"},
        {"entries": ["64Ki", "128Ki", "256Ki"], "seed": ["1", "2", "3", "4"]},
    ),
    "mixed (analytics, 256Ki..16Mi)": ({}, {"entries": ["256Ki", "1Mi", "4Mi", "16Mi"], "seed": ["1", "2", "3"]}),
    "collapse only (analytics, 16Mi)": ({}, {"entries": ["16Mi"], "seed": ["1", "2", "3", "4"]}),
}


def main() -> None:
    for name, (base, axes) in GRIDS.items():
        grid = [{**base, "pods": "50", "horizon": "1h", **p} for p in points(axes)]
        for flags in grid:
            flags["seed"] = int(flags["seed"])
        start = time.perf_counter()
        rows = [run_point(flags) for flags in grid]
        seconds = time.perf_counter() - start
        verdicts = {v: sum(r["verdict"] == v for r in rows) for v in ("ok", "degraded", "collapse")}
        attempts = sum(r["add_429"] + r["add_timeouts"] + r["pods_ready"] for r in rows)
        print(f"{name:>42}: {len(rows) / seconds:6.1f} runs/s/core  ({len(rows)} runs, {verdicts}, "
              f"{attempts / len(rows):,.0f} ADD attempts per run)")  # fmt: skip
    profile = cProfile.Profile()
    profile.enable()
    run_point({"entries": "16Mi", "pods": "50", "horizon": "1h", "seed": 1})
    profile.disable()
    print("\nwhere a collapse run's time goes (top 6 by own time):")
    pstats.Stats(profile).sort_stats("tottime").print_stats(6)


if __name__ == "__main__":
    main()
