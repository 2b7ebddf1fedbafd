"""The emulated node: real LRU hash maps for the table, threads for the agent's actors, a process that walks.

A real FIFO lock serialises walks; a GC thread runs Cilium's adaptive
interval and deletes entries whose lifetime has passed; one thread per pod
runs kubelet's loop, cilium-cni's client with its deadline, and the agent's
handlers (API limiter, scrub walks of the real maps, regeneration sleep,
cleanup scrubs, DEL). Durations are the scenario's divided by its time scale.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from ctsim.core.defaults import CT_KEY_SIZES, CT_VALUE_SIZE
from ctsim.core.gc_interval import GCPolicy
from ctsim.core.rate import Cancelled, TooManyRequests, scaled
from ctsim.inputs.scenario import Scenario
from ctsim.kernel.bpf import BPF_MAP_TYPE_LRU_HASH, BPFMap
from ctsim.kernel.calibrate import FILL_CHUNK, ct_key
from ctsim.kernel.threads import Clock, StallWatch, ThreadFIFOLock, ThreadLimiter, realtime
from ctsim.sim.cni import AddOutcome
from ctsim.sim.pod import backoff

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


@dataclass
class EmuEndpoint:
    lock: ThreadFIFOLock = field(default_factory=ThreadFIFOLock)
    deleted: bool = False


@dataclass
class EmuSandbox:
    endpoint: EmuEndpoint | None = None
    paced: bool = False  # its ADD's 429 came after a paced sleep


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
    emulation's timeline; a walk that still overruns is reported. As root it
    also runs under ``SCHED_FIFO`` (the lowest real-time priority): busy
    processes beside it cannot take its core while it walks, and its walks
    are short and paced, so it cannot take the machine either (the kernel
    caps real-time tasks at 95 % of a core anyway). Its first message says
    which policy it got.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it closes the pipe
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # and SIGTERM (``core.termination``): the parent's to send
    conn.send(realtime())
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
        self.deadline, self.teardown, self.regeneration, self.horizon = (
            s.clock.deadline,
            s.clock.teardown,
            s.clock.regeneration,
            s.clock.horizon,
        )
        self.ct_lock = ThreadFIFOLock()
        self.create = ThreadLimiter(clock, "endpoint-create", scaled(s.endpoint_create, k))
        self.delete = ThreadLimiter(clock, "endpoint-delete", scaled(s.endpoint_delete, k))
        if s.agent_state == "warm":
            self.create.core.warm(s.create_mean_processing / k)
            self.delete.core.spend_skip_initial()
        self.build_permits = threading.Semaphore(s.cores)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.gc_intervals: list[float] = []
        self.counts = {"add_timeouts": 0, "add_429": 0, "walks": 0, "orphaned_walks": 0}
        self.overruns: list[float] = []  # seconds by which a real walk outlasted its paced time (beyond tolerance)
        self.max_overrun = 0.0
        self._count_lock = threading.Lock()
        self.failure: str | None = None  # the first thread that died, and why
        self._arrivals = threading.Condition()
        self._arrived = 0  # pods whose first ADD has entered endpoint-create
        self.stalls = StallWatch()
        self.thread_scheduling = "unknown"  # what the agent's threads got (``realtime``), set by the first
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
        self.walker_scheduling: str = self._walker.recv() if self._walker.poll(30) else "unknown"

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
        t = threading.Thread(target=self._realtime_guard, args=(fn, *args), daemon=True)
        self.threads.append(t)
        t.start()
        return t

    def _realtime_guard(self, fn: Callable[..., None], *args: object) -> None:
        """Each new thread first asks for real-time scheduling, as the walker does.

        The agent's wake-ups (limiter, lock, regeneration, CNI reply) then keep
        their time beside busy processes too. Only threads the node started
        ask: the caller's own thread keeps its policy.
        """
        policy = realtime()
        if self.thread_scheduling == "unknown":
            self.thread_scheduling = policy
        self._guard(fn, *args)

    def _guard(self, fn: Callable[..., None], *args: object) -> None:
        """A thread that dies stops the node: counts a thread short are not the emulation's (``failure``)."""
        try:
            fn(*args)
        except Stopped:
            pass
        except Exception as exc:
            with self._count_lock:
                if self.failure is None:
                    self.failure = f"{fn.__name__}: {type(exc).__name__}: {exc}"
            self.stop.set()

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

    def put_endpoint(
        self,
        sandbox: EmuSandbox,
        deadline: float,
        done: threading.Event,
        out: list[AddOutcome],
        entered: Callable[[], None] | None = None,
    ) -> None:
        try:
            req = self.create.wait(deadline, entered)
        except TooManyRequests as e:
            out.append(AddOutcome.TOO_MANY_REQUESTS)
            sandbox.paced = e.paced
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
            out.append(AddOutcome.OK)
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
    def cni_add(self, sandbox: EmuSandbox, entered: Callable[[], None] | None = None) -> AddOutcome:
        deadline = self.clock.now() + self.deadline
        done, out = threading.Event(), []
        self.spawn(self.put_endpoint, sandbox, deadline, done, out, entered)
        done.wait(max(0.0, deadline - self.clock.now()))
        if done.is_set() and out == [AddOutcome.OK]:
            return AddOutcome.OK
        if done.is_set() and out == [AddOutcome.TOO_MANY_REQUESTS]:
            self._count("add_429")
            return AddOutcome.TOO_MANY_REQUESTS
        self._count("add_timeouts")
        return AddOutcome.TIMEOUT

    def cni_del(self, sandbox: EmuSandbox) -> bool:
        deadline = self.clock.now() + self.teardown
        done = threading.Event()
        self.spawn(self.delete_handler, sandbox, deadline, done)
        return done.wait(max(0.0, deadline - self.clock.now()))

    def _first_turn(self, index: int) -> None:
        """Waits until every pod before ``index`` has entered endpoint-create with its first ADD.

        The model's pods reach the limiter in index order, a fraction of a
        second apart; on a busy machine a thread can wake later than the next
        one, and with 2 slots that would swap which pods are served.
        """
        with self._arrivals:
            while self._arrived < index and not self.stop.is_set():
                self._arrivals.wait(0.05)

    def _entered(self) -> None:
        with self._arrivals:
            self._arrived += 1
            self._arrivals.notify_all()

    def pod_worker(self, pod: EmuPod, rng: Any, horizon: float) -> None:
        clock = self.clock
        clock.sleep_until(pod.created_at)
        self._first_turn(pod.index)
        first: Callable[[], None] | None = self._entered
        stale: EmuSandbox | None = None
        while clock.now() < horizon and not self.stop.is_set():
            if stale is not None and self.cni_del(stale):
                stale = None
            if stale is None:
                pod.attempts += 1
                sandbox = EmuSandbox()
                outcome = self.cni_add(sandbox, first)
                first = None
                if outcome is AddOutcome.OK:
                    if clock.now() <= horizon:
                        pod.ready_at = clock.now()
                    return
                pod.failures.append((clock.now(), "429 paced" if sandbox.paced else outcome))
                if not self.cni_del(sandbox):
                    stale = sandbox
            if self.stop.wait(backoff(rng) / self.s.time_scale):
                return


