"""``ctsim plan``: capacity answers from node facts, every number simulated.

From memory, map ratio, cores, release and churn: the CT map sizes and their
memory; how big the table gets under the adaptive GC and under a fixed
interval, and how long the drift to 12 h takes; the walk, the largest safe
burst and the first conditions that collapse the node; then the mitigations,
each run through the model before it is recommended.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ctsim.core.defaults import CONNTRACK_GC_MAX_LRU_INTERVAL, CONNTRACK_GC_STARTING_INTERVAL, LIMIT_TABLE_MIN
from ctsim.core.errors import InputError
from ctsim.core.maptype import FAMILIES, MapType
from ctsim.core.profiles import get_profile
from ctsim.core.projection import SAFE_BURST_MEANS, FamilyWalk, Projection
from ctsim.core.quantity import format_duration, parse_count, parse_duration
from ctsim.core.sizing import CTMapSizes
from ctsim.inputs.given import MAX_HORIZON, Given, parse_given
from ctsim.inputs.scenario import Scenario, resolve
from ctsim.sim.model import Model, simulate
from ctsim.sim.result import Result, Verdict

DRIFT_HORIZON = "4d"
TRACE_EVERY = 300.0
SEARCH_HORIZON = 3600.0  # what each burst of the collapse search runs for
MAX_BURST_SEARCHED = 400


@dataclass(frozen=True)
class Facts:
    """What the user knows about the node, parsed (``parse_facts``): the node as a ``Given``, and plan's own."""

    node: Given  # the node, with the burst as its pods; every run of the plan is a variant of it
    drift_horizon: float = 4 * 86400.0
    drift_horizon_text: str = DRIFT_HORIZON  # as typed, for the inputs it reports
    replications: int = 1  # seeds per candidate burst in the collapse search

    def variant(self, **override: Any) -> Given:
        """The node with some inputs replaced (numbers, never text)."""
        return replace(self.node, **override)

    @property
    def seed(self) -> int:
        return self.node.seed

    @property
    def dual_stack(self) -> bool:
        return self.node.ipv6_entries is not None

    def empty(self, **override: Any) -> Given:
        """The node with every map empty: where the steady state starts."""
        v6 = {"ipv6_entries": 0, "ipv6_any_entries": None} if self.dual_stack else {}
        return self.variant(entries=0, any_entries=None, **v6, **override)


def facts_for(
    node: Given, *, burst: str | None = None, drift_horizon: str = DRIFT_HORIZON, replications: int = 1
) -> Facts:
    """``ctsim plan``'s own flags over the node (the one ``ctsim run`` takes): checked, then the node's burst."""
    from ctsim.capacity.replications import check as check_replications

    check_replications(replications, MAX_PLAN_REPLICATIONS)
    if burst is not None:
        node = replace(node, pods=parse_count(burst, "{param:burst}", minimum=1, maximum=MAX_PLAN_BURST))
    elif node.pods > MAX_PLAN_BURST:
        raise InputError(f"plan searches bursts of at most {MAX_PLAN_BURST:,}, got {node.pods:,}", "pods")
    horizon = parse_duration(drift_horizon, "{param:drift_horizon}", minimum=3600.0, maximum=MAX_HORIZON)
    return Facts(node, horizon, drift_horizon, replications)


def parse_facts(
    *, drift_horizon: str = DRIFT_HORIZON, replications: int = 1, burst: str | None = None, **flags: object
) -> Facts:
    """The flags as typed (run's, and plan's own) -> ``Facts``: for tests and ``ctsim.cli.docs``."""
    return facts_for(parse_given(**flags), burst=burst, drift_horizon=drift_horizon, replications=replications)


@dataclass(frozen=True)
class SteadyState:
    gc: str  # as the JSON shows it: "auto" or the fixed interval
    gc_interval: float  # 0: adaptive
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


