"""Parsing and printing of counts, durations and rates as a Kubernetes user writes them.

Counts take Kubernetes quantity suffixes (``16M`` = 16,000,000, ``16Mi`` =
16,777,216); durations take Go's units (``90s``, ``5m``, ``12h``, ``1h30m``)
plus ``d`` for days; rates are ``N/s``, ``N/min`` or ``N/h``.
"""

from __future__ import annotations

import math
import re

from ctsim.core.errors import InputError

_SUFFIXES: dict[str, int] = {
    "": 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
# Digits, optionally grouped by commas in threes (1,000,000) or by underscores
# (1_000_000); a fraction; a suffix. "1,,,0" is not a number.
_COUNT_RE = re.compile(
    r"^\s*([+-]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+(?:_[0-9]+)*)(?:\.[0-9]+)?|[+-]?\.[0-9]+)\s*([A-Za-z]*)\s*$"
)
# A plain decimal in ASCII digits, an exponent allowed: what a ratio or fraction takes. Python's ``float()``
# also takes ``0_1`` (as 1.0: a typo read as another number) and other scripts' digits; this does not.
_FLOAT_RE = re.compile(r"^\s*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*$")
_MAX_NUMBER_CHARS = 64  # no quantity here needs more; longer input is refused before parsing
_DURATION_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|min|s|m|h|d)")
_RATE_UNITS: dict[str, float] = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _number(text: str, what: str) -> tuple[tuple[int, int], str]:
    """``(numerator, denominator)`` exactly (``16.5M`` is 16,500,000/1), and the suffix."""
    if len(text) > _MAX_NUMBER_CHARS:
        raise InputError(f"{what}: {text[:20]!r}... is too long to be a number")
    match = _COUNT_RE.match(text)
    if not match:
        raise InputError(f"{what}: cannot read {text!r} as a number (e.g. 16M, 16Mi, 262144)")
    digits, suffix = match.groups()
    if suffix not in _SUFFIXES:
        raise InputError(f"{what}: unknown suffix {suffix!r} in {text!r} (use k, M, G, T or Ki, Mi, Gi, Ti)")
    whole, _, fraction = digits.replace("_", "").replace(",", "").partition(".")
    sign = -1 if whole.startswith("-") else 1
    whole = whole.lstrip("+-")
    numerator = sign * int(whole + fraction or "0") * _SUFFIXES[suffix]
    return (numerator, 10 ** len(fraction)), suffix


def parse_count(text: str | int, what: str = "count", *, minimum: int = 0, maximum: int | None = None) -> int:
    """A whole count such as ``16M``, ``16Mi``, ``256Ki`` or ``262144``, within [minimum, maximum]."""
    if isinstance(text, bool):
        raise InputError(f"{what}: expected a count, got {text!r}")
    if isinstance(text, int):
        numerator, denominator = text, 1
    elif isinstance(text, str):
        (numerator, denominator), _ = _number(text, what)
    else:
        raise InputError(f"{what}: expected a count such as 16M, got {text!r}")
    value, rest = divmod(numerator, denominator)
    if rest:
        raise InputError(f"{what}: {text!r} is not a whole number")
    if value < minimum:
        if minimum == 0:
            raise InputError(f"{what}: must not be negative, got {text!r}")
        raise InputError(f"{what}: must be at least {minimum:,}, got {text!r}")
    if maximum is not None and value > maximum:
        raise InputError(f"{what}: must be at most {maximum:,}, got {text!r}")
    return value


def parse_float(text: str, what: str, *, low: float, high: float) -> float:
    """A plain, finite number within [low, high], for ratios and fractions."""
    if not isinstance(text, str) or len(text) > _MAX_NUMBER_CHARS:
        raise InputError(f"{what}: expected a number, got {str(text)[:20]!r}")
    if not _FLOAT_RE.match(text):
        raise InputError(f"{what}: cannot read {text!r} as a number (ASCII digits, e.g. 0.1)")
    value = float(text)
    if not (low <= value <= high) or not math.isfinite(value):
        raise InputError(f"{what}: must be between {low:g} and {high:g}, got {text!r}")
    return value


