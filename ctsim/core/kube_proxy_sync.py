"""kube-proxy's nftables syncs against its own deadlines: the projection ``ctsim nft run``, ctwatch and the fleet share.

kube-proxy's facts (kubernetes b0f823e6; docs/model.md cites each):

- ``syncProxyRules`` runs under ``BoundedFrequencyRunner(minSyncPeriod,
  time.Hour, burstSyncs=2)``: at most one sync per ``minSyncPeriod`` (1 s by
  default), at least one an hour, and one at a time, so a change that
  arrives during a sync waits for it, then for its own.
- A sync is full at start-up (``needFullSync: true``), after a failed sync
  (retried after ``syncPeriod``) and when the node's labels change; every
  other sync is partial and rewrites only the changed Services' chains.
  The nftables proxier has no periodic full resync.
- ``/healthz`` (port 10256) answers 503 once a queued change has waited longer
  than ``2 x syncPeriod`` (60 s by default,
  ``cmd/kube-proxy/app/server.go``), so a full sync longer than that fails
  the health check on every start-up, and a partial one that long fails it
  always.
- Kubernetes' network programming latency SLO (sig-scalability): the 99th
  percentile of the time from a Service or endpoint change to its rules,
  30 s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctsim.core.nft_cost import NftCalibration
from ctsim.core.nft_layout import EndpointMix, Layout, one_service, shape

SYNC_PERIOD_S = 30.0  # KubeProxyConfiguration syncPeriod's default
MIN_SYNC_PERIOD_S = 1.0  # minSyncPeriod's default
HEALTHZ_FACTOR = 2  # /healthz fails after 2 x syncPeriod without a sync
MAX_INTERVAL_S = 3600.0  # the runner's maxInterval: a sync at least every hour
NETWORK_PROGRAMMING_SLO_S = 30.0
MAX_SERVICES = 1 << 20  # a /12 Service CIDR's addresses, the largest kube-apiserver allows


@dataclass(frozen=True)
class Deadlines:
    min_sync_period_s: float
    healthz_s: float
    network_programming_slo_s: float

    @classmethod
    def of(cls, sync_period_s: float = SYNC_PERIOD_S, min_sync_period_s: float = MIN_SYNC_PERIOD_S) -> Deadlines:
        return cls(min_sync_period_s, HEALTHZ_FACTOR * sync_period_s, NETWORK_PROGRAMMING_SLO_S)


@dataclass(frozen=True)
class SyncProjection:
    """One cluster's syncs in one layout, and what they mean for kube-proxy."""

    layout: Layout
    services: int
    mix: EndpointMix
    full_sync_s: float
    partial_sync_s: float
    deadlines: Deadlines
    measured_up_to: int  # the largest size the calibration measured in this layout

    @property
    def network_programming_s(self) -> float:
        """The worst change's wait: the partial sync in progress, then its own (or the minimum period)."""
        return self.partial_sync_s + max(self.partial_sync_s, self.deadlines.min_sync_period_s)

    @property
    def healthz_fails_on_full_sync(self) -> bool:
        return self.full_sync_s > self.deadlines.healthz_s

    @property
    def healthz_fails_always(self) -> bool:
        return self.partial_sync_s > self.deadlines.healthz_s

    @property
    def misses_programming_slo(self) -> bool:
        return self.network_programming_s > self.deadlines.network_programming_slo_s

    @property
    def back_to_back(self) -> bool:
        """A partial sync outlasts minSyncPeriod: under steady churn kube-proxy syncs without pause."""
        return self.partial_sync_s > self.deadlines.min_sync_period_s

    @property
    def fits(self) -> bool:
        return not (self.healthz_fails_on_full_sync or self.misses_programming_slo)

    @property
    def extrapolated(self) -> bool:
        return self.services > self.measured_up_to


def project(
    cal: NftCalibration, layout: Layout, services: int, mix: EndpointMix, deadlines: Deadlines
) -> SyncProjection:
    law = cal.fits[layout]
    table = shape(layout, services, mix)
    # The changed Service: the mix's largest endpoint count (its chains cost the most).
    changed = one_service(layout, max(c for c, _ in mix.parts))
    measured = max((s.services for s in cal.samples if s.layout is layout), default=0)
    return SyncProjection(layout, services, mix, law.full_s(table), law.partial_s(table, changed), deadlines, measured)


def largest_fitting(cal: NftCalibration, layout: Layout, mix: EndpointMix, deadlines: Deadlines) -> int:
    """The most Services whose syncs keep /healthz up and meet the programming SLO (both grow with Services)."""
    if not project(cal, layout, 1, mix, deadlines).fits:
        return 0
    low, high = 1, MAX_SERVICES
    if project(cal, layout, high, mix, deadlines).fits:
        return high
    while high - low > 1:
        mid = (low + high) // 2
        if project(cal, layout, mid, mix, deadlines).fits:
            low = mid
        else:
            high = mid
    return low
