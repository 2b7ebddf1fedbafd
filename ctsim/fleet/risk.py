"""Each node's scrub risk: the facts its series gave, projected with ``ctsim.core.projection``.

The risk is the one ctwatch alerts on: when a burst of ``pods`` creates
queues its scrubs on the per-family locks at once, how far the last one's
end (walks + regeneration) falls against the deadline — the burst/deadline
ratio. Nodes rank by that ratio, worst first, then by how soon the table's
growth brings them to the deadline; nodes whose series do not say enough
to project are listed last, with what is missing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ctsim.core.defaults import CLIENT_TIMEOUT, CT_MAPS, DEFAULT_REGENERATION, ENDPOINT_CREATE, FAMILY_OF_MAP
from ctsim.core.origin import NONE, Origin
from ctsim.core.profiles import Profile, profile_for
from ctsim.core.projection import (
    FamilyWalk,
    Level,
    Projection,
    seconds_until,
)
from ctsim.core.rate import LimiterCore
from ctsim.core.releases import Release, played, rules
from ctsim.fleet.series import REGENERATION_SERIES, CTCleanWaits, NodeFacts

MODEL_REGENERATION = Origin.default("the model's assumption")
DEFAULT_BURST = 10  # ctwatch's --burst default: the burst a node without ctwatch is projected for
DISAGREE = 2.0  # observed and projected differ by more than this factor: flagged


@dataclass(frozen=True)
class Assumptions:
    """Fleet-wide inputs for what a node's own series do not say, each with its origin."""

    profile: Profile
    pods: int | None = None  # None: each node's ctwatch burst, else DEFAULT_BURST
    rate: float | None = None  # --rate or --calibration: the walk rate where ctwatch measured none
    rate_source: Origin = NONE
    rate_short: str = ""  # the source in a table cell
    bucket_seconds: float = 0.0
    capacity: tuple[int, int] | None = None  # (TCP, non-TCP) map capacity where no series gives it
    capacity_source: Origin = NONE
    regeneration: float = DEFAULT_REGENERATION


@dataclass(frozen=True)
class MapFigures:
    """One CT map of a node: its count and capacity, each with the series it came from."""

    family: str
    entries: int
    max_entries: int | None
    entries_source: Origin
    capacity_source: Origin


@dataclass(frozen=True)
class FamilyRate:
    """A family's walk rate and where it came from: a ctwatch series, a fleet-wide flag, or the profile."""

    entries_per_second: float
    source: Origin
    short: str  # in a table cell


@dataclass
class Simulated:
    """``--simulate``: the model's answer on this node's own facts, and the command that reproduces it."""

    verdict: str
    recovered_at_s: float | None
    latency_p90_s: float | None
    add_timeouts: int
    command: str
    verdict_share: float | None = None  # with --replications: the most common verdict's share of the seeds
    verdict_ci95: list[float] | None = None
    replications: dict[str, Any] | None = None  # {"seeds", "summary"} as `ctsim run --replications` gives them

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return d if self.replications is not None else {k: v for k, v in d.items() if k not in _REPLICATED}


_REPLICATED = ("verdict_share", "verdict_ci95", "replications")


@dataclass
class NodeRisk:
    node: str
    level: Level
    sources: list[str]
    pods: int
    pods_source: Origin
    deadline: float
    deadline_source: Origin
    regeneration: float = DEFAULT_REGENERATION  # seconds after a scrub until the endpoint is up
    regeneration_source: Origin = MODEL_REGENERATION
    limiter: dict[str, float] = field(default_factory=dict)  # endpoint-create's, as the agent last set it
    maps: dict[str, MapFigures] = field(default_factory=dict)  # by pinned name
    walk_rate: dict[str, FamilyRate] = field(default_factory=dict)  # by family
    walk_seconds: dict[str, float] = field(default_factory=dict)  # family -> TCP + non-TCP walk
    scrub_seconds: float | None = None  # one scrub on an idle node: every family's walk
    burst_seconds: float | None = None
    deadline_ratio: float | None = None
    safe_burst: int | None = None  # None with a projection: unbounded (empty tables)
    max_entries_for_burst: int | None = None  # the table on which `pods` scrubs fit: run's advice, on these facts
    growth_per_hour: float | None = None  # entries, every CT map together
    seconds_until_deadline: float | None = None
    gc_interval: float | None = None
    gc_interval_source: str = ""
    release: Release | None = None  # the node's Cilium release as played (None: none read; the fleet's --profile)
    release_source: Origin = NONE
    observed_gc_seconds: dict[str, float] = field(default_factory=dict)
    observed_ct_clean: CTCleanWaits | None = None
    ctwatch_level: Level | None = None
    flags: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # why a figure is missing
    simulated: Simulated | None = None  # --simulate: the model's verdict on this node

    @property
    def known(self) -> bool:
        return self.deadline_ratio is not None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.__dict__.items()
        }
        d["release"] = str(self.release) if self.release is not None else None
        d["maps"] = {name: asdict(m) for name, m in self.maps.items()}
        d["walk_rate"] = {family: asdict(w) for family, w in self.walk_rate.items()}
        d["simulated"] = self.simulated.to_dict() if self.simulated is not None else None
        d["observed_ct_clean"] = self.observed_ct_clean.to_dict() if self.observed_ct_clean is not None else None
        return d


