"""``--api-rate-limit`` as Cilium reads it: per API call, options merged over the call's defaults.

Two layers, each as Cilium's:

* the flag is a ``map[string]string`` (``pkg/command/map_string.go``,
  ``ToStringMapStringE``): a JSON object, or ``name=value,name=value`` where a
  value may hold commas (``splitKeyValue``: a comma starts a new pair only
  when an ``=`` follows before the next comma);
* each value is ``option:value[,option:value]`` (``pkg/rate/api_limiter.go``,
  ``mergeUserConfig``), the option names case-insensitive, each parsed as Go
  parses it (``strconv.ParseUint(v, 0, 64)``, ``ParseFloat``, ``ParseBool``,
  ``time.ParseDuration``, and ``parseRate``'s ``N/duration``), merged over the
  call's defaults, then ``NewAPILimiter``'s zero-value defaults applied.

What Cilium refuses is refused in one line naming the flag and Cilium's reason.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from typing import NamedTuple

from ctsim.core.defaults import ENDPOINT_CREATE, ENDPOINT_DELETE
from ctsim.core.errors import InputError
from ctsim.core.rate import APILimiterParameters

FLAG = "--api-rate-limit"
# pkg/command/map_string.go: keyValueRegex (Go's RE2 and Python's re agree on this pattern)
_KEY_VALUE = re.compile(
    r"([\w\-:;./@]+=([\w\-:;,./@][\w\-:;,./@ ]*[\w\-:;,./@])?[\w\-:;,./@]*,)*"
    r"([\w\-:;./@]+=([\w\-:;,./@][\w\-:;,./@ ]*)?[\w\-:;./@]+)$"
)


def parse_map(text: str) -> dict[str, str]:
    """``ToStringMapStringE`` on a string: JSON, else ``k=v,k2=v2`` with commas allowed in values."""
    stripped = text.lstrip()
    if not text:
        return {}
    if stripped.startswith(("{", "[")):
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise InputError(f"{FLAG}: {exc}") from None
        if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
            raise InputError(f"{FLAG}: a JSON object of strings, got {text!r}")
        return dict(loaded)
    if _KEY_VALUE.sub("", text):
        raise InputError(f"{FLAG}: '{text}' is not formatted as key=value,key1=value1")
    out: dict[str, str] = {}
    for kv in _split_key_value(text):
        parts = kv.split("=")
        if len(parts) != 2:
            raise InputError(f"{FLAG}: '{kv}' in '{text}' is not formatted as key=value,key1=value1")
        out[parts[0]] = parts[1]
    return out


def _split_key_value(text: str) -> list[str]:
    """``splitKeyValue``: split at a comma only where the piece up to the next comma holds an ``=``."""
    commas = [i for i, c in enumerate(text) if c == ","]
    equals = text.count("=")
    if not commas or equals == 1:
        return [text]
    if len(commas) == 1:
        return [text[: commas[0]], text[commas[0] + 1 :]]
    out, start = [], 0
    for n, i in enumerate(commas):
        end = commas[n + 1] if n + 1 < len(commas) else len(text)
        if "=" in text[i:end]:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


_UNITS_NS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_GO_DURATION = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def go_duration(text: str) -> float:
    """``time.ParseDuration``: ``[-+]`` then number-unit pairs (``1h30m``, ``1.5s``); a bare ``0``. Seconds."""
    s = text
    sign = 1.0
    if s[:1] in "+-" and s:
        sign, s = (-1.0 if s[0] == "-" else 1.0), s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"time: invalid duration {text!r}")
    total, pos = Fraction(0), 0
    for m in _GO_DURATION.finditer(s):
        if m.start() != pos:
            break
        total += Fraction(m.group(1)) * _UNITS_NS[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise ValueError(f"time: invalid duration {text!r}" if pos else f"time: missing unit in duration {text!r}")
    return sign * int(total) / 1e9  # Go holds whole nanoseconds


def _uint(text: str) -> int:
    """``strconv.ParseUint(text, 0, 64)``: base from the prefix (0x, 0o, 0b, or a leading 0 for octal)."""
    t = text.replace("_", "") if re.fullmatch(r"0[xXoObB]?[0-9a-fA-F]+(_[0-9a-fA-F]+)*", text) else text
    if not re.fullmatch(r"0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+|[1-9][0-9]*|0", t):
        raise ValueError(f'strconv.ParseUint: parsing "{text}": invalid syntax')
    if t.startswith(("0x", "0X")):
        value = int(t[2:], 16)
    elif t.startswith(("0b", "0B")):
        value = int(t[2:], 2)
    elif t.startswith(("0o", "0O")):
        value = int(t[2:], 8)
    elif len(t) > 1 and t.startswith("0"):
        value = int(t[1:], 8)
    else:
        value = int(t)
    if value >= 1 << 64:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def _float(text: str) -> float:
    """``strconv.ParseFloat(text, 64)`` for the forms an option takes (Go also reads inf and NaN)."""
    if not re.fullmatch(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|[iI]nf(inity)?|NaN)", text):
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": invalid syntax')
    return float(text)


def go_bool(text: str) -> bool:
    """``strconv.ParseBool``."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def parse_rate(text: str) -> float:
    """``parseRate``: ``N/duration`` (``2/s``, ``10/1m``); a bare number after the slash is refused."""
    tokens = text.split("/", 1)
    if len(tokens) != 2:
        raise ValueError("not in the form number/interval")
    count = _float(tokens[0])
    if re.fullmatch(r"[+-]?\d+", tokens[1]):
        raise ValueError(f'interval "{tokens[1]}" must contain duration suffix')
    interval = tokens[1] if tokens[1][:1].isdigit() else "1" + tokens[1]
    seconds = go_duration(interval)
    return count / seconds if seconds else float("inf")


