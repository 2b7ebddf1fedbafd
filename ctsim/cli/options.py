"""The scenario flags, declared once and shared by every command that takes a scenario.

``ctsim run``, ``ctsim emulate``, ``ctsim sweep`` and ``ctsim plan`` accept the same flags with
the same help; ``@scenario_options`` appends them to a typer command and hands
the command one ``Scenario``, resolved (and validated) by ``ctsim.inputs.scenario``.
The walk and sizing groups are also ``ctsim fleet``'s (``@fallback_options``), and
the transport group serves ``fleet`` and ``--from-prometheus`` alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer

from ctsim.cli.command import whole_number, with_flags
from ctsim.core.profiles import DEFAULT_PROFILE, choices
from ctsim.core.quantity import format_bytes

Str = Optional[str]  # noqa: UP045 - typer reads Optional at runtime


# The library names what it refuses by its parameters (``InputError.param``); the command line says each as the
# flag that gives it. A parameter not here is its flag with dashes (``bearer_token_file``: --bearer-token-file).
LIBRARY_FLAGS: dict[str, str] = {
    "url": "--prometheus-url",
    "timeout_s": "--timeout",
    "headers": "--header",
    "start": "--from",  # ctsim backtest's window
    "regeneration": "--regeneration-time",
    "arrival_schedule": "--arrivals",
    "delete_schedule": "--deletes",
    "end": "--to",
}


def _values(field: str, show: Callable[[Any], str] = str) -> str:
    """Each preset's ``field``: ``analytics X, standard Y``."""
    from ctsim.inputs.presets import PRESETS

    return ", ".join(f"{name} {show(getattr(p, field))}" for name, p in PRESETS.items())


def _preset(field: str, show: Callable[[Any], str] = str) -> str:
    """What each preset supplies for ``field`` when the flag is not given, for --help."""
    return "default: the preset's: " + _values(field, show)


def _ratio(r: float | None) -> str:
    return "none (static map sizes)" if r is None else f"{r:g}"


def _opt(help_text: str, metavar: str | None = None, **kw: Any) -> Any:
    return typer.Option(help=help_text, rich_help_panel="Scenario", metavar=metavar, **kw)


Where = Callable[[str], str]  # a flag's name -> what its help adds: its default, or when the command uses it


# One group of flags: name -> (type, help, metavar, default); ``_group`` declares it for a panel.
_WALK = {  # how fast a scrub walks, by one rule (``core.calibration.walk_rate``)
    "rate": (Str, "Walk rate, entries/s (wins over --calibration and the profile)", "ENTRIES/S", None),
    "profile": (str, f"The Cilium release that walks: {choices()}", "NAME", DEFAULT_PROFILE),
    "calibration": (Str, "Walk rates from `ctsim calibrate --output FILE`", "FILE", None),
}
_SIZING = {  # the CT maps' capacity, by one rule (``inputs.scenario.map_capacity``)
    "max_entries": (Str, "TCP CT map capacity, bpf-ct-global-tcp-max", "COUNT", None),
    "node_memory": (Str, "Node memory for dynamic map sizing", "BYTES", None),
    "map_ratio": (Str, "bpf-map-dynamic-size-ratio (Cilium's is 0.0025)", "RATIO", None),
}


def _group(specs: dict[str, tuple[Any, str, str, Any]], panel: str, where: Where) -> dict[str, tuple[Any, Any]]:
    """``specs`` as typer flags in ``panel``; ``where(name)`` ends each help (its default, or when it applies)."""
    return {
        name: (
            Annotated[kind, typer.Option(help=text + where(name) + ".", rich_help_panel=panel, metavar=metavar)],
            default,
        )
        for name, (kind, text, metavar, default) in specs.items()
    }