# Why a Cilium node has no GC interval: the gauge is not there, which is not an interval of 0.
NO_GC_INTERVAL = (
    "no series: cilium_datapath_conntrack_gc_interval_seconds is exported from 1.18 on, and never while "
    "--conntrack-gc-interval is fixed (GetInterval returns before it sets the gauge)"
)


def _capacity(facts: NodeFacts, name: str, a: Assumptions) -> tuple[int | None, Origin]:
    m = facts.maps[name]
    if m.max_entries is not None:
        return m.max_entries, Origin.of_series(m.capacity_series)
    if a.capacity is not None:
        tcp, any_ = a.capacity
        return (tcp if name == CT_MAPS[FAMILY_OF_MAP[name]][0] else any_), a.capacity_source
    return None, NONE


def _maps(facts: NodeFacts, a: Assumptions, risk: NodeRisk) -> dict[str, tuple[tuple[float, ...], tuple[int, ...]]]:
    """Per family with any map known: (entries per map, capacities), TCP map first, as a scrub walks them."""
    out: dict[str, tuple[tuple[float, ...], tuple[int, ...]]] = {}
    growth = 0.0
    grew = False
    unsized: list[str] = []
    for family, names in CT_MAPS.items():
        counts: list[float] = []
        caps: list[int] = []
        for name in names:
            if name not in facts.maps:
                continue
            m = facts.maps[name]
            cap, cap_source = _capacity(facts, name, a)
            entries, per_s = m.entries, m.growth
            if entries is None and m.pressure is not None:
                if cap is None:
                    unsized.append(name)
                    continue
                entries = m.pressure * cap
                per_s = m.growth * cap if m.growth is not None else None
            if entries is None:
                continue
            risk.maps[name] = MapFigures(family, round(entries), cap, Origin.of_series(m.entries_series), cap_source)
            counts.append(entries)
            caps.append(cap or 0)
            if per_s is not None:
                growth += per_s
                grew = True
        if counts:
            out[family] = (tuple(counts), tuple(caps))
    if unsized:
        risk.unknown.append(
            f"Cilium reports the pressure of {', '.join(unsized)} but no series gives "
            f"{'its' if len(unsized) == 1 else 'their'} capacity (run ctwatch, or give --max-entries or --node-memory)"
        )
    for family, (tcp, any_) in CT_MAPS.items():
        if any_ in risk.maps and tcp not in risk.maps and tcp not in unsized:
            risk.flags.append(
                f"{family}: no series counts {tcp} ({any_} is counted): Cilium's pressure is absent while 0, and for "
                f"good where its controller stopped, so the {family} walk here counts {any_} alone"
            )
    risk.growth_per_hour = growth * 3600 if grew else None
    stale = [name for name, m in facts.maps.items() if m.at_last_pass and name in risk.maps]
    if stale:
        risk.flags.append(
            f"no cilium_bpf_map_pressure for {', '.join(stale)}: counted at the end of the last completed GC pass "
            f"(cilium_datapath_conntrack_gc_entries), up to one GC interval old"
        )
    return out