def parse_duration(
    text: str,
    what: str = "duration",
    *,
    allow_zero: bool = False,
    minimum: float = 0.0,
    maximum: float | None = None,
) -> float:
    """Seconds from a Go-style duration such as ``90s``, ``5m``, ``12h`` or ``1h30m``.

    Like Go's ``time.ParseDuration``, a bare ``0`` is zero. The result is
    finite and within [minimum, maximum] (errors name the flag and the bound).
    """
    if not isinstance(text, str):
        raise InputError(f"{what}: expected a duration such as 90s, got {text!r}")
    if len(text) > _MAX_NUMBER_CHARS:
        raise InputError(f"{what}: {text[:20]!r}... is too long to be a duration")
    stripped = text.strip()
    if stripped in ("0", "+0", "-0"):
        stripped = "0s"
    sign = 1.0
    if stripped.startswith("-"):
        sign, stripped = -1.0, stripped[1:]
    pos, total = 0, 0.0
    for match in _DURATION_PART_RE.finditer(stripped):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(stripped):
        raise InputError(f"{what}: cannot read {text!r} as a duration (e.g. 90s, 5m, 12h, 1h30m)")
    total *= sign
    if not math.isfinite(total):
        raise InputError(f"{what}: {text!r} is not a finite duration")
    if total < 0 or (total == 0 and not allow_zero):
        raise InputError(f"{what}: must be greater than zero, got {text!r}")
    if total > 0 and total < minimum:
        raise InputError(f"{what}: must be at least {format_duration(minimum)}, got {text!r}")
    if maximum is not None and total > maximum:
        raise InputError(f"{what}: must be at most {format_duration(maximum)}, got {text!r}")
    return total


MAX_RATE_PER_S = 1e9  # far beyond any node; keeps arithmetic finite


def parse_rate(text: str, what: str = "rate") -> float:
    """Events per second from ``N/s``, ``N/min`` or ``N/h`` (N may carry a count suffix)."""
    if not isinstance(text, str):
        raise InputError(f"{what}: expected a rate such as 50000/min, got {text!r}")
    count_text, slash, unit = text.strip().partition("/")
    if not slash:
        raise InputError(f"{what}: {text!r} needs a unit, e.g. 50000/min or 800/s")
    unit = unit.strip()
    if unit not in _RATE_UNITS:
        raise InputError(f"{what}: unknown unit {unit!r} in {text!r} (use /s, /min or /h)")
    (numerator, denominator), _ = _number(count_text, what)
    if numerator < 0:
        raise InputError(f"{what}: must not be negative, got {text!r}")
    per_second = numerator / denominator / _RATE_UNITS[unit]
    if per_second > MAX_RATE_PER_S:
        raise InputError(f"{what}: at most {MAX_RATE_PER_S:,.0f}/s, got {text!r}")
    return per_second


def format_count(value: float) -> str:
    """``16,777,216`` with the binary or decimal shorthand where it is exact."""
    n = int(value)
    for suffix in ("Mi", "M", "Ki", "k"):
        unit = _SUFFIXES[suffix]
        if n >= unit and n % unit == 0:
            return f"{n:,} ({n // unit}{suffix})"
    return f"{n:,}"


def format_bytes(n: int) -> str:
    """``2Ti``, ``64Gi``, or the count of bytes: node memory as people give it."""
    for suffix, unit in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return f"{n:,} B"


def format_duration(seconds: float) -> str:
    """``12h``, ``7m30s``, ``32.9s``: how Go prints a duration, rounded for people."""
    if seconds is None or math.isinf(seconds):
        return "∞"
    if seconds < 100:
        return f"{int(seconds)}s" if seconds == int(seconds) else f"{seconds:.1f}s"
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else ""]
    parts += [f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def format_rate(per_second: float) -> str:
    if per_second >= 1 and per_second == int(per_second):
        return f"{int(per_second):,}/s"
    per_minute = per_second * 60
    if abs(per_minute - round(per_minute)) < 1e-6:
        return f"{round(per_minute):,}/min"
    return f"{per_second:,.3g}/s"


def split_list(text: str, flag: str) -> list[str]:
    """``a, b,c`` → [a, b, c]: the one rule for comma lists. An empty item (``a,,b``, a trailing comma) is an error."""
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise InputError(f"{flag}: empty list")
    if not all(items):
        raise InputError(f"{flag}: empty item in {text.strip()!r} (a doubled or trailing comma?)")
    return items
