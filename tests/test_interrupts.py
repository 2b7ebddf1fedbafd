"""Ctrl-C at a terminal: SIGINT to the whole process group, workers included; one line, exit 130.

SIGTERM to the process alone (what ``kill``, ``kubectl delete`` and systemd's stop of a main process send):
the same clean-up, one line, exit 143, and nothing of its group left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.support.needs import need_bpf

INTERRUPTED = ["ctsim: interrupted (what it had created is removed)"]


def _ctrl_c_after(args: list[str], seconds: float) -> tuple[int, str, int]:
    p = subprocess.Popen(
        [sys.executable, "-m", "ctsim", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as at a terminal, even under CI
    )  # fmt: skip
    time.sleep(seconds)
    os.killpg(p.pid, signal.SIGINT)  # the terminal signals every process of the foreground group
    _, err = p.communicate(timeout=60)
    return p.returncode, err, p.pid  # its own session: the process group's id is its pid


def test_ctrl_c_in_a_parallel_sweep_is_one_line() -> None:
    # 40 collapses of 3,000 pods: ~1 s each, so the sweep is still running when Ctrl-C comes at 3 s
    pods = "pods=" + ",".join(map(str, range(3000, 3040)))
    rc, err, pgid = _ctrl_c_after(["sweep", "--grid", "entries=16Mi", "--grid", pods, "--processes", "2"], 3.0)
    assert rc == 130, err
    assert err.strip().splitlines() == INTERRUPTED
    assert _group_gone(pgid), "a sweep worker outlived the sweep"


def test_ctrl_c_in_emulate_is_one_line_and_leaves_no_walker() -> None:
    need_bpf()
    rc, err, pgid = _ctrl_c_after(
        ["emulate", "--entries", "2M", "--rate", "100000", "--pods", "4", "--horizon", "10m"], 8.0
    )
    assert rc == 130, err
    assert err.strip().splitlines() == INTERRUPTED
    assert _group_gone(pgid), "a process of the emulation's group outlived it (the walker?)"


def _term_after(args: list[str], seconds: float) -> tuple[int, str, int]:
    p = subprocess.Popen(
        [sys.executable, "-m", "ctsim", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    time.sleep(seconds)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    return p.returncode, err, p.pid


TERMINATED = ["ctsim: terminated (what it had created is removed)"]


def test_sigterm_in_a_parallel_sweep_is_one_line_and_ends_its_workers() -> None:
    pods = "pods=" + ",".join(map(str, range(3000, 3040)))
    rc, err, pgid = _term_after(["sweep", "--grid", "entries=16Mi", "--grid", pods, "--processes", "2"], 3.0)
    assert rc == 143, err
    assert err.strip().splitlines() == TERMINATED
    assert _group_gone(pgid), "a sweep worker outlived the sweep"


def test_sigterm_in_emulate_is_one_line_and_leaves_no_walker() -> None:
    need_bpf()
    args = ["emulate", "--entries", "2M", "--rate", "100000", "--pods", "4", "--horizon", "10m"]
    rc, err, pgid = _term_after(args, 8.0)
    assert rc == 143, err
    assert err.strip().splitlines() == TERMINATED
    assert _group_gone(pgid), "a process of the emulation's group outlived it (the walker?)"


def _group_gone(pgid: int, within: float = 5.0) -> bool:
    """No process is left in the group this test started: only what it started is looked at."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False