_PRESET_SAYS = {
    "max_entries": " (default: the preset's)",
    "node_memory": f" ({_preset('node_memory', format_bytes)})",
    "map_ratio": f" ({_preset('map_ratio', _ratio)})",
}
_GROUPED = _group({**_WALK, **_SIZING}, "Scenario", lambda name: _PRESET_SAYS.get(name, ""))
_FALLBACK_SIZING = {
    "max_entries": ", for maps no series sizes (Cilium-only nodes; default: Cilium's static sizes)",
    "node_memory": ", for maps no series sizes (alone: with the Helm chart's ratio, 0.0025)",
    "map_ratio": ", with --node-memory",
}
# Where a node's own series say nothing: ``ctsim fleet`` takes the same walk and sizing flags, by the same rules.
FALLBACK_PANEL = "Where a node's series say nothing"
FALLBACK_FLAGS: dict[str, tuple[Any, Any]] = {
    **_group(_WALK, FALLBACK_PANEL, lambda name: ", for nodes whose ctwatch measured no rate"),
    **_group(_SIZING, FALLBACK_PANEL, lambda name: _FALLBACK_SIZING[name]),
}


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
    "arrival_schedule": (
        Annotated[
            Str,
            typer.Option(
                "--arrivals",
                help="More pods created over time, beside the burst: '4.4/s for 10m', '30/min for 2h, 0/s for 1h, "
                "30/min for 2h' (churn's syntax; each segment once, its pods evenly spaced).",
                rich_help_panel="Scenario",
                metavar="SCHEDULE",
            ),
        ],
        None,
    ),
    "ct_fill_signals": (
        Annotated[
            Str,
            _opt(
                "The datapath's CT-fill signals, per family (ipv4=6/h,ipv6=1/h: cilium_signals_handled_total"
                '{signal_type="ct_fill_up"}): each wakes the GC for an early pass. 1.19 sends none; from 1.17.9 '
                "and 1.18.3 only on -ENOMEM (the rate given is taken as those).",
                "FAMILY=RATE",
            ),
        ],
        None,
    ),
    "nat_fill_signals": (
        Annotated[
            Str,
            _opt("The datapath's NAT-fill signals, as --ct-fill-signals (every release sends them).", "FAMILY=RATE"),
        ],
        None,
    ),
    "rollout": (
        Annotated[
            Str,
            _opt(
                "A rolling update of a Deployment with this many pods on the node: new pods created within "
                "--max-surge, each old pod's DEL (a scrub) once a new one is Ready, within --max-unavailable.",
                "COUNT",
            ),
        ],
        None,
    ),
    "max_surge": (Annotated[Str, _opt("The rollout's maxSurge: a count or a percent (default: 25%).", "N|N%")], None),
    "max_unavailable": (
        Annotated[Str, _opt("The rollout's maxUnavailable: a count or a percent (default: 25%).", "N|N%")],
        None,
    ),
    "delete_schedule": (
        Annotated[
            Str,
            typer.Option(
                "--deletes",
                help="Running pods deleted over time, as --arrivals: each a CNI DEL whose DeleteEndpoint scrubs "
                "every CT map under the same locks, retried by kubelet until it succeeds.",
                rich_help_panel="Scenario",
                metavar="SCHEDULE",
            ),
        ],
        None,
    ),
    "max_entries": _GROUPED["max_entries"],
    "any_max_entries": (
        Annotated[
            Str,
            _opt(
                "The non-TCP map's capacity, cilium_ct_any4_global (bpf-ct-global-any-max; default: sized as "
                "--max-entries' map is sized, or Cilium's static 262,144).",
                "COUNT",
            ),
        ],
        None,
    ),
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
    "agent_bootstrap": (
        Annotated[
            Str,
            _opt(
                "A fresh agent's start-up before its API answers, the initial CT scan aside: pods' CNI calls wait "
                "for it (default: 0s).",
                "DURATION",
            ),
        ],
        None,
    ),
    "rate": _GROUPED["rate"],
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
    "create_mean_processing": (
        Annotated[
            Str,
            _opt(
                "endpoint-create's mean processing time at t=0, where AutoAdjust has a warm agent's limiter (Cilium's "
                'cilium_api_limiter_processing_duration_seconds{value="mean"}; default: derived from the table).',
                "DURATION",
            ),
        ],
        None,
    ),
    "cores": (Annotated[Str, _opt(f"Node cores: build permits ({_preset('cores')}).", "COUNT")], None),
    "node_memory": _GROUPED["node_memory"],
    "map_ratio": _GROUPED["map_ratio"],
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
    "seed": (Annotated[int, _opt("Random seed: same seed, same result.", "INT", click_type=whole_number("--seed"))], 1),
    "preset": (Annotated[Str, _opt("analytics (the incident, default) or standard.", "NAME")], None),
    "profile": _GROUPED["profile"],
    "cilium_version": (
        Annotated[
            Str,
            _opt(
                "The Cilium release the node runs (1.20.2, v1.19.3, or 1.18 for its newest patch): its walk and "
                "its GC interval caching, patch by patch (default: the profile's release, v1.16.5 for cilium-1.16).",
                "VERSION",
            ),
        ],
        None,
    ),
    "calibration": _GROUPED["calibration"],
    "api_rate_limit": (
        Annotated[
            Str,
            _opt(
                "The agent's --api-rate-limit, in Cilium's syntax: endpoint-create=rate-limit:2/s,rate-burst:16,"
                "parallel-requests:8 (several API calls as Cilium separates them; default: v1.16.5's limiters, "
                "unchanged to 1.20).",
                "CONFIG",
            ),
        ],
        None,
    ),
    "create_limiter": (
        Annotated[
            Str,
            _opt(
                "endpoint-create as a warm agent reports it now (parallel-requests:3,rate-limit:0.02/s,rate-burst:3: "
                "cilium_api_limiter_requests_in_flight and _rate_limit); default: AutoAdjust's reading of the mean "
                "create (--create-mean-processing).",
                "STATE",
            ),
        ],
        None,
    ),
    "enable_api_rate_limit": (
        Annotated[Str, _opt("The agent's --enable-api-rate-limit: false turns every API limiter off.", "BOOL")],
        None,
    ),
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