def assess(facts: NodeFacts, a: Assumptions) -> NodeRisk:
    """One node's row: every figure from ``ctsim.core.projection`` on that node's facts."""
    pods, pods_source = (
        (a.pods, Origin.flag("--pods"))
        if a.pods is not None
        else (facts.burst, Origin.of_series("ctwatch_burst_pods"))
        if facts.burst is not None
        else (DEFAULT_BURST, Origin.default("ctwatch's"))
    )
    deadline, deadline_source = (
        (facts.deadline, Origin.of_series("ctwatch_deadline_seconds"))
        if facts.deadline is not None
        else (CLIENT_TIMEOUT, Origin.default("cilium-cni's ClientTimeout"))
    )
    regeneration, regeneration_source = (
        (facts.regeneration, Origin.of_series(REGENERATION_SERIES))
        if facts.regeneration is not None
        else (a.regeneration, MODEL_REGENERATION)
    )
    risk = NodeRisk(
        node=facts.node,
        level=Level.UNKNOWN,
        sources=sorted(facts.sources),
        pods=pods,
        pods_source=pods_source,
        deadline=deadline,
        deadline_source=deadline_source,
        regeneration=regeneration,
        regeneration_source=regeneration_source,
        limiter=dict(facts.limiter),
        gc_interval=facts.gc_interval,
        gc_interval_source=facts.gc_interval_series or (NO_GC_INTERVAL if "cilium" in facts.sources else ""),
        observed_gc_seconds=dict(facts.observed_gc),
        observed_ct_clean=facts.observed_ct_clean,
        ctwatch_level=Level.of_rank(facts.ctwatch_level) if facts.ctwatch_level is not None else None,
    )
    profile, zero = a.profile, ""
    if facts.release is not None:  # the node's own release walks as it walks, whatever the fleet's --profile
        release, note = played(facts.release)
        profile = profile_for(release.line)
        risk.release, risk.release_source = release, Origin.of_series(facts.release_series)
        if note:
            risk.flags.append(note)
        if rules(release).gc_duration_reads_zero and not facts.observed_gc:
            zero = (
                f"no GC duration: {release} observes 0 s for every batched pass "
                "(cilium_datapath_conntrack_gc_duration_seconds, fixed in 1.20.0)"
            )
    if facts.down:
        risk.flags.append("ctwatch sources down: " + ", ".join(sorted(set(facts.down))))
    risk.flags.extend(facts.implausible)
    per_family = _maps(facts, a, risk)
    if not per_family:
        if not risk.unknown:
            risk.unknown.append(
                "no CT map count in any series (neither ctwatch_entries, cilium_bpf_map_pressure "
                "nor cilium_datapath_conntrack_gc_entries)"
            )
        risk.unknown.extend([zero] if zero else [])
        return risk
    walks = []
    for family, (counts, caps) in per_family.items():
        if family in facts.rates:
            rate, label = facts.rates[family]
            source, buckets = Origin.of_series(f'ctwatch_walk_rate_entries_per_second{{source="{label}"}}'), 0.0
            short = f"ctwatch ({label})" if label else "ctwatch"
        elif a.rate is not None:
            rate, source, buckets, short = a.rate, a.rate_source, a.bucket_seconds, a.rate_short
        else:
            rate, buckets = profile.walk_rate, profile.bucket_seconds
            source = Origin.published(f"profile {profile.name}")
            short = profile.name
        walk = FamilyWalk(family, counts, rate, caps if buckets else (), buckets)
        walks.append(walk)
        risk.walk_rate[family] = FamilyRate(rate, source, short)
        risk.walk_seconds[family] = walk.seconds
    p = Projection(walks, pods, deadline, risk.regeneration)
    risk.scrub_seconds, risk.burst_seconds, risk.deadline_ratio = p.scrub_seconds, p.burst_seconds, p.deadline_ratio
    risk.safe_burst, risk.level, risk.max_entries_for_burst = p.safe_burst, p.level, p.max_entries_for_burst
    growth = risk.growth_per_hour / 3600 if risk.growth_per_hour is not None else None
    risk.seconds_until_deadline = seconds_until(p.entries, p.max_entries_for_burst, growth)
    risk.unknown.extend([zero] if zero else [])
    _compare(risk)
    return risk


def _compare(risk: NodeRisk) -> None:
    """Flag a projection that disagrees with what the agent itself observed."""
    for family, seen in sorted(risk.observed_gc_seconds.items()):
        projected = risk.walk_seconds.get(family)
        if projected and seen > 0 and not 1 / DISAGREE <= seen / projected <= DISAGREE:
            risk.flags.append(
                f"{family}: Cilium's GC passes took {seen:.3g}s on average, the projected walk {projected:.3g}s "
                f"({seen / projected:.2g}x): check the walk rate"
            )
    waits = risk.observed_ct_clean
    high = waits.long_mean_high if waits is not None else None
    if waits is not None and high is not None and risk.scrub_seconds and high < risk.scrub_seconds / DISAGREE:
        risk.flags.append(
            f"the {waits.long_waits:.0f} endpoint builds that waited over {waits.split_at:g}s for CT clean waited "
            f"at most {high:.3g}s on average, under half the projected scrub {risk.scrub_seconds:.3g}s: check the "
            "walk rate and the counts (a create that timed out records no wait)"
        )
    mean, parallel = risk.limiter.get("mean_processing_s"), risk.limiter.get("parallel_requests")
    if mean and parallel is not None:
        core = LimiterCore("endpoint-create", ENDPOINT_CREATE)
        core.warm(mean)  # what run --from-prometheus starts a warm agent's limiter at
        if core.parallel_requests != round(parallel):
            risk.flags.append(
                f"endpoint-create: the agent reports {parallel:.0f} parallel requests, AutoAdjust from its mean "
                f"create of {mean:.3g}s gives {core.parallel_requests} (the model's start): its limiter is not "
                "v1.16.5's default (--api-rate-limit?)"
            )
    ours = risk.pods_source.is_series and risk.deadline_source.is_series  # ctwatch's own burst and deadline
    if ours and risk.ctwatch_level is not None and risk.ctwatch_level != risk.level:
        risk.flags.append(f"ctwatch reports {risk.ctwatch_level} (its own burst and thresholds), this row {risk.level}")


def rank(rows: list[NodeRisk]) -> list[NodeRisk]:
    """Worst first: burst/deadline ratio, then the soonest ETA; nodes that cannot be projected last."""

    def key(r: NodeRisk) -> tuple[int, float, float, str]:
        if r.deadline_ratio is None:
            return (1, 0.0, 0.0, r.node)
        eta = r.seconds_until_deadline if r.seconds_until_deadline is not None else math.inf
        return (0, -r.deadline_ratio, eta, r.node)

    return sorted(rows, key=key)