# option -> (APILimiterParameters field, parser); "log" and "min-wait-duration" are read, and not played.
_OPTIONS = {
    "rate-limit": ("rate_limit", parse_rate),
    "rate-burst": ("rate_burst", _uint),
    "min-wait-duration": ("", go_duration),
    "max-wait-duration": ("max_wait", go_duration),
    "estimated-processing-duration": ("estimated_processing", go_duration),
    "auto-adjust": ("auto_adjust", go_bool),
    "parallel-requests": ("parallel_requests", _uint),
    "min-parallel-requests": ("min_parallel_requests", _uint),
    "max-parallel-requests": ("max_parallel_requests", _uint),
    "mean-over": ("mean_over", _uint),
    "log": ("", go_bool),
    "delayed-adjustment-factor": ("delayed_adjustment_factor", _float),
    "max-adjustment-factor": ("max_adjustment_factor", _float),
    "skip-initial": ("skip_initial", _uint),
}


def merge_user_config(params: APILimiterParameters, config: str, name: str) -> tuple[APILimiterParameters, bool]:
    """``mergeUserConfig`` then ``NewAPILimiter``'s defaults: the parameters, and whether a min-wait was set."""
    changes: dict[str, object] = {}
    min_wait = False
    for token in config.split(","):
        if token == "":
            continue
        key, sep, value = token.partition(":")
        if not sep:
            raise InputError(
                f"{FLAG}: {name}: unable to parse rate limit option {token!r}, must in the form "
                "name=option:value[,option:value]"
            )
        option = _OPTIONS.get(key.lower())
        try:
            if option is None:
                raise ValueError(f"unknown rate limiting option {key!r}")
            parsed = option[1](value)
        except ValueError as exc:
            raise InputError(
                f"{FLAG}: {name}: unable to parse rate limit option {key!r} with value {value!r}: {exc}"
            ) from None
        if option[0]:
            changes[option[0]] = parsed
        elif key.lower() == "min-wait-duration":
            min_wait = parsed != 0
    merged = params._replace(**changes)  # type: ignore[arg-type]
    return _new_api_limiter(merged), min_wait


def _new_api_limiter(p: APILimiterParameters) -> APILimiterParameters:
    """``NewAPILimiter``: a zero MeanOver, MinParallelRequests, RateBurst or factor takes its default."""
    return p._replace(
        mean_over=p.mean_over or 10,
        min_parallel_requests=p.min_parallel_requests or 1,
        rate_burst=p.rate_burst or 1,
        delayed_adjustment_factor=p.delayed_adjustment_factor or 0.5,
        max_adjustment_factor=p.max_adjustment_factor or 100.0,
    )


