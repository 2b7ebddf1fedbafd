"""``ctsim sweep``: the model over a grid of scenarios, in parallel, as rows.

Axes are scenario flags (``entries=1M,4M,16M``); the base scenario is the
other flags. Every row records its parameters and seed, and the ``ctsim run``
command that re-runs it alone.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import shlex
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, NamedTuple

from ctsim.capacity.pool import run_all
from ctsim.core.errors import InputError
from ctsim.core.files import read_text, write_atomic
from ctsim.inputs.given import FLAG_DEFAULTS, Given, command_line, parse_given
from ctsim.inputs.scenario import resolve
from ctsim.sim.model import simulate


class Point(NamedTuple):
    """One run of a sweep: the node, parsed once, and its flags as the user typed them (for the row)."""

    given: Given
    flags: dict[str, Any]


# Every scenario flag and its default as typed: a row's ``ctsim run`` line leaves defaults out.
SCENARIO_FLAGS = FLAG_DEFAULTS

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
# What a heatmap can colour by: the numeric outputs.
HEATMAP_VALUES = tuple(o for o in OUTPUTS if o != "verdict")
MAX_POINTS = 10_000  # a grid larger than this is a typo (and hours of work)


def _flag_name(text: str, where: str) -> str:
    name = text.strip().lstrip("-").replace("-", "_")
    if name not in SCENARIO_FLAGS:
        raise InputError(f"{where}: {text.strip()!r} is not a scenario flag (one of: {', '.join(SCENARIO_FLAGS)})")
    return name


def _values(name: str, values: list[str], where: str) -> list[str]:
    if not values:
        raise InputError(f"{where}: axis {name!r} has no values")
    if len(values) != len(set(values)):
        raise InputError(f"{where}: axis {name!r} repeats a value")
    return values


def parse_axis(text: str) -> tuple[str, list[str]]:
    """``entries=1M,4M,16M`` → ("entries", ["1M", "4M", "16M"]).

    A value that holds a comma (a churn schedule) is double-quoted:
    ``churn="50000/min for 8h, 500/min for 16h",500/min``. An empty value,
    or a schedule's segment split off unquoted, is an error, never a point.
    """
    name, sep, values = text.partition("=")
    if not sep:
        raise InputError(f"--grid: expected NAME=V1,V2,..., got {text!r}")
    name = _flag_name(name, "--grid")
    try:
        rows = list(csv.reader([values], skipinitialspace=True, strict=True))
    except csv.Error as exc:
        raise InputError(f"--grid {name}: cannot read {values!r}: {exc}") from None
    items = [v.strip() for v in rows[0]] if rows else []
    if not any(items):
        raise InputError(f"--grid: axis {name!r} has no values")
    if not all(items):
        raise InputError(f"--grid {name}: empty value in {values.strip()!r} (a doubled or trailing comma?)")
    quoted = '"' in values
    if name == "churn" and len(items) > 1 and not quoted and any(" for " in v for v in items):
        raise InputError(
            f"--grid churn: {values.strip()!r} splits a schedule at its commas; quote each schedule: "
            f'churn="{values.strip()}" (or use a --grid-file)'
        )
    return name, _values(name, items, "--grid")


def _scalar(value: Any, where: str) -> str:
    """A TOML value as the flag's text: strings, whole numbers, floats and booleans only."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise InputError(f"{where}: expected a single value, got {type(value).__name__} {str(value)[:40]!r}")


