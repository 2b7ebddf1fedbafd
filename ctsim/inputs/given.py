"""What the user gave for one run, parsed once: the only place a flag's text becomes a number.

``parse_given`` takes the flags as typed (``"16M"``, ``"90s"``, ``"auto"``)
and returns a frozen ``Given``: numbers, schedules and Enums, ``None`` where
the user gave nothing (a preset or a default fills it in ``resolve``).
Everything below the command line works on a ``Given``: ``plan``, the
mitigations, sweeps, replications and the fleet derive variants of a node
with ``dataclasses.replace`` on its numbers, never by formatting them into
flags to be parsed again.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from ctsim.core.api_rate_limit import APIRateLimits, LimiterState, go_bool, parse_api_rate_limit, parse_limiter_state
from ctsim.core.bounds import (  # the ceilings of what a run may ask for (docs/model.md, "Limits")
    MAX_CORES,
    MAX_DEADLINE,
    MAX_HORIZON,
    MAX_NODE_MEMORY,
    MAX_PODS,
    MAX_REGENERATION,
    MAX_SEED,
    MAX_WALK_RATE,
    MIN_GC_INTERVAL,
)
from ctsim.core.calibration import Calibration
from ctsim.core.defaults import LIMIT_TABLE_MIN
from ctsim.core.errors import InputError
from ctsim.core.origin import Origin
from ctsim.core.profiles import DEFAULT_PROFILE, get_profile
from ctsim.core.quantity import parse_count, parse_duration, parse_float
from ctsim.core.releases import Release, parse_release
from ctsim.inputs.churn import ChurnSchedule, parse_churn
from ctsim.inputs.presets import get_preset

if TYPE_CHECKING:  # the workload and signal flags' types, imported where one is given (most runs give none)
    from ctsim.inputs.signal_rates import SignalRates
    from ctsim.inputs.workload import IntOrPercent, PodSchedule


class AgentState(enum.StrEnum):
    WARM = "warm"  # up for days: the limiter's skip-initial requests spent, the GC interval drifted
    FRESH = "fresh"  # just (re)started


@dataclass(frozen=True)
class Given:
    """One run's inputs as the user gave them, parsed; ``None``: not given (the preset's or a default)."""

    preset: str | None = None
    profile: str = DEFAULT_PROFILE
    entries: int | None = None
    any_entries: int | None = None
    max_entries: int | None = None
    any_max_entries: int | None = None  # the non-TCP map's capacity (bpf-ct-global-any-max)
    expired_fraction: float | None = None
    agent_state: AgentState = AgentState.WARM
    agent_bootstrap: float | None = None  # a fresh agent's start-up before its API answers, the initial scan aside
    ipv6_entries: int | None = None
    ipv6_any_entries: int | None = None
    ipv6_max_entries: int | None = None
    pods: int = 50
    rate: float | None = None
    churn: ChurnSchedule | None = None
    any_churn: ChurnSchedule | None = None
    ipv6_churn: ChurnSchedule | None = None
    ipv6_any_churn: ChurnSchedule | None = None
    conn_duration: float | None = None
    deadline: float | None = None
    gc_interval: float = 0.0  # conntrack-gc-interval; 0: auto (adaptive)
    gc_initial_interval: float | None = None
    gc_next_pass: float | None = None
    gc_max_interval: float | None = None
    regeneration: float | None = None
    create_mean_processing: float | None = None  # endpoint-create's meanProcessingDuration at t=0 (a warm agent)
    cores: int | None = None
    node_memory: int | None = None
    map_ratio: float | None = None  # 0: given as 0, dynamic sizing off
    horizon: float | None = None  # None: until the burst is resolved
    seed: int = 1
    calibration: Calibration | None = None
    cilium_version: Release | None = None  # None: the profile's release
    api_rate_limit: APIRateLimits | None = None  # --api-rate-limit over v1.16.5's defaults
    enable_api_rate_limit: bool | None = None  # --enable-api-rate-limit; None: true, Cilium's default
    create_limiter: LimiterState | None = None  # endpoint-create now, as the agent reports it (a warm agent)
    arrival_schedule: PodSchedule | None = None  # --arrivals: pods created over time, beside the burst at t=0
    delete_schedule: PodSchedule | None = None  # --deletes: running pods deleted over time
    ct_fill_signals: SignalRates | None = None  # the datapath's SIGNAL_CT_FILL_UP, per family
    nat_fill_signals: SignalRates | None = None  # and its SIGNAL_NAT_FILL_UP
    rollout: int | None = None  # --rollout: a Deployment's pods on this node replaced by a rolling update
    max_surge: IntOrPercent | None = None  # its strategy (default 25%)
    max_unavailable: IntOrPercent | None = None  # (default 25%)
    # When each pod reached CNI ADD, in seconds from t=0 (``ctsim backtest``: the pods as the node saw them come);
    # empty: ``pods`` pods within kubelet's start spread. Not a flag.
    arrivals: tuple[float, ...] = ()
    # Where an input came from when not from the user's flags: (input, origin), e.g. a live series.
    sources: tuple[tuple[str, Origin], ...] = ()

    def source(self, name: str) -> Origin | None:
        for key, origin in self.sources:
            if key == name:
                return origin
        return None


def _count(flag: str, **bounds: int) -> Callable[[str], int]:
    return lambda text: parse_count(text, flag, **bounds)


def _duration(flag: str, **bounds: float | bool) -> Callable[[str], float]:
    return lambda text: parse_duration(text, flag, **bounds)  # type: ignore[arg-type]


def _gc_interval(text: str) -> float:
    if text.strip() == "auto":
        return 0.0
    return parse_duration(text, "--gc-interval", minimum=MIN_GC_INTERVAL, maximum=MAX_HORIZON)


def _agent_state(text: str) -> AgentState:
    try:
        return AgentState(text)
    except ValueError:
        raise InputError(f"--agent-state: must be warm or fresh, got {text!r}") from None


def _preset(text: str) -> str:
    return get_preset(text).name


def _profile(text: str) -> str:
    return get_profile(text).name


def _calibration(text: str) -> Calibration:
    from ctsim.core.calibration import load

    return load(text)


def _go_bool(text: str) -> bool:
    """``--enable-api-rate-limit`` as Cilium's flag reads it (``strconv.ParseBool``)."""
    try:
        return go_bool(text)
    except ValueError:
        raise InputError(f"--enable-api-rate-limit: true or false, got {text!r}") from None


