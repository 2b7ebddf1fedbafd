"""A node's live series as a scenario's inputs: what ``run --from-prometheus`` and ``fleet --simulate`` model.

Each input the series give becomes the value a user could have given, and
keeps the series as its origin (``Given.sources``); what they do not give (churn, GC drift,
cores) stays the preset's or the default, and the inputs block says so.
"""

from __future__ import annotations

from dataclasses import replace

from ctsim.core.api_rate_limit import LimiterState
from ctsim.core.defaults import CT_MAPS
from ctsim.core.errors import InputError, shorten
from ctsim.core.origin import Origin
from ctsim.core.profiles import DEFAULT_PROFILE
from ctsim.core.releases import Release
from ctsim.fleet.prometheus import Client, Transport
from ctsim.fleet.risk import Assumptions, NodeRisk, assess
from ctsim.fleet.series import MEAN_PROCESSING_SERIES, Query, read_fleet
from ctsim.inputs.given import AgentState, Given, flag_text
from ctsim.inputs.scenario import Scenario

# Given's field -> (family, map index) of the count it takes
_COUNTS = {
    "entries": ("ipv4", 0),
    "any_entries": ("ipv4", 1),
    "ipv6_entries": ("ipv6", 0),
    "ipv6_any_entries": ("ipv6", 1),
}
# Given's field -> the Scenario.origins entry it sets
_ORIGIN_OF = {
    "entries": "entries",
    "any_entries": "any_entries",
    "ipv6_entries": "ipv6",
    "max_entries": "capacity",
    "any_max_entries": "capacity",
    "rate": "walk_rate",
    "deadline": "deadline",
    "regeneration": "regeneration",
    "create_mean_processing": "limiter",
    "cilium_version": "release",
    "create_limiter": "limiter",
}
LIMITER_STATE_SERIES = (
    'cilium_api_limiter_requests_in_flight{api_call="endpoint-create",value="limit"}, '
    'cilium_api_limiter_rate_limit{api_call="endpoint-create",value="limit"|"burst"}'
)
_FLOATS = ("rate", "deadline", "regeneration", "create_mean_processing")  # Given's float fields among the live
# Given's field -> (the value a series gives, that series)
Live = dict[str, tuple[float | int | Release | LimiterState, Origin]]


def node_inputs(risk: NodeRisk) -> Live:
    """A node's row as a scenario's inputs: field -> (value, the series it came from)."""
    out: Live = {}
    for flag, (family, index) in _COUNTS.items():
        name = CT_MAPS[family][index]
        if name in risk.maps:
            m = risk.maps[name]
            out[flag] = (m.entries, m.entries_source)
    tcp = risk.maps.get(CT_MAPS["ipv4"][0])
    if tcp is not None and tcp.max_entries:
        out["max_entries"] = (tcp.max_entries, tcp.capacity_source)
    any4 = risk.maps.get(CT_MAPS["ipv4"][1])
    if any4 is not None and any4.max_entries and any4.capacity_source.is_series:
        out["any_max_entries"] = (any4.max_entries, any4.capacity_source)  # a series', not a fallback's
    v6 = risk.maps.get(CT_MAPS["ipv6"][0])
    if v6 is not None and v6.max_entries:
        out["ipv6_max_entries"] = (v6.max_entries, v6.capacity_source)
    rate = risk.walk_rate.get("ipv4")
    if rate is not None and rate.source.is_series:
        out["rate"] = (rate.entries_per_second, rate.source)  # whole entries/s since series.py read it
    if risk.deadline_source.is_series:
        out["deadline"] = (float(risk.deadline), risk.deadline_source)
    if risk.regeneration_source.is_series:
        out["regeneration"] = (risk.regeneration, risk.regeneration_source)
    if risk.release is not None:
        out["cilium_version"] = (risk.release, risk.release_source)
    state = [risk.limiter.get(k) for k in ("parallel_requests", "rate_limit", "rate_burst")]
    if all(v is not None for v in state):  # where the agent reports where AutoAdjust left it
        parallel, limit, burst = state
        out["create_limiter"] = (
            LimiterState(round(parallel or 0), float(limit or 0.0), round(burst or 0)),
            Origin.of_series(LIMITER_STATE_SERIES),
        )
    mean = risk.limiter.get("mean_processing_s")
    if mean is not None and mean > 0:  # 0: no create processed since the agent started (a fresh limiter)
        out["create_mean_processing"] = (mean, Origin.of_series(MEAN_PROCESSING_SERIES))
    return out


def uncounted(risk: NodeRisk) -> list[str]:
    """A dual-stack node's IPv6 TCP map that no series counts, though its non-TCP map is counted.

    Cilium's pressure is absent while it is 0 and, for good, where its controller stopped (no batch
    lookups): absent is not empty, so a run needs the count given (``--ipv6-entries``), never 0.
    """
    tcp, any_ = CT_MAPS["ipv6"]
    return [tcp] if any_ in risk.maps and tcp not in risk.maps else []


