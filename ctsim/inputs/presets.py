"""The two nodes of the incident write-up, as starting points for a scenario.

Source: the comparison table of the incident write-up (docs/model.md, "The incident").
A preset supplies only what the user did not give: flags override every
field, and a map the user sized (``--node-memory``, ``--map-ratio``,
``--max-entries``) holds the preset's *share* of its entries, not their count.
"""

from __future__ import annotations

from typing import NamedTuple

from ctsim.core.errors import pick
from ctsim.inputs.churn import ChurnSchedule, parse_churn


class Preset(NamedTuple):
    name: str
    description: str
    cores: int
    node_memory: int
    map_ratio: float | None  # bpf-map-dynamic-size-ratio; None: static map sizes
    ct_tcp_max: int | None  # static bpf-ct-global-tcp-max, when map_ratio is None
    entries: int  # the TCP map's entries on the preset's own map; on another map, the same share of it
    expired_fraction: float
    churn: str
    any_entries: int  # the non-TCP map's
    any_churn: str
    any_assumption: str  # why, in the inputs block

    @property
    def churn_schedule(self) -> ChurnSchedule:
        return parse_churn(self.churn)

    @property
    def any_churn_schedule(self) -> ChurnSchedule:
        return parse_churn(self.any_churn, "--any-churn")


PRESETS: dict[str, Preset] = {
    "analytics": Preset(
        name="analytics",
        description="the incident's analytics node: 128 cores, 2 TiB, ratio 0.005, Trino churn",
        cores=128,
        node_memory=2 * 2**40,
        map_ratio=0.005,
        ct_tcp_max=None,
        # Drifted to 12 h with 50,000 connections/min, the LRU map is full
        # (6 h of churn is 18 M entries): the write-up's ~80 s walks. Its
        # `cilium bpf ct list global` showed ~7 M at one moment (33 s walks).
        # After the fix walks took "fractions of a second": ~1 % were live.
        entries=16_777_216,
        expired_fraction=0.99,
        churn="50000/min",
        # The write-up's counts are `cilium bpf ct list global`, every global map at once; the
        # model takes them as the TCP map's, so the non-TCP map starts empty and gets no churn.
        any_entries=0,
        any_churn="0/s",
        any_assumption="empty, since the write-up counted every global map together (taken as the TCP map's)",
    ),
    "standard": Preset(
        name="standard",
        description="a standard node: 16 cores, 64 GiB, ~262K CT limit, tens of requests/s",
        cores=16,
        node_memory=64 * 2**30,
        map_ratio=None,
        ct_tcp_max=262_144,
        entries=250_000,
        expired_fraction=0.9,
        churn="30/s",
        any_entries=0,
        any_assumption="empty, since a standard node's UDP and DNS flows are few beside its TCP table",
        any_churn="0/s",
    ),
}
DEFAULT_PRESET = "analytics"


def get_preset(name: str) -> Preset:
    return pick(PRESETS, name, "--preset", "preset")
