"""What a value may be, by what it stands for: the bounds a flag meets, and a live series meets the same.

A user's ``--deadline 2d`` is refused; a node whose series says the same
deadline is a broken exporter, not a node to rank. One table serves both:
``ctsim.inputs.given``'s parsers take their ceilings from here, and the
fleet's reader and ctwatch's Cilium source check each series with ``check``.
"""

from __future__ import annotations

from ctsim.core.defaults import LIMIT_TABLE_MAX, MAX_GC_INTERVAL

# Ceilings: what a run may ask for (docs/model.md, "Limits"). Beyond them a
# run would take minutes to hours or the numbers stop meaning anything.
MAX_PODS = 100_000  # a 1 h collapse costs ~1.2 ms of CPU per pod: ~2 min and ~570 MB at the ceiling
MAX_HORIZON = 400 * 86400.0
MAX_CORES = 4096
MAX_NODE_MEMORY = 2**50  # 1 PiB
MAX_WALK_RATE = 10**10
MIN_GC_INTERVAL = 1.0  # seconds; a GC loop faster than that would only spin
MAX_DEADLINE = 86400.0
MAX_REGENERATION = 3600.0
MAX_SEED = 2**63 - 1

# kind -> (lowest, highest, what the bounds are, as a refusal says it)
BOUNDS: dict[str, tuple[float, float, str]] = {
    "entries": (0.0, LIMIT_TABLE_MAX, f"a CT map holds at most {LIMIT_TABLE_MAX:,} (LimitTableMax)"),
    "max_entries": (1.0, LIMIT_TABLE_MAX, f"a CT map's capacity is at most {LIMIT_TABLE_MAX:,} (LimitTableMax)"),
    "pressure": (0.0, 1.0, "a map's count over its capacity"),
    "rate": (1.0, MAX_WALK_RATE, f"--rate's bounds, 1 to {MAX_WALK_RATE:.0e} entries/s"),
    "deadline": (1.0, MAX_DEADLINE, f"--deadline's bounds, 1 s to {MAX_DEADLINE:g} s"),
    "burst": (1.0, MAX_PODS, f"--pods' bounds, 1 to {MAX_PODS:,}"),
    "gc_interval": (1.0, MAX_GC_INTERVAL, "a GC interval of 1 s to 400 d"),
    "regeneration": (0.0, MAX_REGENERATION, f"--regeneration-time's bounds, 0 to {MAX_REGENERATION:g} s"),
    "limiter": (0.0, 1e9, "a limiter's duration, rate, count or factor"),
}


def check(kind: str, value: float) -> str | None:
    """None where ``value`` is a plausible ``kind``; else why not (a NaN is never within bounds)."""
    low, high, why = BOUNDS[kind]
    return None if low <= value <= high else why
