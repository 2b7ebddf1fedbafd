"""The plain run report: styles only where a terminal wants them."""

from __future__ import annotations

import io

import pytest

from ctsim.cli.report import render
from ctsim.cli.term import Terminal
from tests.support.scenarios import run


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("env", "stream", "styled"),
    [
        ({}, io.StringIO(), False),  # piped: plain, one line per line, for grep
        ({}, FakeTTY(), True),
        ({"NO_COLOR": "1"}, FakeTTY(), False),
        ({"TERM": "dumb"}, FakeTTY(), False),
        ({"FORCE_COLOR": "1"}, io.StringIO(), True),
    ],
)
def test_styles_follow_the_terminal_and_the_usual_variables(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], stream: io.StringIO, styled: bool
) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    render(run(entries="16Ki", pods="3", horizon="5m"), Terminal(stream))
    text = stream.getvalue()
    assert ("\033[" in text) is styled
    assert "Verdict: " in text and "Advice: " in text


def test_the_inputs_line_up_in_two_columns() -> None:
    out = io.StringIO()
    Terminal(out, color=False).grid([("a", "1"), ("longer label", "2")])
    assert out.getvalue().splitlines() == ["a             1", "longer label  2"]


def test_a_fix_slower_than_changing_nothing_is_not_offered() -> None:
    """A just-restarted v1.16.7 agent drains 40 pods on its own in 4m28s; the upgrade's 4m34s is no fix (#52).

    (v1.16.5's own restart crash-loops on its initial scan first, and there the upgrade is a fix.)
    """
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "ctsim", "run", "--entries", "16M", "--pods", "40", "--agent-state", "fresh",
         "--cilium-version", "1.16.7"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "Soonest fix" not in out.stdout
    assert "No simulated setting makes every pod Ready sooner than changing nothing" in out.stdout
