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
    DEFAULT_REGENERATION,
    LIMIT_TABLE_MAX,
    TEARDOWN_TIMEOUT,
)
from ctsim.errors import InputError
from ctsim.presets import DEFAULT_PRESET, Preset, get_preset
from ctsim.profiles import Profile, get_profile
from ctsim.quantity import parse_count, parse_duration, parse_float
from ctsim.sizing import ct_map_sizes

DEFAULT_HORIZON = 3600.0
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
    entries: int
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
    horizon: float
    seed: int
    notes: tuple[str, ...] = field(default=())
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

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["churn"] = {
            "schedule": self.churn.describe(),
            "segments": [
                {"per_second": r, "duration_s": None if d == float("inf") else d} for r, d in self.churn.segments
            ],
        }
        d["notes"] = list(self.notes)
        d.pop("flags", None)
        return d


def resolve(
    *,
    preset: str | None = None,
    profile: str = "cilium-1.16",
    entries: str | None = None,
    max_entries: str | None = None,
    expired_fraction: str | None = None,
    agent_state: str = "warm",
    ipv6_entries: str | None = None,
    ipv6_max_entries: str | None = None,
    pods: str = "50",
    rate: str | None = None,
    churn: str | None = None,
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

    The rules run in this order (so the first bad flag is the one named):
    counts and sizing inputs, the IPv4 maps (``_ipv4_maps``), the IPv6 maps
    (``_ipv6_maps``), the walk rate (``_walk_rate``), durations, the GC's
    state at t=0 (``_gc_start``).
    """
    typed = dict(locals())
    p = get_preset(DEFAULT_PRESET if preset is None else preset)
    prof = get_profile(profile)
    notes: list[str] = []

    n_entries = parse_count(entries, "--entries") if entries is not None else p.entries
    n_pods = parse_count(pods, "--pods", minimum=1, maximum=MAX_PODS)
    n_cores = parse_count(cores, "--cores", minimum=1, maximum=MAX_CORES) if cores is not None else p.cores
    memory = (
        parse_count(node_memory, "--node-memory", minimum=1, maximum=MAX_NODE_MEMORY)
        if node_memory is not None
        else p.node_memory
    )
    ratio = parse_float(map_ratio, "--map-ratio", low=0.0, high=1.0) if map_ratio is not None else p.map_ratio
    n_seed = parse_count(seed, "--seed", maximum=MAX_SEED)
    if ratio == 0.0:
        ratio = None

    v4 = _ipv4_maps(p, memory, ratio, max_entries, n_entries, notes)
    v6_entries, v6_tcp_max, v6_any_max, _ = _ipv6_maps(ipv6_entries, ipv6_max_entries, v4, notes)
    n_entries, tcp_max, any_max, source = v4
    if agent_state not in AGENT_STATES:
        raise InputError(f"--agent-state: must be warm or fresh, got {agent_state!r}")

    if expired_fraction is not None:
        expired = parse_float(expired_fraction, "--expired-fraction", low=0.0, high=1.0)
    else:
        expired = p.expired_fraction
    walk_rate, rate_source, delete_s = _walk_rate(prof, rate, calibration)

    schedule = parse_churn(churn if churn is not None else p.churn)
    conn_s = (
        parse_duration(conn_duration, "--conn-duration", maximum=MAX_HORIZON)
        if conn_duration is not None
        else DEFAULT_CONN_SECONDS
    )
    deadline_s = (
        parse_duration(deadline, "--deadline", minimum=1.0, maximum=MAX_DEADLINE)
        if deadline is not None
        else CLIENT_TIMEOUT
    )
    horizon_s = parse_duration(horizon, "--horizon", maximum=MAX_HORIZON) if horizon is not None else DEFAULT_HORIZON
    regen_s = (
        parse_duration(regeneration, "--regeneration-time", allow_zero=True, maximum=MAX_REGENERATION)
        if regeneration is not None
        else DEFAULT_REGENERATION
    )
    fixed, initial, first_pass, max_interval = _gc_start(
        gc_interval, gc_initial_interval, gc_next_pass, gc_max_interval, agent_state, notes
    )

    return Scenario(
        preset=p.name,
        profile=prof.name,
        entries=n_entries,
        max_entries=tcp_max,
        max_entries_source=source,
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
        churn=schedule,
        conn_seconds=conn_s,
        deadline=deadline_s,
        gc_interval=fixed,
        gc_initial_interval=initial,
        gc_first_pass=first_pass,
        gc_max_interval=max_interval,
        regeneration_seconds=regen_s,
        cores=n_cores,
        node_memory=memory,
        map_ratio=ratio,
        horizon=horizon_s,
        seed=n_seed,
        notes=tuple(notes),
        calibration=calibration,
        flags=typed,
    )


# One family's maps: (entries at t=0, TCP capacity, non-TCP capacity, where the capacity came from).
# Plain tuples, not NamedTuples: a NamedTuple costs ~0.8 M instructions to define, on every start-up.
_Maps = tuple[int | None, int, int, str]


def _ipv4_maps(
    p: Preset, memory: int, ratio: float | None, max_entries: str | None, n_entries: int, notes: list[str]
) -> _Maps:
    """Map capacity: explicit, or from sizing, or the preset's static limit; a table never exceeds its map."""
    if ratio is not None:
        sizes = ct_map_sizes(memory, ratio)
        tcp_max, any_max = sizes.tcp, sizes.any
        source = f"dynamic sizing: {memory:,} B x {ratio:g}"
    else:
        tcp_max = p.ct_tcp_max or CT_MAP_ENTRIES_GLOBAL_TCP_DEFAULT
        any_max = CT_MAP_ENTRIES_GLOBAL_ANY_DEFAULT
        source = f"preset {p.name}: static limit"
    if max_entries is not None:
        tcp_max = parse_count(max_entries, "--max-entries", minimum=1)
        source = "--max-entries"
        if tcp_max > LIMIT_TABLE_MAX:
            raise InputError(
                f"--max-entries: {tcp_max:,} exceeds Cilium's limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)"
            )
        if n_entries > tcp_max:
            notes.append(
                f"a map of {tcp_max:,} holds at most {tcp_max:,} entries: --entries {n_entries:,} "
                "is clamped to it (LRU evicts the rest)"
            )
            n_entries = tcp_max
    elif n_entries > tcp_max:
        if n_entries > LIMIT_TABLE_MAX:
            raise InputError(
                f"--entries: {n_entries:,} exceeds Cilium's CT map limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)"
            )
        tcp_max = n_entries
        source += ", raised to --entries"
    return n_entries, tcp_max, any_max, source


def _ipv6_maps(ipv6_entries: str | None, ipv6_max_entries: str | None, v4: _Maps, notes: list[str]) -> _Maps:
    """The IPv6 family, when the node is dual-stack: Cilium sizes both families' maps alike."""
    v6_entries = parse_count(ipv6_entries, "--ipv6-entries") if ipv6_entries is not None else None
    v6_tcp_max, v6_any_max = v4[1], v4[2]
    if ipv6_max_entries is not None:
        v6_tcp_max = parse_count(ipv6_max_entries, "--ipv6-max-entries", minimum=1)
        if v6_entries is None:
            raise InputError("--ipv6-max-entries: give --ipv6-entries too (it makes the node dual-stack)")
        if v6_tcp_max > LIMIT_TABLE_MAX:
            raise InputError(
                f"--ipv6-max-entries: {v6_tcp_max:,} exceeds Cilium's limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)"
            )
    if v6_entries is not None and v6_entries > v6_tcp_max:
        if ipv6_max_entries is not None:  # as for IPv4: a capped map holds what fits
            notes.append(
                f"an IPv6 map of {v6_tcp_max:,} holds at most {v6_tcp_max:,} entries: --ipv6-entries "
                f"{v6_entries:,} is clamped to it (LRU evicts the rest)"
            )
            v6_entries = v6_tcp_max
        elif v6_entries > LIMIT_TABLE_MAX:
            raise InputError(
                f"--ipv6-entries: {v6_entries:,} exceeds Cilium's CT map limit of {LIMIT_TABLE_MAX:,} (LimitTableMax)"
            )
        else:
            v6_tcp_max = v6_entries  # as for IPv4: the map is at least as large as what it holds
    return v6_entries, v6_tcp_max, v6_any_max, ""


def _walk_rate(prof: Profile, rate: str | None, calibration: str | None) -> tuple[float, str, float]:
    """(entries/s, where it came from, seconds per delete): --rate, else the calibration, else the profile's."""
    delete_s = prof.delete_seconds
    cal = None
    if calibration is not None:
        from ctsim.calibration import load as load_calibration

        cal = load_calibration(calibration)
    if cal is not None:
        delete_s = cal.delete_seconds_per_entry
    if rate is not None:
        return float(parse_count(rate, "--rate", minimum=1, maximum=MAX_WALK_RATE)), "--rate", delete_s
    if cal is not None:
        return cal.walk_rate(prof.walk), cal.describe(prof.walk), delete_s
    return prof.walk_rate, prof.source, delete_s


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
    if gc_next_pass is not None:
        first_pass = parse_duration(gc_next_pass, "--gc-next-pass", allow_zero=True, maximum=MAX_HORIZON)
    if initial == CONNTRACK_GC_STARTING_INTERVAL and first_pass == 0.0:
        notes.append("GC starts fresh: first pass now, interval 5m")
    return fixed, initial, first_pass, max_interval
