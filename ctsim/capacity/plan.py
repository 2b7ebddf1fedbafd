"""``ctsim plan``: capacity answers from node facts, every number simulated.

From memory, map ratio, cores, release and churn: the CT map sizes and their
memory; how big the table gets under the adaptive GC and under a fixed
interval, and how long the drift to 12 h takes; the walk, the largest safe
burst and the first conditions that collapse the node; then the mitigations,
each run through the model before it is recommended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctsim.defaults import CONNTRACK_GC_MAX_LRU_INTERVAL
from ctsim.projection import FamilyWalk, max_entries_for_burst, safe_burst, scrub_seconds
from ctsim.quantity import parse_count, parse_duration
from ctsim.scenario import MAX_HORIZON, Scenario, resolve
from ctsim.sim.model import Model, simulate
from ctsim.sim.result import Result, Verdict
from ctsim.sizing import CTMapSizes

DRIFT_HORIZON = "4d"
TRACE_EVERY = 300.0
MAX_BURST_SEARCHED = 400


@dataclass(frozen=True)
class Facts:
    """What the user knows about the node, as typed (validated by ``resolve``)."""

    node_memory: str = "64Gi"
    map_ratio: str = "0.0025"
    max_entries: str | None = None
    cores: str = "16"
    profile: str = "cilium-1.16"
    churn: str = "30/s"
    any_churn: str | None = None
    ipv6_churn: str | None = None  # either IPv6 churn makes the node dual-stack
    ipv6_any_churn: str | None = None
    conn_duration: str | None = None
    burst: str = "50"
    deadline: str | None = None
    rate: str | None = None
    calibration: str | None = None
    drift_horizon: str = DRIFT_HORIZON
    seed: int = 1
    replications: int = 1  # seeds per candidate burst in the collapse search

    def flags(self, **override: Any) -> dict[str, Any]:
        flags: dict[str, Any] = {
            "preset": "analytics",
            "node_memory": self.node_memory,
            "map_ratio": self.map_ratio,
            "max_entries": self.max_entries,
            "cores": self.cores,
            "profile": self.profile,
            "churn": self.churn,
            "any_churn": self.any_churn,
            "ipv6_churn": self.ipv6_churn,
            "ipv6_any_churn": self.ipv6_any_churn,
            "conn_duration": self.conn_duration,
            "pods": self.burst,
            "deadline": self.deadline,
            "rate": self.rate,
            "calibration": self.calibration,
            "seed": self.seed,
        }
        if self.dual_stack:
            flags["ipv6_entries"] = "0"
        flags.update(override)
        return flags

    @property
    def dual_stack(self) -> bool:
        return self.ipv6_churn is not None or self.ipv6_any_churn is not None


@dataclass(frozen=True)
class SteadyState:
    gc: str
    peak_entries: int  # every map
    peak_maps: tuple[int, ...]  # each map's share of it: IPv4 TCP, non-TCP, then IPv6's when dual-stack
    peak_expired: int
    drift_to_cap_s: float | None
    final_interval_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "gc": self.gc,
            "peak_entries": self.peak_entries,
            "peak_maps": list(self.peak_maps),
            "peak_expired": self.peak_expired,
            "drift_to_cap_s": self.drift_to_cap_s,
            "final_interval_s": self.final_interval_s,
        }


def steady_state(facts: Facts, gc_interval: str, **override: Any) -> SteadyState:
    """A fresh agent on an empty table under the churn, for ``drift_horizon``: how big it gets."""
    flags = facts.flags(
        entries="0",
        pods="1",
        gc_interval=gc_interval,
        gc_initial_interval=None if gc_interval != "auto" else "5m",
        horizon=facts.drift_horizon,
        **override,
    )
    model = Model(resolve(**flags), trace_every=TRACE_EVERY)
    result = model.run()
    at = max(range(len(model.trace)), key=lambda i: model.trace[i][1])
    _, present, expired = model.trace[at]
    capped = next((p.start for p in result.gc.passes if p.interval_after >= CONNTRACK_GC_MAX_LRU_INTERVAL), None)
    return SteadyState(
        gc=gc_interval,
        peak_entries=present,
        peak_maps=model.trace_maps[at],
        peak_expired=expired,
        drift_to_cap_s=capped,
        final_interval_s=result.gc.intervals[-1] if result.gc.intervals else None,
    )


def burst_at(facts: Facts, state: SteadyState, burst: int | None = None, **override: Any) -> Result:
    """The burst arriving when the table is at its peak."""
    expired = state.peak_expired / state.peak_entries if state.peak_entries else 0.0
    maps = dict(zip(("entries", "any_entries", "ipv6_entries", "ipv6_any_entries"), state.peak_maps, strict=False))
    flags = facts.flags(**{k: str(v) for k, v in maps.items()}, expired_fraction=f"{expired:.6f}", **override)
    if burst is not None:
        flags["pods"] = str(burst)
    if state.gc != "auto":
        flags["gc_interval"] = state.gc
    return simulate(resolve(**flags))


def outcome(r: Result) -> dict[str, Any]:
    return {
        "verdict": r.verdict,
        "walk_seconds": r.walk_seconds,
        "table_entries": r.entries_at_start,
        "pods_ready": r.pods_ready,
        "ready_first_attempt": r.ready_first_attempt,
        "all_ready_s": r.recovered_at,
        "add_timeouts": r.counters.add_timeouts,
        "add_429": r.counters.add_429,
    }


def collapse_share(facts: Facts, state: SteadyState, burst: int) -> float:
    """The share of ``facts.replications`` seeds (from ``facts.seed``) in which ``burst`` pods collapse in 1 h."""
    if facts.replications <= 1:
        return float(burst_at(facts, state, burst, horizon="1h").verdict == Verdict.COLLAPSE)
    from ctsim.capacity.replications import seeds

    runs = [burst_at(facts, state, burst, horizon="1h", seed=s) for s in seeds(facts.seed, facts.replications)]
    return sum(r.verdict == Verdict.COLLAPSE for r in runs) / len(runs)


def smallest_collapsing_burst(facts: Facts, state: SteadyState, start: int) -> int | None:
    """The first burst that collapses (in at least half the seeds, with replications), searched up from ``start``.

    Doubles from the projection's safe burst (collapses start just above it
    on large tables), then bisects; each size is simulated once per seed.
    """
    seen: dict[int, bool] = {}

    def collapses(n: int) -> bool:
        if n not in seen:
            seen[n] = collapse_share(facts, state, n) >= 0.5
        return seen[n]

    lo, hi = 0, max(1, min(start, MAX_BURST_SEARCHED))
    while not collapses(hi):
        if hi >= MAX_BURST_SEARCHED:
            return None
        lo, hi = hi, min(2 * hi, MAX_BURST_SEARCHED)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if collapses(mid):
            hi = mid
        else:
            lo = mid
    return hi


MAX_PLAN_BURST = 1_000
MAX_PLAN_REPLICATIONS = 200  # each is a whole collapse search's worth of runs


def check(facts: Facts) -> None:
    """The flags only ``ctsim plan`` has, named as the user typed them."""
    from ctsim.capacity.replications import check as check_replications

    check_replications(facts.replications, MAX_PLAN_REPLICATIONS)
    parse_count(facts.burst, "--burst", minimum=1, maximum=MAX_PLAN_BURST)
    parse_duration(facts.drift_horizon, "--drift-horizon", minimum=3600.0, maximum=MAX_HORIZON)


def plan(facts: Facts) -> dict[str, Any]:
    check(facts)
    base: Scenario = resolve(**facts.flags(entries="0", horizon="1h"))
    burst = base.pods
    overhead = base.regeneration_seconds
    adaptive = steady_state(facts, "auto")
    fixed = steady_state(facts, "60s")
    capacities = [(base.max_entries, base.any_max_entries), (base.ipv6_max_entries, base.ipv6_any_max_entries)]
    peak = [
        FamilyWalk(family, adaptive.peak_maps[2 * i : 2 * i + 2], base.walk_rate, capacities[i], base.bucket_seconds)
        for i, family in enumerate(("ipv4", "ipv6")[: len(adaptive.peak_maps) // 2])
    ]
    walk = scrub_seconds(peak)
    at_peak = burst_at(facts, adaptive)
    fits = safe_burst(peak, base.deadline, overhead)

    recommendations = []
    fixed_burst = burst_at(facts, fixed)
    recommendations.append(
        {
            "action": "set conntrack-gc-interval to 60s",
            "flag": "--gc-interval 60s",
            "peak_entries": fixed.peak_entries,
            "outcome": outcome(fixed_burst),
        }
    )
    cap = max_entries_for_burst(peak, burst, base.deadline, overhead)
    if cap < base.max_entries:
        capped = steady_state(facts, "auto", max_entries=str(cap))
        capped_burst = burst_at(facts, capped, max_entries=str(cap))
        recommendations.append(
            {
                "action": f"cap the TCP CT map at {cap:,} entries (bpf-ct-global-tcp-max)",
                "flag": f"--max-entries {cap}",
                "peak_entries": capped.peak_entries,
                "outcome": outcome(capped_burst),
            }
        )
    if base.profile in ("cilium-1.16", "cilium-1.17"):
        batched = burst_at(facts, adaptive, profile="cilium-1.18")
        recommendations.append(
            {
                "action": "upgrade to a batched-walk release (Cilium >= 1.18)",
                "flag": "--profile cilium-1.18",
                "peak_entries": adaptive.peak_entries,
                "outcome": outcome(batched),
            }
        )
    for rec in recommendations:
        rec["helps"] = rec["outcome"]["verdict"] in (Verdict.OK, Verdict.DEGRADED)

    collapse_burst = smallest_collapsing_burst(facts, adaptive, (fits or 0) + 1)
    return {
        "inputs": {**base.to_dict(), "drift_horizon": facts.drift_horizon},
        "max_entries": base.max_entries,
        "any_max_entries": base.any_max_entries,
        "map_memory_bytes": CTMapSizes(base.max_entries, base.any_max_entries).memory_bytes()
        + (
            CTMapSizes(base.ipv6_max_entries, base.ipv6_any_max_entries).memory_bytes(ipv6=True)
            if facts.dual_stack
            else 0
        ),
        "steady_state": {"adaptive": adaptive.to_dict(), "fixed_60s": fixed.to_dict()},
        "walk_seconds": walk,
        "safe_burst": fits,
        "burst": burst,
        "burst_at_peak": outcome(at_peak),
        "collapse": {
            "smallest_burst": collapse_burst,
            "rule": "collapses in 1 h" if facts.replications <= 1 else "collapses in 1 h in at least half the seeds",
            "replications": facts.replications,
        },
        "recommendations": recommendations,
    }
