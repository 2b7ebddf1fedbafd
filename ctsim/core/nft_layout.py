"""kube-proxy's nftables layouts and what each puts in the kernel, counted without writing it.

Three layouts of one ``kube-proxy`` table (seed 000, kubernetes #139513):

- ``today``: every Service's chain picks an endpoint with its own anonymous
  ``numgen random mod N vmap``, each entry a ``goto`` to an endpoint chain
  (``writeServiceToEndpointRules`` in ``pkg/proxy/nftables/proxier.go``).
  One anonymous map per Service: naming and binding each one scans every set
  in the table, which is what grows faster than linearly.
- ``stopgap`` (PR #140723): a Service with one endpoint DNATs in its own
  chain, with no map; the rest are as today.
- ``dispatch`` (PR #140362): fixed ``dispatch-N`` chains, one per endpoint
  count in use, and one shared ``@endpoints`` map keyed by Service and bucket.

``Shape`` is what a layout writes for a mix of Services, counted in closed
form: the projection needs the counts of a cluster far larger than any that
is programmed, and ``ctsim.kernel.nft_ruleset`` writes the same objects
(its tests hold the two to each other).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from ctsim.core.errors import InputError


class Layout(enum.Enum):
    TODAY = "today"
    STOPGAP = "stopgap"
    DISPATCH = "dispatch"

    @property
    def words(self) -> str:
        return LAYOUT_WORDS[self]


LAYOUT_WORDS = {
    Layout.TODAY: "today's: a chain and an anonymous numgen vmap per Service",
    Layout.STOPGAP: "stop-gap (PR #140723): one-endpoint Services DNAT directly",
    Layout.DISPATCH: "dispatch-N chains and one @endpoints map (PR #140362)",
}

# The table's own objects, whatever the Services (setupNFTables): 8 base chains, the jump targets
# and helpers (services, masquerading, mark-for-masquerade, cluster-ips-check, firewall-check, the two
# endpoints checks, reject-chain), the cluster-ips set and 5 named maps (--nodeport-addresses unset).
BASE_CHAINS = 8 + 8
BASE_SETS = 1 + 5
BASE_RULES = 11 + 11  # the jumps from base chains, and the rules of the helper chains


@dataclass(frozen=True)
class EndpointMix:
    """How many Services have how many endpoints: ``((endpoints, share), ...)``, shares summing to 1."""

    parts: tuple[tuple[int, float], ...]

    @classmethod
    def parse(cls, text: str, param: str = "endpoints") -> EndpointMix:
        """``3`` (every Service 3 endpoints) or ``1:70%,3:20%,10:10%``."""
        parts: list[tuple[int, float]] = []
        for item in (p.strip() for p in text.split(",")):
            count_text, _, share_text = item.partition(":")
            try:
                count = int(count_text)
                share = 1.0 if not share_text else float(share_text.rstrip("%")) / (100 if "%" in share_text else 1)
            except ValueError:
                raise InputError(
                    f"cannot read {item!r} (an endpoint count, or COUNT:SHARE%, e.g. '3' or '1:70%,3:30%')", param
                ) from None
            if not 1 <= count <= 10_000:
                raise InputError(f"{count} endpoints per Service: give 1 to 10000", param)
            if not (math.isfinite(share) and 0 < share <= 1):
                raise InputError(f"share {share_text!r} of {item!r}: give more than 0% and up to 100%", param)
            parts.append((count, share))
        total = sum(s for _, s in parts)
        if abs(total - 1.0) > 1e-6:
            raise InputError(f"the shares of {text!r} sum to {total:.0%}, not 100%", param)
        counts = [c for c, _ in parts]
        if len(set(counts)) != len(counts):
            raise InputError(f"{text!r} names an endpoint count twice", param)
        return cls(tuple(parts))

    @classmethod
    def every(cls, endpoints: int) -> EndpointMix:
        return cls(((endpoints, 1.0),))

    @property
    def text(self) -> str:
        if len(self.parts) == 1:
            return str(self.parts[0][0])
        return ",".join(f"{c}:{s * 100:.4g}%" for c, s in self.parts)

    def split(self, services: int) -> list[tuple[int, int]]:
        """(endpoints, Services) for ``services`` Services, whole Services summing to ``services``."""
        out: list[tuple[int, int]] = []
        given = 0
        for i, (count, share) in enumerate(self.parts):
            n = services - given if i == len(self.parts) - 1 else round(services * share)
            out.append((count, n))
            given += n
        return out


@dataclass(frozen=True)
class Shape:
    """What a layout writes into the kernel for some Services: the figures the cost law takes."""

    chains: int
    rules: int
    elements: int  # elements of named sets and maps (cluster-ips, service-ips, @endpoints)
    anonymous_maps: int  # the per-Service numgen vmaps
    anonymous_elements: int  # their entries, one per endpoint
    sets: int  # named sets and maps

    @property
    def objects(self) -> int:
        """Every object the full load adds: what its per-object cost multiplies."""
        return self.chains + self.rules + self.elements + self.anonymous_maps + self.anonymous_elements + self.sets


def shape(layout: Layout, services: int, mix: EndpointMix) -> Shape:
    """What ``layout`` writes for ``services`` ClusterIP Services (Cluster traffic policy) with ``mix``."""
    chains, rules, elements, maps, map_elements, sets = BASE_CHAINS, BASE_RULES, 0, 0, 0, BASE_SETS
    dispatch_counts: set[int] = set()
    for endpoints, n in mix.split(services):
        elements += 2 * n  # cluster-ips and service-ips, one each per Service
        if layout is Layout.DISPATCH:
            dispatch_counts.add(endpoints)
            elements += n * endpoints  # @endpoints: (ClusterIP . proto . port . bucket) -> endpoint
        elif layout is Layout.STOPGAP and endpoints == 1:
            chains += n  # the Service's chain: masquerade, hairpin masquerade, dnat
            rules += 3 * n
        else:
            chains += n * (1 + endpoints)  # the Service's chain and one chain per endpoint
            rules += n * (2 + 2 * endpoints)  # masquerade + numgen vmap; each endpoint: hairpin + dnat
            maps += n
            map_elements += n * endpoints
    if layout is Layout.DISPATCH:
        chains += len(dispatch_counts)
        rules += len(dispatch_counts)
        sets += 1
    return Shape(chains, rules, elements, maps, map_elements, sets)


def one_service(layout: Layout, endpoints: int) -> Shape:
    """What a partial sync writes for one changed Service: its chains, rules and elements."""
    if layout is Layout.DISPATCH:  # its dispatch-N chain and the @endpoints map exist already
        return Shape(0, 0, 2 + endpoints, 0, 0, 0)
    full = shape(layout, 1, EndpointMix.every(endpoints))
    return Shape(
        full.chains - BASE_CHAINS,
        full.rules - BASE_RULES,
        full.elements,
        full.anonymous_maps,
        full.anonymous_elements,
        0,
    )


def infer(chains: int, anonymous_maps: int, endpoints_map: bool) -> tuple[Layout, int, EndpointMix] | None:
    """The layout, Services and endpoint mix a table's cheap counts imply (ctwatch counts no rules or elements).

    With anonymous maps, today's layout: a map per Service, and the chains beyond
    the base are each Service's and its endpoints' (a stop-gap table's
    one-endpoint chains read as more endpoints). With none, the stop-gap's
    one-endpoint Services, a chain each. The redesign's Services are elements
    of one map, which the counts do not see: None.
    """
    per_service = chains - BASE_CHAINS
    if endpoints_map or per_service <= 0:
        return None
    if anonymous_maps == 0:
        return Layout.STOPGAP, per_service, EndpointMix.every(1)
    average = max(per_service / anonymous_maps - 1, 1.0)
    low = int(average)
    high_share = average - low
    if high_share < 1e-9:
        return Layout.TODAY, anonymous_maps, EndpointMix.every(low)
    return Layout.TODAY, anonymous_maps, EndpointMix(((low, 1 - high_share), (low + 1, high_share)))
