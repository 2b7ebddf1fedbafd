"""``flags_of`` is the inverse of the parsers: a ``Given`` as flags, and the flags parsed give it back."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctsim.inputs.churn import parse_churn
from ctsim.inputs.given import Given, command_line, flag_text, flags_of, parse_given
from tests.support.scenarios import varied_runs


def _as_flags(args: list[str]) -> dict[str, str]:
    """``ctsim run`` words as parse_given's keywords."""
    names = [a[2:].replace("-", "_") for a in args[0::2]]
    return {"regeneration" if n == "regeneration_time" else n: v for n, v in zip(names, args[1::2], strict=True)}


@pytest.mark.parametrize("args", varied_runs(120), ids=lambda a: " ".join(a)[:60])
def test_every_varied_run_comes_back_from_its_flags(args: list[str]) -> None:
    given = parse_given(**_as_flags(args))
    assert parse_given(**flags_of(given)) == given


def test_values_no_typed_flag_held_come_back_whole() -> None:
    """What a live series gives (a windowed mean, a schedule per second) is carried at full precision."""
    given = Given(
        regeneration=0.1 + 0.2,  # 0.30000000000000004
        create_mean_processing=77.12345678901234,
        deadline=90.0,
        gc_interval=0.0,
        churn=parse_churn("50000/min for 8h, 500/min for 16h"),
        map_ratio=0.0025,
        rate=213_000.0,
    )
    flags = flags_of(given)
    assert flags["deadline"] == "90s" and flags["regeneration"] == "0.30000000000000004s"
    assert "gc_interval" not in flags  # auto is the default
    assert parse_given(**flags) == given
    assert flag_text("gc_interval", 0.0) == "auto"
    with pytest.raises(ValueError, match="whole entries/s"):
        flag_text("rate", 213_000.5)


def test_the_command_line_names_each_flag_as_typed() -> None:
    words = command_line({"entries": "16M", "regeneration": "2s", "pods": "50", "profile": "cilium-1.16"})
    assert words == ["ctsim", "run", "--entries", "16M", "--regeneration-time", "2s"]  # defaults left out
    assert replace(Given(), pods=3) == parse_given(**flags_of(Given(pods=3)))
