"""``ctsim emulate``: the scenario on the real kernel, scaled down, beside the model.

Real LRU hash maps hold the table; a real FIFO lock serialises walks; a GC
thread runs Cilium's adaptive interval and deletes entries whose lifetime has
passed; one thread per pod runs kubelet's loop, cilium-cni's client with its
deadline, and the agent's handlers (API limiter, scrub walks of the real maps,
regeneration sleep, cleanup scrubs, DEL). Every duration is divided by the
time scale; the table is shrunk so that a walk takes the same share of the
deadline as in the full-size scenario. The simulator then runs the very same
scaled scenario, and the two are compared pod by pod.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from ctsim.core.errors import InputError, WorkFailed
from ctsim.core.maptype import MapType
from ctsim.core.origin import Origin
from ctsim.core.quantity import parse_duration
from ctsim.core.releases import rules
from ctsim.inputs.scenario import MapInputs, Scenario
from ctsim.kernel.bpf import BPFMap
from ctsim.kernel.emulated_node import PACE, EmulatedNode, EmuPod, fill_table
from ctsim.kernel.threads import Clock
from ctsim.sim.model import simulate
from ctsim.sim.pod import new_pod
from ctsim.sim.result import Result, percentile


@dataclass
class Scaling:
    time_scale: float
    entries_factor: float
    full_walk_seconds: float
    walk_share_of_deadline: float

    def describe(self) -> str:
        return (
            f"time / {self.time_scale:g} (deadline, intervals, backoffs, limiter); entries x {self.entries_factor:.4g} "
            f"so a walk is {self.walk_share_of_deadline:.0%} of the deadline, as at full size "
            f"({self.full_walk_seconds:.1f} s of {self.full_walk_seconds / self.walk_share_of_deadline:.0f} s)"
        )


def scale(s: Scenario, time_scale: float, real_rate: float, delete_seconds: float) -> tuple[Scenario, Scaling]:
    """The scenario on a clock ``time_scale`` times faster, with walks at ``real_rate``."""
    tcp, any_ = s.families()["ipv4"]  # emulate runs the IPv4 family only (``check``)
    full_walk = (tcp.entries + any_.entries) / s.walk_rate
    factor = real_rate / (s.walk_rate * time_scale)
    entries = round(tcp.entries * factor)
    any_entries = round(any_.entries * factor)
    scaled_s = replace(
        s,
        maps=(  # no churn: connections are not modelled on a scaled clock
            MapInputs(tcp.type, entries, max(entries, round(tcp.max_entries * factor), 16)),
            MapInputs(any_.type, any_entries, max(any_entries, round(any_.max_entries * factor), 16)),
        ),
        walk_rate=real_rate,
        rate_source=s.rate_source.amended(f" (emulation: {real_rate:,.0f} entries/s on this kernel)"),
        delete_seconds=delete_seconds,
        bucket_seconds=0.0,  # the emulation walks entry by entry, at the paced rate
        time_scale=time_scale,
        # Far enough apart that thread wake-up jitter cannot reorder arrivals.
        pod_start_spread=max(s.pod_start_spread, s.pods * 0.04 * time_scale),
    )
    return scaled_s, Scaling(time_scale, factor, full_walk, full_walk / s.deadline)


def table_rate(maps: list[BPFMap], trials: int = 3) -> float:
    """Entries per CPU second of the scrub walk over these very maps: cost per entry depends on map size.

    The fastest of ``trials``: on a shared machine CPU time per entry still
    grows with contention (a busy hyperthread sibling, cold caches), never
    shrinks, so the fastest walk is this kernel's rate.
    """
    samples = []
    for _ in range(trials):
        start = time.thread_time()
        walked = sum(sum(1 for _ in m.walk()) for m in maps)
        samples.append(walked / max(time.thread_time() - start, 1e-9))
    return max(samples)


@dataclass(frozen=True)
class Emulated:
    """What the real kernel side did: each pod, and the node's counts."""

    pods: tuple[EmuPod, ...]
    add_timeouts: int
    add_429: int
    orphaned_walks: int
    gc_intervals: tuple[float, ...]
    lock_max_queue: int
    walks_overran: int  # real walks that outlasted their paced time by more than the tolerance
    max_overrun: float
    walker_scheduling: str
    setup_s: float  # forking the walker and its pipes, before t=0
    thread_scheduling: str  # the agent's threads' policy
    stalled_s: float  # how long, in all, the emulation could not run on time (``StallWatch``)
    max_stall_s: float


