"""A node's live series as a scenario's inputs: what ``run --from-prometheus`` and ``fleet --simulate`` model.

Each input the series give becomes the flag a user would have typed, and
keeps the series as its origin; what they do not give (churn, GC drift,
the non-TCP map's capacity, cores) stays the preset's or the default, and
the inputs block says so.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ctsim.defaults import CT_MAPS
from ctsim.errors import InputError
from ctsim.fleet.prometheus import Client, Transport
from ctsim.fleet.risk import Assumptions, NodeRisk, assess
from ctsim.fleet.series import Query, read_fleet
from ctsim.scenario import Scenario

# resolve()'s flag -> (family, map index) of the count it takes
_COUNTS = {
    "entries": ("ipv4", 0),
    "any_entries": ("ipv4", 1),
    "ipv6_entries": ("ipv6", 0),
    "ipv6_any_entries": ("ipv6", 1),
}
# resolve()'s flag -> the Scenario.origins entry it sets
_ORIGIN_OF = {
    "entries": "entries",
    "any_entries": "any_entries",
    "ipv6_entries": "ipv6",
    "max_entries": "capacity",
    "rate": "walk_rate",
    "deadline": "deadline",
}


def node_inputs(risk: NodeRisk) -> dict[str, tuple[str, str]]:
    """resolve()'s flags from a node's row: flag -> (value as typed, the series it came from)."""
    out: dict[str, tuple[str, str]] = {}
    for flag, (family, index) in _COUNTS.items():
        name = CT_MAPS[family][index]
        if name in risk.maps:
            m = risk.maps[name]
            out[flag] = (str(m["entries"]), m["entries_source"])
    if "ipv6_any_entries" in out and "ipv6_entries" not in out:
        out["ipv6_entries"] = ("0", "no cilium_ct6_global series: taken as empty")
    tcp = risk.maps.get(CT_MAPS["ipv4"][0])
    if tcp is not None and tcp["max_entries"]:
        out["max_entries"] = (str(tcp["max_entries"]), tcp["capacity_source"])
    v6 = risk.maps.get(CT_MAPS["ipv6"][0])
    if v6 is not None and v6["max_entries"]:
        out["ipv6_max_entries"] = (str(v6["max_entries"]), v6["capacity_source"])
    rate = risk.walk_rate.get("ipv4")
    if rate is not None and rate["source"].startswith("ctwatch_"):
        out["rate"] = (str(round(rate["entries_per_second"])), rate["source"])
    if risk.deadline_source == "ctwatch_deadline_seconds":
        out["deadline"] = (f"{risk.deadline:g}s", risk.deadline_source)
    return out


def apply(flags: dict[str, Any], inputs: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Sets each live input the user did not give; returns those it set (what the user gave wins)."""
    used = {}
    for flag, (value, series) in inputs.items():
        if flags.get(flag) is None:
            flags[flag] = value
            used[flag] = (value, series)
    return used


def relabel(scenario: Scenario, used: dict[str, tuple[str, str]], node: str) -> Scenario:
    """The scenario with each live input's origin naming its series, not "given"."""
    origins = dict(scenario.origins)
    for flag, (_, series) in used.items():
        key = _ORIGIN_OF.get(flag)
        if key is None or key not in origins:
            continue
        was = origins[key]
        where = f"live: {series} of {node}"
        if key == "capacity":
            origins[key] = was.replace("given: TCP --max-entries", f"{where} (TCP)", 1)
        elif was.startswith("given"):
            origins[key] = where + was[len("given") :]
    return dataclasses.replace(scenario, origins=tuple(origins.items()))


def read_node(client: Client, node: str, query: Query, assumptions: Assumptions) -> NodeRisk:
    """One node's row, read with a selector on each node label; one clear line when there is no such node."""
    read = read_fleet(client, query, only=node)
    if node not in read.nodes:
        raise InputError(
            f"--node: no ctwatch or Cilium CT series with {' or '.join(query.labels)} = {node!r} at {client.url} "
            f"(is it the label that names nodes? --node-label)"
        )
    risk = assess(read.nodes[node], assumptions)
    if not risk.maps:
        raise InputError(f"--node {node}: " + "; ".join(risk.unknown))
    return risk


def live_inputs(
    flags: dict[str, Any],
    url: str | None,
    node: str | None,
    node_label: str,
    transport: Transport,
    profile: str | None,
    calibration: str | None = None,
) -> dict[str, tuple[str, str]]:
    """Fills ``flags`` (only the keys it has) from the node's series where the user gave none; returns what it set."""
    from ctsim.profiles import get_profile

    if url is None:
        raise InputError("--node: give --from-prometheus URL too")
    if node is None or not node.strip():
        raise InputError("--from-prometheus: give --node NAME too (the node's --node-label value)")
    assumptions = Assumptions(profile=get_profile(profile or "cilium-1.16"))
    with Client(url, transport) as client:
        risk = read_node(client, node, Query(node_label=node_label), assumptions)
    inputs = {k: v for k, v in node_inputs(risk).items() if k in flags}
    if calibration is not None:  # the user chose the calibrated rate over any measured one
        inputs.pop("rate", None)
    return apply(flags, inputs)


def from_prometheus(
    flags: dict[str, Any], url: str | None, node: str | None, node_label: str, transport: Transport
) -> Scenario:
    """resolve() over a live node's series: every input they give, unless the user gave it."""
    from ctsim.scenario import resolve

    used = live_inputs(flags, url, node, node_label, transport, flags.get("profile"), flags.get("calibration"))
    scenario = relabel(resolve(**flags), used, node or "")
    taken = ", ".join(sorted(_ORIGIN_OF.get(f, f) for f in used)) or "nothing"
    note = (
        f"from Prometheus: {node}'s series gave {taken}; churn, GC drift and cores are still the preset's "
        "(the inputs block says which)"
    )
    return dataclasses.replace(scenario, notes=(*scenario.notes, note))
