import pytest

from ctsim.core.errors import InputError
from ctsim.core.quantity import format_duration, parse_count, parse_duration, parse_rate


@pytest.mark.parametrize(
    ("text", "value"),
    [("16M", 16_000_000), ("16Mi", 16_777_216), ("262144", 262_144), ("256Ki", 262_144), ("1.5k", 1500), ("0", 0)],
)
def test_counts_take_kubernetes_suffixes(text: str, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize("text", ["-5", "16X", "1.5", "abc", "", "16 Mi Mi"])
def test_bad_counts_are_rejected(text: str) -> None:
    with pytest.raises(InputError):
        parse_count(text)


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("5m", 300), ("12h", 43200), ("1h30m", 5400), ("500ms", 0.5), ("30d", 2592000)]
)
def test_durations_take_go_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["0s", "-5s", "90", "5 minutes", "h"])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(InputError):
        parse_duration(text)


def test_rates() -> None:
    assert parse_rate("50000/min") == pytest.approx(50_000 / 60)
    assert parse_rate("50k/min") == pytest.approx(50_000 / 60)
    assert parse_rate("800/s") == 800
    with pytest.raises(InputError):
        parse_rate("800")
    with pytest.raises(InputError):
        parse_rate("800/fortnight")


def test_format_duration_reads_like_go() -> None:
    assert format_duration(43200) == "12h"
    assert format_duration(450) == "7m30s"
    assert format_duration(32.86) == "32.9s"
    assert format_duration(90) == "90s"
