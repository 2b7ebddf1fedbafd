"""Wires a scenario into a SimPy node, runs it, and reads off the result."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

import simpy

from ctsim.churn import connection_churn
from ctsim.ctmap import new_map
from ctsim.gc import GCHistory, GCPolicy, run_gc
from ctsim.kubelet import Pod, new_pod, pod_worker
from ctsim.lock import GlobalDeleteLock
from ctsim.node import Family, Node
from ctsim.projection import max_entries_for_burst, safe_burst, walk_seconds
from ctsim.result import Advice, Result, verdict
from ctsim.scenario import Scenario
from ctsim.storm import Storm
from ctsim.walk import walk


@dataclass
class Model:
    scenario: Scenario
    trace_every: float | None = None  # node seconds between (t, present, expired) samples
    fast_forward: bool = True  # ride retry storms (ctsim.storm); False plays every attempt
    env: simpy.Environment = field(init=False)
    node: Node = field(init=False)
    pods: list[Pod] = field(init=False)
    gc: GCHistory = field(init=False)

    def __post_init__(self) -> None:
        s = self.scenario
        self.env = env = simpy.Environment()
        k = s.time_scale
        expired = round(s.entries * s.expired_fraction)
        tcp = new_map("cilium_ct4_global", s.max_entries, established=s.entries - expired, expired=expired)
        any4 = new_map("cilium_ct_any4_global", s.any_max_entries)
        family = Family("ipv4", [tcp, any4], GlobalDeleteLock(env, "ipv4"))
        self.node = Node(
            env=env,
            families=[family],
            walk_rate=s.walk_rate,
            delete_seconds=s.delete_seconds,
            regeneration_seconds=s.regeneration_seconds / k,
            cores=s.cores,
            time_scale=k,
        )
        self.entries_at_start = family.present
        self.gc = GCHistory()
        policy = GCPolicy(fixed_interval=s.gc_interval, max_interval=s.gc_max_interval)
        env.process(
            run_gc(
                env,
                lambda: walk(self.node, family, collect_garbage=True),
                policy,
                s.gc_initial_interval,
                s.gc_first_pass,
                self.gc,
                k,
            )
        )
        if s.churn.peak > 0:
            if k != 1.0:
                raise ValueError("churn is not modelled on a scaled clock")
            env.process(connection_churn(env, tcp, s.churn, s.conn_seconds))
        self.trace: list[tuple[float, int, int]] = []
        if self.trace_every:
            env.process(self._sample(family, self.trace_every / k))
        self.pods = [new_pod(i, s.pods, s.seed, s.pod_start_spread / k) for i in range(s.pods)]
        self.storm = Storm(self.node, s.horizon / k) if self.fast_forward else None
        if self.storm is not None and not self.storm.enabled_for(s.deadline / k):
            self.storm = None
        for pod in self.pods:
            env.process(pod_worker(self.node, pod, s.deadline / k, pod.created_at, self.storm))

    def _sample(self, family: Family, every: float) -> Generator[simpy.Event, None, None]:
        while True:
            now = self.env.now
            self.trace.append((now, family.present, sum(m.expired(now) for m in family.maps)))
            yield self.env.timeout(every)

    def run(self) -> Result:
        horizon = self.scenario.horizon / self.scenario.time_scale
        self.env.run(until=horizon)
        if self.storm is not None:
            self.storm.settle(horizon)  # refusals planned before the horizon happened
        return self.result()

    def result(self) -> Result:
        s, node = self.scenario, self.node
        family = node.families[0]
        tcp = family.maps[0]
        overhead = s.regeneration_seconds / s.time_scale
        return Result(
            scenario=s,
            verdict=verdict(self.pods),
            walk_seconds=walk_seconds(self.entries_at_start, s.walk_rate),
            pods=self.pods,
            counters=node.counters,
            gc=self.gc,
            lock_max_queue=family.lock.max_queue,
            lock_max_holders=family.lock.max_holders,
            lock_held_seconds=family.lock.held_seconds,
            entries_at_start=self.entries_at_start,
            entries_at_end=family.present,
            expired_at_end=sum(m.expired(self.env.now) for m in family.maps),
            live_evicted=sum(m.live_evicted for m in family.maps),
            limiter_end={
                "endpoint_create_rate_per_s": node.endpoint_create.core.rate_limit,
                "endpoint_create_burst": node.endpoint_create.core.rate_burst,
                "endpoint_create_parallel": node.endpoint_create.core.parallel_requests,
                "endpoint_create_rejected": node.endpoint_create.core.rejected,
            },
            advice=Advice(
                burst=s.pods,
                safe_burst=safe_burst(self.entries_at_start, s.walk_rate, s.deadline / s.time_scale, overhead),
                max_entries_for_burst=max_entries_for_burst(s.pods, s.walk_rate, s.deadline / s.time_scale, overhead),
                walk_seconds_for_burst=(s.deadline / s.time_scale - overhead) / s.pods,
            ),
            extra={"tcp_cohorts_at_end": tcp.cohorts},
        )


def simulate(scenario: Scenario) -> Result:
    return Model(scenario).run()
