"""A scenario: every input of one run, resolved from a preset and the user's flags.

Resolution happens once, here, so the model, the report and the JSON all see
the same parsed values, and so bad input fails before any simulation starts.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field

from ctsim.churn import ChurnSchedule, parse_churn
from ctsim.defaults import (
    CLIENT_TIMEOUT,
    CONNTRACK_GC_MAX_LRU_INTERVAL,
    CONNTRACK_GC_STARTING_INTERVAL,
    CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT,
    CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT,
    DEFAULT_DYNAMIC_SIZE_RATIO,
    DEFAULT_REGENERATION,
    ENDPOINT_CREATE,
    LIMIT_TABLE_MAX,
    TEARDOWN_TIMEOUT,
)
from ctsim.errors import InputError
from ctsim.presets import DEFAULT_PRESET, Preset, get_preset
from ctsim.profiles import Profile, get_profile
from ctsim.projection import FamilyWalk, scrub_seconds
from ctsim.quantity import format_bytes, format_duration, parse_count, parse_duration, parse_float
from ctsim.sizing import ct_map_sizes

DEFAULT_HORIZON = 3600.0  # what capacity planning's burst searches run for
UNTIL_RESOLVED_CAP = 2 * 86400.0  # with no --horizon: the longest a run waits for its burst to resolve
DEFAULT_CONN_SECONDS = 30.0
DRIFTED_NEXT_PASS = 6 * 3600.0  # incident state: the last 12 h pass was 6 h ago
AGENT_STATES = ("warm", "fresh")

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


@dataclass(frozen=True)
class Scenario:
    preset: str
    profile: str
    entries: int  # the IPv4 TCP map's at t=0
    max_entries: int
    max_entries_source: str
    any_max_entries: int
    agent_state: str  # warm: up for days (skip-initial spent); fresh: just started
    ipv6_entries: int | None  # None: IPv4 only; else the node is dual-stack
    ipv6_max_entries: int
    ipv6_any_max_entries: int
    expired_fraction: float
    pods: int
    walk_rate: float
    rate_source: str
    delete_seconds: float
    churn: ChurnSchedule
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
    any_entries: int = 0  # the IPv4 non-TCP map's at t=0
    bucket_seconds: float = 0.0  # a batched walk's cost per bucket of a map's capacity (0: per-entry walks)
    ipv6_any_entries: int = 0
    any_churn: ChurnSchedule = field(default_factory=lambda: ChurnSchedule(((0.0, float("inf")),)))
    ipv6_churn: ChurnSchedule = field(default_factory=lambda: ChurnSchedule(((0.0, float("inf")),)))
    ipv6_any_churn: ChurnSchedule = field(default_factory=lambda: ChurnSchedule(((0.0, float("inf")),)))
    # meanProcessingDuration endpoint-create starts with: a warm agent's last creates (see _warm_limiter); 0: fresh
    create_mean_processing: float = 0.0
    until_resolved: bool = False  # no --horizon: the run ends when the burst is resolved (see ctsim.sim.model)
    notes: tuple[str, ...] = field(default=())
    # Where each input came from, in the inputs block's order: (input, "given" | "derived: ..." | "preset ..." | ...).
    origins: tuple[tuple[str, str], ...] = field(default=())
    # How many times faster than the node's clock the run's clock goes; every
    # duration but a walk's is divided by it (walks are entries / rate).
    # 1 for `ctsim run`; `ctsim emulate` scales down.
    time_scale: float = 1.0
    pod_start_spread: float = 1.0  # kubelet's pod workers reach CNI ADD within this
    calibration: str | None = None  # the calibration file, when one was given
    # The flags as typed, for re-running (sweep rows, plan); not part of the result.
    flags: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

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

    def origin(self, name: str) -> str:
        return dict(self.origins).get(name, "")

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        for name in ("churn", "any_churn", "ipv6_churn", "ipv6_any_churn"):
            schedule: ChurnSchedule = getattr(self, name)
            d[name] = {
                "schedule": schedule.describe(),
                "segments": [
                    {"per_second": r, "duration_s": None if d == float("inf") else d} for r, d in schedule.segments
                ],
            }
        d["notes"] = list(self.notes)
        d["origins"] = dict(self.origins)
        d.pop("flags", None)
        return d


def resolve(
    *,
    preset: str | None = None,
    profile: str = "cilium-1.16",
    entries: str | None = None,
    any_entries: str | None = None,
    max_entries: str | None = None,
    expired_fraction: str | None = None,
    agent_state: str = "warm",
    ipv6_entries: str | None = None,
    ipv6_any_entries: str | None = None,
    ipv6_max_entries: str | None = None,
    pods: str = "50",
    rate: str | None = None,
    churn: str | None = None,
    any_churn: str | None = None,
    ipv6_churn: str | None = None,
    ipv6_any_churn: str | None = None,
    conn_duration: str | None = None,
    deadline: str | None = None,
    gc_interval: str = "auto",
    gc_initial_interval: str | None = None,
    gc_next_pass: str | None = None,
    gc_max_interval: str | None = None,
    regeneration: str | None = None,
    cores: str | None = None,
    node_memory: str | None = None,
    map_ratio: str | None = None,
    horizon: str | None = None,
    seed: int | str = 1,
    calibration: str | None = None,
) -> Scenario:
    """Flags (as the user typed them) over the preset; raises InputError on bad input.

    A preset supplies only what the user did not give; every input's origin
    is kept (``Scenario.origins``). The rules run in this order (so the first
    bad flag is the one named): counts and sizing inputs, map capacity
    (``_capacity``), the IPv4 maps' entries (``_fill``), the IPv6 family
    (``_ipv6_maps``), the walk rate (``_walk_rate``), durations, the GC's
    state at t=0 (``_gc_start``), the warm limiter (``_warm_limiter``).
    """
    typed = dict(locals())
    p = get_preset(DEFAULT_PRESET if preset is None else preset)
    prof = get_profile(profile)
    notes: list[str] = []
    origins: dict[str, str] = {}
    from_preset = f"preset {p.name}"

    def origin(name: str, flag: object, otherwise: str) -> None:
        origins[name] = "given" if flag is not None else otherwise

    n_pods = parse_count(pods, "--pods", minimum=1, maximum=MAX_PODS)
    n_cores = parse_count(cores, "--cores", minimum=1, maximum=MAX_CORES) if cores is not None else p.cores
    n_seed = parse_count(seed, "--seed", maximum=MAX_SEED)
    n_entries = parse_count(entries, "--entries") if entries is not None else None
    n_any = parse_count(any_entries, "--any-entries") if any_entries is not None else None

    cap = _capacity(p, node_memory, map_ratio, max_entries, notes)
    user_sized = max_entries is not None or node_memory is not None or map_ratio is not None
    tcp_max, any_max, capacity_origin = cap.tcp, cap.any, cap.origin
    if n_entries is None:
        n_entries, origins["entries"] = _preset_share(p, tcp_max, cap.preset_tcp)
    else:
        given = n_entries
        n_entries, tcp_max, capacity_origin = _fill(
            "--entries", n_entries, tcp_max, capacity_origin, user_sized, "TCP", notes
        )
        origins["entries"] = "given" if n_entries == given else "given, clamped to the map"
    if n_any is None:
        n_any = min(p.any_entries, any_max)
        origins["any_entries"] = f"{from_preset}: {p.any_assumption}"
    else:
        given = n_any
        n_any, any_max, capacity_origin = _fill(
            "--any-entries", n_any, any_max, capacity_origin, user_sized, "non-TCP", notes
        )
        origins["any_entries"] = "given" if n_any == given else "given, clamped to the map"
    origins["capacity"] = capacity_origin
    v6 = _ipv6_maps(ipv6_entries, ipv6_any_entries, ipv6_max_entries, tcp_max, any_max, user_sized, notes)
    v6_entries, v6_any, v6_tcp_max, v6_any_max = v6
    if v6_entries is not None:
        origins["ipv6"] = "given" + (", maps sized like IPv4's" if ipv6_max_entries is None else "")
    if agent_state not in AGENT_STATES:
        raise InputError(f"--agent-state: must be warm or fresh, got {agent_state!r}")

    if expired_fraction is not None:
        expired = parse_float(expired_fraction, "--expired-fraction", low=0.0, high=1.0)
    else:
        expired = p.expired_fraction
    origin("expired_fraction", expired_fraction, from_preset)
    walk_rate, rate_source, delete_s, bucket_s = _walk_rate(prof, rate, calibration)
    origins["walk_rate"] = "given" if rate is not None else rate_source

    schedule = parse_churn(churn if churn is not None else p.churn)
    origin("churn", churn, from_preset)
    any_schedule = parse_churn(any_churn if any_churn is not None else p.any_churn, "--any-churn")
    origin("any_churn", any_churn, from_preset)
    v6_schedules = []
    for flag, value in (("--ipv6-churn", ipv6_churn), ("--ipv6-any-churn", ipv6_any_churn)):
        if value is not None and v6_entries is None:
            raise InputError(f"{flag}: give --ipv6-entries too (it makes the node dual-stack)")
        v6_schedules.append(parse_churn(value if value is not None else "0/s", flag))
    conn_s = (
        parse_duration(conn_duration, "--conn-duration", maximum=MAX_HORIZON)
        if conn_duration is not None
        else DEFAULT_CONN_SECONDS
    )
    origin("conn_duration", conn_duration, "default")
    if conn_duration is not None and all(c.peak == 0 for c in (schedule, any_schedule, *v6_schedules)):
        notes.append("--conn-duration has no effect: no churn opens connections in this run")
    deadline_s = (
        parse_duration(deadline, "--deadline", minimum=1.0, maximum=MAX_DEADLINE)
        if deadline is not None
        else CLIENT_TIMEOUT
    )
    origin("deadline", deadline, "default: cilium-cni's ClientTimeout")
    if horizon is not None:
        horizon_s = parse_duration(horizon, "--horizon", maximum=MAX_HORIZON)
        origins["horizon"] = "given"
    else:
        horizon_s = UNTIL_RESOLVED_CAP
        origins["horizon"] = f"until resolved (at most {format_duration(UNTIL_RESOLVED_CAP)})"
    regen_s = (
        parse_duration(regeneration, "--regeneration-time", allow_zero=True, maximum=MAX_REGENERATION)
        if regeneration is not None
        else DEFAULT_REGENERATION
    )
    origin("regeneration", regeneration, "default: the model's assumption")
    origin("cores", cores, from_preset)
    fixed, initial, first_pass, max_interval = _gc_start(
        gc_interval, gc_initial_interval, gc_next_pass, gc_max_interval, agent_state, notes
    )
    walks = [FamilyWalk("ipv4", (n_entries, n_any), walk_rate, (tcp_max, any_max), bucket_s)]
    if v6_entries is not None:
        walks.append(FamilyWalk("ipv6", (v6_entries, v6_any), walk_rate, (v6_tcp_max, v6_any_max), bucket_s))
    mean, origins["limiter"] = _warm_limiter(agent_state, walks, regen_s, deadline_s)
    return Scenario(
        preset=p.name,
        profile=prof.name,
        entries=n_entries,
        max_entries=tcp_max,
        max_entries_source=capacity_origin,
        any_max_entries=any_max,
        agent_state=agent_state,
        ipv6_entries=v6_entries,
        ipv6_max_entries=v6_tcp_max,
        ipv6_any_max_entries=v6_any_max,
        expired_fraction=expired,
        pods=n_pods,
        walk_rate=walk_rate,
        rate_source=rate_source,
        delete_seconds=delete_s,
        bucket_seconds=bucket_s,
        churn=schedule,
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
        seed=n_seed,
        any_entries=n_any,
        ipv6_any_entries=v6_any,
        any_churn=any_schedule,
        ipv6_churn=v6_schedules[0],
        ipv6_any_churn=v6_schedules[1],
        create_mean_processing=mean,
        until_resolved=horizon is None,
        notes=tuple(notes),
        origins=tuple(origins.items()),
        calibration=calibration,
        flags=typed,
    )


class _Capacity:
    """Map capacity per family (TCP, non-TCP) and where it came from. A slotted class: cheap to define."""

    __slots__ = ("any", "memory", "origin", "preset_tcp", "ratio", "tcp")

    def __init__(self, tcp: int, any_: int, origin: str, memory: int, ratio: float | None, preset_tcp: int) -> None:
        self.tcp, self.any, self.origin, self.memory, self.ratio, self.preset_tcp = (
            tcp,
            any_,
            origin,
            memory,
            ratio,
            preset_tcp,
        )


def _static_tcp(p: Preset) -> int:
    return p.ct_tcp_max or CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT


def _preset_tcp(p: Preset) -> int:
    """The TCP capacity of the preset's own node (its entries are a share of it)."""
    return ct_map_sizes(p.node_memory, p.map_ratio).tcp if p.map_ratio else _static_tcp(p)


