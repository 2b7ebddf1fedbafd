"""A scenario: every input of one run, resolved from a preset and the user's flags.

Resolution happens once, here, so the model, the report and the JSON all see
the same parsed values, and so bad input fails before any simulation starts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, NamedTuple

from ctsim.core.api_rate_limit import APIRateLimits, LimiterState
from ctsim.core.calibration import walk_rate
from ctsim.core.defaults import (
    CLIENT_TIMEOUT,
    CONNTRACK_GC_MAX_LRU_INTERVAL,
    CONNTRACK_GC_STARTING_INTERVAL,
    CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT,
    CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT,
    DEFAULT_DYNAMIC_SIZE_RATIO,
    DEFAULT_REGENERATION,
    ENDPOINT_CREATE,
    ENDPOINT_DELETE,
    LIMIT_TABLE_MAX,
    TEARDOWN_TIMEOUT,
)
from ctsim.core.errors import InputError
from ctsim.core.maptype import MapType
from ctsim.core.origin import Origin
from ctsim.core.profiles import DEFAULT_PROFILE, Profile, get_profile, profile_for
from ctsim.core.projection import FamilyWalk, scrub_seconds
from ctsim.core.quantity import format_bytes, format_duration
from ctsim.core.rate import APILimiterParameters
from ctsim.core.releases import CTFillSignal, IntervalCache, Release, ReleaseRules, newest, played, rules
from ctsim.core.sizing import ct_map_sizes
from ctsim.inputs.churn import ChurnSchedule
from ctsim.inputs.given import AgentState, Given, parse_given
from ctsim.inputs.presets import DEFAULT_PRESET, Preset, get_preset

if TYPE_CHECKING:
    from ctsim.inputs.signal_rates import SignalRates
    from ctsim.inputs.workload import PodSchedule

DEFAULT_HORIZON = 3600.0  # what capacity planning's burst searches run for
UNTIL_RESOLVED_CAP = 2 * 86400.0  # with no --horizon: the longest a run waits for its burst to resolve
DEFAULT_CONN_SECONDS = 30.0
DRIFTED_NEXT_PASS = 6 * 3600.0  # incident state: the last 12 h pass was 6 h ago


class NodeClock:
    """Durations as the simulated (or emulated) node lives them: the model's at 1x, ``ctsim emulate``'s k x faster.

    A slotted class, not a NamedTuple: defining one costs ~0.8 M instructions at every start-up.
    """

    __slots__ = ("deadline", "horizon", "pod_start_spread", "regeneration", "teardown")

    def __init__(self, deadline: float, teardown: float, regeneration: float, horizon: float, pod_start_spread: float):
        self.deadline = deadline  # cilium-cni's client timeout
        self.teardown = teardown  # containerd's deferred DEL
        self.regeneration = regeneration
        self.horizon = horizon
        self.pod_start_spread = pod_start_spread


NO_CHURN = ChurnSchedule(((0.0, float("inf")),))


class MapInputs(NamedTuple):
    """One CT map at t=0: its type, the entries present, its capacity, and the connections that feed it."""

    type: MapType
    entries: int
    max_entries: int
    churn: ChurnSchedule = NO_CHURN


@dataclass(frozen=True)
class Scenario:
    preset: str
    profile: str
    release: Release  # the Cilium release played: its walk is the profile's, its GC rules ``core.releases.rules``
    # One record per CT map, in walk order: IPv4's TCP and non-TCP maps, then, on a dual-stack node, IPv6's.
    maps: tuple[MapInputs, ...]
    max_entries_source: Origin  # both IPv4 maps' capacity
    agent_state: AgentState  # warm: up for days (skip-initial spent); fresh: just started
    expired_fraction: float
    pods: int
    walk_rate: float
    rate_source: str
    delete_seconds: float
    conn_seconds: float
    deadline: float
    gc_interval: float  # conntrack-gc-interval; 0 = adaptive
    gc_initial_interval: float  # cachedGCInterval at t=0; 0 = a fresh agent's (next interval from 5m)
    gc_first_pass: float
    gc_max_interval: float
    regeneration_seconds: float
    cores: int
    node_memory: int
    map_ratio: float | None
    horizon: float  # the run's end; with until_resolved, its cap
    seed: int
    bucket_seconds: float = 0.0  # a batched walk's cost per bucket of a map's capacity (0: per-entry walks)
    # The agent's endpoint limiters (--api-rate-limit over v1.16.5's defaults; all zero: --enable-api-rate-limit
    # false, as APILimiterSet.Wait then hands out a request that waits for nothing).
    endpoint_create: APILimiterParameters = ENDPOINT_CREATE
    endpoint_delete: APILimiterParameters = ENDPOINT_DELETE
    create_limiter: LimiterState | None = None  # endpoint-create's state at t=0 as reported; None: AutoAdjust's
    # meanProcessingDuration endpoint-create starts with: a warm agent's last creates (see _warm_limiter); 0: fresh
    create_mean_processing: float = 0.0
    until_resolved: bool = False  # no --horizon: the run ends when the burst is resolved (see ctsim.sim.model)
    notes: tuple[str, ...] = field(default=())
    # Where each input came from, in the inputs block's order: (input, its Origin).
    origins: tuple[tuple[str, Origin], ...] = field(default=())
    # How many times faster than the node's clock the run's clock goes; every
    # duration but a walk's is divided by it (walks are entries / rate).
    # 1 for `ctsim run`; `ctsim emulate` scales down.
    time_scale: float = 1.0
    pod_start_spread: float = 1.0  # kubelet's pod workers reach CNI ADD within this
    arrivals: tuple[float, ...] = ()  # each pod's first CNI ADD, seconds from t=0 (empty: within pod_start_spread)
    arrival_schedule: PodSchedule | None = None  # more pods created over time, after the burst's (--arrivals)
    delete_schedule: PodSchedule | None = None  # running pods deleted over time (--deletes)
    ct_fill_signals: SignalRates | None = None  # the datapath's CT-fill signals as given (the release gates them)
    nat_fill_signals: SignalRates | None = None
    rollout: int = 0  # a Deployment's pods replaced by a rolling update (0: none)
    max_surge: int = 0  # resolved from --max-surge for ``rollout`` replicas
    max_unavailable: int = 0
    agent_bootstrap: float = 0.0  # a fresh agent's start-up before its API answers, the initial scan aside
    calibration: str | None = None  # the calibration file, when one was given
    # What the user gave, parsed: variants of this node (plan, mitigations, sweeps) replace its numbers.
    given: Given = field(default_factory=lambda: Given(), compare=False, repr=False)

    @functools.cached_property
    def clock(self) -> NodeClock:
        """The scenario's durations on the clock the node runs on: divided by ``time_scale`` once, here."""
        k = self.time_scale
        return NodeClock(
            deadline=self.deadline / k,
            teardown=TEARDOWN_TIMEOUT / k,
            regeneration=self.regeneration_seconds / k,
            horizon=self.horizon / k,
            pod_start_spread=self.pod_start_spread / k,
        )

    def signals_sent(self, r: ReleaseRules) -> tuple[tuple[str, float], ...]:
        """The fill-up signals this release's datapath sends: (family, per second), CT's then NAT's."""
        sent: list[tuple[str, float]] = []
        if self.ct_fill_signals is not None and r.ct_fill_signal is not CTFillSignal.NEVER:
            sent += self.ct_fill_signals.rates
        if self.nat_fill_signals is not None:
            sent += self.nat_fill_signals.rates
        return tuple(sent)

    def origin(self, name: str) -> Origin | None:
        return dict(self.origins).get(name)

    def map(self, t: MapType) -> MapInputs:
        """The map of type ``t``; KeyError on an IPv4-only node's IPv6 maps."""
        for m in self.maps:
            if m.type is t:
                return m
        raise KeyError(t)

    @property
    def dual_stack(self) -> bool:
        return len(self.maps) > 2

    def families(self) -> dict[str, tuple[MapInputs, ...]]:
        """Each family's maps, TCP first, in walk order."""
        out: dict[str, tuple[MapInputs, ...]] = {}
        for m in self.maps:
            out[m.type.family] = (*out.get(m.type.family, ()), m)
        return out

    def start_walks(self) -> list[FamilyWalk]:
        """Each family's walk of the table at t=0: what run's advice and plan's safe burst project."""
        return [
            FamilyWalk(
                family,
                tuple(m.entries for m in maps),
                self.walk_rate,
                tuple(m.max_entries for m in maps),
                self.bucket_seconds,
            )
            for family, maps in self.families().items()
        ]

    def to_dict(self) -> dict[str, object]:
        """The inputs as ``--json`` has always given them: one flat key per map's figure, in _JSON_ORDER."""
        d: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("maps", "given")}
        v4 = self.families()["ipv4"]
        v6 = self.families().get("ipv6")
        for prefix, maps in (("", v4), ("ipv6_", v6 or v4)):
            tcp, any_ = maps
            d[f"{prefix}entries"], d[f"{prefix}max_entries"] = tcp.entries, tcp.max_entries
            d[f"{prefix}any_entries"], d[f"{prefix}any_max_entries"] = any_.entries, any_.max_entries
            d[f"{prefix}churn"], d[f"{prefix}any_churn"] = tcp.churn, any_.churn
        if v6 is None:  # an IPv4-only node: no IPv6 entries or churn, its maps' sizes IPv4's
            d.update(ipv6_entries=None, ipv6_any_entries=0, ipv6_churn=NO_CHURN, ipv6_any_churn=NO_CHURN)
        for name in ("churn", "any_churn", "ipv6_churn", "ipv6_any_churn"):
            schedule = d[name]
            assert isinstance(schedule, ChurnSchedule)
            d[name] = {
                "schedule": schedule.describe(),
                "segments": [
                    {"per_second": r, "duration_s": None if span == float("inf") else span}
                    for r, span in schedule.segments
                ],
            }
        d["release"] = str(self.release)
        if self.create_limiter is not None:
            d["create_limiter"] = self.create_limiter._asdict()
        else:
            d.pop("create_limiter")
        if (self.endpoint_create, self.endpoint_delete) != (ENDPOINT_CREATE, ENDPOINT_DELETE):
            d["api_rate_limit"] = {
                "endpoint_create": self.endpoint_create._asdict(),
                "endpoint_delete": self.endpoint_delete._asdict(),
            }
        d["notes"] = list(self.notes)
        d["origins"] = dict(self.origins)
        if self.arrivals:
            d["arrivals"] = list(self.arrivals)
        else:
            d.pop("arrivals")
        for name in ("ct_fill_signals", "nat_fill_signals"):
            rates = getattr(self, name)
            if rates is None:
                d.pop(name)
            else:
                d[name] = {family: per_second for family, per_second in rates.rates}
        if self.rollout:
            d["rollout"] = {"pods": self.rollout, "max_surge": self.max_surge, "max_unavailable": self.max_unavailable}
        else:
            d.pop("rollout")
        d.pop("max_surge")
        d.pop("max_unavailable")
        if not self.agent_bootstrap:
            d.pop("agent_bootstrap")
        for name in ("arrival_schedule", "delete_schedule"):
            schedule = getattr(self, name)
            if schedule is None:
                d.pop(name)
            else:
                d[name] = {
                    "schedule": schedule.describe(),
                    "pods": schedule.count,
                    "segments": [{"per_second": r, "duration_s": span} for r, span in schedule.segments],
                }
        return {k: d[k] for k in _JSON_ORDER if k in d}


