"""``--api-rate-limit`` parsed as Cilium parses it (cases from pkg/rate/api_limiter_test.go), and played."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctsim.core.api_rate_limit import merge_user_config, parse_api_rate_limit, parse_map, parse_rate
from ctsim.core.defaults import ENDPOINT_CREATE
from ctsim.core.errors import InputError
from ctsim.core.rate import APILimiterParameters
from ctsim.inputs.given import flags_of, parse_given
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import simulate

EMPTY = APILimiterParameters(min_parallel_requests=0, rate_burst=0, mean_over=0)


@pytest.mark.parametrize("bad", ["foo", "1/foo", "/1s", "foo/1s", "1/1", "10"])
def test_parse_rate_refuses_what_cilium_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(bad)


def test_parse_rate() -> None:
    assert parse_rate("1/1s") == 1.0 and parse_rate("1/5m") == 1 / 300 and parse_rate("10/s") == 10.0
    assert parse_rate("5/m") == 5 / 60


@pytest.mark.parametrize(
    ("config", "expect"),
    [
        ("rate-limit:5/m", {"rate_limit": 5 / 60}),
        ("estimated-processing-duration:100ms", {"estimated_processing": 0.1}),
        ("rate-limit:5/m,rate-burst:2", {"rate_limit": 5 / 60, "rate_burst": 2}),
        (
            "auto-adjust:true,parallel-requests:2,max-parallel-requests:3,min-parallel-requests:2,skip-initial:5",
            {"auto_adjust": True, "parallel_requests": 2, "max_parallel_requests": 3, "min_parallel_requests": 2,
             "skip_initial": 5},
        ),
        (
            "delayed-adjustment-factor:0.5,log:true,max-wait-duration:2s,min-wait-duration:100ms,"
            "max-adjustment-factor:50.0",
            {"delayed_adjustment_factor": 0.5, "max_wait": 2.0, "max_adjustment_factor": 50.0},
        ),
        ("auto-adjust:true,", {"auto_adjust": True}),
        ("auto-adjust:false,rate-limit:10/s,", {"auto_adjust": False, "rate_limit": 10.0}),
        ("RATE-LIMIT:1/s", {"rate_limit": 1.0}),  # option names are case-insensitive
        ("rate-burst:0x10", {"rate_burst": 16}),  # strconv.ParseUint(v, 0, 64)
    ],
)  # fmt: skip
def test_new_api_limiter_from_config(config: str, expect: dict[str, object]) -> None:
    merged, _ = merge_user_config(EMPTY, config, "foo")
    assert {k: getattr(merged, k) for k in expect} == expect


@pytest.mark.parametrize(
    ("key", "value"),
    [("", ""), ("foo", ""), ("rate-limit", "10"), ("rate-burst", "foo"), ("max-wait-duration", "100sm"),
     ("min-wait-duration", "100sm"), ("estimated-processing-duration", "100sm"), ("auto-adjust", "not-true"),
     ("max-parallel-requests", "ss"), ("parallel-requests", "ss"), ("min-parallel-requests", "ss"),
     ("mean-over", "foo"), ("log", "not-true"), ("delayed-adjustment-factor", "foo"),
     ("max-adjustment-factor", "foo"), ("skip-initial", "foo"), ("rate-burst", "-1"), ("max-wait-duration", "1d")],
)  # fmt: skip
def test_merge_user_config_key_value_refusals(key: str, value: str) -> None:
    with pytest.raises(InputError, match="--api-rate-limit: foo: unable to parse rate limit option"):
        merge_user_config(EMPTY, f"{key}:{value}", "foo")


@pytest.mark.parametrize("config", ["auto-adjust", "1:2:3"])
def test_merge_user_config_refusals(config: str) -> None:
    with pytest.raises(InputError):
        merge_user_config(EMPTY, config, "foo")


def test_the_flag_is_a_map_whose_values_hold_commas() -> None:
    """pkg/command's splitKeyValue: a comma starts a new call only where an ``=`` follows it."""
    text = "endpoint-create=rate-limit:2/s,rate-burst:16,parallel-requests:8,endpoint-delete=parallel-requests:8"
    assert parse_map(text) == {
        "endpoint-create": "rate-limit:2/s,rate-burst:16,parallel-requests:8",
        "endpoint-delete": "parallel-requests:8",
    }
    assert parse_map('{"endpoint-create": "rate-limit:1/m"}') == {"endpoint-create": "rate-limit:1/m"}
    for bad in ("endpoint-create", "=x", "a=b=c", '{"endpoint-create": 5}'):
        with pytest.raises(InputError, match="--api-rate-limit"):
            parse_map(bad)


def test_users_tunings_merge_over_the_defaults() -> None:
    limits = parse_api_rate_limit("endpoint-create=rate-limit:2/s,rate-burst:16,parallel-requests:8")
    c = limits.endpoint_create
    assert (c.rate_limit, c.rate_burst, c.parallel_requests) == (2.0, 16, 8)
    assert (c.max_wait, c.skip_initial, c.auto_adjust) == (ENDPOINT_CREATE.max_wait, 4, True)  # kept
    assert parse_api_rate_limit("endpoint-create=max-wait-duration:2m").endpoint_create.max_wait == 120.0
    tuned = parse_api_rate_limit("endpoint-create=parallel-requests:16,estimated-processing-duration:5s")
    assert (tuned.endpoint_create.parallel_requests, tuned.endpoint_create.estimated_processing) == (16, 5.0)
    other = parse_api_rate_limit("endpoint-list=rate-limit:1/s")
    assert other.others == ("endpoint-list",) and other.endpoint_create == ENDPOINT_CREATE
    given = parse_given(api_rate_limit="endpoint-create=rate-limit:2/s,rate-burst:16", enable_api_rate_limit="0")
    assert parse_given(**flags_of(given)) == given  # the flags' text gives the same limiters back


def test_a_tuned_or_disabled_limiter_changes_the_burst() -> None:
    flags = {"entries": "1000", "pods": "200"}
    default = simulate(resolve_flags(**flags))
    off = simulate(resolve_flags(**flags, enable_api_rate_limit="false"))
    tuned = simulate(resolve_flags(**flags, api_rate_limit="endpoint-create=rate-limit:2/s,rate-burst:16,"
                                   "parallel-requests:8"))  # fmt: skip
    assert default.counters.add_429 > 0 and off.counters.add_429 == 0 and off.verdict == "ok"
    assert tuned.recovered_at is not None and default.recovered_at is not None
    assert tuned.recovered_at < default.recovered_at / 2


@pytest.mark.parametrize(
    "args",
    [["--api-rate-limit", "endpoint-create=rate-limit:10"], ["--api-rate-limit", "endpoint-create"],
     ["--enable-api-rate-limit", "maybe"]],
)  # fmt: skip
def test_a_refusal_is_one_line(args: list[str]) -> None:
    p = subprocess.run([sys.executable, "-m", "ctsim", "run", *args], capture_output=True, text=True, check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
