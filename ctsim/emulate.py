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

import contextlib
import math
import multiprocessing
import signal
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import Any

from ctsim.bpf import BPF_MAP_TYPE_LRU_HASH, BPFMap
from ctsim.calibrate import CT_VALUE_SIZE, FILL_CHUNK, KEY_SIZES, ct_key
from ctsim.churn import ChurnSchedule
from ctsim.cni import TEARDOWN_TIMEOUT
from ctsim.errors import InputError
from ctsim.gc import GCPolicy
from ctsim.kubelet import backoff, new_pod
from ctsim.limiter import (
    ENDPOINT_CREATE,
    ENDPOINT_DELETE,
    WAIT_SEMAPHORE_RESOLUTION,
    APILimiterParameters,
    Cancelled,
    LimitedRequest,
    LimiterCore,
    TooManyRequests,
    scaled,
)
from ctsim.model import simulate
from ctsim.result import Result, percentile
from ctsim.scenario import Scenario

LIFETIME_EXPIRED = 0
LIFETIME_LIVE = 0xFFFFFFFF
_LIFETIME = struct.Struct("<I")  # our CT value keeps the entry's lifetime in its first 4 bytes

# The emulated kernel walks at this share of the rate this CPU was measured at
# (in CPU time). A walk then has ~1/PACE = 4x its CPU time to finish in wall
# time: the walking process keeps its timeline with four busy processes beside
# it on a 2-core machine (it gets ~2/5 of a core, so 2.5x, plus wake-up
# latency), and the report counts the walks that did not. The cost is a
# smaller emulated table for the same walk time.
PACE = 0.25
# A walk may end this share of the deadline after its paced time before it
# counts as an overrun: waking the walking process and the pipe round trip take
# a few ms even when idle, tens of ms under load. Outcomes differ only when a
# walk moves across a deadline; the tests keep walks 15 % of it from the edge.
OVERRUN_TOLERANCE = 0.02


class Stopped(Exception):
    """The emulation reached its horizon while a walk was running."""


class Clock:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def sleep_until(self, t: float) -> None:
        delay = t - self.now()
        if delay > 0:
            time.sleep(delay)


class FifoLock:
    """A ticket lock: waiters are served in arrival order, like Go's mutex in starvation mode.

    Not owner-bound: one thread may take it for another to release.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0
        self._serving = 0
        self.max_queue = 0

    def acquire(self) -> None:
        with self._cond:
            ticket = self._next
            self._next += 1
            self.max_queue = max(self.max_queue, self._next - self._serving - 1)
            while self._serving != ticket:
                self._cond.wait()

    def release(self) -> None:
        with self._cond:
            self._serving += 1
            self._cond.notify_all()


class ThreadSemaphore:
    """``x/sync/semaphore.Weighted`` on threads: FIFO, with a give-up time."""

    def __init__(self, clock: Clock, size: int) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._size, self._cur = size, 0
        self._waiters: deque[list[Any]] = deque()

    def acquire(self, n: int, give_up_at: float) -> bool:
        with self._cond:
            if self._size - self._cur >= n and not self._waiters:
                self._cur += n
                return True
            me: list[Any] = [n, False]
            self._waiters.append(me)
            while not me[1]:
                remaining = give_up_at - self._clock.now()
                if remaining <= 0:
                    self._waiters.remove(me)
                    self._notify()
                    return False
                self._cond.wait(remaining)
            return True

    def release(self, n: int) -> None:
        with self._cond:
            self._cur -= n
            self._notify()

    def _notify(self) -> None:
        while self._waiters and self._size - self._cur >= self._waiters[0][0]:
            waiter = self._waiters.popleft()
            self._cur += waiter[0]
            waiter[1] = True
        self._cond.notify_all()


class ThreadLimiter:
    """``APILimiter`` on the wall clock: the model's LimiterCore behind a mutex, in ``wait()``'s order."""

    def __init__(self, clock: Clock, name: str, params: APILimiterParameters) -> None:
        self.clock = clock
        self.core = LimiterCore(name, params)
        self._mutex = threading.Lock()
        self._sem = ThreadSemaphore(clock, WAIT_SEMAPHORE_RESOLUTION)

    def wait(self, deadline: float) -> LimitedRequest:
        """Admits, or raises TooManyRequests or Cancelled; ``deadline`` is the caller's."""
        clock, core = self.clock, self.core
        with self._mutex:
            req = core.schedule(clock.now())
            if req.skip:
                return core.admitted(clock.now(), req)
            mean, weight = core.mean_processing, core.slot_weight
        if weight:
            give_up = deadline
            if core.params.max_wait > 0:
                give_up = min(deadline, req.scheduled_at + core.params.max_wait)
            if not self._sem.acquire(weight, give_up):
                self.finish(req, success=False)
                if clock.now() >= deadline:
                    raise Cancelled()
                with self._mutex:
                    core.rejected += 1
                raise TooManyRequests()
            req.weight = weight
        with self._mutex:
            now = clock.now()
            delay = core.reserve(now)
            if core.too_late(delay, now - req.scheduled_at):
                core.cancel(now, now + delay)
                core.rejected += 1
                core.paced += mean > 0
                refused = True
            else:
                refused = False
        if refused:
            time.sleep(mean)  # holding the slot, as the agent's handler does
            self.finish(req, success=False)
            raise TooManyRequests(paced=mean > 0)
        if delay > 0:
            clock.sleep_until(min(now + delay, deadline))
            if clock.now() >= deadline:
                with self._mutex:
                    core.cancel(clock.now(), now + delay)
                self.finish(req, success=False)
                raise Cancelled()
        with self._mutex:
            return core.admitted(clock.now(), req)

    def finish(self, req: LimitedRequest, success: bool) -> None:
        with self._mutex:
            freed = self.core.finished(self.clock.now(), req, success)
        if freed and req.weight:
            self._sem.release(req.weight)


