"""Cilium's CT map types: an address family x TCP or any other protocol, the global maps.

Cilium's ``mapType`` (``pkg/maps/ctmap/types.go``: ``mapTypeIPv4TCPGlobal``,
``mapTypeIPv4AnyGlobal``, ``mapTypeIPv6TCPGlobal``, ``mapTypeIPv6AnyGlobal``,
with ``isIPv6()`` and ``isTCP()``). Within a family a scrub and a GC pass walk
the TCP map, then the other (``doGC4``/``doGC6``); IPv4 before IPv6. A value
that belongs to one map is keyed by its ``MapType``, never by a prefix on a
name (``ipv6_any_...``).
"""

from __future__ import annotations

import enum


class MapType(enum.Enum):
    IPV4_TCP = ("ipv4", True, "cilium_ct4_global")
    IPV4_ANY = ("ipv4", False, "cilium_ct_any4_global")
    IPV6_TCP = ("ipv6", True, "cilium_ct6_global")
    IPV6_ANY = ("ipv6", False, "cilium_ct_any6_global")

    def __init__(self, family: str, tcp: bool, pinned: str) -> None:
        self.family = family  # "ipv4" | "ipv6": whose lock and whose GC pass
        self.tcp = tcp  # the TCP map (else UDP, ICMP and the rest: "any")
        self.pinned = pinned  # its name under <bpffs>/tc/globals/

    @property
    def ipv6(self) -> bool:
        return self.family == "ipv6"

    @classmethod
    def of(cls, family: str, tcp: bool) -> MapType:
        return next(t for t in cls if t.family == family and t.tcp == tcp)


FAMILIES = ("ipv4", "ipv6")  # in walk order