# The inputs' keys in --json, in the order they have had since the scenario was one flat record.
_JSON_ORDER = (
    "preset", "profile", "release", "entries", "max_entries", "max_entries_source", "any_max_entries", "agent_state",
    "ipv6_entries", "ipv6_max_entries", "ipv6_any_max_entries", "expired_fraction", "pods", "walk_rate",
    "rate_source", "delete_seconds", "churn", "conn_seconds", "deadline", "gc_interval", "gc_initial_interval",
    "gc_first_pass", "gc_max_interval", "regeneration_seconds", "cores", "node_memory", "map_ratio", "horizon",
    "seed", "any_entries", "bucket_seconds", "ipv6_any_entries", "any_churn", "ipv6_churn", "ipv6_any_churn",
    "create_mean_processing", "until_resolved", "notes", "origins", "time_scale", "pod_start_spread", "arrivals",
    "calibration", "api_rate_limit", "create_limiter", "arrival_schedule", "delete_schedule", "ct_fill_signals",
    "nat_fill_signals", "rollout", "agent_bootstrap",
)  # fmt: skip


def resolve_flags(**flags: object) -> Scenario:
    """The flags as typed (``"16M"``, ``"90s"``) -> a Scenario: ``parse_given`` then ``resolve``."""
    return resolve(parse_given(**flags))