def _capacity(
    p: Preset, node_memory: str | None, map_ratio: str | None, max_entries: str | None, notes: list[str]
) -> _Capacity:
    """The maps' capacity: --max-entries, else sizing from memory x ratio, else static sizes.

    A given --node-memory or --map-ratio always sizes the maps: memory or
    ratio not given come from the preset, and a preset with static sizes
    lends the Helm chart's ratio.
    """
    from_preset = f"preset {p.name}"
    memory = (
        parse_count(node_memory, "--node-memory", minimum=1, maximum=MAX_NODE_MEMORY)
        if node_memory is not None
        else p.node_memory
    )
    memory_from = f"--node-memory {format_bytes(memory)}" if node_memory is not None else format_bytes(memory)
    if node_memory is None and map_ratio is not None:
        memory_from = f"{from_preset}'s {memory_from}"
    ratio: float | None
    if map_ratio is not None:
        ratio = parse_float(map_ratio, "--map-ratio", low=0.0, high=1.0) or None
        ratio_from = f"--map-ratio {ratio:g}" if ratio else ""
    elif node_memory is not None and p.map_ratio is None:
        ratio = DEFAULT_DYNAMIC_SIZE_RATIO
        ratio_from = f"ratio {ratio:g}, the Helm chart's default"
        notes.append(
            f"--node-memory sizes the maps with bpf-map-dynamic-size-ratio {ratio:g} (the Helm chart's default): "
            f"preset {p.name} has static sizes; give --map-ratio to choose another"
        )
    else:
        ratio = p.map_ratio
        ratio_from = (f"{from_preset}'s {ratio:g}" if node_memory is not None else f"{ratio:g}") if ratio else ""
    if ratio is not None:
        sizes = ct_map_sizes(memory, ratio)
        tcp, any_ = sizes.tcp, sizes.any
        if sizes.overflowed:
            notes.append(
                f"{format_bytes(memory)} x {ratio:g} overflows the agent's int64 sizing arithmetic: "
                "Cilium sizes such maps as the model does, to what the wrapped product gives"
            )
        how = f"dynamic sizing, {memory_from} x {ratio_from}"
        origin = f"derived: {how}" if node_memory is not None or map_ratio is not None else f"{from_preset}: {how}"
    else:
        if node_memory is not None:
            notes.append("--node-memory sizes nothing: --map-ratio 0 turns dynamic sizing off (static map sizes)")
        tcp, any_ = _static_tcp(p), CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT  # the preset's static limit, if it has one
        origin = f"{from_preset}: static sizes" if p.ct_tcp_max else "default: Cilium's static sizes"
    if max_entries is not None:
        tcp = parse_count(max_entries, "--max-entries", minimum=1)
        if tcp > LIMIT_TABLE_MAX:
            raise InputError(f"--max-entries: {tcp:,} exceeds Cilium's limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)")
        origin = f"given: TCP --max-entries; non-TCP {origin}"
    return _Capacity(tcp, any_, origin, memory, ratio, _preset_tcp(p))