def steady_state(facts: Facts, gc_interval: float, **override: Any) -> SteadyState:
    """A fresh agent on an empty table under the churn, for ``drift_horizon``: how big it gets.

    ``gc_interval`` is conntrack-gc-interval (0: adaptive, from a fresh agent's 5m).
    """
    node = facts.empty(
        pods=1,
        gc_interval=gc_interval,
        gc_initial_interval=None if gc_interval else CONNTRACK_GC_STARTING_INTERVAL,
        horizon=facts.drift_horizon,
        **override,
    )
    model = Model(resolve(node), trace_every=TRACE_EVERY)
    result = model.run()
    at = max(range(len(model.trace)), key=lambda i: model.trace[i][1])
    _, present, expired = model.trace[at]
    capped = next((p.start for p in result.gc.passes if p.interval_after >= CONNTRACK_GC_MAX_LRU_INTERVAL), None)
    return SteadyState(
        gc=format_duration(gc_interval) if gc_interval else "auto",
        gc_interval=gc_interval,
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
    node = facts.variant(**maps, expired_fraction=round(expired, 6), **override)
    if burst is not None:
        node = replace(node, pods=burst)
    if state.gc_interval:
        node = replace(node, gc_interval=state.gc_interval)
    return simulate(resolve(node))


@dataclass(frozen=True)
class Outcome:
    """What one burst came to, in the figures plan shows for it."""

    verdict: Verdict
    walk_seconds: float
    table_entries: int
    pods_ready: int
    ready_first_attempt: int
    all_ready_s: float | None
    add_timeouts: int
    add_429: int

    @classmethod
    def of(cls, r: Result) -> Outcome:
        return cls(
            verdict=r.verdict,
            walk_seconds=r.walk_seconds,
            table_entries=r.entries_at_start,
            pods_ready=r.pods_ready,
            ready_first_attempt=r.ready_first_attempt,
            all_ready_s=r.recovered_at,
            add_timeouts=r.counters.add_timeouts,
            add_429=r.counters.add_429,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def collapse_share(facts: Facts, state: SteadyState, burst: int) -> float:
    """The share of ``facts.replications`` seeds (from ``facts.seed``) in which ``burst`` pods collapse in 1 h."""
    if facts.replications <= 1:
        return float(burst_at(facts, state, burst, horizon=SEARCH_HORIZON).verdict == Verdict.COLLAPSE)
    from ctsim.capacity.replications import seeds

    runs = [
        burst_at(facts, state, burst, horizon=SEARCH_HORIZON, seed=s) for s in seeds(facts.seed, facts.replications)
    ]
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


# Worst first: a mitigation helps only where its verdict is better than the burst's at the peak, or the same
# verdict with every pod Ready sooner.
_WORSE = {Verdict.OK: 0, Verdict.DEGRADED: 1, Verdict.UNFINISHED: 2, Verdict.COLLAPSE: 3}


def _helps(mitigated: Outcome, at_peak: Outcome) -> bool:
    a, b = _WORSE[mitigated.verdict], _WORSE[at_peak.verdict]
    if a != b:
        return a < b
    if mitigated.verdict == Verdict.OK:
        return False
    sooner, then = mitigated.all_ready_s, at_peak.all_ready_s
    return sooner is not None and (then is None or sooner < then)


@dataclass(frozen=True)
class Recommendation:
    """One mitigation, run through the model at the table it leads to."""

    action: str
    flag: str  # what to add to `ctsim plan` (or `run`) to see it
    peak_entries: int
    outcome: Outcome
    helps: bool  # better than the burst at the peak: a better verdict, or all Ready sooner

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "flag": self.flag,
            "peak_entries": self.peak_entries,
            "outcome": self.outcome.to_dict(),
            "helps": self.helps,
        }


# endpoint-create settings plan tries, smallest first, where the limiter (not the scrub) binds a burst.
LIMITER_LADDER = (
    "endpoint-create=rate-limit:1/s,rate-burst:8,parallel-requests:8",
    "endpoint-create=rate-limit:2/s,rate-burst:16,parallel-requests:8",
    "endpoint-create=rate-limit:5/s,rate-burst:32,parallel-requests:16",
    "endpoint-create=rate-limit:10/s,rate-burst:64,parallel-requests:32",
    "endpoint-create=rate-limit:20/s,rate-burst:128,parallel-requests:64",
)


@dataclass(frozen=True)
class BindingLimit:
    """Which limit keeps the burst from being Ready at its first attempt: the scrub, the API limiter, or both.

    The scrub binds where today's table's scrubs for the burst outlast the
    deadline (its safe burst is below it); the limiter binds where the same
    burst on an empty table is still not ok. Where only the limiter binds,
    ``LIMITER_LADDER``'s first setting that makes the burst ok on today's
    table is offered, simulated; None where none of them does.
    """

    scrub: bool
    limiter: bool
    empty_table: Outcome
    setting: str | None = None  # --api-rate-limit's text
    setting_outcome: Outcome | None = None
    tried: bool = False  # the ladder was simulated (only where the scrubs fit)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scrub": self.scrub,
            "limiter": self.limiter,
            "empty_table": self.empty_table.to_dict(),
            "limiter_setting": self.setting,
            "limiter_setting_outcome": self.setting_outcome.to_dict() if self.setting_outcome else None,
            "no_limiter_setting_fits": self.limiter and self.setting is None,
        }