@dataclass
class EmuEndpoint:
    lock: FifoLock = field(default_factory=FifoLock)
    deleted: bool = False


@dataclass
class EmuSandbox:
    endpoint: EmuEndpoint | None = None


@dataclass
class EmuPod:
    index: int
    created_at: float
    attempts: int = 0
    ready_at: float | None = None
    failures: list[tuple[float, str]] = field(default_factory=list)


def _walker(conn: Connection, maps: list[BPFMap], rate: float, delete_seconds: float) -> None:
    """The walking process: one full walk of one map per request, as Cilium's loop, paced.

    A scrub only walks (a new pod's IP matches nothing): the tight loop that
    ``ctsim calibrate`` times. A GC pass also reads each lifetime and deletes
    the expired entries. Each walk takes what the model says it takes
    (entries / ``rate`` + deletes × ``delete_seconds``): the real walk runs,
    then the rest of that time is slept. ``rate`` is set below what this CPU
    walks (``PACE``), so a busy machine slows the real walk without moving the
    emulation's timeline; a walk that still overruns is reported.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it closes the pipe
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        collect_garbage, index = request
        start = time.perf_counter()
        m = maps[index]
        walked, deleted = 0, 0
        if not collect_garbage:
            walked = sum(1 for _ in m.walk())
        else:
            expired = []
            for key in m.walk():
                if _LIFETIME.unpack_from(m.last_value)[0] == LIFETIME_EXPIRED:
                    expired.append(key)
                walked += 1
            deleted = sum(m.delete(key) for key in expired)
        left = walked / rate + deleted * delete_seconds - (time.perf_counter() - start)
        if left > 0:
            time.sleep(left)
        conn.send((walked, deleted, deleted / m.max_entries, max(0.0, -left)))


class EmulatedNode:
    """The agent's state on real kernel objects, and its actors as threads."""

    def __init__(self, s: Scenario, maps: list[BPFMap], clock: Clock) -> None:
        self.s, self.maps, self.clock = s, maps, clock
        k = s.time_scale
        self.deadline = s.deadline / k
        self.teardown = TEARDOWN_TIMEOUT / k
        self.regeneration = s.regeneration_seconds / k
        self.horizon = s.horizon / k
        self.ct_lock = FifoLock()
        self.create = ThreadLimiter(clock, "endpoint-create", scaled(ENDPOINT_CREATE, k))
        self.delete = ThreadLimiter(clock, "endpoint-delete", scaled(ENDPOINT_DELETE, k))
        if s.agent_state == "warm":
            self.create.core.spend_skip_initial()
            self.delete.core.spend_skip_initial()
        self.build_permits = threading.Semaphore(s.cores)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.gc_intervals: list[float] = []
        self.counts = {"add_timeouts": 0, "add_429": 0, "walks": 0, "orphaned_walks": 0}
        self.overruns: list[float] = []  # seconds by which a real walk outlasted its paced time (beyond tolerance)
        self.max_overrun = 0.0
        self._count_lock = threading.Lock()
        # Walks run in a process of their own, forked before any thread starts:
        # the agent walks on its own core, not under this process's GIL.
        ctx = multiprocessing.get_context("fork")
        self._walker, child = ctx.Pipe()
        self._walker_mutex = threading.Lock()
        self._walker_process = ctx.Process(
            target=_walker, args=(child, maps, s.walk_rate, s.delete_seconds), daemon=True
        )
        self._walker_process.start()
        child.close()

    def close(self) -> None:
        with contextlib.suppress(OSError, BrokenPipeError):
            self._walker.send(None)
        self._walker_process.join(timeout=30)
        if self._walker_process.is_alive():
            self._walker_process.kill()
        self._walker.close()

    def _count(self, key: str) -> None:
        """Counts what happened within the horizon, as the model does (it stops there)."""
        if self.clock.now() > self.horizon:
            return
        with self._count_lock:
            self.counts[key] += 1

    def spawn(self, fn: Callable[..., None], *args: object) -> threading.Thread:
        t = threading.Thread(target=self._guard, args=(fn, *args), daemon=True)
        self.threads.append(t)
        t.start()
        return t

    def _guard(self, fn: Callable[..., None], *args: object) -> None:
        with contextlib.suppress(Stopped):
            fn(*args)

    # The shared walk: GC passes and scrubs, map by map under the family lock.
    def walk(self, collect_garbage: bool, caller_deadline: float | None) -> tuple[int, int, float]:
        """Walks every map; orphaned, as in the model, when walk time on a non-empty map ran past the caller."""
        walked = deleted = 0
        ratio = 0.0
        orphaned = False
        for index in range(len(self.maps)):
            self.ct_lock.acquire()  # released between the maps, as doGC4 does
            try:
                if self.stop.is_set():
                    raise Stopped()
                with self._walker_mutex:  # the lock already serialises; this guards the pipe
                    self._walker.send((collect_garbage, index))
                    w, d, r, overrun = self._walker.recv()
            finally:
                self.ct_lock.release()
            self.max_overrun = max(self.max_overrun, overrun)
            if overrun > OVERRUN_TOLERANCE * self.deadline:
                self.overruns.append(overrun)
            if caller_deadline is not None and w > 0 and self.clock.now() > caller_deadline:
                orphaned = True
            walked, deleted, ratio = walked + w, deleted + d, max(ratio, r)
        self._count("walks")
        if orphaned:
            self._count("orphaned_walks")
        return walked, deleted, ratio

    def gc_loop(self) -> None:
        s, k = self.s, self.s.time_scale
        policy = GCPolicy(
            fixed_interval=s.gc_interval, max_interval=s.gc_max_interval, cached_interval=s.gc_initial_interval
        )
        next_pass = s.gc_first_pass / k
        previous: float | None = None
        while not self.stop.wait(max(0.0, next_pass - self.clock.now())):
            start = self.clock.now()
            _, _, ratio = self.walk(collect_garbage=True, caller_deadline=None)
            actual = (start - previous) * k if previous is not None else 0.0
            interval = policy.get_interval(actual, ratio)
            if self.clock.now() <= self.horizon:
                self.gc_intervals.append(interval)
            previous = start
            next_pass = self.clock.now() + interval / k

    # The agent's handlers.
    def delete_endpoint(self, ep: EmuEndpoint, caller_deadline: float) -> bool:
        ep.lock.acquire()
        try:
            if ep.deleted:
                return False
            ep.deleted = True
            self.walk(collect_garbage=False, caller_deadline=caller_deadline)
            return True
        finally:
            ep.lock.release()

    def put_endpoint(self, sandbox: EmuSandbox, deadline: float, done: threading.Event, out: list[str]) -> None:
        try:
            req = self.create.wait(deadline)
        except TooManyRequests:
            out.append("429")
            done.set()
            return
        except Cancelled:
            return
        ep = EmuEndpoint()
        sandbox.endpoint = ep
        ep.lock.acquire()  # taken for the scrub goroutine, which releases it
        scrubbed, regenerated = threading.Event(), threading.Event()
        regen_ok: list[bool] = []

        def scrub() -> None:
            try:
                self.walk(collect_garbage=False, caller_deadline=deadline)
            finally:
                ep.lock.release()
                scrubbed.set()

        def regenerate() -> None:
            with self.build_permits:
                scrubbed.wait()
                if ep.deleted or self.clock.now() >= deadline:
                    regen_ok.append(False)
                else:
                    time.sleep(self.regeneration)
                    regen_ok.append(True)
            regenerated.set()

        self.spawn(scrub)
        self.spawn(regenerate)
        regenerated.wait(max(0.0, deadline - self.clock.now()))
        if regenerated.is_set() and regen_ok and regen_ok[0] and self.clock.now() < deadline:
            self.create.finish(req, success=True)
            out.append("ok")
            done.set()
            return
        scrubbed.wait()
        self.delete_endpoint(ep, deadline)
        self.create.finish(req, success=False)

    def delete_handler(self, sandbox: EmuSandbox, deadline: float, done: threading.Event) -> None:
        try:
            req = self.delete.wait(deadline)
        except (Cancelled, TooManyRequests):
            return
        ep = sandbox.endpoint
        found = ep is not None and not ep.deleted and self.delete_endpoint(ep, deadline)
        self.delete.finish(req, success=found)  # a 404 is r.Error(): no re-tuning
        done.set()

    # The clients: cilium-cni under containerd, and kubelet.
    def cni_add(self, sandbox: EmuSandbox) -> str:
        deadline = self.clock.now() + self.deadline
        done, out = threading.Event(), []
        self.spawn(self.put_endpoint, sandbox, deadline, done, out)
        done.wait(max(0.0, deadline - self.clock.now()))
        if done.is_set() and out == ["ok"]:
            return "ok"
        if done.is_set() and out == ["429"]:
            self._count("add_429")
            return "429"
        self._count("add_timeouts")
        return "timeout"

    def cni_del(self, sandbox: EmuSandbox) -> bool:
        deadline = self.clock.now() + self.teardown
        done = threading.Event()
        self.spawn(self.delete_handler, sandbox, deadline, done)
        return done.wait(max(0.0, deadline - self.clock.now()))

    def pod_worker(self, pod: EmuPod, rng: Any, horizon: float) -> None:
        clock = self.clock
        clock.sleep_until(pod.created_at)
        stale: EmuSandbox | None = None
        while clock.now() < horizon and not self.stop.is_set():
            if stale is not None and self.cni_del(stale):
                stale = None
            if stale is None:
                pod.attempts += 1
                sandbox = EmuSandbox()
                outcome = self.cni_add(sandbox)
                if outcome == "ok":
                    if clock.now() <= horizon:
                        pod.ready_at = clock.now()
                    return
                pod.failures.append((clock.now(), outcome))
                if not self.cni_del(sandbox):
                    stale = sandbox
            if self.stop.wait(backoff(rng) / self.s.time_scale):
                return