def _churn(flag: str) -> Callable[[str], ChurnSchedule]:
    return lambda text: parse_churn(text, flag)


def _pods_over_time(flag: str) -> Callable[[str], PodSchedule]:
    def parse(text: str) -> PodSchedule:
        from ctsim.inputs.workload import parse_pod_schedule

        return parse_pod_schedule(text, flag, MAX_PODS)

    return parse


def _signal_rates(flag: str) -> Callable[[str], SignalRates]:
    def parse(text: str) -> SignalRates:
        from ctsim.inputs.signal_rates import parse_signal_rates

        return parse_signal_rates(text, flag)

    return parse


def _int_or_percent(flag: str) -> Callable[[str], IntOrPercent]:
    def parse(text: str) -> IntOrPercent:
        from ctsim.inputs.workload import parse_int_or_percent

        return parse_int_or_percent(text, flag)

    return parse


_GC = {"minimum": MIN_GC_INTERVAL, "maximum": MAX_HORIZON}
# Each flag's parser, in the order a run checks them: of several bad flags, the first here is the one named.
PARSERS: dict[str, Callable[[str], object]] = {
    "preset": _preset,
    "profile": _profile,
    "cilium_version": parse_release,
    "api_rate_limit": parse_api_rate_limit,
    "enable_api_rate_limit": _go_bool,
    "create_limiter": parse_limiter_state,
    "pods": _count("--pods", minimum=1, maximum=MAX_PODS),
    "cores": _count("--cores", minimum=1, maximum=MAX_CORES),
    "seed": _count("--seed", maximum=MAX_SEED),
    "entries": _count("--entries"),
    "any_entries": _count("--any-entries"),
    "node_memory": _count("--node-memory", minimum=1, maximum=MAX_NODE_MEMORY),
    "map_ratio": lambda text: parse_float(text, "--map-ratio", low=0.0, high=1.0),
    "max_entries": _count("--max-entries", minimum=LIMIT_TABLE_MIN),  # Cilium's LimitTableMin
    "any_max_entries": _count("--any-max-entries", minimum=LIMIT_TABLE_MIN),
    "ipv6_entries": _count("--ipv6-entries"),
    "ipv6_any_entries": _count("--ipv6-any-entries"),
    "ipv6_max_entries": _count("--ipv6-max-entries", minimum=LIMIT_TABLE_MIN),
    "agent_state": _agent_state,
    "agent_bootstrap": _duration("--agent-bootstrap", allow_zero=True, maximum=MAX_DEADLINE),
    "expired_fraction": lambda text: parse_float(text, "--expired-fraction", low=0.0, high=1.0),
    "calibration": _calibration,
    "rate": lambda text: float(parse_count(text, "--rate", minimum=1, maximum=MAX_WALK_RATE)),
    "churn": _churn("--churn"),
    "any_churn": _churn("--any-churn"),
    "ipv6_churn": _churn("--ipv6-churn"),
    "ipv6_any_churn": _churn("--ipv6-any-churn"),
    "arrival_schedule": _pods_over_time("--arrivals"),
    "delete_schedule": _pods_over_time("--deletes"),
    "ct_fill_signals": _signal_rates("--ct-fill-signals"),
    "nat_fill_signals": _signal_rates("--nat-fill-signals"),
    "rollout": _count("--rollout", minimum=1, maximum=MAX_PODS),
    "max_surge": _int_or_percent("--max-surge"),
    "max_unavailable": _int_or_percent("--max-unavailable"),
    "conn_duration": _duration("--conn-duration", maximum=MAX_HORIZON),
    "deadline": _duration("--deadline", minimum=1.0, maximum=MAX_DEADLINE),
    "horizon": _duration("--horizon", maximum=MAX_HORIZON),
    "regeneration": _duration("--regeneration-time", allow_zero=True, maximum=MAX_REGENERATION),
    "create_mean_processing": _duration("--create-mean-processing", maximum=MAX_DEADLINE),
    "gc_max_interval": _duration("--gc-max-interval", **_GC),
    "gc_interval": _gc_interval,
    "gc_initial_interval": _duration("--gc-initial-interval", **_GC),
    "gc_next_pass": _duration("--gc-next-pass", allow_zero=True, maximum=MAX_HORIZON),
}
NOT_FLAGS = ("arrivals", "sources")  # Given's fields that no flag sets
# Every flag, in Given's order, with its default as the command line declares it (None: not given).
FLAG_DEFAULTS: dict[str, object] = {f.name: None for f in fields(Given) if f.name not in NOT_FLAGS} | {
    "profile": DEFAULT_PROFILE,
    "agent_state": "warm",
    "pods": "50",
    "gc_interval": "auto",
    "seed": 1,
}
assert set(PARSERS) == set(FLAG_DEFAULTS)


