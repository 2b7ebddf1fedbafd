"""A fresh agent's start-up, release by release: the initial scan's log.Fatal, the API's wait, the DEL queue."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctsim.core.releases import Release, rules
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.bootstrap import crash_loop_delay
from ctsim.sim.ctmap import new_map
from ctsim.sim.model import simulate


def test_only_v1_16_0_to_1_16_6_block_their_start_up_on_the_initial_scan() -> None:
    assert rules(Release(1, 16, 0)).initial_scan_blocks and rules(Release(1, 16, 6)).initial_scan_blocks
    assert not rules(Release(1, 16, 7)).initial_scan_blocks and not rules(Release(1, 17, 0)).initial_scan_blocks
    assert [crash_loop_delay(n) for n in range(7)] == [10, 20, 40, 80, 160, 300, 300]


def test_the_incidents_node_restarted_on_v1_16_5_crash_loops_until_a_scan_fits_in_30_s() -> None:
    r = simulate(resolve_flags(entries="16M", pods="5", agent_state="fresh"))
    a = r.agent
    assert a is not None and a["initial_scan_blocks"]
    exits = a["fatal_exits_at_s"]
    assert isinstance(exits, list) and len(exits) >= 2
    # Each start scans for 30 s and dies; kubelet waits 10 s, then 20 s, ... before the next.
    assert exits[0] == pytest.approx(30.0)
    for n in range(1, len(exits)):
        assert exits[n] - exits[n - 1] == pytest.approx(crash_loop_delay(n - 1) + 30.0)
    served = a["api_served_at_s"]
    assert isinstance(served, float) and served > exits[-1] + crash_loop_delay(len(exits) - 1)
    assert r.gc.passes[0].start == pytest.approx(exits[-1] + crash_loop_delay(len(exits) - 1))
    assert r.gc.passes[0].end == pytest.approx(served) and r.gc.passes[0].end - r.gc.passes[0].start <= 30.0
    assert a["deleted_by_killed_scans"] > 0
    assert r.counters.add_no_agent > 0  # cilium-cni's 30 s connect ran out while the agent was down
    assert all(p.ready_at is not None and p.ready_at > served for p in r.pods)
    # From v1.16.7 the same node's agent answers at once and scans on its own.
    fixed = simulate(resolve_flags(entries="16M", pods="5", agent_state="fresh", cilium_version="1.16.7"))
    assert fixed.agent is None and fixed.gc.passes[0].start == 0.0 and fixed.counters.add_no_agent == 0


def test_live_entries_that_take_over_30_s_to_walk_crash_loop_for_ever_at_kubelets_5_minute_cap() -> None:
    r = simulate(resolve_flags(entries="16M", expired_fraction="0", pods="2", agent_state="fresh", horizon="1h"))
    a = r.agent
    assert a is not None and a["api_served_at_s"] is None and not r.gc.passes
    exits = a["fatal_exits_at_s"]
    assert isinstance(exits, list) and exits[-1] - exits[-2] == pytest.approx(300.0 + 30.0)
    assert r.pods_ready == 0 and r.counters.add_ok == 0


@pytest.mark.parametrize(("version", "connect_s"), [("1.18.1", 10.0), ("1.19.4", 1.5)])
def test_a_del_while_the_agent_is_down_is_queued_after_the_releases_connect_timeout(
    version: str, connect_s: float
) -> None:
    s = resolve_flags(
        cilium_version=version, entries="1M", pods="1", agent_state="fresh", agent_bootstrap="60s",
        delete_schedule="1/s for 20s", horizon="5m",
    )  # fmt: skip
    r = simulate(s)
    a = r.agent
    assert a is not None and a["api_served_at_s"] == pytest.approx(60.0)
    assert a["deletes_queued"] == 20 + r.counters.add_no_agent  # and each failed ADD's teardown
    took = [d.latency for d in r.deletions]
    assert took == pytest.approx([connect_s] * 20)  # kubelet sees each DEL succeed once queued
    assert r.counters.delete_scrubs == 20  # the agent deletes the queued endpoints once it answers, each scrubbed


def test_1_19_starts_its_gc_once_the_restored_endpoints_have_regenerated() -> None:
    flags = {"entries": "1M", "pods": "1", "agent_state": "fresh", "horizon": "10m", "regeneration": "4s"}
    assert simulate(resolve_flags(cilium_version="1.19.4", **flags)).gc.passes[0].start == pytest.approx(4.0)
    assert simulate(resolve_flags(cilium_version="1.18.10", **flags)).gc.passes[0].start == 0.0
    late = simulate(resolve_flags(cilium_version="1.19.4", agent_bootstrap="30s", **flags))
    assert late.gc.passes[0].start == pytest.approx(34.0)


def test_an_add_waits_for_the_api_within_its_30_s_connect() -> None:
    r = simulate(resolve_flags(cilium_version="1.18.10", entries="1k", pods="3", agent_state="fresh",
                               agent_bootstrap="10.2s", horizon="2m"))  # fmt: skip
    assert r.counters.add_no_agent == 0 and r.pods_ready == 3 and r.counters.add_attempts == 3
    # GetConfig is polled every 0.5 s from the ADD's start: the first poll after 10.2 s gets in.
    assert all(p.ready_at is not None and p.ready_at > 10.2 for p in r.pods)
    waited = sorted(r.latency.cni_add.values)
    assert all(w > 10.2 - 1.0 for w in waited)


def test_a_killed_scan_deletes_only_garbage() -> None:
    m = new_map("cilium_ct4_global", 1 << 20, established=1000, expired=5000)
    assert m.delete_oldest_expired(0.0, 2000) == 2000 and m.present == 4000 and m.expired(0.0) == 3000
    assert m.delete_oldest_expired(0.0, 10_000) == 3000 and m.present == 1000 and m.live_evicted == 0


def test_agent_bootstrap_is_a_fresh_agents_and_emulate_refuses_a_start_up_it_does_not_play() -> None:
    for args in (
        ["run", "--agent-bootstrap", "30s"],
        ["run", "--agent-state", "fresh", "--agent-bootstrap", "-3s"],
        ["emulate", "--agent-state", "fresh", "--entries", "100k"],
    ):
        p = subprocess.run([sys.executable, "-m", "ctsim", *args], capture_output=True, text=True, check=False)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, (args, p.stderr)
        assert "--agent-bootstrap" in p.stderr or "--agent-state" in p.stderr, p.stderr