def binding_limit(facts: Facts, today: Scenario, safe_burst: int | None) -> BindingLimit:
    """The burst on an empty table with today's limiter, and, where only the limiter binds, a setting that fits."""
    from ctsim.core.api_rate_limit import parse_api_rate_limit

    v6 = {"ipv6_entries": 0, "ipv6_any_entries": 0} if facts.dual_stack else {}
    empty = Outcome.of(simulate(resolve(facts.variant(entries=0, any_entries=0, horizon=SEARCH_HORIZON, **v6))))
    scrub = safe_burst is not None and safe_burst < today.pods
    limiter = empty.verdict != Verdict.OK
    if not limiter or scrub or facts.node.enable_api_rate_limit is False:
        return BindingLimit(scrub, limiter, empty)
    for text in LIMITER_LADDER:
        tuned = facts.variant(api_rate_limit=parse_api_rate_limit(text), horizon=SEARCH_HORIZON)
        outcome = Outcome.of(simulate(resolve(tuned)))
        if outcome.verdict == Verdict.OK:
            return BindingLimit(scrub, limiter, empty, text, outcome, tried=True)
    return BindingLimit(scrub, limiter, empty, tried=True)


@dataclass(frozen=True)
class CapacityPlan:
    """``ctsim plan``'s answer: today's table, the table the churn leads to, and what helps."""

    today: Scenario  # the node as `ctsim run` takes it on the same flags
    drift_horizon: str  # as typed
    map_memory_bytes: int
    entries: float  # today's table: run's advice.safe_burst is this one's
    walk_seconds: float
    safe_burst: int | None
    adaptive: SteadyState
    fixed_60s: SteadyState
    burst_today: Outcome  # the burst on today's table, as `ctsim run` plays it on the same flags
    peak_walk_seconds: float
    peak_safe_burst: int | None
    burst_at_peak: Outcome
    smallest_collapsing_burst: int | None
    replications: int
    recommendations: tuple[Recommendation, ...]
    binding: BindingLimit | None = None  # which limit binds today's burst
    live: dict[str, dict[str, str]] | None = field(default=None, compare=False)  # flags a live series stood for

    @property
    def burst(self) -> int:
        return self.today.pods

    @property
    def peak_reached_from_today(self) -> bool:
        """The churn's peak is at or above today's table: the table gets there on its own.

        Below it, today's table holds what the GC has not collected yet: only a
        GC pass brings it down to the peak, and until then a burst meets today's.
        """
        return self.adaptive.peak_entries >= self.entries

    @property
    def collapse_rule(self) -> str:
        return "collapses in 1 h" if self.replications <= 1 else "collapses in 1 h in at least half the seeds"

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "inputs": {**self.today.to_dict(), "drift_horizon": self.drift_horizon},
            "max_entries": self.today.map(MapType.IPV4_TCP).max_entries,
            "any_max_entries": self.today.map(MapType.IPV4_ANY).max_entries,
            "map_memory_bytes": self.map_memory_bytes,
            "entries": self.entries,
            "walk_seconds": self.walk_seconds,
            "safe_burst": self.safe_burst,
            "safe_burst_means": SAFE_BURST_MEANS,
            "steady_state": {"adaptive": self.adaptive.to_dict(), "fixed_60s": self.fixed_60s.to_dict()},
            "peak": {"walk_seconds": self.peak_walk_seconds, "safe_burst": self.peak_safe_burst},
            "burst": self.burst,
            "burst_today": self.burst_today.to_dict(),
            "peak_reached_from_today": self.peak_reached_from_today,
            "burst_at_peak": self.burst_at_peak.to_dict(),
            "collapse": {
                "smallest_burst": self.smallest_collapsing_burst,
                "rule": self.collapse_rule,
                "replications": self.replications,
            },
            "recommendations": [r.to_dict() for r in self.recommendations],
            "binding_limit": self.binding.to_dict() if self.binding is not None else None,
        }
        if self.live:
            doc["live"] = self.live
        return doc


