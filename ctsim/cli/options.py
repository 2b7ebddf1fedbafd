"""The scenario flags, declared once and shared by every command that takes a scenario.

``ctsim run``, ``ctsim emulate`` and ``ctsim sweep`` accept the same flags with
the same help; ``@scenario_options`` appends them to a typer command and hands
the command one ``Scenario``, resolved (and validated) by ``ctsim.inputs.scenario``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer

from ctsim.cli.command import with_flags
from ctsim.core.profiles import DEFAULT_PROFILE, choices
from ctsim.core.quantity import format_bytes

Str = Optional[str]  # noqa: UP045 - typer reads Optional at runtime


def _values(field: str, show: Callable[[Any], str] = str) -> str:
    """Each preset's ``field``: ``analytics X, standard Y``."""
    from ctsim.inputs.presets import PRESETS

    return ", ".join(f"{name} {show(getattr(p, field))}" for name, p in PRESETS.items())


def _preset(field: str, show: Callable[[Any], str] = str) -> str:
    """What each preset supplies for ``field`` when the flag is not given, for --help."""
    return "default: the preset's: " + _values(field, show)


def _ratio(r: float | None) -> str:
    return "none (static map sizes)" if r is None else f"{r:g}"


def _opt(help_text: str, metavar: str | None = None) -> Any:
    return typer.Option(help=help_text, rich_help_panel="Scenario", metavar=metavar)


# name → (annotation, default); names are resolve()'s keyword arguments.
SCENARIO_FLAGS: dict[str, tuple[Any, Any]] = {
    "entries": (
        Annotated[
            Str,
            _opt(
                "Present entries at t=0 in the TCP map, cilium_ct4_global (16M, 16Mi, 262144; default: the "
                f"preset's share of the map: {_values('entries', '{:,}'.format)} on its own). "
                "Only a total over every map (cilium bpf ct list global)? Give it here.",
                "COUNT",
            ),
        ],
        None,
    ),
    "any_entries": (
        Annotated[
            Str,
            _opt(
                "Present entries at t=0 in the non-TCP map, cilium_ct_any4_global (UDP, DNS, ICMP); "
                "a scrub walks it after the TCP map (default: the preset's, 0).",
                "COUNT",
            ),
        ],
        None,
    ),
    "pods": (Annotated[str, _opt("Pods scheduled onto the node at once.", "COUNT")], "50"),
    "max_entries": (Annotated[Str, _opt("CT map capacity (default: the preset's).", "COUNT")], None),
    "expired_fraction": (
        Annotated[Str, _opt(f"Share of the t=0 entries already expired ({_preset('expired_fraction')}).", "FRACTION")],
        None,
    ),
    "ipv6_entries": (
        Annotated[
            Str, _opt("Present IPv6 CT entries at t=0: makes the node dual-stack (IPv6 maps and lock).", "COUNT")
        ],
        None,
    ),
    "ipv6_any_entries": (
        Annotated[Str, _opt("Present entries at t=0 in cilium_ct_any6_global (needs --ipv6-entries).", "COUNT")],
        None,
    ),
    "ipv6_max_entries": (Annotated[Str, _opt("IPv6 CT map capacity (default: sized like IPv4).", "COUNT")], None),
    "agent_state": (
        Annotated[
            str,
            _opt("warm: agent up for days (skip-initial spent, GC drifted); fresh: just (re)started.", "warm|fresh"),
        ],
        "warm",
    ),
    "rate": (Annotated[Str, _opt("Walk rate, entries/s (default: the profile's published rate).", "ENTRIES/S")], None),
    "churn": (
        Annotated[
            Str,
            _opt(
                "New connections: N/s, N/min or N/h, or a repeating schedule '50000/min for 8h, 500/min for 16h' "
                f"({_preset('churn')}).",
                "RATE",
            ),
        ],
        None,
    ),
    "any_churn": (
        Annotated[
            Str,
            _opt(
                "New non-TCP flows into cilium_ct_any4_global, as --churn (each lives 60s after its last packet, "
                "bpf-ct-timeout-regular-any; default: the preset's, 0/s).",
                "RATE",
            ),
        ],
        None,
    ),
    "ipv6_churn": (
        Annotated[Str, _opt("New TCP connections into cilium_ct6_global, as --churn (needs --ipv6-entries).", "RATE")],
        None,
    ),
    "ipv6_any_churn": (
        Annotated[Str, _opt("New non-TCP flows into cilium_ct_any6_global (needs --ipv6-entries).", "RATE")],
        None,
    ),
    "conn_duration": (Annotated[Str, _opt("How long each connection stays open (default: 30s).", "DURATION")], None),
    "deadline": (Annotated[Str, _opt("cilium-cni's API client timeout (default: 90s).", "DURATION")], None),
    "gc_interval": (
        Annotated[str, _opt("conntrack-gc-interval: 'auto' (adaptive) or a duration.", "auto|DURATION")],
        "auto",
    ),
    "gc_initial_interval": (
        Annotated[Str, _opt("Start a fresh agent with this GC interval (default: 5m).", "DURATION")],
        None,
    ),
    "gc_next_pass": (
        Annotated[
            Str,
            _opt(
                "When the next GC pass starts (default: warm and adaptive, 6h: the last 12h pass was 6h ago; or now).",
                "DURATION",
            ),
        ],
        None,
    ),
    "gc_max_interval": (Annotated[Str, _opt("conntrack-gc-max-interval (default: 12h, Cilium's).", "DURATION")], None),
    "regeneration": (
        Annotated[
            Str,
            typer.Option(
                "--regeneration-time",
                help="Endpoint BPF compile and load time (default: 2s).",
                rich_help_panel="Scenario",
                metavar="DURATION",
            ),
        ],
        None,
    ),
    "cores": (Annotated[Str, _opt(f"Node cores: build permits ({_preset('cores')}).", "COUNT")], None),
    "node_memory": (
        Annotated[Str, _opt(f"Node memory for dynamic map sizing ({_preset('node_memory', format_bytes)}).", "BYTES")],
        None,
    ),
    "map_ratio": (
        Annotated[
            Str, _opt(f"bpf-map-dynamic-size-ratio (Cilium's is 0.0025; {_preset('map_ratio', _ratio)}).", "RATIO")
        ],
        None,
    ),
    "horizon": (
        Annotated[
            Str,
            _opt(
                "How much node time to simulate (default: until the burst is resolved: every pod Ready, "
                "or, past the first GC pass, 1h with none becoming Ready; at most 2d).",
                "DURATION",
            ),
        ],
        None,
    ),
    "seed": (Annotated[int, _opt("Random seed: same seed, same result.", "INT")], 1),
    "preset": (Annotated[Str, _opt("analytics (the incident, default) or standard.", "NAME")], None),
    "profile": (
        Annotated[str, _opt(f"{choices()}.", "NAME")],
        DEFAULT_PROFILE,
    ),
    "calibration": (Annotated[Str, _opt("Walk rates from `ctsim calibrate --output FILE`.", "FILE")], None),
}