def emulate(s: Scenario, maps: list[BPFMap]) -> Emulated:
    """Runs the scaled scenario ``s`` (see ``scale``) on ``maps``; returns per-pod outcomes."""
    clock = Clock()
    node = EmulatedNode(s, maps, clock)
    # No cyclic collection while the clock runs: a full pass over a large caller's heap
    # (a test suite's, a notebook's) holds the GIL for tens of ms (70 ms at 160k objects here), which no node does.
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    # t=0 is when the node is ready: forking the walker can take a second on a loaded
    # machine, and a clock that ran meanwhile would push the pods' timeouts past the horizon.
    setup_s = clock.start()
    try:
        horizon = s.clock.horizon
        node.spawn(node.stalls.run, node.stop)
        node.spawn(node.gc_loop)
        pods = []
        for i in range(s.pods):
            model_pod = new_pod(i, s.pods, s.seed, s.clock.pod_start_spread)
            pod = EmuPod(index=i, created_at=model_pod.created_at)
            pods.append(pod)
            node.spawn(node.pod_worker, pod, model_pod.rng, horizon)
        while not node.stop.wait(min(1.0, max(0.0, horizon - clock.now()))) and clock.now() < horizon:
            pass  # to the horizon, or until a thread dies
    finally:
        node.stop.set()
        for t in list(node.threads):
            t.join(timeout=30)
        node.close()
        if collecting:
            gc.enable()
    if node.failure is not None:
        raise WorkFailed(f"an emulated agent thread died, so the counts are not the emulation's: {node.failure}")
    return Emulated(
        pods=tuple(pods),
        add_timeouts=node.counts["add_timeouts"],
        add_429=node.counts["add_429"],
        orphaned_walks=node.counts["orphaned_walks"],
        gc_intervals=tuple(node.gc_intervals),
        lock_max_queue=node.ct_lock.max_queue,
        walks_overran=len(node.overruns),
        max_overrun=node.max_overrun,
        walker_scheduling=node.walker_scheduling,
        setup_s=setup_s,
        thread_scheduling=node.thread_scheduling,
        stalled_s=node.stalls.stalled_s,
        max_stall_s=node.stalls.worst_s,
    )


def outcome(ready_at: float | None, attempts: int) -> str:
    """A pod's outcome: Ready at its first attempt, Ready after retries, or not Ready.

    Which retry succeeds is left out on purpose: after a timeout, the retry
    schedule compounds sub-millisecond differences (thread wake-ups) into
    different attempt counts without changing what the pod went through.
    """
    if ready_at is None:
        return "not ready"
    return "ready, first attempt" if attempts == 1 else "ready after retries"


@dataclass(frozen=True)
class PodPair:
    """One pod, emulated beside simulated."""

    pod: int
    emulated: str  # ``outcome``
    simulated: str
    emulated_attempts: int
    simulated_attempts: int
    emulated_latency_s: float | None
    simulated_latency_s: float | None

    @property
    def matches(self) -> bool:
        return self.emulated == self.simulated


@dataclass(frozen=True)
class TableRate:
    """The walk rate the emulation paced to, and what the emulated table really walks at."""

    estimated_entries_per_s: float  # the full-size node's per-entry rate on this kernel
    measured_cpu_entries_per_s: float
    paced_entries_per_s: float
    walker_scheduling: str

    @property
    def headroom(self) -> float:
        return self.measured_cpu_entries_per_s / self.paced_entries_per_s


