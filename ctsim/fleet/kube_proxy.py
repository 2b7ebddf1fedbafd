"""The fleet's second hazard: kube-proxy's nftables syncs, from ctwatch's projection and kube-proxy's own series.

The hazard is the cluster's, not a node's: every node's kube-proxy programs
every Service. So it is a section of its own beside the node ranking: the
cluster's Services and sync times, and its nodes ranked by how close their
full sync comes to kube-proxy's ``/healthz`` threshold, from ctwatch's
projection (``ctwatch_kube_proxy_projected_sync_seconds``) and from what
kube-proxy measured (``kubeproxy_sync_full_proxy_rules_duration_seconds``).
A figure no series gave is None, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ctsim.core.kube_proxy_sync import Deadlines
from ctsim.fleet.prometheus import Sample

FULL = "kubeproxy_sync_full_proxy_rules_duration_seconds"
PARTIAL = "kubeproxy_sync_partial_proxy_rules_duration_seconds"
SYNC = "kubeproxy_sync_proxy_rules_duration_seconds"


class _Query(Protocol):
    def of(self, metric: str, *matchers: str) -> str: ...
    def by(self, *labels: str) -> str: ...
    def node_of(self, labels: dict[str, str]) -> str | None: ...


def queries(q: _Query, window: str) -> dict[str, str]:
    def mean(metric: str) -> str:
        total, count = (f"sum {q.by()} (increase({q.of(metric + part)}[{window}]))" for part in ("_sum", "_count"))
        return f"{total} / {count} > 0"

    return {
        "kube_proxy_projected": q.of("ctwatch_kube_proxy_projected_sync_seconds"),
        "kube_proxy_healthz": q.of("ctwatch_kube_proxy_healthz_deadline_seconds"),
        "kube_proxy_services": q.of("ctwatch_kube_proxy_services_estimated"),
        "kube_proxy_full_observed": mean(FULL),
        "kube_proxy_partial_observed": mean(PARTIAL),
        "kube_proxy_sync_p99": (
            f"histogram_quantile(0.99, sum {q.by('le')} (increase({q.of(SYNC + '_bucket')}[{window}])))"
        ),
    }


@dataclass
class KubeProxyFacts:
    node: str
    projected_full_s: float | None = None
    projected_partial_s: float | None = None
    layout: str = ""
    services: int | None = None
    healthz_s: float | None = None  # ctwatch's, from its --kube-proxy.sync-period
    observed_full_s: float | None = None  # kube-proxy's mean full sync over the window
    observed_partial_s: float | None = None
    sync_p99_s: float | None = None

    @property
    def deadline_s(self) -> float:
        return self.healthz_s if self.healthz_s is not None else Deadlines.of().healthz_s

    @property
    def worst_full_s(self) -> float | None:
        known = [v for v in (self.projected_full_s, self.observed_full_s) if v is not None]
        return max(known) if known else None

    @property
    def ratio(self) -> float | None:
        worst = self.worst_full_s
        return worst / self.deadline_s if worst is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "deadline_ratio": self.ratio}


def _ok(v: float) -> bool:
    return v == v and 0 <= v < float("inf")


def read(answers: dict[str, list[Sample]], q: _Query) -> dict[str, KubeProxyFacts]:
    """Each node's kube-proxy figures; a node appears only where some series named it."""
    nodes: dict[str, KubeProxyFacts] = {}

    def each(name: str) -> Iterable[tuple[KubeProxyFacts, Sample]]:
        for s in answers.get(name, []):
            node = q.node_of(s.labels)
            if node and _ok(s.value):
                yield nodes.setdefault(node, KubeProxyFacts(node)), s

    for facts, s in each("kube_proxy_projected"):
        facts.layout = s.labels.get("layout", facts.layout)
        if s.labels.get("sync") == "full":
            facts.projected_full_s = s.value
        elif s.labels.get("sync") == "partial":
            facts.projected_partial_s = s.value
    for facts, s in each("kube_proxy_healthz"):
        if s.value > 0:
            facts.healthz_s = s.value
    for facts, s in each("kube_proxy_services"):
        facts.services = int(s.value)
    for facts, s in each("kube_proxy_full_observed"):
        facts.observed_full_s = s.value
    for facts, s in each("kube_proxy_partial_observed"):
        facts.observed_partial_s = s.value
    for facts, s in each("kube_proxy_sync_p99"):
        facts.sync_p99_s = s.value
    return nodes


@dataclass(frozen=True)
class ClusterSyncs:
    """The cluster's kube-proxy hazard: its nodes, worst first, and the figures of the worst."""

    nodes: tuple[KubeProxyFacts, ...]

    @classmethod
    def of(cls, facts: dict[str, KubeProxyFacts]) -> ClusterSyncs:
        return cls(tuple(sorted(facts.values(), key=lambda f: (-(f.ratio or -1.0), f.node))))

    @property
    def services(self) -> int | None:
        known = [f.services for f in self.nodes if f.services is not None]
        return max(known) if known else None

    @property
    def worst(self) -> KubeProxyFacts | None:
        return self.nodes[0] if self.nodes else None

    @property
    def verdict(self) -> str:
        worst = self.worst
        if worst is None or worst.ratio is None:
            return "unknown: no full sync projected or observed"
        if worst.ratio >= 1:
            return "critical: a kube-proxy restart fails /healthz for the whole of its full sync"
        if worst.ratio >= 0.5:
            return "warning: a full sync takes half of /healthz's threshold or more"
        return "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "services": self.services,
            "verdict": self.verdict,
            "nodes": [f.to_dict() for f in self.nodes],
        }
