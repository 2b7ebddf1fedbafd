"""The model against the real kernel: ctsim emulate at a small, fast scale (no mocks)."""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import time

import pytest

from ctsim.core.defaults import CT_KEY_SIZES
from ctsim.core.maptype import MapType
from ctsim.inputs.scenario import resolve_flags
from ctsim.kernel import calibrate as cal
from ctsim.kernel import emulate as em
from ctsim.sim.model import simulate
from ctsim.sim.result import percentile
from tests.support.load import busy
from tests.support.needs import need_bpf


@pytest.fixture(scope="module")
def rates() -> tuple[float, float]:
    need_bpf()
    with cal.new_ct_map(1 << 17, CT_KEY_SIZES["ipv4"]) as m:
        rate = statistics.median(cal.per_entry_rate(m) for _ in range(5))
        delete_s = cal.delete_seconds(m, CT_KEY_SIZES["ipv4"], 5000)
    return rate, delete_s


# Walks at 10 %, 41 % and 120 % of the deadline: all fit, two fit, none fits,
# each 15 % or more from the edge either way (two walks and the regeneration
# end at 84 %, a third would end at 123 %). The 2-minute horizon covers every
# first attempt, its timeout and its cleanup scrub; later retries race the
# adapted limiter for tokens, where thread wake-up jitter decides which pod
# wins (docs/calibration.md shows how the two sides agree in aggregate there).
# Both sides walk at a paced rate (ctsim.kernel.emulate.PACE) set from the CPU time
# of a walk, so the same test must pass with two busy processes beside it.
# A latency is within 10 % of the model's, or within WAKE_UPS of it: what a pod's thread wake-ups (limiter,
# lock, regeneration sleep, CNI reply) add under load is a few tens of ms whatever the latency, so on
# the shortest latencies (walks of 10 % of the deadline, ~0.8 s scaled) it alone can pass 10 %. Beside
# 4 busy processes the largest gap measured was 0.11 s, the largest p50 error 0.069 (one run of the
# 0.41 case beside 2 failed at 0.13), before the agent's threads ran under SCHED_FIFO; beside 10 busy
# processes the 0.1 case's errors then fell from 0.06-0.07 to 0.02-0.04.
WAKE_UPS = 0.15  # seconds of wall time, scaled: 4.5 s of node time at --time-scale 30
# Beyond that, a latency may also differ by the time the emulation measured itself unable to run
# (``stalled_s``: a host that starved this VM; CI once saw p90 0.30 s late with walks on time). The
# stall is measured, not assumed: on a host that never stalls the allowance is 0.


@pytest.mark.parametrize(("walk_share", "contention"), [(0.1, 0), (0.41, 0), (1.2, 0), (0.1, 4), (0.41, 4), (1.2, 4)])
def test_emulation_matches_the_model_pod_for_pod(
    rates: tuple[float, float], walk_share: float, contention: int
) -> None:
    rate, delete_s = rates
    entries = round(walk_share * 90 * 100_000)
    s = resolve_flags(entries=str(entries), rate="100000", pods="5", horizon="2m", expired_fraction="0", seed=3)
    with busy(contention):
        report = em.run(s, time_scale=30, real_rate=rate, delete_seconds=delete_s)
    # Both sides walk at the paced rate: the share is the target's, up to rounding the table.
    assert report.scaling.walk_share_of_deadline == pytest.approx(walk_share, rel=0.01)
    assert report.table_rate.headroom > 1.5  # the kernel walks this table well within its paced time
    assert report.emulated.walks_overran == 0, report.emulated.max_overrun
    assert report.emulated.thread_scheduling == report.table_rate.walker_scheduling  # both real-time as root
    assert report.mismatched_pods == 0, [(p.emulated, p.simulated) for p in report.pods]
    e_lats = [p.emulated_latency_s for p in report.pods if p.emulated_latency_s is not None]
    s_lats = [p.simulated_latency_s for p in report.pods if p.simulated_latency_s is not None]
    for q, err in report.latency_error.items():
        if err is not None:
            at = {"p50": 0.5, "p90": 0.9, "max": 1.0}[q]
            gap = abs(percentile(e_lats, at) - percentile(s_lats, at))
            stalled = report.emulated.stalled_s
            assert err <= 0.10 or gap <= WAKE_UPS + stalled, (q, err, gap, stalled, report.pods)
    assert report.emulated.add_timeouts == report.simulated.counters.add_timeouts, report.to_dict()["emulated"]