def parse_value(name: str, text: object) -> object:
    """One flag's value as typed (a str; an int for --seed) -> what ``Given`` holds."""
    if name == "seed" and isinstance(text, int) and not isinstance(text, bool):
        return parse_count(text, "--seed", maximum=MAX_SEED)
    if not isinstance(text, str):
        raise InputError(f"--{name.replace('_', '-')}: expected text, got {text!r}")
    return PARSERS[name](text)


def parse_given(**flags: object) -> Given:
    """The flags as typed (``None``: not given) -> a ``Given``; raises InputError naming the first bad flag."""
    unknown = set(flags) - set(PARSERS)
    if unknown:
        raise InputError(f"unknown scenario flag(s): {', '.join(sorted(unknown))}")
    values = {name: parse_value(name, flags[name]) for name in PARSERS if flags.get(name) is not None}
    return Given(**values)  # type: ignore[arg-type]


# Each flag as the command line spells it: its field with dashes, but one.
FLAG_NAMES: dict[str, str] = {name: "--" + name.replace("_", "-") for name in PARSERS} | {
    "regeneration": "--regeneration-time",
    "arrival_schedule": "--arrivals",
    "delete_schedule": "--deletes",
}
_DURATIONS = frozenset(
    {"conn_duration", "deadline", "horizon", "regeneration", "create_mean_processing", "agent_bootstrap"}
    | {"gc_max_interval", "gc_interval", "gc_initial_interval", "gc_next_pass"}
)


def flag_text(name: str, value: object) -> str:
    """The inverse of ``PARSERS``: ``value`` as ``name``'s flag takes it, exactly (``parse_value`` gives it back).

    A duration is written in seconds at full precision (``0.30000000000000004s``),
    a churn schedule per second; a value no flag can carry (a walk rate with a
    fraction: ``--rate`` takes whole entries/s) is a ValueError.
    """
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, Calibration):
        return value.path
    from ctsim.inputs.signal_rates import SignalRates
    from ctsim.inputs.workload import IntOrPercent, PodSchedule

    if isinstance(value, Release | APIRateLimits | LimiterState | IntOrPercent):
        return str(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, SignalRates):
        return ",".join(f"{family}={_number(rate)}/s" for family, rate in value.rates)
    if isinstance(value, PodSchedule):
        return ", ".join(f"{_number(rate)}/s for {_number(span)}s" for rate, span in value.segments)
    if isinstance(value, ChurnSchedule):
        if value.constant:
            return f"{_number(value.segments[0][0])}/s"
        return ", ".join(f"{_number(rate)}/s for {_number(span)}s" for rate, span in value.segments)
    if name in _DURATIONS:
        assert isinstance(value, float | int)
        if name == "gc_interval" and value == 0:
            return "auto"
        return "0" if value == 0 else f"{_number(value)}s"
    if name == "rate":
        assert isinstance(value, float | int)
        if value != int(value):
            raise ValueError(f"--rate takes whole entries/s, not {value!r}")
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _number(value: float) -> str:
    """A float at full precision, without a trailing ``.0`` (``90``, ``0.30000000000000004``)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def flags_of(g: Given) -> dict[str, str]:
    """What ``g`` holds beyond the defaults, as flags' texts: ``parse_given(**flags_of(g))`` is ``g`` again
    (without its ``arrivals`` and ``sources``, which no flag carries)."""
    default = Given()
    return {
        name: flag_text(name, getattr(g, name))
        for name in PARSERS
        if getattr(g, name) is not None and getattr(g, name) != getattr(default, name)
    }


def command_line(flags: dict[str, object], command: str = "run") -> list[str]:
    """``ctsim COMMAND`` with ``flags`` (text as typed, or ``flags_of``'s), defaults left out."""
    words = ["ctsim", command]
    for name, value in flags.items():
        if value is None or FLAG_DEFAULTS[name] == value:
            continue
        words += [FLAG_NAMES[name], str(value)]
    return words