def fill_table(s: Scenario) -> list[BPFMap]:
    """Real maps holding the scenario's table: expired and live entries by lifetime."""
    key_size = KEY_SIZES["ipv4"]
    tcp = BPFMap.create(BPF_MAP_TYPE_LRU_HASH, key_size, CT_VALUE_SIZE, s.max_entries, name="ctsim_emu_tcp")
    maps = [tcp]
    try:
        maps.append(
            BPFMap.create(BPF_MAP_TYPE_LRU_HASH, key_size, CT_VALUE_SIZE, s.any_max_entries, name="ctsim_emu_any")
        )
        expired = round(s.entries * s.expired_fraction)
        dead = _LIFETIME.pack(LIFETIME_EXPIRED) + bytes(CT_VALUE_SIZE - 4)
        live = _LIFETIME.pack(LIFETIME_LIVE) + bytes(CT_VALUE_SIZE - 4)
        for base in range(0, s.entries, FILL_CHUNK):
            n = min(FILL_CHUNK, s.entries - base)
            keys = b"".join(ct_key(i, key_size) for i in range(base, base + n))
            values = b"".join(dead if i < expired else live for i in range(base, base + n))
            tcp.update_batch(keys, values, n)
    except BaseException:
        for m in maps:
            m.close()
        raise
    return maps


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
    full_walk = s.entries / s.walk_rate
    factor = real_rate / (s.walk_rate * time_scale)
    entries = round(s.entries * factor)
    scaled_s = replace(
        s,
        entries=entries,
        max_entries=max(entries, round(s.max_entries * factor), 16),
        any_max_entries=max(round(s.any_max_entries * factor), 16),
        walk_rate=real_rate,
        rate_source=f"{s.rate_source} (emulation: {real_rate:,.0f} entries/s on this kernel)",
        delete_seconds=delete_seconds,
        churn=ChurnSchedule(((0.0, float("inf")),)),
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


def emulate(s: Scenario, maps: list[BPFMap]) -> dict[str, Any]:
    """Runs the scaled scenario ``s`` (see ``scale``) on ``maps``; returns per-pod outcomes."""
    clock = Clock()
    node = EmulatedNode(s, maps, clock)
    try:
        horizon = s.horizon / s.time_scale
        node.spawn(node.gc_loop)
        pods = []
        for i in range(s.pods):
            model_pod = new_pod(i, s.pods, s.seed, s.pod_start_spread / s.time_scale)
            pod = EmuPod(index=i, created_at=model_pod.created_at)
            pods.append(pod)
            node.spawn(node.pod_worker, pod, model_pod.rng, horizon)
        clock.sleep_until(horizon)
    finally:
        node.stop.set()
        for t in list(node.threads):
            t.join(timeout=30)
        node.close()
    return {
        "pods": pods,
        "counts": node.counts,
        "gc_intervals": node.gc_intervals,
        "lock_max_queue": node.ct_lock.max_queue,
        "overruns": node.overruns,
        "max_overrun": node.max_overrun,
    }


def outcome(ready_at: float | None, attempts: int) -> str:
    """A pod's outcome: Ready at its first attempt, Ready after retries, or not Ready.

    Which retry succeeds is left out on purpose: after a timeout, the retry
    schedule compounds sub-millisecond differences (thread wake-ups) into
    different attempt counts without changing what the pod went through.
    """
    if ready_at is None:
        return "not ready"
    return "ready, first attempt" if attempts == 1 else "ready after retries"


def compare(s: Scenario, scaling: Scaling, emulated: dict[str, Any], simulated: Result) -> dict[str, Any]:
    rows = []
    for emu, sim in zip(emulated["pods"], simulated.pods, strict=True):
        e_lat = None if emu.ready_at is None else emu.ready_at - emu.created_at
        s_lat = sim.ready_latency
        rows.append(
            {
                "pod": emu.index,
                "emulated": outcome(emu.ready_at, emu.attempts),
                "simulated": outcome(sim.ready_at, sim.attempts),
                "emulated_attempts": emu.attempts,
                "simulated_attempts": sim.attempts,
                "emulated_latency_s": e_lat,
                "simulated_latency_s": s_lat,
            }
        )
    mismatched = sum(r["emulated"] != r["simulated"] for r in rows)
    e_lats = [r["emulated_latency_s"] for r in rows if r["emulated_latency_s"] is not None]
    s_lats = [r["simulated_latency_s"] for r in rows if r["simulated_latency_s"] is not None]

    def err(q: float | None) -> float | None:
        if not e_lats or not s_lats:
            return None
        e = max(e_lats) if q is None else percentile(e_lats, q)
        m = max(s_lats) if q is None else percentile(s_lats, q)
        return abs(e - m) / m if m else None  # type: ignore[operator]

    return {
        "scaling": {
            "time_scale": scaling.time_scale,
            "entries_factor": scaling.entries_factor,
            "walk_share_of_deadline": scaling.walk_share_of_deadline,
            "description": scaling.describe(),
        },
        "scaled_inputs": s.to_dict(),
        "mismatched_pods": mismatched,
        "latency_error": {"p50": err(0.5), "p90": err(0.9), "max": err(None)},
        "emulated": {
            "ready": len(e_lats),
            "add_timeouts": emulated["counts"]["add_timeouts"],
            "add_429": emulated["counts"]["add_429"],
            "orphaned_walks": emulated["counts"]["orphaned_walks"],
            "gc_intervals_s": emulated["gc_intervals"],
            "lock_max_queue": emulated["lock_max_queue"],
            "walks_overran": len(emulated["overruns"]),
            "max_overrun_s": emulated["max_overrun"],
        },
        "simulated": {
            "ready": len(s_lats),
            "verdict": simulated.verdict,
            "add_timeouts": simulated.counters.add_timeouts,
            "add_429": simulated.counters.add_429,
            "orphaned_walks": simulated.counters.orphaned_walks,
            "gc_intervals_s": simulated.gc.intervals,
            "lock_max_queue": simulated.lock_max_queue,
        },
        "pods": rows,
    }


MAX_EMULATED_PODS = 200  # one thread per pod, plus handlers: beyond this the threads, not the kernel, dominate
MAX_EMULATED_SECONDS = 3600.0  # wall-clock seconds of emulation


def check(s: Scenario, time_scale: float) -> None:
    """What ``ctsim emulate`` can run, named by flag, before any map is made."""
    if s.ipv6_entries is not None:
        raise InputError("--ipv6-entries: ctsim emulate runs the IPv4 family only")
    if s.pods > MAX_EMULATED_PODS:
        raise InputError(f"--pods: ctsim emulate runs at most {MAX_EMULATED_PODS} pods (one thread each)")
    if s.entries < 1:
        raise InputError("--entries: ctsim emulate needs at least 1 entry to walk")
    if not math.isfinite(time_scale) or not 1 <= time_scale <= 1000:
        raise InputError(f"--time-scale: must be between 1 and 1000, got {time_scale!r}")
    if s.horizon / time_scale > MAX_EMULATED_SECONDS:
        raise InputError(
            f"--horizon: {s.horizon / time_scale:,.0f} s of wall-clock emulation at --time-scale {time_scale:g}; "
            f"at most {MAX_EMULATED_SECONDS:,.0f} s (raise --time-scale or shorten --horizon)"
        )


def run(s: Scenario, time_scale: float, real_rate: float, delete_seconds: float) -> dict[str, Any]:
    """Scales ``s`` with ``PACE`` x ``real_rate``, fills the table, then runs both sides.

    Both sides walk at that paced rate, so a walk takes exactly the share of
    the deadline it takes at full size; the emulation's walker does the real
    walk and sleeps out the rest. The rate measured (in CPU time) on the
    emulated table just before the run is reported with the headroom it
    leaves; a walk that outlasts its paced time anyway is counted.
    """
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
                f"in CPU time ({scaled_s.entries:,} entries), {measured / paced:.1f}x the paced rate"
            ),
        )
        simulated = simulate(scaled_s)
        emulated = emulate(scaled_s, maps)
    finally:
        for m in maps:
            m.close()
    report = compare(scaled_s, scaling, emulated, simulated)
    report["table_rate"] = {
        "estimated_entries_per_s": real_rate,
        "measured_cpu_entries_per_s": measured,
        "paced_entries_per_s": paced,
        "headroom": measured / paced,
    }
    return report