def plan(facts: Facts) -> CapacityPlan:
    """Today's table (as ``ctsim run`` on the same flags sees it), the table the churn leads to, and what helps."""
    today: Scenario = resolve(facts.variant(horizon=SEARCH_HORIZON))
    now = today.start_walks()
    burst = today.pods
    overhead = today.regeneration_seconds
    adaptive = steady_state(facts, 0.0)
    fixed = steady_state(facts, 60.0)
    # The IPv6 maps, where the churn reaches them, are sized like IPv4's unless the node has its own.
    capacities = [tuple(m.max_entries for m in today.families().get(f, today.families()["ipv4"])) for f in FAMILIES]
    peak = [
        FamilyWalk(family, adaptive.peak_maps[2 * i : 2 * i + 2], today.walk_rate, capacities[i], today.bucket_seconds)
        for i, family in enumerate(("ipv4", "ipv6")[: len(adaptive.peak_maps) // 2])
    ]
    at_the_peak, today_ = (
        Projection(peak, burst, today.deadline, overhead),
        Projection(now, burst, today.deadline, overhead),
    )
    peak_fits = at_the_peak.safe_burst
    at_peak = Outcome.of(burst_at(facts, adaptive))

    candidates: list[tuple[str, str, int, Outcome]] = [
        (
            "set conntrack-gc-interval to 60s",
            "--gc-interval 60s",
            fixed.peak_entries,
            Outcome.of(burst_at(facts, fixed)),
        )
    ]
    cap = at_the_peak.max_entries_for_burst
    # A cap the table never reaches changes nothing; one under LimitTableMin is not a map Cilium makes.
    if LIMIT_TABLE_MIN <= cap < min(today.map(MapType.IPV4_TCP).max_entries, adaptive.peak_maps[0]):
        capped = steady_state(facts, 0.0, max_entries=cap)
        candidates.append(
            (
                f"cap the TCP CT map at {cap:,} entries (bpf-ct-global-tcp-max)",
                f"--max-entries {cap}",
                capped.peak_entries,
                Outcome.of(burst_at(facts, capped, max_entries=cap)),
            )
        )
    upgrade = get_profile(today.profile).upgrade
    if upgrade and facts.node.rate is None:  # --rate fixes every walk, as in run's advice
        candidates.append(
            (
                f"upgrade to a batched-walk release (Cilium >= {get_profile(upgrade).release})",
                f"--profile {upgrade}",
                adaptive.peak_entries,
                Outcome.of(burst_at(facts, adaptive, profile=upgrade, cilium_version=None)),
            )
        )
    memory = CTMapSizes(*capacities[0]).memory_bytes()
    if facts.dual_stack:
        memory += CTMapSizes(*capacities[1]).memory_bytes(ipv6=True)
    return CapacityPlan(
        today=today,
        drift_horizon=facts.drift_horizon_text,
        map_memory_bytes=memory,
        entries=today_.entries,
        walk_seconds=today_.scrub_seconds,
        safe_burst=today_.safe_burst,
        adaptive=adaptive,
        fixed_60s=fixed,
        peak_walk_seconds=at_the_peak.scrub_seconds,
        peak_safe_burst=peak_fits,
        burst_today=Outcome.of(simulate(today)),
        burst_at_peak=at_peak,
        smallest_collapsing_burst=smallest_collapsing_burst(facts, adaptive, (peak_fits or 0) + 1),
        replications=facts.replications,
        recommendations=tuple(Recommendation(*c, helps=_helps(c[3], at_peak)) for c in candidates),
        binding=binding_limit(facts, today, today_.safe_burst),
    )
