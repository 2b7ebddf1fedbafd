"""CT map sizes as the agent computes them (``calculateDynamicBPFMapSizes``).

Source: ``pkg/option/config.go`` / ``pkg/maps`` sizing in Cilium; spec §2.
"""

from __future__ import annotations

from dataclasses import dataclass

CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT = 2 << 18  # 524,288
CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT = 2 << 17  # 262,144
LIMIT_TABLE_AUTO_GLOBAL_TCP_MIN = 1 << 17
LIMIT_TABLE_AUTO_GLOBAL_ANY_MIN = 1 << 16
LIMIT_TABLE_MAX = 1 << 24  # 16,777,216
DEFAULT_DYNAMIC_SIZE_RATIO = 0.0025

# The bytes all default-sized maps take together. Cilium computes it from the
# element sizes; we take the one value consistent with every row of the code's
# own calculation examples (512MB→33140, 1GB→66280, 4GB→265121,
# 16GB→1060485 TCP entries at ratio 0.0025).
TOTAL_MAP_MEMORY_DEFAULT = 81 * 262_144

# One CT element: 14 B IPv4 key + 56 B CtEntry value (spec §2); hash-table
# overhead is not counted.
CT_ELEMENT_BYTES_V4 = 14 + 56


@dataclass(frozen=True)
class CTMapSizes:
    tcp: int
    any: int

    @property
    def memory_bytes(self) -> int:
        return (self.tcp + self.any) * CT_ELEMENT_BYTES_V4


def dynamic_size(default: int, minimum: int, total_memory: int, ratio: float) -> int:
    """``getDynamicSizeCalculator``: the default scaled by memory*ratio, clamped."""
    if not 0.0 < ratio <= 1.0:
        return default
    available = int(total_memory * ratio)
    entries = default * available // TOTAL_MAP_MEMORY_DEFAULT
    return max(minimum, min(entries, LIMIT_TABLE_MAX))


def ct_map_sizes(total_memory: int, ratio: float) -> CTMapSizes:
    return CTMapSizes(
        tcp=dynamic_size(CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT, LIMIT_TABLE_AUTO_GLOBAL_TCP_MIN, total_memory, ratio),
        any=dynamic_size(CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT, LIMIT_TABLE_AUTO_GLOBAL_ANY_MIN, total_memory, ratio),
    )
