"""Running pods deleted: kubelet's KillPod → containerd's StopPodSandbox → cilium-cni's DEL, retried until done.

Each deleted pod is one that ran on the node before the run: its endpoint
exists, so its DEL is ``DeleteEndpoint`` → ``leaveLocked``'s synchronous
scrub, under the endpoint's lock and each family's, through endpoint-delete's
limiter. The DEL's client is cilium-cni with its 90 s ``ClientTimeout``
(within kubelet's 2 min runtime request timeout, so the CNI deadline binds);
a DEL that times out leaves the sandbox, and kubelet's next sync, after
``wait.Jitter(10s, 0.5)``, sends another. The agent's handler goes on after
its client left, so that next DEL usually finds the endpoint gone: a 404.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import simpy

from ctsim.sim.cni import cni_del
from ctsim.sim.endpoint import Endpoint, Sandbox
from ctsim.sim.lock import FIFOLock
from ctsim.sim.node import Node
from ctsim.sim.pod import Draws, backoff


@dataclass(slots=True)
class Deletion:
    """One running pod's deletion: when it was asked for, its DELs, and when the last one succeeded."""

    index: int
    asked_at: float
    attempts: int = 0
    deleted_at: float | None = None

    @property
    def latency(self) -> float | None:
        return None if self.deleted_at is None else self.deleted_at - self.asked_at


def deletions(slots: tuple[tuple[float, float], ...], seed: int, time_scale: float = 1.0) -> list[Deletion]:
    """One deletion per slot (start, width), asked for within the slot's first half, as a pod arrives in its own."""
    return [Deletion(j, (t + 0.5 * _draws(seed, j).random() * w) / time_scale) for j, (t, w) in enumerate(slots)]


def _draws(seed: int, index: int) -> Draws:
    return Draws(seed * 1_000_003 + 500_000 + index)  # the deletion's own stream, apart from the pods'


def running_sandbox(node: Node, index: int) -> Sandbox:
    """A sandbox that ran before the run: its endpoint made and regenerated long ago."""
    return Sandbox(pod=index, attempt=0, endpoint=Endpoint(lock=FIFOLock(node.env)))


def delete_running_pod(
    node: Node, deletion: Deletion, deadline_s: float, seed: int
) -> Generator[simpy.Event, object, None]:
    """DEL until one succeeds (an answer, or a 404); back-off between; started at ``deletion.asked_at``."""
    sandbox = running_sandbox(node, deletion.index)
    rng = _draws(seed, deletion.index)
    rng.random()  # the draw that placed it in its slot
    while True:
        deletion.attempts += 1
        done = yield from cni_del(node, sandbox, timeout_s=deadline_s)
        if done:
            deletion.deleted_at = node.env.now
            node.pod_deleted()
            return
        yield node.env.timeout(backoff(rng) / node.time_scale)