def _preset_share(p: Preset, tcp_max: int, preset_tcp: int) -> tuple[int, str]:
    """The preset's TCP entries: its count on its own map, the same share of any other."""
    share = p.entries / preset_tcp
    what = "a full map" if share >= 1 else f"{share:.0%} of the map"
    if tcp_max == preset_tcp:
        return p.entries, f"preset {p.name}: {what}"
    return min(tcp_max, round(share * tcp_max)), f"derived: preset {p.name}'s share of the map, {what}"


def _fill(
    flag: str, entries: int, capacity: int, origin: str, user_sized: bool, which: str, notes: list[str]
) -> tuple[int, int, str]:
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
    return entries, entries, f"{origin}; {which} raised to {flag}'s {entries:,}"


def _ipv6_maps(
    ipv6_entries: str | None,
    ipv6_any_entries: str | None,
    ipv6_max_entries: str | None,
    tcp_max: int,
    any_max: int,
    user_sized: bool,
    notes: list[str],
) -> tuple[int | None, int, int, int]:
    """The IPv6 family, when the node is dual-stack: (TCP entries, non-TCP entries, TCP max, non-TCP max).

    Cilium sizes both families' maps alike; the same fill rules as IPv4's apply.
    """
    v6_entries = parse_count(ipv6_entries, "--ipv6-entries") if ipv6_entries is not None else None
    v6_any = parse_count(ipv6_any_entries, "--ipv6-any-entries") if ipv6_any_entries is not None else 0
    v6_tcp_max, v6_any_max = tcp_max, any_max
    if ipv6_max_entries is not None:
        v6_tcp_max = parse_count(ipv6_max_entries, "--ipv6-max-entries", minimum=1)
        if v6_tcp_max > LIMIT_TABLE_MAX:
            raise InputError(
                f"--ipv6-max-entries: {v6_tcp_max:,} exceeds Cilium's limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)"
            )
    if v6_entries is None:
        for flag, value in (("--ipv6-max-entries", ipv6_max_entries), ("--ipv6-any-entries", ipv6_any_entries)):
            if value is not None:
                raise InputError(f"{flag}: give --ipv6-entries too (it makes the node dual-stack)")
        return None, 0, v6_tcp_max, v6_any_max
    capped = user_sized or ipv6_max_entries is not None
    v6_entries, v6_tcp_max, _ = _fill("--ipv6-entries", v6_entries, v6_tcp_max, "", capped, "IPv6 TCP", notes)
    v6_any, v6_any_max, _ = _fill("--ipv6-any-entries", v6_any, v6_any_max, "", capped, "IPv6 non-TCP", notes)
    return v6_entries, v6_any, v6_tcp_max, v6_any_max


