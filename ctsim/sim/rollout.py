"""A Deployment's rolling update on the node: new pods created, old ones deleted as the new become Ready.

Source: kubernetes ``pkg/controller/deployment/rolling.go``
(``reconcileNewReplicaSet``, ``reconcileOldReplicaSets``): the new
ReplicaSet scales up while all pods stay within ``replicas + maxSurge``
(terminating pods are not counted), and the old one scales down while the
available pods stay at least ``replicas - maxUnavailable``. Here every pod
of the Deployment is on this node, a new pod is available once Ready, and
an old pod's deletion is ``ctsim.sim.deletion``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ctsim.sim.deletion import Deletion, delete_running_pod
from ctsim.sim.node import Node
from ctsim.sim.pod import Pod


@dataclass
class Rollout:
    """The Deployment controller's view: ``replicas`` old pods to replace with as many new ones."""

    node: Node
    replicas: int
    max_surge: int
    max_unavailable: int
    new_pod: Callable[[], Pod]  # makes the next new pod, created now, and starts its worker
    deadline_s: float
    seed: int
    first_deletion: int = 0  # deletions are numbered on from the run's scheduled ones (their random streams)
    old_alive: int = field(init=False)  # old pods not yet asked to terminate
    created: int = 0
    ready: int = 0
    pods: set[int] = field(default_factory=set)  # the new pods' indices
    deletions: list[Deletion] = field(default_factory=list)
    done_at: float | None = None  # the last new pod Ready and the last old pod's deletion asked for

    def __post_init__(self) -> None:
        self.old_alive = self.replicas

    def reconcile(self) -> None:
        """Scale the new pods up, then the old ones down, as far as surge and availability allow."""
        while self.created < self.replicas and self.old_alive + self.created < self.replicas + self.max_surge:
            self.created += 1
            self.pods.add(self.new_pod().index)
        while self.old_alive > 0 and self.old_alive - 1 + self.ready >= self.replicas - self.max_unavailable:
            self.old_alive -= 1
            self._delete_old()
        # Old pods' deletions made room: surge again.
        while self.created < self.replicas and self.old_alive + self.created < self.replicas + self.max_surge:
            self.created += 1
            self.pods.add(self.new_pod().index)
        if self.done_at is None and self.ready == self.replicas and self.old_alive == 0:
            self.done_at = self.node.env.now

    def summary(self) -> dict[str, float | int | None]:
        """JSON ``rollout``: how far it got, and when it was done."""
        return {
            "replicas": self.replicas,
            "new_created": self.created,
            "new_ready": self.ready,
            "old_deletes_asked": self.replicas - self.old_alive,
            "old_deleted": sum(d.deleted_at is not None for d in self.deletions),
            "done_at_s": self.done_at,
        }

    def pod_ready(self, pod: Pod) -> None:
        if pod.index in self.pods:
            self.ready += 1
            self.reconcile()

    def _delete_old(self) -> None:
        node = self.node
        d = Deletion(index=self.first_deletion + len(self.deletions), asked_at=node.env.now)
        self.deletions.append(d)
        node.env.process(delete_running_pod(node, d, self.deadline_s, self.seed))
