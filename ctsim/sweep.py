"""``ctsim sweep``: the model over a grid of scenarios, in parallel, as rows.

Axes are scenario flags (``entries=1M,4M,16M``); the base scenario is the
other flags. Every row records its parameters and seed, and the ``ctsim run``
command that re-runs it alone.
"""

from __future__ import annotations

import csv
import itertools
import json
import multiprocessing
import os
import shlex
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ctsim.errors import InputError
from ctsim.model import simulate
from ctsim.options import SCENARIO_FLAGS
from ctsim.scenario import resolve

Row = dict[str, Any]
OUTPUTS = (
    "verdict",
    "walk_seconds",
    "pods_ready",
    "ready_first_attempt",
    "ready_first_attempt_fraction",
    "latency_p50_s",
    "latency_p90_s",
    "latency_max_s",
    "add_timeouts",
    "add_429",
    "orphaned_walk_seconds",
    "lock_max_queue",
    "gc_passes",
    "entries_at_end",
)


def parse_axis(text: str) -> tuple[str, list[str]]:
    """``entries=1M,4M,16M`` → ("entries", ["1M", "4M", "16M"])."""
    name, sep, values = text.partition("=")
    name = name.strip().lstrip("-").replace("-", "_")
    if not sep or not values.strip():
        raise InputError(f"--grid: expected NAME=V1,V2,..., got {text!r}")
    if name not in SCENARIO_FLAGS:
        raise InputError(f"--grid: {name!r} is not a scenario flag (one of: {', '.join(SCENARIO_FLAGS)})")
    return name, [v.strip() for v in values.split(",") if v.strip()]


def load_grid_file(path: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A TOML file with ``[base]`` flags and ``[grid]`` axes (lists)."""
    try:
        doc = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"--grid-file: no such file: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"--grid-file: {path}: {exc}") from None
    base = {k.replace("-", "_"): v for k, v in doc.get("base", {}).items()}
    axes: dict[str, list[str]] = {}
    for key, values in doc.get("grid", {}).items():
        name, parsed = parse_axis(f"{key}={','.join(str(v) for v in values)}")
        axes[name] = parsed
    for name in base:
        if name not in SCENARIO_FLAGS:
            raise InputError(f"--grid-file: [base] {name!r} is not a scenario flag")
    return base, axes


def points(axes: dict[str, list[str]]) -> list[dict[str, str]]:
    names = list(axes)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names))]


def command(flags: dict[str, Any]) -> str:
    """The ``ctsim run`` line that reproduces a row."""
    parts = ["ctsim", "run"]
    for name, value in flags.items():
        if value is None or SCENARIO_FLAGS[name][1] == value:
            continue
        flag = "--regeneration-time" if name == "regeneration" else "--" + name.replace("_", "-")
        parts += [flag, str(value)]
    return shlex.join(parts)


def run_point(flags: dict[str, Any]) -> Row:
    """One grid point: resolve, simulate, flatten."""
    result = simulate(resolve(**flags))
    d = result.to_dict()
    pods, lat = d["pods"], d["pods"]["ready_latency_s"]
    return {
        **{name: flags.get(name) for name in flags},
        "seed": result.scenario.seed,
        "verdict": result.verdict,
        "walk_seconds": result.walk_seconds,
        "pods_ready": pods["ready"],
        "ready_first_attempt": pods["ready_first_attempt"],
        "ready_first_attempt_fraction": pods["ready_first_attempt"] / pods["requested"],
        "latency_p50_s": lat["p50"],
        "latency_p90_s": lat["p90"],
        "latency_max_s": lat["max"],
        "add_timeouts": d["cni"]["add_timeouts"],
        "add_429": d["cni"]["add_429"],
        "orphaned_walk_seconds": d["lock"]["orphaned_walk_seconds"],
        "lock_max_queue": d["lock"]["max_queue"],
        "gc_passes": len(d["gc"]["intervals_s"]),
        "entries_at_end": d["table"]["entries_at_end"],
        "command": command(flags),
    }


def sweep(
    base: dict[str, Any],
    axes: dict[str, list[str]],
    processes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Row]:
    """Every grid point over ``processes`` worker processes; rows in grid order."""
    grid = [{**base, **p} for p in points(axes)]
    for flags in grid:
        resolve(**flags)  # bad input fails here, in one line, before any worker starts
    n = processes or os.cpu_count() or 1
    rows: list[Row] = []
    if n == 1 or len(grid) == 1:
        for flags in grid:
            rows.append(run_point(flags))
            if progress:
                progress(len(rows), len(grid))
        return rows
    with multiprocessing.get_context("fork").Pool(n) as pool:
        for row in pool.imap(run_point, grid, chunksize=max(1, len(grid) // (n * 8))):
            rows.append(row)
            if progress:
                progress(len(rows), len(grid))
    return rows


def write_csv(rows: Iterable[Row], path: str) -> None:
    rows = list(rows)
    fields = list(rows[0]) if rows else []
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def write_json(rows: list[Row], base: dict[str, Any], axes: dict[str, list[str]], path: str) -> None:
    with open(path, "w") as f:
        json.dump({"base": base, "grid": axes, "rows": rows}, f, indent=2)
        f.write("\n")
