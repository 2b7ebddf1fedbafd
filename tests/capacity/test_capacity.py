"""ctsim sweep, ctsim plan, plots, and the generated capacity-planning tables."""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ctsim.capacity.sweep import load_grid_file, points
from ctsim.cli import docs

pytest.importorskip("matplotlib")


def ctsim(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctsim", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_committed_tables_are_what_the_model_says_today() -> None:
    current = docs.DOC.read_text()
    assert docs.render(current) == current, "docs/capacity-planning.md is stale: run `python -m ctsim.cli.docs`"


def test_the_docs_plots_exist() -> None:
    for name in ("burst-heatmap.png", "drift.png"):
        assert (docs.IMG / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_writes_rows_that_rerun_alone(tmp_path: Path) -> None:
    out_csv, out_json, png = tmp_path / "s.csv", tmp_path / "s.json", tmp_path / "h.png"
    p = ctsim(
        "sweep", "--grid", "entries=1Mi,16Mi", "--grid", "pods=5,20", "--gc-interval", "auto", "--seed", "7",
        "--csv", str(out_csv), "-o", str(out_json), "--heatmap", str(png), "--processes", "2",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 4
    assert {(r["entries"], r["pods"]) for r in rows} == {("1Mi", "5"), ("1Mi", "20"), ("16Mi", "5"), ("16Mi", "20")}
    doc = json.loads(out_json.read_text())
    assert doc["grid"] == {"entries": ["1Mi", "16Mi"], "pods": ["5", "20"]}
    assert png.read_bytes()[:4] == b"\x89PNG"
    # Any row re-runs alone, with the same seed, to the same outcome.
    row = next(r for r in doc["rows"] if r["entries"] == "16Mi" and r["pods"] == "20")
    assert "--seed 7" in row["command"]
    again = ctsim(*shlex.split(row["command"])[1:], "--json")
    d = json.loads(again.stdout)
    assert d["verdict"] == row["verdict"] == "collapse"
    assert d["cni"]["add_429"] == row["add_429"]


def test_sweep_from_a_toml_file(tmp_path: Path) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text('[base]\npreset = "standard"\n\n[grid]\npods = [10, 50]\ngc_interval = ["auto", "60s"]\n')
    base, axes = load_grid_file(str(grid))
    assert base == {"preset": "standard"}
    assert len(points(axes)) == 4
    p = ctsim("sweep", "--grid-file", str(grid), "--processes", "1")
    assert p.returncode == 0, p.stderr
    assert "4 runs" in p.stdout


@pytest.mark.parametrize(
    "args",
    [["--grid", "bogus=1,2"], ["--grid", "entries"], ["--grid", "entries=1M,-5"], [], ["--grid-file", "/nope.toml"]],
)
def test_sweep_bad_input_is_one_line(args: list[str]) -> None:
    p = ctsim("sweep", *args)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_run_plot_draws_the_drift(tmp_path: Path) -> None:
    png = tmp_path / "drift.png"
    p = ctsim("run", "--entries", "0", "--max-entries", "16Mi", "--churn", "500/min", "--gc-initial-interval", "5m",
              "--horizon", "2d", "--pods", "1", "--plot", str(png))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_plan_answers_with_simulated_recommendations() -> None:
    p = ctsim("plan", "--node-memory", "2Ti", "--map-ratio", "0.005", "--cores", "128",
              "--churn", "50000/min for 8h, 500/min for 16h", "--burst", "50", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["max_entries"] == 16_777_216
    assert d["map_memory_bytes"] == 2 * 16_777_216 * 70
    assert d["walk_seconds"] > 30  # quiet nights let the table fill: the incident
    assert d["safe_burst"] is not None and d["safe_burst"] < 10
    assert d["burst_at_peak"]["verdict"] == "collapse"
    assert d["steady_state"]["fixed_60s"]["peak_entries"] < d["steady_state"]["adaptive"]["peak_entries"] / 10
    actions = {r["flag"]: r for r in d["recommendations"]}
    assert set(actions) == {"--gc-interval 60s", "--max-entries 374880", "--profile cilium-1.18"}
    for rec in d["recommendations"]:
        assert rec["outcome"]["verdict"] in ("ok", "degraded", "collapse", "unfinished")
        assert rec["helps"] == (rec["outcome"]["verdict"] in ("ok", "degraded"))
    assert actions["--gc-interval 60s"]["helps"]


def test_plan_bad_input_is_one_line() -> None:
    p = ctsim("plan", "--node-memory", "lots")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_plan_says_which_limit_binds_and_offers_a_limiter_setting_that_fits() -> None:
    """200 pods on a 1,000-entry table: the scrubs fit, the limiter does not (even on an empty table); a setting
    of the ladder fits, simulated. The incident's table: both bind, and no limiter setting can fit."""
    from ctsim.capacity.plan import parse_facts, plan

    limiter = plan(parse_facts(entries="1000", max_entries="1Mi", pods="200")).binding
    assert limiter is not None and (limiter.scrub, limiter.limiter) == (False, True)
    assert limiter.empty_table.verdict != "ok" and limiter.empty_table.add_429 > 0
    assert limiter.setting is not None and limiter.setting_outcome is not None
    assert limiter.setting_outcome.verdict == "ok"
    both = plan(parse_facts(entries="16M", pods="50")).binding
    assert both is not None and (both.scrub, both.limiter, both.setting, both.tried) == (True, True, None, False)
    neither = plan(parse_facts(preset="standard", pods="10")).binding
    assert neither is not None and (neither.scrub, neither.limiter) == (False, False)
    off = plan(parse_facts(entries="1000", max_entries="1Mi", pods="200", enable_api_rate_limit="false")).binding
    assert off is not None and not off.limiter and off.empty_table.verdict == "ok"


def test_plan_answers_for_todays_table_first_and_says_when_the_churn_cannot_reach_its_peak() -> None:
    """7M entries today, a churn that peaks at 1.25M from empty: an 80-pod burst collapses now (#52)."""
    p = ctsim("plan", "--entries", "7M", "--pods", "80")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    today = next(i for i, line in enumerate(lines) if line.startswith("Today's table: 7,000,000 entries"))
    assert lines[today + 1].startswith("A 80-pod burst on today's table: COLLAPSE"), lines[today + 1]
    churn = next(line for line in lines if line.startswith("Churn "))
    assert "below today's 7,000,000: the churn alone never brings today's table down to it" in churn
    assert lines.index(churn) > today
    d = json.loads(ctsim("plan", "--entries", "7M", "--pods", "80", "--json").stdout)
    run = json.loads(ctsim("run", "--entries", "7M", "--pods", "80", "--horizon", "1h", "--json").stdout)
    assert d["burst_today"]["verdict"] == run["verdict"] == "collapse"
    assert d["peak_reached_from_today"] is False