def shown(field: str, value: float | int | Release | LimiterState) -> str:
    """A live value as the flag a user would type for it (a row's ``ctsim run`` line, plan's ``live``)."""
    if isinstance(value, Release | LimiterState) or field in _FLOATS:
        return flag_text(field, value)
    return flag_text(field, int(value))


def with_live(given: Given, live: Live, node: str) -> Given:
    """``given`` with each live value it does not already hold, and that value's series as its source."""
    used = {k: v for k, v in live.items() if getattr(given, k) is None}
    sources = tuple((k, Origin.of_series(row.series, node)) for k, (_, row) in used.items() if k in _ORIGIN_OF)
    return replace(given, **{k: value for k, (value, _) in used.items()}, sources=(*given.sources, *sources))


def read_node(client: Client, node: str, query: Query, assumptions: Assumptions) -> NodeRisk:
    """One node's row, read with a selector on each node label; one clear line when there is no such node."""
    read = read_fleet(client, query, only=node)
    if node not in read.nodes:
        raise InputError(
            f"no ctwatch or Cilium CT series with {' or '.join(query.labels)} = {node!r} at {client.shown} "
            "(is it the label that names nodes? {param:node_label})",
            "node",
        )
    risk = assess(read.nodes[node], assumptions)
    if not risk.maps:
        raise InputError(f"--node {node}: " + "; ".join(risk.unknown))
    return risk


def check_node(node: str) -> None:
    """A node name that can stand in a label matcher as it is."""
    if not node.strip() or any(c in node for c in '"\\{}\n'):
        raise InputError(f"{shorten(node)!r} is not a node name (no quotes, braces or backslashes)", "node")


def live_inputs(
    wanted: set[str],
    url: str | None,
    node: str | None,
    node_label: str,
    transport: Transport,
    profile: str | None,
    calibration: object = None,
    at: float | None = None,
) -> Live:
    """The ``wanted`` inputs the node's series give at ``at`` (None: now): field -> (value, series)."""
    from ctsim.core.profiles import DEFAULT_PROFILE, get_profile

    if url is None:
        raise InputError("give {param:from_prometheus} URL too", "node")
    if node is None or not node.strip():
        raise InputError("give {param:node} NAME too (the node's {param:node_label} value)", "from_prometheus")
    check_node(node)
    assumptions = Assumptions(profile=get_profile(profile or DEFAULT_PROFILE))
    with Client(url, transport) as client:
        risk = read_node(client, node, Query(node_label=node_label, at=at), assumptions)
    inputs = {k: v for k, v in node_inputs(risk).items() if k in wanted}
    if calibration is not None:  # the user chose the calibrated rate over any measured one
        inputs.pop("rate", None)
    return inputs


def from_prometheus(
    given: Given, url: str | None, node: str | None, node_label: str, transport: Transport, at: float | None = None
) -> tuple[Scenario, dict[str, tuple[str, str]]]:
    """A live node's series under what the user gave: every input they give, unless the user gave it.

    ``at``: the node as its series were at that time (``ctsim backtest``'s start); None: now.

    Returns the scenario and each live input: field -> (the flag's value a user would type, its series).
    """
    from ctsim.inputs.scenario import resolve

    wanted = _COUNTS.keys() | {"max_entries", "any_max_entries", "ipv6_max_entries", "rate", "deadline", "regeneration"}
    if given.agent_state is AgentState.WARM:  # a fresh agent's limiter starts at its defaults, whatever it was
        wanted |= {"create_mean_processing", "create_limiter"}
    if given.profile == DEFAULT_PROFILE:  # a --profile given names the release line: the node's is not taken
        wanted |= {"cilium_version"}
    wanted = {k for k in wanted if getattr(given, k) is None}
    used = live_inputs(wanted, url, node, node_label, transport, given.profile, given.calibration, at)
    if "ipv6_any_entries" in used and "ipv6_entries" not in used and given.ipv6_entries is None:
        tcp, any_ = CT_MAPS["ipv6"]
        raise InputError(
            f"{node}'s {any_} is counted but no series counts {tcp} (Cilium's pressure is "
            "absent while 0, and for good where its controller stopped): give {param:ipv6_entries}",
            "from_prometheus",
        )
    scenario = resolve(with_live(given, used, node or ""))
    taken = ", ".join(sorted({_ORIGIN_OF.get(f, f) for f in used})) or "nothing"  # both capacities: one origin
    note = (
        f"from Prometheus: {node}'s series gave {taken}; churn, GC drift and cores are still the preset's "
        "(the inputs block says which)"
    )
    if "create_mean_processing" in used and "create_limiter" not in used:
        note += (
            "; its limiter's parallelism, rate and burst are not all exported: endpoint-create starts where "
            "AutoAdjust puts it from the mean create"
        )
    return replace(scenario, notes=(*scenario.notes, note)), {
        k: (shown(k, v), series) for k, (v, series) in used.items()
    }
