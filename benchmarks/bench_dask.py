"""Sweeps on Dask: what a task costs, what a second worker gives, and Dask against the local pool.

One grid of mixed runs (analytics node, 256Ki..16Mi, 50-pod bursts over 1 h),
in one process first: that is the work. Then on real Dask clusters on
loopback (``distributed.LocalCluster``, worker processes of one thread), all
timed in wall time, best of ``ROUNDS`` alternating rounds:

- Dask's cost per task: one worker, points sent in ctsim's chunks, and one
  point per task, each against the whole grid as one task on that worker
  (the same work, one task's overhead). Apart from it, what running in a
  Dask worker costs at all: that one task against the work in one process
  (the worker's event loop, heartbeats and profiler share its GIL).
- 2 workers against 1 (issue "Performance III": >= 1.7x when both cores are
  free), and 2 Dask workers against the local pool's 2 processes, with the
  seconds a LocalCluster takes to start (what ``sweep`` without
  ``--scheduler`` would pay on every run if it used one).

Every Dask sweep's rows are compared with the one-process rows: a figure of
a sweep that gave other rows would mean nothing.

    python benchmarks/bench_dask.py [ROUNDS]
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ctsim.capacity import pool
from ctsim.capacity.sweep import points, run_point, sweep

BASE: dict[str, str] = {"pods": "50", "horizon": "1h"}
AXES = {"entries": ["256Ki", "1Mi", "4Mi", "16Mi"], "seed": [str(s) for s in range(1, 49)]}


def cluster(workers: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    )


def timed(fn: Callable[[], list[dict[str, Any]]], expect: list[dict[str, Any]]) -> float:
    start = time.perf_counter()
    rows = fn()
    seconds = time.perf_counter() - start
    if rows != expect:
        sys.exit("bench_dask: a Dask sweep's rows differ from the one-process rows")
    return seconds


def on_dask(address: str, expect: list[dict[str, Any]]) -> float:
    return timed(lambda: sweep(BASE, AXES, scheduler=address), expect)


def one_task(client: Any, expect: list[dict[str, Any]]) -> float:
    """The grid as a single task: the work as a worker does it, with one task's overhead."""
    grid = [{**BASE, **p} for p in points(AXES)]
    return timed(lambda: client.submit(pool._apply, run_point, grid, pure=False).result(), expect)


def per_point(address: str, expect: list[dict[str, Any]]) -> float:
    """The same sweep with one point per task: what chunking saves."""
    kept = pool.CHUNKS_PER_WORKER
    pool.CHUNKS_PER_WORKER = 10**9
    try:
        return on_dask(address, expect)
    finally:
        pool.CHUNKS_PER_WORKER = kept


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    logging.getLogger("distributed").setLevel(logging.ERROR)
    size = len(points(AXES))
    expect = sweep(BASE, AXES, processes=1)  # also warms this process's imports
    best: dict[str, list[float]] = {}

    def note(name: str, seconds: float) -> None:
        best.setdefault(name, []).append(seconds)

    for _ in range(rounds):
        note("work", timed(lambda: sweep(BASE, AXES, processes=1), expect))
        note("pool 2", timed(lambda: sweep(BASE, AXES, processes=2), expect))
        for workers in (1, 2):
            start = time.perf_counter()
            with cluster(workers) as c:
                note(f"start {workers}", time.perf_counter() - start)
                address = c.scheduler_address
                sweep(BASE, {"entries": ["256Ki"], "seed": ["1"]}, scheduler=address)  # workers import ctsim
                note(f"dask {workers}", on_dask(address, expect))
                if workers == 1:
                    note("dask 1 per point", per_point(address, expect))
                    with c.get_client() as client:
                        note("dask 1 one task", one_task(client, expect))
    m = {name: min(values) for name, values in best.items()}
    w = m["work"]
    task = m["dask 1 one task"]
    print(f"{size} mixed runs, best of {rounds} rounds, wall time")
    print(f"  the work in one process        : {w:.2f} s")
    print(f"  1 Dask worker, one task        : {task:.2f} s   a worker's own cost: {task / w - 1:+.1%}")
    print(f"  1 Dask worker, ctsim's chunks  : {m['dask 1']:.2f} s   per-task overhead: {m['dask 1'] / task - 1:+.1%}")
    pp = m["dask 1 per point"]
    print(f"  1 Dask worker, a point a task  : {pp:.2f} s   per-task overhead: {pp / task - 1:+.1%}")
    if (os.cpu_count() or 1) < 2:
        print("one core: no scaling to measure")
        return
    two = m["dask 2"]
    print(f"  2 Dask workers                 : {two:.2f} s   {m['dask 1'] / two:.2f}x one worker")
    print(f"  local pool, 2 processes        : {m['pool 2']:.2f} s   Dask's 2 workers take {two / m['pool 2']:.2f}x")
    print(f"  a LocalCluster starts in {m['start 1']:.2f} s (1 worker), {m['start 2']:.2f} s (2 workers)")


if __name__ == "__main__":
    main()
