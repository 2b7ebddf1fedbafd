"""The command line as a user meets it: real processes, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def ctsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctsim", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_main_job_json_has_the_promised_fields() -> None:
    p = ctsim("run", "--entries", "16M", "--pods", "50", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["verdict"] == "collapse"
    assert round(d["walk_seconds"], 1) == 75.1
    assert d["pods"]["requested"] == 50
    assert set(d["pods"]["ready_latency_s"]) == {"p50", "p90", "p99", "max"}
    for key in ("add_timeouts", "add_429"):
        assert key in d["cni"]
    assert {"orphaned_walk_seconds", "max_queue"} <= set(d["lock"])
    assert isinstance(d["gc"]["intervals_s"], list)
    assert d["inputs"]["entries"] == 16_000_000
    assert d["inputs"]["max_entries"] == 16_777_216


def test_the_report_prints_parsed_values_and_a_verdict() -> None:
    p = ctsim("run", "--entries", "16Mi", "--pods", "50")
    assert p.returncode == 0, p.stderr
    assert "16,777,216" in p.stdout
    assert "COLLAPSE" in p.stdout
    assert "Advice:" in p.stdout


def test_no_ready_pod_gives_null_latencies() -> None:
    p = ctsim("run", "--entries", "16Mi", "--pods", "3", "--horizon", "60s", "--json")
    d = json.loads(p.stdout)
    assert d["pods"]["ready"] == 0
    assert d["pods"]["ready_latency_s"]["p50"] is None


@pytest.mark.parametrize(
    "args",
    [
        ["--entries", "-5"],
        ["--pods", "0"],
        ["--entries", "16X"],
        ["--rate", "0"],
        ["--rate", "-3"],
        ["--deadline", "0s"],
        ["--deadline", "-90s"],
        ["--horizon", "0s"],
        ["--preset", "nope"],
        ["--profile", "cilium-0.1"],
        ["--seed", "abc"],
        ["--bogus"],
        ["--entries", "20M"],
        ["--churn", "lots"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str]) -> None:
    p = ctsim("run", *args)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert p.stderr.startswith("ctsim: error:")


def test_a_capped_map_clamps_the_entries_it_cannot_hold() -> None:
    # What `ctsim plan` recommends must run as printed: --max-entries below --entries caps the table.
    p = ctsim("run", "--entries", "16M", "--pods", "50", "--max-entries", "374880", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["inputs"]["entries"] == d["inputs"]["max_entries"] == 374_880
    assert any("clamped" in note for note in d["inputs"]["notes"])


HELPS = [
    ("ctsim", "--help"), ("ctsim", "run", "--help"), ("ctsim", "emulate", "--help"), ("ctsim", "sweep", "--help"),
    ("ctsim", "plan", "--help"), ("ctsim", "calibrate", "--help"),
    ("ctwatch", "--help"), ("ctwatch", "rules", "--help"),
]  # fmt: skip


@pytest.mark.parametrize("words", HELPS, ids=" ".join)
def test_every_help_names_value_types_and_whole_descriptions(words: tuple[str, ...]) -> None:
    p = subprocess.run([sys.executable, "-m", *words], capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    assert "<str>" not in p.stdout and "<int>" not in p.stdout and "<float>" not in p.stdout, p.stdout
    assert "..." not in p.stdout.split("Commands:")[-1] or "Commands:" not in p.stdout  # no truncated command help


def test_scenario_help_shows_the_defaults_the_model_uses() -> None:
    from ctsim.core.defaults import CLIENT_TIMEOUT, CONNTRACK_GC_MAX_LRU_INTERVAL, DEFAULT_REGENERATION
    from ctsim.core.quantity import format_duration
    from ctsim.inputs.presets import PRESETS
    from ctsim.inputs.scenario import DEFAULT_CONN_SECONDS, UNTIL_RESOLVED_CAP

    text = " ".join(ctsim("run", "--help").stdout.split())  # unwrapped
    for seconds in (CLIENT_TIMEOUT, CONNTRACK_GC_MAX_LRU_INTERVAL, DEFAULT_REGENERATION, DEFAULT_CONN_SECONDS):
        assert f"default: {format_duration(seconds)}" in text, seconds
    assert f"at most {format_duration(UNTIL_RESOLVED_CAP)})" in text and "until the burst is resolved" in text
    for name, preset in PRESETS.items():
        assert f"{name} {preset.entries:,}" in text and f"{name} {preset.churn}" in text
        assert f"{name} {preset.cores}" in text and f"{name} {preset.expired_fraction:g}" in text


def test_version() -> None:
    from ctsim import __version__

    assert ctsim("--version").stdout.strip() == f"ctsim {__version__}"


def test_shell_completion_names_commands_and_flags() -> None:
    """`ctsim --install-completion` installs what these answer: the shell asks ctsim itself."""
    script = str(Path(sys.executable).parent / "ctsim")  # the shell runs the installed command, by that name
    env = {**os.environ, "_CTSIM_COMPLETE": "complete_bash", "COMP_CWORD": "1", "COMP_WORDS": "ctsim pl"}
    p = subprocess.run([script], env=env, capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["plan"], (p.stdout, p.stderr)
    env.update(COMP_CWORD="2", COMP_WORDS="ctsim run --max-e")
    p = subprocess.run([script], env=env, capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["--max-entries"], (p.stdout, p.stderr)
    # typer's own switch: the option takes the shell named, not shellingham's guess from the process tree (a
    # suite started without a shell among its ancestors, as by nohup, has none to find: "Shell  not supported").
    named = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = subprocess.run([script, "--show-completion", "bash"], env=named, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "_CTSIM_COMPLETE" in shown.stdout.upper(), shown.stderr


def test_long_work_off_a_terminal_says_how_far_it_got(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log gets a progress line every PROGRESS_EVERY seconds (10 s; shortened here), and nothing for short work."""
    import time

    from ctsim.cli import progress

    monkeypatch.setattr(progress, "PROGRESS_EVERY", 0.05)

    def work(progress):  # type: ignore[no-untyped-def]
        for _ in range(4):
            time.sleep(0.06)
            progress("sweep", 1, 4)
        return "done"

    assert progress.with_progress(work) == "done"
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("ctsim: sweep ") for line in lines), lines
    assert "1/4 (25%)" in lines[0] and "left" in lines[0]
    monkeypatch.setattr(progress, "PROGRESS_EVERY", 60.0)
    assert progress.with_progress(work) == "done"
    assert capsys.readouterr().err == ""  # work shorter than the interval prints nothing
    monkeypatch.setattr(progress, "PROGRESS_EVERY", 0.05)
    with progress.heartbeat("emulate", 120.0):
        time.sleep(0.2)
    assert "ctsim: emulate " in capsys.readouterr().err
