"""Output that cannot be written, and secrets that must not be: one line on stderr, never a traceback or a password.

A full device is made with mknod in a temporary folder (never the real /dev/full).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ctsim.core.urls import redact, redact_text
from tests.support.http import send, serve
from tests.support.needs import REQUIRED

RUN = ["-m", "ctsim", "run", "--entries", "16M", "--pods", "5"]
EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()


def _full(tmp_path: Path) -> Path:
    path = tmp_path / "full"
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except PermissionError as exc:
        if REQUIRED:
            pytest.fail(f"CTSIM_REQUIRE_KERNEL=1 but mknod is refused: {exc}")
        pytest.skip(f"mknod needs root: {exc}")
    return path


def _run(args: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=False, **kw)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "args",
    [
        RUN,
        [*RUN, "--json"],
        ["-m", "ctsim", "plan", "--entries", "1M", "--drift-horizon", "1h"],
        ["-m", "ctsim", "sweep", "--entries", "0", "--pods", "1", "--horizon", "1m", "--grid", "seed=1,2"],
        ["-m", "ctwatch", "rules"],
    ],
)
def test_stdout_on_a_full_device_is_one_line(tmp_path: Path, args: list[str]) -> None:
    full = _full(tmp_path)
    with full.open("w") as out:
        p = subprocess.run([sys.executable, *args], stdout=out, stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("No space left on device"), p.stderr


def test_a_closed_stdout_is_one_line() -> None:
    p = subprocess.run([sys.executable, *RUN], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       timeout=120, preexec_fn=lambda: os.close(1))  # fmt: skip
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == ["ctsim: error: cannot write to standard output: standard output is closed"]


def test_an_encoding_without_the_arrows_gets_ascii() -> None:
    p = _run(RUN, env={**os.environ, "PYTHONIOENCODING": "latin-1"})
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert " - upgrade to Cilium 1.18" in p.stdout  # the em dash, as ASCII


def test_a_password_in_a_url_is_never_printed() -> None:
    assert redact("http://sre:s3cret@prom:9090/x") == "http://sre:xxxxx@prom:9090/x"
    assert redact("http://token@prom/") == "http://token@prom/"  # a user alone is not a secret (Go's Redacted)
    assert redact_text("at http://a:b@h/ and https://c:d@e:1/") == "at http://a:xxxxx@h/ and https://c:xxxxx@e:1/"

    def respond(handler: object) -> None:
        send(handler, EMPTY, 200, "application/json")  # type: ignore[arg-type]

    with serve(respond) as address:
        url = f"http://sre:s3cret@{address}/"
        fleet = _run(["-m", "ctsim", "fleet", "--prometheus-url", url])
        live = _run([*RUN, "--from-prometheus", url, "--node", "n1"])
    for p in (fleet, live):
        assert p.returncode == 2 and "s3cret" not in p.stdout + p.stderr, p.stderr
        assert f"sre:xxxxx@{address}" in p.stderr
    refused = _run(["-m", "ctsim", "fleet", "--prometheus-url", "http://sre:s3cret@127.0.0.1:1/"])
    assert "s3cret" not in refused.stderr and "sre:xxxxx@127.0.0.1:1" in refused.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-m", "ctsim", "fleet", "--prometheus-url", "http://127.0.0.1:65536/"], "--prometheus-url: invalid port"),
        (
            ["-m", "ctsim", "sweep", "--grid", "seed=1,2", "--scheduler", "tcp://127.0.0.1:65536"],
            "--scheduler: invalid port",
        ),
        (["-m", "ctwatch", "--once", "--cilium.metrics-url", "http://127.0.0.1:65536/m"], "--cilium.metrics-url"),
        (["-m", "ctsim", "fleet", "--prometheus-url", "http://" + "h" * 20_000 + "/"], "--prometheus-url"),
        ([*RUN, "--churn", "9" * 100_000], "--churn"),
    ],
)
def test_odd_values_are_one_short_line(args: list[str], words: str) -> None:
    p = _run(args)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], p.stderr[:500]
    assert len(lines[0]) < 600  # cut: a 100,000-character value is not echoed whole
