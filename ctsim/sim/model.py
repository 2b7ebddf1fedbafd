"""Wires a scenario into a SimPy node, runs it, and reads off the result."""

from __future__ import annotations

import gc
from array import array
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import simpy

if TYPE_CHECKING:  # a run's optional parts, imported where a run has them (most have none)
    from ctsim.sim.bootstrap import AgentStart
    from ctsim.sim.deletion import Deletion
    from ctsim.sim.rollout import Rollout
    from ctsim.sim.signals import GCSignals

from ctsim.core.defaults import CT_TIMEOUT_ANY, CT_TIMEOUT_TCP_FIN
from ctsim.core.gc_interval import GCPolicy
from ctsim.core.projection import FamilyWalk, Projection
from ctsim.core.releases import IntervalCache, rules
from ctsim.inputs.scenario import MapInputs, Scenario
from ctsim.sim.clock import advance, process_after, start_processes
from ctsim.sim.connections import ConnectionChurn
from ctsim.sim.ctmap import new_map
from ctsim.sim.gc import GCHistory, GCPass, run_gc, run_gc_signalled
from ctsim.sim.intervals import RetryIntervals
from ctsim.sim.kubelet import pod_worker
from ctsim.sim.lock import GlobalDeleteLock
from ctsim.sim.node import AgentAPI, Family, Node
from ctsim.sim.parking import Parking
from ctsim.sim.pod import Pod, new_pod
from ctsim.sim.result import STALL, Advice, FamilyResult, LimiterEnd, Result, verdict
from ctsim.sim.walk import walk


def _family(env: simpy.Environment, name: str, inputs: tuple[MapInputs, ...], expired_fraction: float) -> Family:
    """A family's maps (TCP, non-TCP) with their t=0 entries, the same share expired in each, and its lock."""
    maps = []
    for m in inputs:
        expired = round(m.entries * expired_fraction)
        maps.append(new_map(m.type.pinned, m.max_entries, established=m.entries - expired, expired=expired))
    return Family(name, maps, GlobalDeleteLock(env, name))


# A run that waits for its burst gives up once this long went by, past a GC pass, with no pod becoming Ready.
STORM_SETTLE = 3600.0