def test_a_slow_start_moves_no_timeout_past_the_horizon(
    rates: tuple[float, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node's t=0 is when it is ready, however long the walker's fork took (it took ~1 s in a loaded CI)."""
    rate, delete_s = rates
    ready = em.EmulatedNode.__init__

    def slow(self: em.EmulatedNode, *args: object) -> None:
        ready(self, *args)
        time.sleep(1.0)  # every first attempt times out at least 0.87 s (wall) before this run's horizon

    monkeypatch.setattr(em.EmulatedNode, "__init__", slow)
    s = resolve_flags(
        entries=str(round(1.2 * 90 * 100_000)), rate="100000", pods="5", horizon="2m", expired_fraction="0"
    )
    report = em.run(s, time_scale=30, real_rate=rate, delete_seconds=delete_s)
    assert report.emulated.setup_s >= 1.0
    assert report.emulated.add_timeouts == report.simulated.counters.add_timeouts > 0


def test_both_maps_are_filled_and_walked(rates: tuple[float, float]) -> None:
    """A table split between the TCP and the non-TCP map walks as one: the same pods time out on both sides."""
    rate, delete_s = rates
    s = resolve_flags(
        entries=str(round(0.6 * 90 * 100_000)),
        any_entries=str(round(0.6 * 90 * 100_000)),
        rate="100000",
        pods="5",
        horizon="2m",
        expired_fraction="0",
        seed=3,
    )
    report = em.run(s, time_scale=30, real_rate=rate, delete_seconds=delete_s)
    assert report.scaled.map(MapType.IPV4_ANY).entries > 0
    assert report.scaling.walk_share_of_deadline == pytest.approx(1.2, rel=0.01)
    assert report.mismatched_pods == 0
    assert report.emulated.add_timeouts == report.simulated.counters.add_timeouts > 0


def test_gc_runs_on_the_real_maps(rates: tuple[float, float]) -> None:
    rate, delete_s = rates
    s = resolve_flags(entries="2M", rate="100000", pods="2", horizon="4m", gc_interval="60s", expired_fraction="0.9")
    report = em.run(s, time_scale=60, real_rate=rate, delete_seconds=delete_s)
    # The first pass deletes the 90 % expired (r > 0.25), later ones nothing: a fixed 60 s interval throughout.
    assert report.emulated.gc_intervals[:2] == (60.0, 60.0)
    assert report.mismatched_pods == 0


def test_no_maps_or_threads_are_left_behind(rates: tuple[float, float]) -> None:
    import threading

    rate, delete_s = rates
    before = threading.active_count()
    s = resolve_flags(entries="500k", rate="100000", pods="2", horizon="2m", expired_fraction="0")
    policy = os.sched_getscheduler(0)
    em.run(s, time_scale=60, real_rate=rate, delete_seconds=delete_s)
    assert threading.active_count() <= before
    assert os.sched_getscheduler(0) == policy  # only the node's own threads ran real-time
    # The maps were closed: none named ctsim_emu_* survives (checked through bpftool where present).
    listing = subprocess.run(["sh", "-c", "command -v bpftool && bpftool map list"], capture_output=True, text=True)
    assert "ctsim_emu" not in listing.stdout


def test_a_scaled_model_is_the_same_model() -> None:
    """Dividing every duration and the table by k divides every result time by k."""
    full = resolve_flags(entries="3M", pods="12", horizon="20m", expired_fraction="0", churn="0/s")
    k = 10.0
    tcp = full.maps[0]
    tenth = tcp._replace(entries=tcp.entries // 10, max_entries=tcp.max_entries // 10)
    fast = dataclasses.replace(full, maps=(tenth, *full.maps[1:]), time_scale=k)
    a, b = simulate(full), simulate(fast)
    assert [p.attempts for p in a.pods] == [p.attempts for p in b.pods]
    for pa, pb in zip(a.pods, b.pods, strict=True):
        if pa.ready_latency is None:
            assert pb.ready_latency is None
        else:
            assert pb.ready_latency == pytest.approx(pa.ready_latency / k, rel=1e-6)