class APIRateLimits(NamedTuple):
    """The agent's endpoint limiters as ``--api-rate-limit`` and ``--enable-api-rate-limit`` leave them."""

    endpoint_create: APILimiterParameters = ENDPOINT_CREATE
    endpoint_delete: APILimiterParameters = ENDPOINT_DELETE
    others: tuple[str, ...] = ()  # api calls configured that the model does not play
    min_wait: tuple[str, ...] = ()  # limiters given a min-wait-duration (read, not played)

    def __str__(self) -> str:
        """The flag's text that gives these limiters back, every option written out (``given.flag_text``)."""
        calls = {"endpoint-create": self.endpoint_create, "endpoint-delete": self.endpoint_delete}
        return ",".join(f"{name}={_options(p)}" for name, p in calls.items())


DEFAULTS = {"endpoint-create": ENDPOINT_CREATE, "endpoint-delete": ENDPOINT_DELETE}


def parse_api_rate_limit(text: str) -> APIRateLimits:
    """``--api-rate-limit`` over v1.16.5's defaults (unchanged to 1.20: cilium-releases.md §2.6)."""
    limits = dict(DEFAULTS)
    others, min_wait = [], []
    for name, config in parse_map(text).items():
        base = limits.get(name, APILimiterParameters(min_parallel_requests=0, rate_burst=0, mean_over=0))
        merged, waits = merge_user_config(base, config, name)
        if name in limits:
            limits[name] = merged
        else:
            others.append(name)
        if waits:
            min_wait.append(name)
    return APIRateLimits(limits["endpoint-create"], limits["endpoint-delete"], tuple(others), tuple(min_wait))


def _options(p: APILimiterParameters) -> str:
    return ",".join(
        [
            f"estimated-processing-duration:{round(p.estimated_processing * 1e9)}ns",
            f"auto-adjust:{str(p.auto_adjust).lower()}",
            f"mean-over:{p.mean_over}",
            f"parallel-requests:{p.parallel_requests}",
            f"max-parallel-requests:{p.max_parallel_requests}",
            f"min-parallel-requests:{p.min_parallel_requests}",
            *([f"rate-limit:{p.rate_limit!r}/s"] if p.rate_limit else []),
            f"rate-burst:{p.rate_burst}",
            f"max-wait-duration:{round(p.max_wait * 1e9)}ns",
            f"skip-initial:{p.skip_initial}",
            f"delayed-adjustment-factor:{p.delayed_adjustment_factor!r}",
            f"max-adjustment-factor:{p.max_adjustment_factor!r}",
        ]
    )


class LimiterState(NamedTuple):
    """A warm limiter as its agent reports it now (``cilium_api_limiter_requests_in_flight{value="limit"}``,
    ``cilium_api_limiter_rate_limit{value="limit"|"burst"}``): where AutoAdjust left it."""

    parallel_requests: int
    rate_limit: float
    rate_burst: int

    def __str__(self) -> str:
        return (
            f"parallel-requests:{self.parallel_requests},rate-limit:{self.rate_limit!r}/s,rate-burst:{self.rate_burst}"
        )


def parse_limiter_state(text: str, flag: str = "--create-limiter") -> LimiterState:
    """``parallel-requests:3,rate-limit:0.02/s,rate-burst:3``: the three, in ``--api-rate-limit``'s option syntax."""
    values: dict[str, object] = {}
    for token in text.split(","):
        key, sep, value = token.partition(":")
        field = {"parallel-requests": "parallel_requests", "rate-limit": "rate_limit", "rate-burst": "rate_burst"}
        if not sep or key.strip().lower() not in field:
            raise InputError(f"{flag}: parallel-requests:N,rate-limit:R/s,rate-burst:B, got {text!r}")
        name = key.strip().lower()
        try:
            values[field[name]] = parse_rate(value) if name == "rate-limit" else _uint(value)
        except ValueError as exc:
            raise InputError(f"{flag}: {name}: {exc}") from None
    if len(values) != 3:
        raise InputError(f"{flag}: give parallel-requests, rate-limit and rate-burst, got {text!r}")
    return LimiterState(**values)  # type: ignore[arg-type]