@dataclass
class Model:
    scenario: Scenario
    trace_every: float | None = None  # node seconds between (t, present, expired) samples
    parking: bool = True  # play refused retries on demand (ctsim.sim.parking); False plays each as events
    gather: frozenset[int] | None = None  # a replay's: keep only the intervals of these keys (sim.intervals)
    env: simpy.Environment = field(init=False)
    node: Node = field(init=False)
    pods: list[Pod] = field(init=False)
    parked: Parking | None = field(init=False)  # None: parking is off, or cannot apply to this scenario
    gc: GCHistory = field(init=False)

    def __post_init__(self) -> None:
        s = self.scenario
        self.env = env = simpy.Environment()
        k = s.time_scale
        families = [_family(env, name, maps, s.expired_fraction) for name, maps in s.families().items()]
        self.node = Node(
            env=env,
            families=families,
            walk_rate=s.walk_rate,
            delete_seconds=s.delete_seconds,
            bucket_seconds=s.bucket_seconds,
            regeneration_seconds=s.clock.regeneration,
            teardown_seconds=s.clock.teardown,
            cores=s.cores,
            time_scale=k,
            create_params=s.endpoint_create,
            delete_params=s.endpoint_delete,
            delete_404_first=rules(s.release).delete_404_before_limiter,
        )
        if s.agent_state == "warm":
            self.node.endpoint_create.core.warm(s.create_mean_processing / k)
            if s.create_limiter is not None:  # where the agent reports it: AutoAdjust's reading of the mean aside
                c = s.create_limiter
                self.node.endpoint_create.core.set_state(c.parallel_requests, c.rate_limit * k, c.rate_burst)
            self.node.endpoint_delete.core.spend_skip_initial()
        self.entries_at_start = {f.name: tuple(m.present for m in f.maps) for f in families}
        self.gc = GCHistory()
        policy = GCPolicy(
            fixed_interval=s.gc_interval,
            max_interval=s.gc_max_interval,
            cached_interval=s.gc_initial_interval,
            capped_cache=rules(s.release).interval_cache is IntervalCache.CAPPED,
        )
        names = tuple(f.name for f in families)
        release = rules(s.release)
        sent = s.signals_sent(release)
        self.signals: GCSignals | None = None
        if sent:
            from ctsim.sim.signals import GCSignals, signal_source

            self.signals = GCSignals(env)
            for name, per_second in sent:
                env.process(signal_source(env, self.signals, name, per_second, s.horizon, k))

        def start_gc(first: float) -> None:
            """The GC goroutine, its first pass ``first`` node seconds on."""
            if self.signals is not None:
                walks_all = release.gc_walks_all_families
                loop = run_gc_signalled(env, self._gc_pass, policy, first, self.gc, names, self.signals, walks_all, k)
                env.process(loop)
            else:
                env.process(run_gc(env, self._gc_pass, policy, first, self.gc, names, k))

        self.agent: AgentStart | None = None
        if s.agent_state == "fresh" and release.starts_up(s.agent_bootstrap):
            self._start_agent(start_gc)
        else:
            start_gc(s.gc_first_pass)
        simulated = [m for f in families for m in f.maps]  # in s.maps' order
        feeds = [
            (ctmap, m.churn, CT_TIMEOUT_TCP_FIN if m.type.tcp else CT_TIMEOUT_ANY)
            for ctmap, m in zip(simulated, s.maps, strict=True)
        ]
        for ctmap, schedule, close in feeds:
            if schedule.peak > 0:
                if k != 1.0:
                    raise ValueError("churn is not modelled on a scaled clock")
                ctmap.feed = ConnectionChurn(
                    ctmap, schedule, s.conn_seconds, until=s.horizon, close_timeout=close
                ).catch_up
        self.trace: list[tuple[float, int, int]] = []  # (t, present, expired) over every map
        self.trace_maps: list[tuple[int, ...]] = []  # present per map at each sample: IPv4 TCP, non-TCP, IPv6 ...
        if self.trace_every:
            env.process(self._sample(self.trace_every / k))
        spread, arrivals = s.clock.pod_start_spread, s.arrivals
        self.pods = [new_pod(i, s.pods, s.seed, spread, arrivals[i] / k if arrivals else None) for i in range(s.pods)]
        if s.arrival_schedule is not None:  # after the burst's, numbered on, each jittered within its slot
            slots = s.arrival_schedule.slots()
            self.pods += [new_pod(s.pods + j, s.pods, s.seed, spread, t / k, w / k) for j, (t, w) in enumerate(slots)]
        self.deletions: list[Deletion] = []
        if s.delete_schedule is not None:
            from ctsim.sim.deletion import deletions

            self.deletions = deletions(s.delete_schedule.slots(), s.seed, k)
        self.rollout: Rollout | None = None
        if s.rollout:
            from ctsim.sim.rollout import Rollout

            self.rollout = Rollout(
                self.node, s.rollout, s.max_surge, s.max_unavailable, self._rollout_pod, s.clock.deadline, s.seed,
                first_deletion=len(self.deletions),
            )  # fmt: skip
            self.node.on_ready = self.rollout.pod_ready
        self.node.unready = len(self.pods) + s.rollout  # the rollout's pods are still to come
        self.node.undeleted = len(self.deletions) + s.rollout
        self.intervals = RetryIntervals(self.node.retry_intervals, self.gather)
        self.intervals.replay = partial(_gather, s, self.trace_every, self.parking)
        self.ended_because = "horizon"
        self.stopped = False  # the run ended before its horizon (``_until_resolved``)
        if s.until_resolved:
            self._until_resolved()
        deadline = s.clock.deadline
        parks = self.parking and Parking.applies(self.node, deadline)
        self.parked = Parking(self.node, deadline) if parks else None
        start_processes(env, lambda: self._start_pods(deadline))

    def _start_agent(self, start_gc: Callable[[float], None]) -> None:
        """A fresh agent's start-up (``ctsim.sim.bootstrap``): the API down until it is done; the GC from it."""
        from ctsim.sim.bootstrap import AgentStart, agent_start

        s, env, node = self.scenario, self.env, self.node
        release = rules(s.release)
        node.api = AgentAPI(env.event(), release.cni_del_connect_timeout_s)
        self.agent = AgentStart(node.api, release.initial_scan_blocks)

        def first_pass_done() -> simpy.Event:
            done = env.event()

            def told(_: GCPass) -> None:
                self.gc.watchers.remove(told)
                done.succeed()

            self.gc.watchers.append(told)
            return done

        restore = s.regeneration_seconds if release.gc_after_endpoint_restore else 0.0
        gc_delay = restore + s.gc_first_pass  # where the initial scan does not block; else it runs at once
        env.process(agent_start(node, self.agent, s.agent_bootstrap, start_gc, first_pass_done, gc_delay))

    def _stopped(self, _: simpy.Event) -> None:
        self.stopped = True

    def _until_resolved(self) -> None:
        """Ends the run when its burst is resolved: every pod Ready, or ``STORM_SETTLE`` without one becoming Ready.

        That window starts no earlier than the end of the first GC pass: while
        pods still become Ready, or that pass's effect may still show, the
        storm can change on its own. Past it nothing but the next pass (up to
        12 h later) or an operator can; the cap (the horizon) ends a run whose
        first pass never comes.
        """
        env = self.env
        stop = env.event()
        # Set as the stop is processed: SimPy reschedules a stop event, so it is not ``processed`` until the next run.
        stop.callbacks.append(self._stopped)
        stop.callbacks.append(simpy.core.StopSimulation.callback)

        def end(because: str) -> None:
            if not stop.triggered:
                self.ended_because = because
                stop.succeed()

        all_ready = self.node.all_ready = env.event()
        all_ready.callbacks.append(lambda _: end("resolved"))
        settle = STORM_SETTLE / self.scenario.time_scale
        # Pods given their own arrival times (a backtest, --arrivals) or deletions may still be coming: the storm
        # is not settled before.
        s = self.scenario
        last_arrival = max(
            self.pods[-1].created_at if s.arrivals or s.arrival_schedule is not None else 0.0,
            self.deletions[-1].asked_at if self.deletions else 0.0,
        )

        def check(passed: float) -> None:
            """At ``settle`` past the first pass's end (``passed``), then past each pod's Ready after it."""
            ready = max((p.ready_at for p in self.pods if p.ready_at is not None), default=0.0)
            ready = max((d.deleted_at for d in self.deletions if d.deleted_at is not None), default=ready)
            since = max(ready, passed, last_arrival)
            if env.now - since >= settle:
                end("settled")
            else:
                env.timeout(since + settle - env.now).callbacks.append(lambda _: check(passed))

        def first_pass(p: GCPass) -> None:  # told at the end of the pass
            self.gc.watchers.remove(first_pass)
            passed = p.end
            env.timeout(settle).callbacks.append(lambda _: check(passed))

        self.gc.watchers.append(first_pass)

    def _start_pods(self, deadline: float) -> None:
        """Every pod's worker, waiting for its first ADD; one start event for all of them."""
        node, env, parked = self.node, self.env, self.parked
        for pod in self.pods:
            process_after(env, pod.created_at, pod_worker(node, pod, deadline, parked), unwatched=True)
        seed = self.scenario.seed
        if self.rollout is not None:
            self.rollout.reconcile()
        if self.deletions:
            from ctsim.sim.deletion import delete_running_pod
        for d in self.deletions:
            process_after(env, d.asked_at, delete_running_pod(node, d, deadline, seed), unwatched=True)

    def _rollout_pod(self) -> Pod:
        """A rollout's next new pod: created now, its first ADD within kubelet's start spread, as a burst's."""
        s, env = self.scenario, self.env
        spread = s.clock.pod_start_spread
        pod = new_pod(len(self.pods), 1, s.seed, spread, at=env.now, within=spread)
        self.pods.append(pod)
        worker = pod_worker(self.node, pod, s.clock.deadline, self.parked)
        process_after(env, pod.created_at - env.now, worker, unwatched=True)
        return pod

    def _gc_pass(self, names: tuple[str, ...]) -> Generator[simpy.Event, object, tuple[int, int, tuple[float, ...]]]:
        """``runGC`` over ``GlobalMaps(ipv4, ipv6)`` for the pass's families: each one's ratio (max over its maps)."""
        walked = deleted = 0
        ratios = []
        for family in self.node.families:
            if family.name in names:
                w, d, r = yield from walk(self.node, family, collect_garbage=True)
                walked, deleted = walked + w, deleted + d
                ratios.append(r)
        return walked, deleted, tuple(ratios)

    def _sample(self, every: float) -> Generator[simpy.Event, None, None]:
        while True:
            now = self.env.now
            maps = [m for family in self.node.families for m in family.maps]
            for m in maps:
                m.catch_up(now)
            present = tuple(m.present for m in maps)
            self.trace.append((now, sum(present), sum(m.expired(now) for m in maps)))
            self.trace_maps.append(present)
            if not advance(self.env, every):  # its own timer wakes it alone
                yield self.env.timeout(every)

    def run(self, progress: Callable[[str, int, int], None] | None = None) -> Result:
        """Runs to the horizon in hundredths, folding the intervals after each; ``progress("simulate", 1, 100)``.

        A run in slices is the same run: each slice's end is one more event, which
        orders nothing else.
        """
        horizon = self.scenario.clock.horizon
        # Events and generators are freed by reference counting as they are processed; the cyclic
        # collector would only rescan every live pod's frames, again and again (half the run at 3,000 pods).
        collecting = gc.isenabled()
        gc.disable()
        try:
            for step in range(1, 101):
                self.env.run(until=horizon * step / 100 if step < 100 else horizon)
                self.intervals.fold()
                self._fold_latencies()
                if progress is not None:
                    progress("simulate", 1, 100)
                if self.stopped:
                    if progress is not None:
                        progress("simulate", 100 - step, 100)
                    break
        finally:
            if collecting:
                gc.enable()
        return self.result()

    def _fold_latencies(self) -> None:
        self.node.latency.fold()
        self.node.endpoint_create.waits.fold()
        self.node.endpoint_delete.waits.fold()

    def result(self) -> Result:
        s, node, now = self.scenario, self.node, self.env.now
        if self.parked is not None:
            self.parked.finish()  # a parked pod's steps before the horizon
        self.intervals.fold()
        for pod in self.pods:
            pod.rng.release()
        for family in node.families:
            for m in family.maps:
                m.catch_up(now)  # what opened by the end; none at the horizon, whose events a run stops before
        overhead, deadline = s.clock.regeneration, s.clock.deadline
        families = [
            FamilyResult(
                name=f.name,
                max_entries=f.maps[0].max_entries,
                any_max_entries=f.maps[1].max_entries,
                entries_at_start=sum(self.entries_at_start[f.name]),
                any_entries_at_start=self.entries_at_start[f.name][1],
                entries_at_end=f.present,
                expired_at_end=sum(m.expired(now) for m in f.maps),
                live_evicted=sum(m.live_evicted for m in f.maps),
                lock_max_queue=f.lock.max_queue,
                lock_max_holders=f.lock.max_holders,
                lock_held_seconds=f.lock.held_seconds,
            )
            for f in node.families
        ]
        walks = [
            FamilyWalk(
                f.name,
                self.entries_at_start[f.name],
                s.walk_rate,
                tuple(m.max_entries for m in f.maps),
                s.bucket_seconds,
            )
            for f in node.families
        ]
        projected = Projection(walks, s.pods, deadline, overhead)
        if self.ended_because == "horizon" and s.until_resolved:
            self.ended_because = "cap"
        return Result(
            scenario=s,
            verdict=verdict(self.pods, self.gc.passes, now, STALL / s.time_scale),
            ended_at=now,
            ended_because=self.ended_because,
            families=families,
            walks=walks,
            pods=self.pods,
            counters=node.counters,
            gc=self.gc,
            limiter_end=LimiterEnd(node.endpoint_create.core, node.endpoint_delete.core),
            advice=Advice(
                burst=s.pods,
                safe_burst=projected.safe_burst,
                max_entries_for_burst=projected.max_entries_for_burst,
                walk_seconds_for_burst=(deadline - overhead) / s.pods,
            ),
            extra={"tcp_cohorts_at_end": node.families[0].maps[0].cohorts},
            retry_intervals=self.intervals,
            latency=node.latency,
            deletions=self.deletions + (self.rollout.deletions if self.rollout is not None else []),
            rollout=None if self.rollout is None else self.rollout.summary(),
            signals=None
            if self.signals is None
            else {"handled": dict(self.signals.sent), "dropped_while_a_pass_ran": dict(self.signals.dropped)},
            limiter_waits={lim.core.name: lim.waits for lim in (node.endpoint_create, node.endpoint_delete)},
            agent=None if self.agent is None else self.agent.summary(s.time_scale),
        )


def _gather(s: Scenario, trace_every: float | None, parking: bool, keys: frozenset[int]) -> array[float]:
    """The same run played again, keeping only the intervals of ``keys``: a missed percentile whose spill failed."""
    again = Model(s, trace_every=trace_every, parking=parking, gather=keys)
    again.run()
    return again.intervals.kept()


COLLECT_AT = 1_000  # pods: a finished model's cycles (processes, events, frames) freed at once past this


def simulate(scenario: Scenario) -> Result:
    """``Model(scenario).run()``; a large model is freed before the next run (mitigations: three in a row)."""
    model = Model(scenario)
    result = model.run()
    if scenario.pods > COLLECT_AT:
        del model
        gc.collect()  # the run disabled the collector: 100,000 pods grew ~380 MB a mitigation without this
    return result