def fill_table(s: Scenario) -> list[BPFMap]:
    """Real maps holding the scenario's table, TCP and non-TCP: expired and live entries by lifetime."""
    key_size = CT_KEY_SIZES["ipv4"]
    maps: list[BPFMap] = []
    try:
        for name, inputs in zip(("ctsim_emu_tcp", "ctsim_emu_any"), s.families()["ipv4"], strict=True):
            entries, max_entries = inputs.entries, inputs.max_entries
            m = BPFMap.create(BPF_MAP_TYPE_LRU_HASH, key_size, CT_VALUE_SIZE, max_entries, name=name)
            maps.append(m)
            _fill(m, entries, s.expired_fraction, key_size)
    except BaseException:
        for m in maps:
            m.close()
        raise
    return maps


def _fill(m: BPFMap, entries: int, expired_fraction: float, key_size: int) -> None:
    expired = round(entries * expired_fraction)
    dead = _LIFETIME.pack(LIFETIME_EXPIRED) + bytes(CT_VALUE_SIZE - 4)
    live = _LIFETIME.pack(LIFETIME_LIVE) + bytes(CT_VALUE_SIZE - 4)
    for base in range(0, entries, FILL_CHUNK):
        n = min(FILL_CHUNK, entries - base)
        keys = b"".join(ct_key(i, key_size) for i in range(base, base + n))
        values = b"".join(dead if i < expired else live for i in range(base, base + n))
        m.update_batch(keys, values, n)
