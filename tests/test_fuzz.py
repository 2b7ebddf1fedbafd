"""Every input gets an answer: a corpus of bad invocations, generated flag values, and odd but valid ones.

Each bad invocation must exit 2 with exactly one line on stderr, no
traceback, within a time and memory bound (tests/data/bad-invocations.txt).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import resource
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctsim.core.errors import InputError
from ctsim.core.maptype import MapType
from ctsim.inputs.given import MAX_DEADLINE, MAX_HORIZON, MAX_PODS, MIN_GC_INTERVAL, parse_given
from ctsim.inputs.scenario import resolve_flags

DATA = Path(__file__).parent / "data"
TIME_LIMIT_S = 30
MEMORY_LIMIT = 2 << 30  # address space: a command that reads /dev/zero or allocates without bound dies here


def _files(tmp: Path) -> dict[str, str]:
    """The files the corpus names by {placeholder}."""
    cal = {"format": "ctsim-calibration/1", "per_entry_entries_per_s": 400000, "batch_entries_per_s": 3e6,
           "delete_seconds_per_entry": 2.5e-6}  # fmt: skip
    texts = {
        "bad_json": "{not json",
        "infinity_json": json.dumps(cal).replace("400000", "Infinity"),
        "huge_json": json.dumps({**cal, "per_entry_entries_per_s": 1e308}),
        "deep_json": "[" * 100_000,
        "digits_json": json.dumps(cal).replace("400000", "9" * 5000),
        "wrong_format_json": json.dumps({**cal, "format": "something-else"}),
        "negative_rate_json": json.dumps({**cal, "per_entry_entries_per_s": -5}),
        "bad_toml": "[grid\npods = ",
        "pods_scalar_toml": "[grid]\npods = 5\n",
        "grid_scalar_toml": "grid = 5\n",
        "base_scalar_toml": "base = 5\n[grid]\npods = [1, 2]\n",
        "seed_list_toml": "[base]\nseed = [1]\n[grid]\npods = [1, 2]\n",
        "unknown_table_toml": "[grids]\npods = [1, 2]\n",
        "unknown_flag_toml": "[grid]\nbogus = [1, 2]\n",
        "empty_axis_toml": "[grid]\npods = []\n",
        "nested_toml": "[grid]\npods = [[1, 2], [3]]\n",
        "dup_axis_toml": '[grid]\ngc-interval = ["60s"]\ngc_interval = ["5m"]\n',
        "dup_base_toml": '[base]\npods = 5\n--pods = 6\n[grid]\nentries = ["0", "1M"]\n',
        "pods_axis_toml": "[grid]\npods = [1, 2]\n",
    }
    out = {"tmp": str(tmp), "fifo": str(tmp / "fifo"), "sock": str(tmp / "sock")}
    os.mkfifo(out["fifo"])  # nobody writes it: opening it to read would block forever
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(out["sock"])  # a socket file; closed at once, the path stays
    listener.close()
    for name, text in texts.items():
        path = tmp / (name.rsplit("_", 1)[0] + "." + name.rsplit("_", 1)[1])
        path.write_text(text)
        out[name] = str(path)
    return out


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _invoke(line: str, files: dict[str, str]) -> tuple[str, subprocess.CompletedProcess[str] | None]:
    words = [w.format(**files) for w in shlex.split(line)]
    module = {"ctsim": "ctsim", "ctwatch": "ctwatch"}[words[0]]
    try:
        p = subprocess.run(
            [sys.executable, "-m", module, *words[1:]],
            capture_output=True, text=True, timeout=TIME_LIMIT_S, check=False, preexec_fn=_limits,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return line, None
    return line, p


def _corpus(name: str) -> list[str]:
    lines = (DATA / name).read_text().splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def test_the_corpus_is_large_enough() -> None:
    assert len(_corpus("bad-invocations.txt")) >= 150
    assert len(_corpus("odd-valid-invocations.txt")) >= 20


def test_every_bad_invocation_is_one_line_and_exit_2(tmp_path: Path) -> None:
    files = _files(tmp_path)
    failures = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for line, p in pool.map(lambda line: _invoke(line, files), _corpus("bad-invocations.txt")):
            if p is None:
                failures.append(f"{line}: no answer within {TIME_LIMIT_S} s")
                continue
            lines = p.stderr.strip().splitlines()
            if (
                p.returncode != 2
                or len(lines) != 1
                or "Traceback" in p.stderr
                or not lines[0].startswith(("ctsim: error:", "ctwatch: error:"))
            ):
                failures.append(f"{line}: exit {p.returncode}, stderr {p.stderr[-300:]!r}")
    assert not failures, "\n".join(failures)


def test_odd_but_valid_invocations_succeed(tmp_path: Path) -> None:
    files = _files(tmp_path)
    failures = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for line, p in pool.map(lambda line: _invoke(line, files), _corpus("odd-valid-invocations.txt")):
            if p is None or p.returncode != 0 or "Traceback" in p.stderr:
                failures.append(f"{line}: {'timeout' if p is None else (p.returncode, p.stderr[-300:])}")
    assert not failures, "\n".join(failures)


FLAG_TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["0", "-0", "1e308", "inf", "nan", "1,,,0", "16Mi", "5m", "1ns", "0s", " ", "∞", "1_0", "9" * 80]),
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.builds(
        lambda n, u: f"{n}{u}", st.integers(-5, 10**12), st.sampled_from(["", "s", "m", "h", "d", "ns", "Mi", "/s"])
    ),
)
FLAGS = ["entries", "pods", "max_entries", "expired_fraction", "rate", "churn", "conn_duration", "deadline",
         "gc_interval", "gc_initial_interval", "gc_next_pass", "gc_max_interval", "regeneration", "cores",
         "node_memory", "map_ratio", "horizon", "preset", "profile", "agent_state", "ipv6_entries",
         "ipv6_max_entries"]  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(FLAGS), FLAG_TEXT, min_size=1, max_size=3))
def test_generated_flag_values_resolve_or_fail_in_one_line(flags: dict[str, str]) -> None:
    """Whatever a user types, resolve_flags() returns a scenario or raises InputError naming the flag."""
    try:
        s = resolve_flags(**flags)  # type: ignore[arg-type]
    except InputError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith("--"), message
        return
    # The bounds are the code's own ceilings, never copies of them.
    assert 1 <= s.pods <= MAX_PODS and s.horizon <= MAX_HORIZON and 1 <= s.deadline <= MAX_DEADLINE
    assert s.gc_interval == 0 or s.gc_interval >= MIN_GC_INTERVAL


@pytest.mark.parametrize(
    ("value", "count"),
    [("0", 0), ("1,000,000", 1_000_000), ("16Mi", 16 * 2**20), ("16M", 16_000_000), ("1_000", 1_000), ("2.5k", 2_500)],
)
def test_counts_people_write(value: str, count: int) -> None:
    assert parse_given(entries=value).entries == count
    assert resolve_flags(entries=value, max_entries="16Mi").map(MapType.IPV4_TCP).entries == count
