"""Monte Carlo replications with their intervals, and runs on a real Dask cluster (issue "Performance III")."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ctsim.capacity import replications as mc
from ctsim.capacity import sweep as sw
from ctsim.inputs.given import parse_given
from ctsim.inputs.scenario import resolve_flags
from tests.support.http import free_port


def test_wilson_is_the_score_interval() -> None:
    low, high = mc.wilson(200, 200)
    assert high == 1.0 and low == pytest.approx(0.9812, abs=1e-4)  # "collapse in 200/200 (98.1-100 %)"
    assert mc.wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    a, b = mc.wilson(3, 10)
    c, d = mc.wilson(7, 10)
    assert (a, b) == (pytest.approx(1 - d), pytest.approx(1 - c))  # symmetric in k and n - k
    assert a < 0.3 < b


def test_seeds_are_reproducible_and_distinct() -> None:
    assert mc.seeds(1, 50) == mc.seeds(1, 50)
    assert len(set(mc.seeds(1, 1000))) == 1000
    assert mc.seeds(1, 5) != mc.seeds(2, 5)
    assert mc.seeds(1, 5) == mc.seeds(1, 8)[:5]  # more replications extend, never reshuffle, the first


def test_a_coin_flip_burst_reports_both_verdicts_with_intervals() -> None:
    flags = {"entries": "4Mi", "pods": "50"}
    s = resolve_flags(**flags)
    rows = mc.replicate(s.given, flags, s.seed, 12, processes=2)
    assert rows == mc.replicate(s.given, flags, s.seed, 12, processes=1)  # the pool changes nothing
    summary = mc.summary(rows)
    shares = summary["verdicts"]
    assert sum(v["count"] for v in shares.values()) == 12
    for v in shares.values():
        assert v["ci95"][0] <= v["share"] <= v["ci95"][1]
    q = summary["quantiles"]["add_attempts"]
    assert q["p5"] <= q["p50"] <= q["p95"]


@contextmanager
def dask_cluster() -> Iterator[str]:
    """A real scheduler and two worker processes (under a nanny) on loopback; every process group killed after."""
    pytest.importorskip("distributed", reason="the ctsim[dask] extra is not installed")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    procs = [
        subprocess.Popen(
            [*dask, "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        ),
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "2", "--nthreads", "1",
             "--no-dashboard", "--host", "127.0.0.1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        ),
    ]  # fmt: skip
    try:
        from distributed import Client

        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(address, timeout=5) as client:
                    if len(client.scheduler_info()["workers"]) == 2:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the Dask workers never joined their scheduler")
            time.sleep(0.5)
        yield address
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_sweeps_and_replications_on_dask_are_the_local_runs() -> None:
    base = dict(entries="1M", pods="5", horizon="10m")
    axes = {"pods": ["1", "8"], "entries": ["1M", "7M"]}
    local = sw.sweep(base, axes, processes=1)
    with dask_cluster() as address:
        assert sw.sweep(base, axes, scheduler=address) == local
        given = parse_given(**base)
        assert mc.replicate(given, base, 7, 4, scheduler=address) == mc.replicate(given, base, 7, 4, processes=1)
        p = subprocess.run(
            [sys.executable, "-m", "ctsim", "run", "--entries", "1M", "--pods", "5", "--horizon", "10m",
             "--replications", "3", "--scheduler", address, "--json"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert len(doc["replications"]["rows"]) == 3 and doc["replications"]["seeds"] == mc.seeds(1, 3)


def test_chunks_cover_every_point_once_and_stride_over_the_grid() -> None:
    from ctsim.capacity.pool import CHUNKS_PER_WORKER, chunks

    for n, workers in [(0, 2), (1, 4), (7, 2), (16, 2), (1000, 2), (100_000, 64)]:
        parts = chunks(n, workers)
        assert sorted(i for part in parts for i in part) == list(range(n))
        assert len(parts) == min(max(n, 1), workers * CHUNKS_PER_WORKER)
        assert max(map(len, parts)) - min(map(len, parts)) <= 1  # equal counts, each a stride over the grid


# Collapses of 50-65 pods on a 16Mi map: ~0.5 s each, so a sweep of them is still running when the test acts.
SLOW = {"pods": [str(n) for n in range(50, 66)], "entries": ["16Mi"]}


def _processing(address: str, within: float = 60.0) -> dict[str, list[str]]:
    """Once a task runs on a worker: the scheduler's worker address -> keys it runs."""
    from distributed import Client

    deadline = time.monotonic() + within
    with Client(address, timeout=10) as client:
        while time.monotonic() < deadline:
            busy = {w: list(keys) for w, keys in client.processing().items() if keys}
            if busy:
                return busy
            time.sleep(0.05)
    pytest.fail("no task reached a Dask worker")