def _prom(help_text: str, metavar: str | None = None, panel: str = "Prometheus") -> Any:
    return typer.Option(help=help_text, rich_help_panel=panel, metavar=metavar)


# How to reach a Prometheus (or Thanos, VictoriaMetrics, Mimir) query API: ``ctsim fleet`` and
# ``ctsim run --from-prometheus``; the names follow Prometheus's own http_config.
PROMETHEUS_FLAGS: dict[str, tuple[Any, Any]] = {
    "bearer_token_file": (
        Annotated[Str, _prom("Send the token in this file as 'Authorization: Bearer'.", "FILE")],
        None,
    ),
    "basic_auth_user": (Annotated[Str, _prom("Basic auth user (with --basic-auth-password-file).", "USER")], None),
    "basic_auth_password_file": (Annotated[Str, _prom("Basic auth password, read from this file.", "FILE")], None),
    "ca_file": (Annotated[Str, _prom("CA certificates (PEM) to verify the server with.", "FILE")], None),
    "cert_file": (Annotated[Str, _prom("Client certificate (PEM), for mutual TLS.", "FILE")], None),
    "key_file": (Annotated[Str, _prom("The client certificate's key (PEM).", "FILE")], None),
    "insecure_skip_verify": (
        Annotated[
            bool,
            typer.Option(
                "--insecure-skip-verify", help="Do not verify the server's certificate.", rich_help_panel="Prometheus"
            ),
        ],
        False,
    ),
    "header": (
        Annotated[
            list[str] | None,
            _prom(
                "An extra request header (repeat for more), e.g. 'X-Scope-OrgID: prod'.",
                "'NAME: VALUE'",
            ),
        ],
        None,
    ),
    "timeout": (Annotated[str, _prom("Per query.", "DURATION")], "30s"),
}
# ``ctsim run --from-prometheus URL --node NAME``: the scenario from a live node's series.
LIVE_FLAGS: dict[str, tuple[Any, Any]] = {
    "from_prometheus": (
        Annotated[
            Str,
            _prom(
                "Take the node's maps, counts, walk rate and deadline from this Prometheus (needs --node).",
                "URL",
                "Scenario",
            ),
        ],
        None,
    ),
    "node": (Annotated[Str, _prom("The node to read (the --node-label value).", "NAME", "Scenario")], None),
    "node_label": (
        Annotated[
            str, _prom("The label that names a node; of several, the first a series has.", "LABEL[,LABEL]", "Scenario")
        ],
        "node,instance",
    ),
}