@dataclass(frozen=True)
class Emulation:
    """``ctsim emulate``'s answer: both sides of the same scaled scenario, pod by pod."""

    scaling: Scaling
    scaled: Scenario
    emulated: Emulated
    simulated: Result
    pods: tuple[PodPair, ...]
    latency_error: dict[str, float | None]  # p50, p90, max: |emulated - simulated| / simulated
    table_rate: TableRate
    rate_source: str = ""  # where the per-entry rate came from (a calibration file, or measured now)

    @property
    def mismatched_pods(self) -> int:
        return sum(not p.matches for p in self.pods)

    def to_dict(self) -> dict[str, Any]:
        e, s = self.emulated, self.simulated
        return {
            "scaling": {
                "time_scale": self.scaling.time_scale,
                "entries_factor": self.scaling.entries_factor,
                "walk_share_of_deadline": self.scaling.walk_share_of_deadline,
                "description": self.scaling.describe(),
            },
            "scaled_inputs": self.scaled.to_dict(),
            "mismatched_pods": self.mismatched_pods,
            "latency_error": self.latency_error,
            "emulated": {
                "ready": sum(p.emulated_latency_s is not None for p in self.pods),
                "add_timeouts": e.add_timeouts,
                "add_429": e.add_429,
                "orphaned_walks": e.orphaned_walks,
                "gc_intervals_s": list(e.gc_intervals),
                "lock_max_queue": e.lock_max_queue,
                "walks_overran": e.walks_overran,
                "max_overrun_s": e.max_overrun,
                "setup_s": e.setup_s,
                "thread_scheduling": e.thread_scheduling,
                "stalled_s": e.stalled_s,
                "max_stall_s": e.max_stall_s,
                "failures": [[(round(t, 3), str(o)) for t, o in p.failures] for p in e.pods],
            },
            "simulated": {
                "ready": sum(p.simulated_latency_s is not None for p in self.pods),
                "verdict": s.verdict,
                "add_timeouts": s.counters.add_timeouts,
                "add_429": s.counters.add_429,
                "orphaned_walks": s.counters.orphaned_walks,
                "gc_intervals_s": s.gc.intervals,
                "lock_max_queue": s.lock_max_queue,
            },
            "pods": [asdict(p) for p in self.pods],
            "table_rate": {
                "estimated_entries_per_s": self.table_rate.estimated_entries_per_s,
                "measured_cpu_entries_per_s": self.table_rate.measured_cpu_entries_per_s,
                "paced_entries_per_s": self.table_rate.paced_entries_per_s,
                "headroom": self.table_rate.headroom,
                "walker_scheduling": self.table_rate.walker_scheduling,
            },
            "rate": {"entries_per_s": self.table_rate.estimated_entries_per_s, "source": self.rate_source},
        }


def compare(s: Scenario, scaling: Scaling, emulated: Emulated, simulated: Result, rate: TableRate) -> Emulation:
    pods = []
    for emu, sim in zip(emulated.pods, simulated.pods, strict=True):
        pods.append(
            PodPair(
                pod=emu.index,
                emulated=outcome(emu.ready_at, emu.attempts),
                simulated=outcome(sim.ready_at, sim.attempts),
                emulated_attempts=emu.attempts,
                simulated_attempts=sim.attempts,
                emulated_latency_s=None if emu.ready_at is None else emu.ready_at - emu.created_at,
                simulated_latency_s=sim.ready_latency,
            )
        )
    e_lats = [p.emulated_latency_s for p in pods if p.emulated_latency_s is not None]
    s_lats = [p.simulated_latency_s for p in pods if p.simulated_latency_s is not None]

    def err(q: float | None) -> float | None:
        if not e_lats or not s_lats:
            return None
        e = max(e_lats) if q is None else percentile(e_lats, q)
        m = max(s_lats) if q is None else percentile(s_lats, q)
        return abs(e - m) / m if m else None  # type: ignore[operator]

    errors = {"p50": err(0.5), "p90": err(0.9), "max": err(None)}
    return Emulation(scaling, s, emulated, simulated, tuple(pods), errors, rate)


