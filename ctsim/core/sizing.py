"""CT map sizes as the agent computes them (``calculateDynamicBPFMapSizes``, v1.16.5).

``entries = default * int(total_memory * ratio) // total_map_memory_default``,
clamped to [min, LimitTableMax]. The denominator is what all default-sized
maps would take, with the element sizes ``initDaemonConfig`` sets: the IPv6
ones, the largest (CT 38+56 B, NAT 94 B, neighbour 24 B, sock rev-NAT 32+20 B).
The calculation examples in Cilium's code comment (16 GB → 1,060,485) come
from older element sizes and no longer hold.
"""

from __future__ import annotations

from typing import NamedTuple

from ctsim.core.defaults import (
    CT_KEY_SIZES,
    CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT,
    CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT,
    CT_VALUE_SIZE,
    LIMIT_TABLE_AUTO_GLOBAL_ANY_MIN,
    LIMIT_TABLE_AUTO_GLOBAL_TCP_MIN,
    LIMIT_TABLE_MAX,
)

NAT_MAP_ENTRIES_GLOBAL_DEFAULT = (CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT + CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT) * 2 // 3
SOCK_REV_NAT_MAP_ENTRIES_DEFAULT = CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT

# Element sizes (key + value), as initDaemonConfig passes them to SetMapElementSizes.
CT_ELEMENT_BYTES_V4 = CT_KEY_SIZES["ipv4"] + CT_VALUE_SIZE  # tuple.TupleKey4Global + CtEntry
CT_ELEMENT_BYTES_V6 = CT_KEY_SIZES["ipv6"] + CT_VALUE_SIZE  # tuple.TupleKey6Global + CtEntry
NAT_ELEMENT_BYTES = 94  # SizeofNatKey6 + SizeofNatEntry6
NEIGH_ELEMENT_BYTES = 24  # SizeofNeighKey6 + SizeOfNeighValue
SOCK_REV_NAT_ELEMENT_BYTES = 32 + 20  # SizeofSockRevNat6Key + SizeofSockRevNat6Value

TOTAL_MAP_MEMORY_DEFAULT = (
    CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT * CT_ELEMENT_BYTES_V6
    + CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT * CT_ELEMENT_BYTES_V6
    + NAT_MAP_ENTRIES_GLOBAL_DEFAULT * NAT_ELEMENT_BYTES
    + NAT_MAP_ENTRIES_GLOBAL_DEFAULT * NEIGH_ELEMENT_BYTES  # the neighbour map is sized like NAT
    + SOCK_REV_NAT_MAP_ENTRIES_DEFAULT * SOCK_REV_NAT_ELEMENT_BYTES
)  # 149,422,080 B


class CTMapSizes(NamedTuple):
    """``bpf-ct-global-tcp-max`` and ``bpf-ct-global-any-max``: each family's maps have these sizes."""

    tcp: int
    any: int
    overflowed: bool = False  # the agent's int64 product wrapped (memory x ratio >= 16 TiB)

    def memory_bytes(self, ipv6: bool = False) -> int:
        """Keys and values of one family's two maps (hash-table overhead not counted)."""
        return (self.tcp + self.any) * (CT_ELEMENT_BYTES_V6 if ipv6 else CT_ELEMENT_BYTES_V4)


def _int64(n: int) -> int:
    """Go's int64 arithmetic: the product wraps around."""
    return (n + 2**63) % 2**64 - 2**63


def _go_div(a: int, b: int) -> int:
    """Go's integer division truncates towards zero (Python's floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def dynamic_size(default: int, minimum: int, total_memory: int, ratio: float) -> int:
    """``getEntries``: ``(default * memoryAvailableForMaps) / totalMapMemoryDefault`` in int64, clamped.

    The product wraps once memory x ratio reaches 2**63 / default bytes (16 TiB
    for the TCP map's 524,288): the agent then sizes from the wrapped value,
    and so does this (``ct_map_sizes`` flags it).
    """
    if not 0.0 < ratio <= 1.0:
        return default
    available = int(total_memory * ratio)
    entries = _go_div(_int64(default * available), TOTAL_MAP_MEMORY_DEFAULT)
    return max(minimum, min(entries, LIMIT_TABLE_MAX))


def ct_map_sizes(total_memory: int, ratio: float) -> CTMapSizes:
    available = int(total_memory * ratio) if 0.0 < ratio <= 1.0 else 0
    return CTMapSizes(
        tcp=dynamic_size(CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT, LIMIT_TABLE_AUTO_GLOBAL_TCP_MIN, total_memory, ratio),
        any=dynamic_size(CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT, LIMIT_TABLE_AUTO_GLOBAL_ANY_MIN, total_memory, ratio),
        overflowed=CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT * available >= 2**63,
    )