def transport(values: dict[str, Any]) -> Any:
    """``PROMETHEUS_FLAGS`` as typed -> a ``ctsim.fleet.prometheus.Transport``."""
    from ctsim.core.quantity import parse_duration
    from ctsim.fleet.prometheus import Transport

    return Transport(
        bearer_token_file=values["bearer_token_file"],
        basic_auth_user=values["basic_auth_user"],
        basic_auth_password_file=values["basic_auth_password_file"],
        ca_file=values["ca_file"],
        cert_file=values["cert_file"],
        key_file=values["key_file"],
        insecure_skip_verify=values["insecure_skip_verify"],
        headers=tuple(values["header"] or ()),
        timeout_s=parse_duration(values["timeout"], "--timeout", minimum=0.1, maximum=3600.0),
    )


# What the decorators hand a command, not flags of its own: ``flags`` is the scenario flags as typed, for a
# command that shows them (a sweep's rows, a replication's ``ctsim run`` line); ``live``, what a live node's
# series gave (field -> value, series, node).
_BUILT = frozenset({"scenario", "transport", "flags", "live"})


def _adding(
    command: Callable[..., Any],
    flags: dict[str, tuple[Any, Any]],
    build: Callable[[dict[str, Any]], dict[str, Any]],
    last: bool = False,
) -> Callable[..., Any]:
    return with_flags(command, flags, build, _BUILT, last=last, localns={"Scenario": object, "Transport": object})


def scenario_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the scenario flags to ``command``, which receives ``scenario=Scenario``.

    The model is imported only when a command runs: ``ctsim --help`` and
    flag errors never pay for it.
    """

    def build(values: dict[str, Any]) -> dict[str, Any]:
        from ctsim.inputs.given import FLAG_DEFAULTS
        from ctsim.inputs.scenario import resolve_flags

        flags = {name: values[name] for name in FLAG_DEFAULTS}  # in Given's order, as a sweep's rows show them
        return {"scenario": resolve_flags(**flags), "flags": flags}

    return _adding(command, SCENARIO_FLAGS, build)


def live_scenario_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The scenario flags and ``--from-prometheus``: a live node's series fill what the user did not give."""

    def build(values: dict[str, Any]) -> dict[str, Any]:
        from ctsim.inputs.given import FLAG_DEFAULTS, parse_given
        from ctsim.inputs.scenario import resolve

        flags = {name: values[name] for name in FLAG_DEFAULTS}
        given = parse_given(**flags)
        url, node = values["from_prometheus"], values["node"]
        if url is None and node is None:
            return {"scenario": resolve(given), "flags": flags}
        from ctsim.fleet.live import from_prometheus

        scenario, live = from_prometheus(given, url, node, values["node_label"], transport(values))
        shown = {k: value for k, (value, _) in live.items()}
        read = {k: {"value": value, "series": series, "node": node} for k, (value, series) in live.items()}
        return {"scenario": scenario, "flags": {**flags, **shown}, "live": read}

    return _adding(command, {**SCENARIO_FLAGS, **LIVE_FLAGS, **PROMETHEUS_FLAGS}, build)


def prometheus_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the transport flags to ``command``, which receives ``transport=Transport``."""
    return _adding(command, PROMETHEUS_FLAGS, lambda values: {"transport": transport(values)}, last=True)
