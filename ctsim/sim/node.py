"""The simulated node: the agent's shared state that every actor touches.

It holds what the Cilium agent holds (CT maps and their per-family lock, the
API limiters, the build semaphore) and the counters the result is made of.
Actors (GC, endpoint handlers, cilium-cni, containerd, kubelet) are generator
processes in their own modules and take the node as their first argument.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import simpy

from ctsim.core.defaults import ENDPOINT_CREATE, ENDPOINT_DELETE
from ctsim.core.rate import APILimiterParameters, scaled
from ctsim.sim.ctmap import CTMap
from ctsim.sim.latency import NodeLatencies
from ctsim.sim.limiter import APILimiter
from ctsim.sim.lock import FIFOLock, GlobalDeleteLock
from ctsim.sim.pod import Pod


@dataclass
class Family:
    """One address family: its global CT maps (TCP and non-TCP) and their lock."""

    name: str
    maps: list[CTMap]
    lock: GlobalDeleteLock

    @property
    def present(self) -> int:
        return sum(m.present for m in self.maps)


@dataclass
class AgentAPI:
    """The agent's API while it starts (``ctsim.sim.bootstrap``): not answering until ``serving`` succeeds."""

    serving: simpy.Event
    del_connect_timeout: float  # cilium-cni's DEL fallback: 10 s; 1.5 s from 1.19.0 (f372e54f27)
    queued: list[Any] = field(default_factory=list)  # the sandboxes whose DEL was queued, not yet processed
    deletes_queued: int = 0

    @property
    def down(self) -> bool:
        return not self.serving.triggered


@dataclass
class Counters:
    add_attempts: int = 0
    add_ok: int = 0
    add_timeouts: int = 0
    add_429: int = 0
    add_429_paced: int = 0
    add_cancelled_in_limiter: int = 0
    add_no_agent: int = 0  # ADDs that found no agent answering within ClientConnectTimeout
    del_calls: int = 0
    del_404: int = 0
    del_timeouts: int = 0
    create_scrubs: int = 0
    delete_scrubs: int = 0
    scrub_seconds: float = 0.0
    gc_seconds: float = 0.0
    orphaned_walks: int = 0
    orphaned_walk_seconds: float = 0.0


@dataclass
class Node:
    env: simpy.Environment
    families: list[Family]
    walk_rate: float
    delete_seconds: float
    regeneration_seconds: float
    teardown_seconds: float  # containerd's deferred DEL, on the node's clock (Scenario.clock)
    cores: int
    time_scale: float = 1.0
    bucket_seconds: float = 0.0  # a batched walk visits every bucket of the map
    create_params: APILimiterParameters = ENDPOINT_CREATE  # the agent's endpoint-create limiter (Scenario's)
    delete_params: APILimiterParameters = ENDPOINT_DELETE
    delete_404_first: bool = False  # 1.18.0+ (0fd97811e5): DELETE of a missing endpoint is answered before the limiter
    api: AgentAPI | None = None  # a fresh agent's API while it starts; None: answering from t=0
    counters: Counters = field(default_factory=Counters)
    latency: NodeLatencies = field(default_factory=NodeLatencies)
    endpoint_create: APILimiter = field(init=False)
    endpoint_delete: APILimiter = field(init=False)
    build_permits: FIFOLock = field(init=False)
    unready: int = 0  # pods not Ready yet
    undeleted: int = 0  # running pods whose deletion was asked for (or will be) and has not succeeded
    all_ready: simpy.Event | None = None  # succeeds when the last pod becomes Ready (a run that waits for it)
    on_ready: Callable[[Pod], None] | None = None  # told of each pod Ready (a rollout's controller)
    retry_intervals: array[float] = field(default_factory=lambda: array("d"))  # 8 bytes per retry (sim/intervals)

    def pod_ready(self, pod: Pod) -> None:
        self.unready -= 1
        if self.on_ready is not None:
            self.on_ready(pod)
        self._resolved()

    def pod_deleted(self) -> None:
        self.undeleted -= 1
        self._resolved()

    def _resolved(self) -> None:
        if self.unready == 0 and self.undeleted == 0 and self.all_ready is not None:
            self.all_ready.succeed()

    def __post_init__(self) -> None:
        self.endpoint_create = APILimiter(self.env, "endpoint-create", scaled(self.create_params, self.time_scale))
        self.endpoint_delete = APILimiter(self.env, "endpoint-delete", scaled(self.delete_params, self.time_scale))
        self.build_permits = FIFOLock(self.env, capacity=self.cores)  # buildEndpointSem