# What each decorator hands a command, not flags of its own: ``flags`` is the scenario flags as typed, for a
# command that shows them (a sweep's rows, a replication's ``ctsim run`` line); ``live``, what a live node's
# series gave (field -> value, series, node). Each decorator names only its own, so that they stack.
_SCENARIO = frozenset({"scenario", "flags"})
_LIVE = _SCENARIO | {"live"}
_TRANSPORT = frozenset({"transport"})
_FALLBACK = frozenset({"fallback", "fallback_flags"})
_NAMES = {"Scenario": object, "Transport": object, "Given": object}  # annotations read only as text


def _adding(
    command: Callable[..., Any],
    flags: dict[str, tuple[Any, Any]],
    build: Callable[[dict[str, Any]], dict[str, Any]],
    provides: frozenset[str],
    last: bool = False,
) -> Callable[..., Any]:
    return with_flags(command, flags, build, provides, last=last, localns=_NAMES)


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

    return _adding(command, SCENARIO_FLAGS, build, _SCENARIO)


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

    return _adding(command, {**SCENARIO_FLAGS, **LIVE_FLAGS, **PROMETHEUS_FLAGS}, build, _LIVE)


# A backtest's pods and horizon are the node's own: its pods as kube-state-metrics saw them, its window.
BACKTEST_FLAGS = {k: v for k, v in SCENARIO_FLAGS.items() if k not in ("pods", "horizon")}
_GIVEN = frozenset({"given"})


def given_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The scenario flags but ``--pods`` and ``--horizon``, parsed, not resolved: ``command`` receives
    ``given=Given``, which a backtest completes with the node's series and pods."""

    def build(values: dict[str, Any]) -> dict[str, Any]:
        from ctsim.inputs.given import FLAG_DEFAULTS, parse_given

        return {"given": parse_given(**{name: values.get(name) for name in FLAG_DEFAULTS})}

    return _adding(command, BACKTEST_FLAGS, build, _GIVEN, last=True)


def fallback_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The walk and sizing flags, for what a node's series do not say: ``command`` receives ``fallback=Given``
    (parsed as run parses them) and ``fallback_flags`` (as typed, for a row's ``ctsim run`` line)."""

    def build(values: dict[str, Any]) -> dict[str, Any]:
        from ctsim.inputs.given import parse_given

        return {"fallback": parse_given(**values), "fallback_flags": values}

    return _adding(command, FALLBACK_FLAGS, build, _FALLBACK, last=True)


def prometheus_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the transport flags to ``command``, which receives ``transport=Transport``."""
    return _adding(command, PROMETHEUS_FLAGS, lambda values: {"transport": transport(values)}, _TRANSPORT, last=True)