def test_a_worker_killed_mid_sweep_loses_no_row() -> None:
    from distributed import Client

    base = dict(entries="16Mi", pods="50")
    local = sw.sweep(base, SLOW, processes=2)
    with dask_cluster() as address:
        result: list[list[dict[str, object]]] = []
        thread = threading.Thread(target=lambda: result.append(sw.sweep(base, SLOW, scheduler=address)))
        thread.start()
        victim = next(iter(_processing(address)))
        with Client(address, timeout=10) as client:
            pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)  # the worker dies with its task; its nanny starts another
        thread.join(timeout=300)
        with Client(address, timeout=10) as client:
            assert victim not in client.scheduler_info()["workers"]  # it did die mid-sweep
    assert not thread.is_alive() and result == [local]


def test_ctrl_c_on_a_dask_sweep_cancels_its_tasks_and_is_one_line() -> None:
    from distributed import Client

    with dask_cluster() as address:
        p = subprocess.Popen(
            [sys.executable, "-m", "ctsim", "sweep", "--grid", "pods=" + ",".join(SLOW["pods"]), "--entries", "16Mi",
             "--scheduler", address],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        _processing(address)
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        assert err.strip().splitlines() == ["ctsim: interrupted (what it had created is removed)"]
        with Client(address, timeout=10) as client:
            deadline = time.monotonic() + 30
            while client.run_on_scheduler(_task_count) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert client.run_on_scheduler(_task_count) == 0, "the sweep's tasks outlived it on the cluster"


def _task_count(dask_scheduler: Any) -> int:
    return len(dask_scheduler.tasks)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--replications", "2", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler: cannot reach"),
        (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler: give --replications too"),
        (["--replications", "0"], "--replications"),
    ],
)
def test_bad_cluster_input_is_one_line(args: list[str], says: str) -> None:
    pytest.importorskip("distributed", reason="the ctsim[dask] extra is not installed")
    p = subprocess.run(
        [sys.executable, "-m", "ctsim", "run", "--entries", "1M", "--pods", "2", "--horizon", "1m", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert says in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_plans_collapse_search_takes_the_first_burst_that_collapses_in_half_the_seeds() -> None:
    from ctsim.capacity import plan as planner

    # Busy days, quiet nights: the table fills (a steady 50000/min on 512Gi peaks at 550,000 and only degrades).
    facts = planner.parse_facts(
        node_memory="1Ti", map_ratio="0.005", cores="128", churn="50000/min for 8h, 500/min for 16h",
        drift_horizon="2d", burst="20", replications=4,
    )  # fmt: skip
    state = planner.steady_state(facts, 0.0)
    n = planner.smallest_collapsing_burst(facts, state, 1)
    assert n is not None
    assert planner.collapse_share(facts, state, n) >= 0.5
    if n > 1:
        assert planner.collapse_share(facts, state, n - 1) < 0.5
    one = dataclasses.replace(facts, replications=1)
    assert planner.collapse_share(one, state, n) in (0.0, 1.0)  # one seed: a verdict, not a share


def test_a_sweep_with_replications_runs_every_point_with_the_same_seeds() -> None:
    base = dict(entries="1M", pods="5", horizon="10m")
    axes = {"pods": ["1", "30"]}
    seeds = mc.seeds(3, 4)
    rows = sw.sweep(base, axes, processes=2, seeds=seeds)
    assert [r["seed"] for r in rows] == seeds * 2 and [r["pods"] for r in rows] == ["1"] * 4 + ["30"] * 4
    points = mc.by_point(rows, ["pods"], 4)
    assert [p["pods"] for p in points] == ["1", "30"]
    assert all(sum(v["count"] for v in p["summary"]["verdicts"].values()) == 4 for p in points)
    p = subprocess.run(
        [sys.executable, "-m", "ctsim", "sweep", "--grid", "pods=1,30", "--entries", "1M", "--horizon", "10m",
         "--replications", "4", "--seed", "3", "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    doc = json.loads(p.stdout)
    assert doc["seeds"] == seeds and [q["summary"] for q in doc["points"]] == [q["summary"] for q in points]