def _warm_limiter(agent_state: str, walks: list[FamilyWalk], regeneration: float, deadline: float) -> tuple[float, str]:
    """endpoint-create's meanProcessingDuration at t=0, and how it was derived.

    A warm agent's last ``mean_over`` (10) creates each took one scrub of the
    table as it is at t=0 plus the regeneration, capped at the deadline (a
    create that outlives its caller ends with an error, which feeds nothing
    to AutoAdjust). A fresh agent has no mean: the limiter starts at its defaults.
    """
    if agent_state == "fresh":
        return 0.0, "default: a fresh agent's limiter, at its v1.16.5 parameters"
    walk = scrub_seconds(walks)
    mean = min(walk + regeneration, deadline)
    capped = " (capped at the deadline)" if walk + regeneration > deadline else ""
    return mean, (
        f"derived: AutoAdjust after the last {ENDPOINT_CREATE.mean_over} creates, each one scrub of this table "
        f"plus the regeneration, {format_duration(mean)}{capped}"
    )


def _walk_rate(prof: Profile, rate: str | None, calibration: str | None) -> tuple[float, str, float, float]:
    """(entries/s, where it came from, seconds per delete, seconds per bucket of a batched walk).

    --rate, else the calibration, else the profile's. A batched walk's bucket
    cost comes from the calibration when it measured one, else the profile.
    """
    delete_s, bucket_s = prof.delete_seconds, prof.bucket_seconds
    cal = None
    if calibration is not None:
        from ctsim.calibration import load as load_calibration

        cal = load_calibration(calibration)
    if cal is not None:
        delete_s = cal.delete_seconds_per_entry
        if prof.walk == "batched" and cal.batch_bucket_seconds is not None:
            bucket_s = cal.batch_bucket_seconds
    if rate is not None:
        return float(parse_count(rate, "--rate", minimum=1, maximum=MAX_WALK_RATE)), "--rate", delete_s, bucket_s
    if cal is not None:
        return cal.walk_rate(prof.walk), cal.describe(prof.walk), delete_s, bucket_s
    return prof.walk_rate, prof.source, delete_s, bucket_s