def load_grid_file(path: str) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """A TOML file with ``[base]`` flags (single values) and ``[grid]`` axes (lists)."""
    text = read_text(path, "--grid-file")
    try:
        doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise InputError(f"--grid-file: {path}: {str(exc)[:120] or 'too deeply nested'}") from None
    unknown = set(doc) - {"base", "grid"}
    if unknown:
        raise InputError(f"--grid-file: {path}: unknown key {sorted(unknown)[0]!r} (use [base] and [grid])")
    base_doc, grid_doc = doc.get("base", {}), doc.get("grid", {})
    for table, value in (("base", base_doc), ("grid", grid_doc)):
        if not isinstance(value, dict):
            raise InputError(f"--grid-file: {path}: {table} must be a table ([{table}]), got {value!r}")
    base: dict[str, Any] = {}
    for key, value in base_doc.items():
        name = _flag_name(key, "--grid-file [base]")
        if name in base:
            raise InputError(f"--grid-file [base]: {name!r} given twice ({key!r})")
        base[name] = _scalar(value, f"--grid-file [base] {key}")
    axes: dict[str, list[str]] = {}
    for key, values in grid_doc.items():
        name = _flag_name(key, "--grid-file [grid]")
        if name in axes:
            raise InputError(f"--grid-file [grid]: axis {name!r} given twice ({key!r})")
        if not isinstance(values, list):
            raise InputError(f"--grid-file [grid] {key}: expected a list such as [5, 10, 50], got {values!r}")
        axes[name] = _values(name, [_scalar(v, f"--grid-file [grid] {key}") for v in values], "--grid-file")
    return base, axes


def points(axes: dict[str, list[str]]) -> list[dict[str, str]]:
    names = list(axes)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names))]


def command(flags: dict[str, Any]) -> str:
    """The ``ctsim run`` line that reproduces a row."""
    return shlex.join(command_line(flags))


def run_point(point: Point) -> Row:
    """One grid point: resolve, simulate, flatten (only what a row holds: no whole ``to_dict``)."""
    flags = point.flags
    result = simulate(resolve(point.given))
    c, lat, first = result.counters, result.ready_latency(), result.ready_first_attempt
    return {
        **{name: flags.get(name) for name in flags},
        "seed": result.scenario.seed,
        "verdict": result.verdict,
        "walk_seconds": result.walk_seconds,
        "pods_ready": result.pods_ready,
        "ready_first_attempt": first,
        "ready_first_attempt_fraction": first / len(result.pods),
        "latency_p50_s": lat["p50"],
        "latency_p90_s": lat["p90"],
        "latency_max_s": lat["max"],
        "recovered_at_s": result.recovered_at,
        "add_attempts": c.add_attempts,
        "add_timeouts": c.add_timeouts,
        "add_429": c.add_429,
        "orphaned_walk_seconds": c.orphaned_walk_seconds,
        "lock_max_queue": result.lock_max_queue,
        "gc_passes": len(result.gc.passes),
        "entries_at_end": result.entries_at_end,
        "command": command(flags),
    }


def sweep(
    base: dict[str, Any],
    axes: dict[str, list[str]],
    processes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    scheduler: str | None = None,
    seeds: list[int] | None = None,
) -> list[Row]:
    """Every grid point over ``processes`` worker processes (or a Dask ``scheduler``); rows in grid order.

    With ``seeds``, every point runs once per seed (the same seeds at every
    point, so points differ by their inputs, not their luck): a row per run.
    """
    size = 1
    for values in axes.values():
        size *= len(values)
    if size > MAX_POINTS:
        raise InputError(f"--grid: {size:,} points; at most {MAX_POINTS:,} per sweep")
    grid = []
    for p in points(axes):
        flags = {**base, **p}
        given = parse_given(**flags)  # parsed once, here: bad input fails in one line, before any worker starts
        resolve(given)
        grid.append(Point(given, flags))
    if seeds:
        grid = [Point(replace(p.given, seed=s), {**p.flags, "seed": s}) for p in grid for s in seeds]
    return run_all(run_point, grid, processes, scheduler, progress)


def write_csv(rows: Iterable[Row], path: str) -> None:
    rows = list(rows)
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else [])
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, out.getvalue())


def to_json(
    rows: list[Row], base: dict[str, Any], axes: dict[str, list[str]], extra: dict[str, Any] | None = None
) -> str:
    return json.dumps({"base": base, "grid": axes, "rows": rows, **(extra or {})}, indent=2) + "\n"
