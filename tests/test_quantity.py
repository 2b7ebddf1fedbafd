import pytest

from ctsim.core.errors import InputError
from ctsim.core.quantity import format_duration, parse_count, parse_duration, parse_float, parse_rate


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


@pytest.mark.parametrize("text", ["0_1", "0_5", "٠.٥", "０.５", "0x1", "1e", "nan", "inf", ".", "1..0"])
def test_a_ratio_is_ascii_digits_never_a_typo_read_as_another_number(text: str) -> None:
    """float() reads 0_1 as 1.0 and other scripts' digits as numbers: a ratio takes neither."""
    with pytest.raises(InputError, match="cannot read"):
        parse_float(text, "--warning-ratio", low=0.0, high=10.0)


def test_a_ratio_in_plain_digits_still_reads() -> None:
    assert parse_float("0.25", "--x", low=0.0, high=1.0) == 0.25
    assert parse_float(" 1e-2 ", "--x", low=0.0, high=1.0) == 0.01


def test_a_churn_rate_takes_the_thousands_grouping_a_count_takes() -> None:
    from ctsim.inputs.churn import parse_churn

    assert parse_churn("5,000/min").segments == parse_churn("5000/min").segments
    both = parse_churn("5,000/min for 8h, 500/min for 16h,1,500/min for 1h")
    assert [round(r * 60, 9) for r, _ in both.segments] == [5000.0, 500.0, 1500.0]
    with pytest.raises(InputError, match="empty item"):
        parse_churn("5/min for 1h,, 6/min for 1h")