def resolve(g: Given) -> Scenario:
    """What the user gave over the preset; raises InputError where the inputs contradict each other.

    A preset supplies only what the user did not give; every input's origin
    is kept (``Scenario.origins``). The rules run in this order: map capacity
    (``_capacity``), the IPv4 maps' entries (``_fill``), the IPv6 family
    (``_ipv6_maps``), the walk rate (``core.calibration.walk_rate``), durations, the GC's
    state at t=0 (``_gc_start``), the warm limiter (``_warm_limiter``).
    """
    p = get_preset(DEFAULT_PRESET if g.preset is None else g.preset)
    notes: list[str] = []
    origins: dict[str, Origin] = {}
    from_preset = Origin.preset(p.name)

    def said(name: str) -> Origin:
        """Where a given input came from: the user's flag, or the source that stood in for it (a live series)."""
        return g.source(name) or Origin.given()

    release, prof, origins["release"] = _release(g, notes, said)

    def origin(name: str, flag: object, otherwise: Origin) -> None:
        origins[name] = said(name) if flag is not None else otherwise

    n_cores = g.cores if g.cores is not None else p.cores
    cap = _capacity(p, g, notes)
    user_sized = g.max_entries is not None or g.node_memory is not None or g.map_ratio is not None
    tcp_max, any_max, capacity_origin = cap.tcp, cap.any, cap.origin
    if g.entries is None:
        n_entries, origins["entries"] = _preset_share(p, tcp_max, cap.preset_tcp)
    else:
        n_entries, tcp_max, capacity_origin = _fill(
            "--entries", g.entries, tcp_max, capacity_origin, user_sized, "TCP", notes
        )
        origins["entries"] = said("entries").amended("" if n_entries == g.entries else ", clamped to the map")
    if g.any_entries is None:
        n_any = min(p.any_entries, any_max)
        origins["any_entries"] = Origin.preset(p.name, p.any_assumption)
    else:
        n_any, any_max, capacity_origin = _fill(
            "--any-entries",
            g.any_entries,
            any_max,
            capacity_origin,
            user_sized or g.any_max_entries is not None,
            "non-TCP",
            notes,
        )
        origins["any_entries"] = said("any_entries").amended("" if n_any == g.any_entries else ", clamped to the map")
    origins["capacity"] = capacity_origin
    v6_entries, v6_any, v6_tcp_max, v6_any_max = _ipv6_maps(g, tcp_max, any_max, user_sized, notes)
    if v6_entries is not None:
        origins["ipv6"] = said("ipv6_entries").amended(", maps sized like IPv4's" if g.ipv6_max_entries is None else "")

    expired = g.expired_fraction if g.expired_fraction is not None else p.expired_fraction
    origin("expired_fraction", g.expired_fraction, from_preset)
    walk = walk_rate(prof, g.rate, g.calibration)
    walk_rate_s, rate_source, delete_s, bucket_s = (
        walk.entries_per_s,
        walk.source,
        walk.delete_seconds,
        walk.bucket_seconds,
    )
    if walk.note:
        notes.append(walk.note)
    origins["walk_rate"] = said("rate") if g.rate is not None else walk.source

    schedule = g.churn if g.churn is not None else p.churn_schedule
    origin("churn", g.churn, from_preset)
    any_schedule = g.any_churn if g.any_churn is not None else p.any_churn_schedule
    origin("any_churn", g.any_churn, from_preset)
    v6_schedules = []
    for flag, value in (("--ipv6-churn", g.ipv6_churn), ("--ipv6-any-churn", g.ipv6_any_churn)):
        if value is not None and v6_entries is None:
            raise InputError(f"{flag}: give --ipv6-entries too (it makes the node dual-stack)")
        v6_schedules.append(value if value is not None else NO_CHURN)
    conn_s = g.conn_duration if g.conn_duration is not None else DEFAULT_CONN_SECONDS
    origin("conn_duration", g.conn_duration, Origin.default())
    if g.conn_duration is not None and all(c.peak == 0 for c in (schedule, any_schedule, *v6_schedules)):
        notes.append("--conn-duration has no effect: no churn opens connections in this run")
    deadline_s = g.deadline if g.deadline is not None else CLIENT_TIMEOUT
    origin("deadline", g.deadline, Origin.default("cilium-cni's ClientTimeout"))
    if g.horizon is not None:
        horizon_s = g.horizon
        origins["horizon"] = said("horizon")
    else:
        horizon_s = UNTIL_RESOLVED_CAP
        origins["horizon"] = Origin.rule(f"until resolved (at most {format_duration(UNTIL_RESOLVED_CAP)})")
    regen_s = g.regeneration if g.regeneration is not None else DEFAULT_REGENERATION
    origin("regeneration", g.regeneration, Origin.default("the model's assumption"))
    if regen_s >= deadline_s:  # no create could ever answer in time: every advice would be nonsense (a table <= 0)
        flag = "--regeneration-time" if g.regeneration is not None else "--deadline"
        raise InputError(
            f"{flag}: a regeneration of {format_duration(regen_s)} leaves no time for a scrub within the "
            f"{format_duration(deadline_s)} CNI deadline: give --deadline above --regeneration-time"
        )
    origin("cores", g.cores, from_preset)
    fixed, initial, first_pass, max_interval = _gc_start(g, rules(release), notes)
    maps = [
        MapInputs(MapType.IPV4_TCP, n_entries, tcp_max, schedule),
        MapInputs(MapType.IPV4_ANY, n_any, any_max, any_schedule),
    ]
    if v6_entries is not None:
        maps += [
            MapInputs(MapType.IPV6_TCP, v6_entries, v6_tcp_max, v6_schedules[0]),
            MapInputs(MapType.IPV6_ANY, v6_any, v6_any_max, v6_schedules[1]),
        ]
    walks = [
        FamilyWalk(family, (tcp.entries, any_.entries), walk_rate_s, (tcp.max_entries, any_.max_entries), bucket_s)
        for family, (tcp, any_) in (("ipv4", maps[:2]), ("ipv6", maps[2:]))[: len(maps) // 2]
    ]
    create, delete = _limiters(g, notes)
    _signals(g, release, notes)
    mean, origins["limiter"] = _warm_limiter(g.agent_state, walks, regen_s, deadline_s, create.mean_over)
    if g.api_rate_limit is not None:
        origins["limiter"] = origins["limiter"].amended(", with --api-rate-limit's parameters")
    if g.create_mean_processing is not None:
        if g.agent_state is AgentState.FRESH:
            raise InputError("--create-mean-processing: a warm agent's limiter; --agent-state fresh starts at defaults")
        mean, origins["limiter"] = g.create_mean_processing, said("create_mean_processing")
    if g.create_limiter is not None:  # where the limiter stands: the mean still feeds its next AutoAdjust
        if g.agent_state is AgentState.FRESH:
            raise InputError("--create-limiter: a warm agent's limiter; --agent-state fresh starts at defaults")
        origins["limiter"] = said("create_limiter")
    if g.enable_api_rate_limit is False:
        mean, origins["limiter"] = 0.0, said("enable_api_rate_limit").amended(": --enable-api-rate-limit false")
    if g.agent_bootstrap is not None and g.agent_state is not AgentState.FRESH:
        raise InputError("--agent-bootstrap: a fresh agent's start-up; give --agent-state fresh too")
    if g.agent_state is AgentState.FRESH and rules(release).initial_scan_blocks:
        notes.append(
            f"{release} blocks its start-up on the initial CT scan and exits (log.Fatal) if it takes over 30 s: "
            "fixed in v1.16.7 and 1.17.0 (fea19ec9c7)"
        )
        if g.gc_next_pass is not None:
            notes.append(f"--gc-next-pass has no effect: {release}'s initial scan runs as the agent starts")
    return Scenario(
        preset=p.name,
        profile=prof.name,
        release=release,
        maps=tuple(maps),
        max_entries_source=capacity_origin,
        agent_state=g.agent_state,
        expired_fraction=expired,
        pods=g.pods,
        walk_rate=walk_rate_s,
        rate_source=rate_source,
        delete_seconds=delete_s,
        bucket_seconds=bucket_s,
        conn_seconds=conn_s,
        deadline=deadline_s,
        gc_interval=fixed,
        gc_initial_interval=initial,
        gc_first_pass=first_pass,
        gc_max_interval=max_interval,
        regeneration_seconds=regen_s,
        cores=n_cores,
        node_memory=cap.memory,
        map_ratio=cap.ratio,
        horizon=horizon_s,
        seed=g.seed,
        create_mean_processing=mean,
        endpoint_create=create,
        endpoint_delete=delete,
        create_limiter=g.create_limiter if g.enable_api_rate_limit is not False else None,
        until_resolved=g.horizon is None,
        notes=tuple(notes),
        origins=tuple(origins.items()),
        calibration=g.calibration.path if g.calibration is not None else None,
        arrivals=_arrivals(g, horizon_s),
        arrival_schedule=g.arrival_schedule,
        agent_bootstrap=g.agent_bootstrap or 0.0,
        delete_schedule=g.delete_schedule,
        ct_fill_signals=g.ct_fill_signals,
        nat_fill_signals=g.nat_fill_signals,
        **_rollout(g),
        given=g,
    )


def _arrivals(g: Given, horizon: float) -> tuple[float, ...]:
    """The pods' arrival times, one per pod, in order, within the run."""
    a = g.arrivals
    if not a:
        return ()
    if g.arrival_schedule is not None:
        raise InputError("the pods come at their own times here: a schedule of more is not taken", "arrival_schedule")
    if len(a) != g.pods:
        raise InputError(f"arrivals: {len(a):,} times for {g.pods:,} pods")
    if not 0.0 <= a[0] <= a[-1] <= horizon or list(a) != sorted(a):
        raise InputError(f"arrivals: times must be ascending, from 0 to the horizon ({horizon:g} s)")
    return a


class _Capacity:
    """Map capacity per family (TCP, non-TCP) and where it came from. A slotted class: cheap to define."""

    __slots__ = ("any", "memory", "origin", "preset_tcp", "ratio", "tcp")

    def __init__(self, tcp: int, any_: int, origin: Origin, memory: int, ratio: float | None, preset_tcp: int) -> None:
        self.tcp, self.any, self.origin, self.memory, self.ratio, self.preset_tcp = (
            tcp,
            any_,
            origin,
            memory,
            ratio,
            preset_tcp,
        )


def _both_maps(tcp: Origin, any_: Origin, sized: Origin) -> Origin:
    """The two maps' capacities' origin, said once: the sizing's alone where neither map was given its own."""
    if tcp is sized and any_ is sized:
        return sized
    left = f"TCP {sized}" if tcp is sized else f"{tcp} (TCP)" if tcp.is_series else str(tcp)
    return Origin(f"{left}; non-TCP {any_}", (any_ if tcp is sized else tcp).source)


def _static_tcp(p: Preset) -> int:
    return p.ct_tcp_max or CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT


def _preset_tcp(p: Preset) -> int:
    """The TCP capacity of the preset's own node (its entries are a share of it)."""
    return ct_map_sizes(p.node_memory, p.map_ratio).tcp if p.map_ratio else _static_tcp(p)


def map_capacity(g: Given) -> tuple[int, int]:
    """The TCP and non-TCP maps' capacity ``resolve`` gives ``g``'s sizing over its preset: the fleet's too."""
    p = get_preset(DEFAULT_PRESET if g.preset is None else g.preset)
    cap = _capacity(p, g, [])
    return cap.tcp, cap.any


def _capacity(p: Preset, g: Given, notes: list[str]) -> _Capacity:
    """The maps' capacity: --max-entries, else sizing from memory x ratio, else static sizes.

    A given --node-memory or --map-ratio always sizes the maps: memory or
    ratio not given come from the preset, and a preset with static sizes
    lends the Helm chart's ratio.
    """
    from_preset = f"preset {p.name}"
    memory = g.node_memory if g.node_memory is not None else p.node_memory
    memory_from = f"--node-memory {format_bytes(memory)}" if g.node_memory is not None else format_bytes(memory)
    if g.node_memory is None and g.map_ratio is not None:
        memory_from = f"{from_preset}'s {memory_from}"
    ratio: float | None
    if g.map_ratio is not None:
        ratio = g.map_ratio or None
        ratio_from = f"--map-ratio {ratio:g}" if ratio else ""
    elif g.node_memory is not None and p.map_ratio is None:
        ratio = DEFAULT_DYNAMIC_SIZE_RATIO
        ratio_from = f"ratio {ratio:g}, the Helm chart's default"
        notes.append(
            f"--node-memory sizes the maps with bpf-map-dynamic-size-ratio {ratio:g} (the Helm chart's default): "
            f"preset {p.name} has static sizes; give --map-ratio to choose another"
        )
    else:
        ratio = p.map_ratio
        ratio_from = (f"{from_preset}'s {ratio:g}" if g.node_memory is not None else f"{ratio:g}") if ratio else ""
    if ratio is not None:
        sizes = ct_map_sizes(memory, ratio)
        tcp, any_ = sizes.tcp, sizes.any
        if sizes.overflowed:
            notes.append(
                f"{format_bytes(memory)} x {ratio:g} overflows the agent's int64 sizing arithmetic: "
                "Cilium sizes such maps as the model does, to what the wrapped product gives"
            )
        how = f"dynamic sizing, {memory_from} x {ratio_from}"
        sized_by_user = g.node_memory is not None or g.map_ratio is not None
        sized = Origin.derived(how) if sized_by_user else Origin.preset(p.name, how)
    else:
        if g.node_memory is not None:
            notes.append("--node-memory sizes nothing: --map-ratio 0 turns dynamic sizing off (static map sizes)")
        tcp, any_ = _static_tcp(p), CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT  # the preset's static limit, if it has one
        sized = Origin.preset(p.name, "static sizes") if p.ct_tcp_max else Origin.default("Cilium's static sizes")
    tcp_origin = any_origin = sized
    if g.max_entries is not None:
        tcp = g.max_entries
        if tcp > LIMIT_TABLE_MAX:
            raise InputError(f"--max-entries: {tcp:,} exceeds Cilium's limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)")
        tcp_origin = g.source("max_entries") or Origin.given("TCP --max-entries")
    if g.any_max_entries is not None:
        any_ = g.any_max_entries
        if any_ > LIMIT_TABLE_MAX:
            raise InputError(
                f"--any-max-entries: {any_:,} exceeds Cilium's limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)"
            )
        any_origin = g.source("any_max_entries") or Origin.given("--any-max-entries")
    origin = _both_maps(tcp_origin, any_origin, sized)
    return _Capacity(tcp, any_, origin, memory, ratio, _preset_tcp(p))


def _preset_share(p: Preset, tcp_max: int, preset_tcp: int) -> tuple[int, Origin]:
    """The preset's TCP entries: its count on its own map, the same share of any other."""
    share = p.entries / preset_tcp
    what = "a full map" if share >= 1 else f"{share:.0%} of the map"
    if tcp_max == preset_tcp:
        return p.entries, Origin.preset(p.name, what)
    return min(tcp_max, round(share * tcp_max)), Origin.derived(f"preset {p.name}'s share of the map, {what}")


def _fill(
    flag: str, entries: int, capacity: int, origin: Origin, user_sized: bool, which: str, notes: list[str]
) -> tuple[int, int, Origin]:
    """A given count on its map: a map the user sized holds what fits; a preset's map grows to hold it."""
    if entries <= capacity:
        return entries, capacity, origin
    if user_sized:
        notes.append(
            f"a {which} map of {capacity:,} holds at most {capacity:,} entries: {flag} {entries:,} "
            "is clamped to it (LRU evicts the rest)"
        )
        return capacity, capacity, origin
    if entries > LIMIT_TABLE_MAX:
        raise InputError(f"{flag}: {entries:,} exceeds Cilium's CT map limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)")
    return entries, entries, origin.amended(f"; {which} raised to {flag}'s {entries:,}")


def _ipv6_maps(
    g: Given, tcp_max: int, any_max: int, user_sized: bool, notes: list[str]
) -> tuple[int | None, int, int, int]:
    """The IPv6 family, when the node is dual-stack: (TCP entries, non-TCP entries, TCP max, non-TCP max).

    Cilium sizes both families' maps alike; the same fill rules as IPv4's apply.
    """
    v6_any = g.ipv6_any_entries if g.ipv6_any_entries is not None else 0
    v6_tcp_max, v6_any_max = tcp_max, any_max
    if g.ipv6_max_entries is not None:
        v6_tcp_max = g.ipv6_max_entries
        if v6_tcp_max > LIMIT_TABLE_MAX:
            raise InputError(
                f"--ipv6-max-entries: {v6_tcp_max:,} exceeds Cilium's limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)"
            )
    if g.ipv6_entries is None:
        for flag, value in (("--ipv6-max-entries", g.ipv6_max_entries), ("--ipv6-any-entries", g.ipv6_any_entries)):
            if value is not None:
                raise InputError(f"{flag}: give --ipv6-entries too (it makes the node dual-stack)")
        return None, 0, v6_tcp_max, v6_any_max
    capped = user_sized or g.ipv6_max_entries is not None
    unsaid = Origin.given()  # the IPv6 maps' capacity has no origin of its own in the inputs block
    v6_entries, v6_tcp_max, _ = _fill("--ipv6-entries", g.ipv6_entries, v6_tcp_max, unsaid, capped, "IPv6 TCP", notes)
    v6_any, v6_any_max, _ = _fill("--ipv6-any-entries", v6_any, v6_any_max, unsaid, capped, "IPv6 non-TCP", notes)
    return v6_entries, v6_any, v6_tcp_max, v6_any_max


def _release(g: Given, notes: list[str], said: Callable[[str], Origin]) -> tuple[Release, Profile, Origin]:
    """The release played and the profile (its walk): ``--cilium-version``, else ``--profile``'s newest patch."""
    prof = get_profile(g.profile)
    if g.cilium_version is None:
        release = newest(prof.release)
        if prof.name == DEFAULT_PROFILE:
            origin = Origin.default("the incident's release")
        else:
            origin = Origin.given(f"--profile {prof.name}, the newest patch of {prof.release} ctsim knows")
    else:
        release, note = played(g.cilium_version)
        if note:
            notes.append(note)
        line = profile_for(release.line)
        if g.profile not in (DEFAULT_PROFILE, line.name):
            raise InputError(
                f"--cilium-version: {g.cilium_version} is not of --profile {g.profile}'s release line: give one of them"
            )
        prof, origin = line, said("cilium_version")
    fresh = g.agent_state is AgentState.FRESH
    agent_down = fresh and (bool(g.agent_bootstrap) or rules(release).initial_scan_blocks)
    unplayed = rules(release).unplayed(agent_down)
    if unplayed:
        notes.append(f"{release} also, and the model does not play it: {'; '.join(unplayed)}")
    return release, prof, origin


def _rollout(g: Given) -> dict[str, int]:
    """The rollout's replicas, surge and unavailability as counts (Kubernetes' rounding)."""
    from ctsim.inputs.workload import IntOrPercent

    default = IntOrPercent(25.0, percent=True)  # a Deployment's RollingUpdate defaults
    if g.rollout is None:
        for name in ("max_surge", "max_unavailable"):
            if getattr(g, name) is not None:
                raise InputError("a rollout's strategy, with no --rollout", name)
        return {}
    surge = (g.max_surge or default).of(g.rollout, round_up=True)
    unavailable = (g.max_unavailable or default).of(g.rollout, round_up=False)
    if surge == 0 and unavailable == 0:
        raise InputError("{param:max_surge} and {param:max_unavailable} cannot both be 0", "max_unavailable")
    return {"rollout": g.rollout, "max_surge": surge, "max_unavailable": unavailable}


def _signals(g: Given, release: Release, notes: list[str]) -> None:
    """The fill-up signals given: each family the node has; what the release sends of them, said."""
    for name, rates in (("ct_fill_signals", g.ct_fill_signals), ("nat_fill_signals", g.nat_fill_signals)):
        if rates is not None and "ipv6" in rates.families and g.ipv6_entries is None:
            raise InputError("ipv6 is signalled, and the node has no IPv6 family (give --ipv6-entries)", name)
    if g.ct_fill_signals is None:
        return
    fill = rules(release).ct_fill_signal
    if fill is CTFillSignal.NEVER:
        notes.append(f"--ct-fill-signals plays none: {release} never sends a CT-fill signal (01dbe8dae0)")
    elif fill is CTFillSignal.ENOMEM:
        notes.append(
            f"--ct-fill-signals taken as the inserts that failed with -ENOMEM: only those signal on {release} "
            "(e26284484c)"
        )


def _limiters(g: Given, notes: list[str]) -> tuple[APILimiterParameters, APILimiterParameters]:
    """endpoint-create's and endpoint-delete's parameters: v1.16.5's defaults, --api-rate-limit's, or none."""
    limits = g.api_rate_limit or APIRateLimits()
    if limits.others:
        notes.append(f"--api-rate-limit: {', '.join(limits.others)} read, and not modelled (only endpoint-create "
                     "and endpoint-delete are)")  # fmt: skip
    if limits.min_wait:
        notes.append(f"--api-rate-limit: min-wait-duration of {', '.join(limits.min_wait)} read, and not played")
    if g.enable_api_rate_limit is False:
        if g.api_rate_limit is not None:
            notes.append("--api-rate-limit has no effect: --enable-api-rate-limit false turns every limiter off")
        return APILimiterParameters(), APILimiterParameters()  # Wait hands out a dummy request
    return limits.endpoint_create, limits.endpoint_delete


def _warm_limiter(
    agent_state: AgentState, walks: list[FamilyWalk], regeneration: float, deadline: float, mean_over: int
) -> tuple[float, Origin]:
    """endpoint-create's meanProcessingDuration at t=0, and how it was derived.

    A warm agent's last ``mean_over`` (10) creates each took one scrub of the
    table as it is at t=0 plus the regeneration, capped at the deadline (a
    create that outlives its caller ends with an error, which feeds nothing
    to AutoAdjust). A fresh agent has no mean: the limiter starts at its defaults.
    """
    if agent_state is AgentState.FRESH:
        return 0.0, Origin.default("a fresh agent's limiter, at its v1.16.5 parameters")
    walk = scrub_seconds(walks)
    mean = min(walk + regeneration, deadline)
    capped = " (capped at the deadline)" if walk + regeneration > deadline else ""
    return mean, Origin.derived(
        f"AutoAdjust after the last {mean_over} creates, each one scrub of this table "
        f"plus the regeneration, {format_duration(mean)}{capped}"
    )


# (conntrack-gc-interval, 0: adaptive; GetInterval's cachedGCInterval at t=0, 0: none yet;
#  when the next pass runs; conntrack-gc-max-interval, 0: Cilium's)
_GCStart = tuple[float, float, float, float]


def _gc_start(g: Given, release: ReleaseRules, notes: list[str]) -> _GCStart:
    """The GC's state at t=0 (GetInterval's cachedGCInterval, and when the next pass runs).

    A fresh agent has no cached interval and runs its first pass now; so does
    an agent given a fixed or an initial interval. Otherwise a warm agent is
    in the incident's state: drifted to the 12 h cap, mid-cycle (half the
    interval it sleeps: 6 h, or half a smaller --gc-max-interval).
    """
    max_interval = g.gc_max_interval or 0.0
    fixed = g.gc_interval
    drifted = False
    if g.gc_initial_interval is not None:
        initial = g.gc_initial_interval
        first_pass = 0.0
    elif fixed:
        initial, first_pass = fixed, 0.0
    elif g.agent_state is AgentState.FRESH:
        initial, first_pass = 0.0, 0.0
        when = "once the agent has started" if release.starts_up(g.agent_bootstrap or 0.0) else "now"
        notes.append(f"fresh agent: 4 requests skip the API limiter; GC runs {when}, next interval from 5m")
    else:
        # Mid-cycle: half the interval the agent sleeps, which GetInterval caps at conntrack-gc-max-interval.
        # Up to v1.18.1 the cached interval stays 12 h (calculateInterval writes it uncapped); from v1.18.2 the
        # GC loop caches the capped one.
        initial, drifted = CONNTRACK_GC_MAX_LRU_INTERVAL, True
        sleeps = min(initial, max_interval) if max_interval else initial
        if release.interval_cache is IntervalCache.CAPPED and max_interval:
            initial = sleeps
        first_pass = DRIFTED_NEXT_PASS if sleeps == initial else sleeps / 2
    if fixed:
        initial = fixed
        for flag, value in (("--gc-initial-interval", g.gc_initial_interval), ("--gc-max-interval", g.gc_max_interval)):
            if value is not None:
                notes.append(f"{flag} has no effect: a fixed --gc-interval is every interval (GetInterval returns it)")
    if g.gc_next_pass is not None:
        first_pass = g.gc_next_pass
    if drifted:
        capped = (
            f", each pass at most {format_duration(max_interval)} apart (--gc-max-interval)"
            if max_interval and max_interval < initial
            else ""
        )
        when = "given" if g.gc_next_pass is not None else "mid-cycle"
        notes.append(
            f"GC starts drifted, as in a warm agent: interval {format_duration(initial)}{capped}, "
            f"next pass in {format_duration(first_pass)} ({when}); --agent-state fresh for a just-started agent"
        )
    if initial == CONNTRACK_GC_STARTING_INTERVAL and first_pass == 0.0:
        notes.append("GC starts fresh: first pass now, interval 5m")
    return fixed, initial, first_pass, max_interval
