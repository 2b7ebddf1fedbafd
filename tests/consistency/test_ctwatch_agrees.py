"""ctwatch and ctsim on the same node's facts: the same safe burst, the same table limit, the same burst time.

ctwatch's Assessor projects what its sources read; ``ctsim run`` projects what its flags say. Given the same
counts, capacities, walk rate, burst and deadline, ctwatch_safe_burst_pods is run's advice.safe_burst.
"""

from __future__ import annotations

import pytest
from ctwatch.assess import Assessor, Thresholds
from ctwatch.readings import FAMILY_OF_MAP, MapReading, SourceResult

from ctsim.core.defaults import CT_MAPS
from ctsim.core.projection import burst_seconds
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import simulate

# (TCP, non-TCP) entries and capacity per family, the walk rate, the burst and the deadline.
NODES = {
    "the incident": ({"ipv4": ((16_000_000, 0), (16_777_216, 262_144))}, 213_000, 50, 90),
    "a coin-flip table": ({"ipv4": ((4_194_304, 0), (8_388_608, 262_144))}, 213_000, 10, 90),
    "non-TCP heavy": ({"ipv4": ((2_000_000, 1_500_000), (4_194_304, 2_097_152))}, 150_000, 20, 90),
    "dual stack": ({"ipv4": ((8_000_000, 10_000), (8_388_608, 262_144)),
                    "ipv6": ((4_000_000, 0), (8_388_608, 262_144))}, 213_000, 10, 90),
    "a short deadline": ({"ipv4": ((1_000_000, 0), (2_097_152, 262_144))}, 300_000, 30, 45),
    "empty": ({"ipv4": ((0, 0), (524_288, 262_144))}, 213_000, 10, 90),
}  # fmt: skip


def _flags(maps: dict, rate: int, pods: int, deadline: int) -> dict[str, str]:
    (tcp, any_), (cap, _) = maps["ipv4"]
    flags = {"entries": str(tcp), "any_entries": str(any_), "max_entries": str(cap), "rate": str(rate),
             "pods": str(pods), "deadline": f"{deadline}s", "horizon": "1s", "expired_fraction": "0"}  # fmt: skip
    if "ipv6" in maps:
        (tcp6, any6), (cap6, _) = maps["ipv6"]
        flags |= {"ipv6_entries": str(tcp6), "ipv6_any_entries": str(any6), "ipv6_max_entries": str(cap6)}
    return flags


@pytest.mark.parametrize("node", NODES)
def test_ctwatch_projects_what_run_advises(node: str) -> None:
    maps, rate, pods, deadline = NODES[node]
    bpf = SourceResult("bpf", up=True, duration_s=0.01)
    for family, ((tcp, any_), (cap, any_cap)) in maps.items():
        names = CT_MAPS[family]
        bpf.readings += [MapReading("bpf", FAMILY_OF_MAP[names[0]], names[0], tcp, cap),
                         MapReading("bpf", FAMILY_OF_MAP[names[1]], names[1], any_, any_cap)]  # fmt: skip
    assessor = Assessor(Thresholds(burst=pods, deadline_s=deadline), float(rate), "--rate", pinned=True)
    families = assessor.assess(0.0, {"bpf": bpf})
    scenario = resolve_flags(**_flags(maps, rate, pods, deadline))
    advice = simulate(scenario).to_dict()["advice"]
    for f in families:
        fits = None if f.safe_burst == float("inf") else int(f.safe_burst)
        assert fits == advice["safe_burst"], (node, f.family, fits, advice)
        expected = burst_seconds(scenario.start_walks(), pods) + scenario.regeneration_seconds
        assert f.burst_seconds == pytest.approx(expected, rel=1e-12), (node, f.family)
        assert f.deadline_ratio == pytest.approx(expected / deadline, rel=1e-12)
