"""One node, one answer: what ``ctsim run`` advises is what ``ctsim run`` with that advice's flags says."""

from __future__ import annotations

import pytest

from ctsim.capacity.mitigations import simulate_mitigations
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import simulate
from ctsim.sim.result import Verdict

NODES = {
    "the incident": {"entries": "16M", "pods": "50"},
    "a coin-flip table": {"entries": "4Mi", "pods": "50"},
    "dual stack": {"entries": "8M", "ipv6_entries": "4M", "pods": "10"},
    "a fresh agent": {"preset": "standard", "entries": "2Mi", "pods": "30", "agent_state": "fresh"},
    "a short horizon": {"entries": "16M", "pods": "50", "horizon": "30m"},
    "a capped GC already": {"entries": "16M", "pods": "20", "gc_max_interval": "2h"},
    "a next pass given": {"entries": "16M", "pods": "50", "gc_next_pass": "2h"},
}


def _flags(argv: list[str]) -> dict[str, str]:
    """``["--gc-interval", "60s", ...]`` as the scenario flags the command line would pass (the last wins)."""
    pairs = dict(zip(argv[::2], argv[1::2], strict=True))
    return {("regeneration" if k == "--regeneration-time" else k[2:].replace("-", "_")): v for k, v in pairs.items()}


@pytest.mark.parametrize("node", NODES)
def test_every_mitigations_argv_reproduces_its_figures(node: str) -> None:
    flags = NODES[node]
    mitigations = simulate_mitigations(resolve_flags(**flags))
    assert mitigations, "a storm with nothing offered"
    for m in mitigations:
        again = simulate(resolve_flags(**{**flags, **_flags(m.argv)}))
        said = m.to_dict()
        assert (again.verdict, again.pods_ready, again.recovered_at) == (
            said["verdict"],
            said["pods_ready"],
            said["all_ready_s"],
        ), (node, m.argv)


def test_a_warm_agents_drifted_gc_follows_the_max_interval_and_the_next_pass_given() -> None:
    capped = resolve_flags(entries="16M", gc_max_interval="1h")
    assert capped.gc_first_pass == 1800.0  # mid-cycle of the 1h it sleeps, not of 12h
    assert any("at most 1h apart" in n and "next pass in 30m" in n for n in capped.notes)
    given = resolve_flags(entries="16M", gc_next_pass="1h")
    assert given.gc_first_pass == 3600.0
    drift = [n for n in given.notes if n.startswith("GC starts drifted")]
    assert drift and "next pass in 1h (given)" in drift[0] and "warm" in drift[0]
    assert resolve_flags(entries="16M").gc_first_pass == 6 * 3600.0  # the incident's state, unchanged


def test_a_run_that_says_it_does_not_recover_stays_unrecovered_for_two_days() -> None:
    flags = {"entries": "16M", "pods": "50", "expired_fraction": "0"}  # the GC pass deletes nothing
    settled = simulate(resolve_flags(**flags))
    assert settled.ended_because == "settled" and settled.verdict == "collapse"
    longer = simulate(resolve_flags(**flags, horizon="2d"))
    assert longer.pods_ready == settled.pods_ready == 0


def test_a_default_run_goes_on_while_pods_still_become_ready() -> None:
    """500 pods on the incident's table drain for more than an hour after the GC pass: the run waits for them."""
    r = simulate(resolve_flags(entries="16M", pods="500"))
    assert r.ended_because == "resolved" and r.pods_ready == 500
    assert r.recovered_at is not None and r.recovered_at > r.gc.passes[0].end + 3600


@pytest.mark.parametrize("horizon", ["2m", "5m", "20m", "45m", "2h"])
@pytest.mark.parametrize("entries", ["1Mi", "4Mi", "16M"])
def test_a_collapse_always_has_its_stall(horizon: str, entries: str) -> None:
    """A short --horizon says what it saw: never a collapse without 30 minutes of pods failing and none Ready."""
    r = simulate(resolve_flags(entries=entries, pods="50", horizon=horizon))
    if r.verdict == "collapse":
        assert r.stall is not None
    assert r.verdict != "ok" or r.pods_ready == 50


PLANNED = {
    "the incident": {"entries": "16M", "pods": "50"},
    "64 GiB, non-TCP heavy": {
        "node_memory": "64Gi", "map_ratio": "0.0025", "entries": "1.2M", "any_entries": "400k",
        "churn": "20000/min", "pods": "30",
    },
    "standard": {"preset": "standard", "pods": "10"},
    "dual stack, batched": {"entries": "8M", "ipv6_entries": "4M", "pods": "10", "profile": "cilium-1.18"},
}  # fmt: skip


@pytest.mark.parametrize("node", PLANNED)
def test_plan_and_run_give_one_safe_burst_for_one_node(node: str) -> None:
    from ctsim.capacity import plan as planner

    flags = PLANNED[node]
    answer = planner.plan(planner.parse_facts(**flags, drift_horizon="1d"))
    run = simulate(resolve_flags(**flags, horizon="1s")).to_dict()
    assert answer.safe_burst == run["advice"]["safe_burst"]
    assert answer.walk_seconds == pytest.approx(run["walk_seconds"], rel=1e-12)
    at_peak = answer.burst_at_peak
    for rec in answer.recommendations:  # ticked only where simulating it changed the answer
        if rec.outcome.verdict == at_peak.verdict == Verdict.OK:
            assert not rec.helps


SAFE_NODES = {
    "the incident": {"entries": "16M"},
    "8M": {"entries": "8M"},
    "4M": {"entries": "4M"},
    "2M": {"entries": "2M"},
    "dual stack": {"entries": "8M", "ipv6_entries": "4M"},
    "non-TCP heavy": {"entries": "2M", "any_entries": "6M", "max_entries": "4M"},
    "batched, 16M": {"entries": "16M", "profile": "cilium-1.18"},
    "64 GiB": {"node_memory": "64Gi", "map_ratio": "0.0025", "entries": "1.2M", "any_entries": "400k", "cores": "16"},
}  # fmt: skip


@pytest.mark.parametrize("node", SAFE_NODES)
def test_the_safe_burst_is_safe_and_one_more_is_not_free(node: str) -> None:
    """`run --pods safe_burst`: no ADD outlasts the deadline. One pod more: the burst costs something.

    Measured on these nodes: one more pod never produced an ADD timeout here, because the API limiter
    answers the excess with HTTP 429 first (SAFE_BURST_MEANS says so); what one more always costs is a
    refusal or a timeout.
    """
    flags = SAFE_NODES[node]
    n = simulate(resolve_flags(**flags, pods="1", horizon="1s")).to_dict()["advice"]["safe_burst"]
    assert n is not None and 1 <= n <= 100, n
    at = simulate(resolve_flags(**flags, pods=str(n)))
    assert at.counters.add_timeouts == 0, (node, n)
    over = simulate(resolve_flags(**flags, pods=str(n + 1)))
    assert over.counters.add_timeouts + over.counters.add_429 > 0, (node, n + 1)