MAX_EMULATED_PODS = 200  # one thread per pod, plus handlers: beyond this the threads, not the kernel, dominate
MAX_EMULATED_SECONDS = 3600.0  # wall-clock seconds of emulation


EMULATED_HORIZON = "1h"  # without --horizon: threads cannot wait for the burst to resolve as the model does


def fixed_horizon(s: Scenario) -> Scenario:
    """The scenario with a fixed horizon: its own, or ``EMULATED_HORIZON`` (said in a note)."""
    if not s.until_resolved:
        return s
    horizon = parse_duration(EMULATED_HORIZON, "--horizon")
    note = f"ctsim emulate runs a fixed horizon: {EMULATED_HORIZON} without --horizon"
    origins = (*[(k, v) for k, v in s.origins if k != "horizon"], ("horizon", Origin.default(EMULATED_HORIZON)))
    return replace(s, horizon=horizon, until_resolved=False, notes=(*s.notes, note), origins=origins)


def check(s: Scenario, time_scale: float) -> None:
    """What ``ctsim emulate`` can run, named by flag, before any map is made."""
    if s.dual_stack:
        raise InputError("ctsim emulate runs the IPv4 family only", "ipv6_entries")
    for name in ("arrival_schedule", "delete_schedule"):
        if getattr(s, name) is not None:
            raise InputError("ctsim emulate plays the burst at t=0 only (ctsim run plays a schedule)", name)
    if s.agent_state == "fresh" and rules(s.release).starts_up(s.agent_bootstrap):
        raise InputError(
            f"ctsim emulate starts the agent with its API up and its GC at once; {s.release}'s start-up is not "
            "emulated (ctsim run plays it; 1.16.7 to 1.18 start so)",
            "agent_state",
        )
    if s.pods > MAX_EMULATED_PODS:
        raise InputError(f"ctsim emulate runs at most {MAX_EMULATED_PODS} pods (one thread each)", "pods")
    if s.map(MapType.IPV4_TCP).entries < 1:
        raise InputError("ctsim emulate needs at least 1 entry to walk", "entries")
    if not math.isfinite(time_scale) or not 1 <= time_scale <= 1000:
        raise InputError(f"must be between 1 and 1000, got {time_scale!r}", "time_scale")
    if s.horizon / time_scale > MAX_EMULATED_SECONDS:
        raise InputError(
            f"{s.horizon / time_scale:,.0f} s of wall-clock emulation at {{param:time_scale}} {time_scale:g}; "
            f"at most {MAX_EMULATED_SECONDS:,.0f} s (raise {{param:time_scale}} or shorten {{param:horizon}})",
            "horizon",
        )


def run(s: Scenario, time_scale: float, real_rate: float, delete_seconds: float, rate_source: str = "") -> Emulation:
    """Scales ``s`` with ``PACE`` x ``real_rate``, fills the table, then runs both sides.

    Both sides walk at that paced rate, so a walk takes exactly the share of
    the deadline it takes at full size; the emulation's walker does the real
    walk and sleeps out the rest. The rate measured (in CPU time) on the
    emulated table just before the run is reported with the headroom it
    leaves; a walk that outlasts its paced time anyway is counted.
    """
    s = fixed_horizon(s)
    check(s, time_scale)
    scaled_s, scaling = scale(s, time_scale, real_rate * PACE, delete_seconds / PACE)
    maps = fill_table(scaled_s)
    try:
        measured = table_rate(maps)
        paced = scaled_s.walk_rate
        scaled_s = replace(
            scaled_s,
            rate_source=(
                f"{paced:,.0f} entries/s: {PACE:g} x {real_rate:,.0f}/s; this table walks at {measured:,.0f}/s "
                f"in CPU time ({scaled_s.maps[0].entries:,} entries), {measured / paced:.1f}x the paced rate"
            ),
        )
        simulated = simulate(scaled_s)
        emulated = emulate(scaled_s, maps)
    finally:
        for m in maps:
            m.close()
    rate = TableRate(real_rate, measured, paced, emulated.walker_scheduling)
    return replace(compare(scaled_s, scaling, emulated, simulated, rate), rate_source=rate_source)
