"""docs/validation.md is the model's: every report's figures and verdict regenerate byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctsim.cli import validation


def test_the_committed_page_is_todays_model() -> None:
    current = validation.DOC.read_text()
    assert validation.render(current) == current, "docs/validation.md is stale: run `python -m ctsim.cli.validation`"


def test_a_verdict_follows_from_its_checks() -> None:
    report = validation.REPORTS[0]
    check = report.checks[0]
    assert validation.Outcome(report, [(check, 1.0, True)]).verdict == "reproduces"
    assert validation.Outcome(report, [(check, 1.0, True), (check, 2.0, False)]).verdict == "partly"
    assert validation.Outcome(report, [(check, None, False)]).verdict == "does not reproduce"


def test_outside_a_clone_the_generators_say_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctsim.cli import docs

    for module in (docs, validation):
        monkeypatch.setattr(module, "DOC", tmp_path / "docs" / "missing.md")
        assert module.main(["--check"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "clone of the repository" in err