# (conntrack-gc-interval, 0: adaptive; GetInterval's cachedGCInterval at t=0, 0: none yet;
#  when the next pass runs; conntrack-gc-max-interval, 0: Cilium's)
_GCStart = tuple[float, float, float, float]


def _gc_start(
    gc_interval: str,
    gc_initial_interval: str | None,
    gc_next_pass: str | None,
    gc_max_interval: str | None,
    agent_state: str,
    notes: list[str],
) -> _GCStart:
    """The GC's state at t=0 (GetInterval's cachedGCInterval, and when the next pass runs).

    A fresh agent has no cached interval and runs its first pass now; so does
    an agent given a fixed or an initial interval. Otherwise a warm agent is
    in the incident's state: drifted to the 12 h cap, mid-cycle.
    """
    gc_bounds = {"minimum": MIN_GC_INTERVAL, "maximum": MAX_HORIZON}
    max_interval = parse_duration(gc_max_interval, "--gc-max-interval", **gc_bounds) if gc_max_interval else 0.0

    fixed = 0.0 if gc_interval.strip() == "auto" else parse_duration(gc_interval, "--gc-interval", **gc_bounds)
    if gc_initial_interval is not None:
        initial = parse_duration(gc_initial_interval, "--gc-initial-interval", **gc_bounds)
        first_pass = 0.0
    elif fixed:
        initial, first_pass = fixed, 0.0
    elif agent_state == "fresh":
        initial, first_pass = 0.0, 0.0
        notes.append("fresh agent: 4 requests skip the API limiter; GC runs now, next interval from 5m")
    else:
        initial, first_pass = CONNTRACK_GC_MAX_LRU_INTERVAL, DRIFTED_NEXT_PASS
        notes.append("GC starts drifted: interval 12h, next pass in 6h (--agent-state fresh: a just-started agent)")
    if fixed:
        initial = fixed
        for flag, value in (("--gc-initial-interval", gc_initial_interval), ("--gc-max-interval", gc_max_interval)):
            if value is not None:
                notes.append(f"{flag} has no effect: a fixed --gc-interval is every interval (GetInterval returns it)")
    if gc_next_pass is not None:
        first_pass = parse_duration(gc_next_pass, "--gc-next-pass", allow_zero=True, maximum=MAX_HORIZON)
    if initial == CONNTRACK_GC_STARTING_INTERVAL and first_pass == 0.0:
        notes.append("GC starts fresh: first pass now, interval 5m")
    return fixed, initial, first_pass, max_interval
