"""Pods created and deleted over time (``--arrivals``, ``--deletes``), beside the burst at t=0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctsim.core.errors import InputError
from ctsim.inputs.given import flags_of, parse_given
from ctsim.inputs.scenario import resolve_flags
from ctsim.inputs.workload import parse_pod_schedule
from ctsim.sim.model import Model, simulate


def test_a_schedule_plays_each_segment_once_its_pods_evenly_spaced() -> None:
    schedule = parse_pod_schedule("4.4/s for 10m", "--arrivals", 100_000)
    times = schedule.times()
    assert len(times) == schedule.count == 2_640  # not 2,639 for the float 4.4 x 600
    assert times[0] == 0.0 and times[1] == pytest.approx(1 / 4.4) and times[-1] < 600.0
    paused = parse_pod_schedule("1/min for 2m, 0/s for 1h, 1/min for 2m", "--deletes", 100_000).times()
    assert paused == (0.0, 60.0, 3720.0, 3780.0)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("4.4/s", "give the rate a span"),
        ("0/s for 1h", "schedules no pod"),
        ("1000/s for 1d", "at most"),
        ("fast for 10m", "--arrivals"),
    ],
)
def test_a_schedule_that_cannot_be_played_is_refused(text: str, says: str) -> None:
    with pytest.raises(InputError, match=says):
        parse_pod_schedule(text, "--arrivals", 100_000)


def test_the_flags_carry_the_schedules_exactly() -> None:
    g = parse_given(arrival_schedule="30/min for 2h", delete_schedule="4.4/s for 10m")
    flags = flags_of(g)
    assert parse_given(**flags) == g
    assert {"arrival_schedule", "delete_schedule"} <= set(flags)


def test_arrivals_come_after_the_burst_and_the_run_waits_for_them() -> None:
    model = Model(resolve_flags(entries="100k", pods="3", arrival_schedule="1/min for 10m"))
    result = model.run()
    assert len(model.pods) == 13
    # Each in the first half of its minute, jittered by its own stream (a schedule's round instants would
    # meet other events').
    assert all(60.0 * k < p.created_at < 60.0 * k + 30.0 for k, p in enumerate(model.pods[3:]))
    assert result.pods_ready == 13 and result.ended_because == "resolved"


def test_steady_arrivals_meet_the_limiter_waits_and_429s() -> None:
    """agent-sandbox #1187's shape: a steady stream, not a burst, queues in endpoint-create."""
    d = simulate(resolve_flags(entries="100k", pods="1", arrival_schedule="2/s for 5m")).to_dict()
    assert d["pods"]["requested"] == 601
    assert d["cni"]["add_429"] > 0
    waits = d["latency_s"]["limiter_wait"]["endpoint-create"]
    assert waits["p50"] > 10.0 and waits["max"] <= 60.0
    assert d["inputs"]["arrival_schedule"] == {
        "schedule": "2/s for 5m",
        "pods": 600,
        "segments": [{"per_second": 2.0, "duration_s": 300.0}],
    }


def test_deletes_on_a_table_of_millions_take_past_10s_per_del_on_a_per_entry_release() -> None:
    """cilium #35411's shape: each DEL of a running pod is DeleteEndpoint's synchronous scrub of every map."""
    d = simulate(resolve_flags(entries="4M", pods="1", delete_schedule="1/min for 30m", horizon="1h")).to_dict()
    assert d["deletes"]["requested"] == 30 and d["deletes"]["deleted"] == 30
    assert d["latency_s"]["cni_del"]["p50"] > 10.0
    assert d["deletes"]["delete_latency_s"]["max"] >= d["latency_s"]["cni_del"]["max"]
    assert d["lock"]["delete_scrubs"] >= 30
    # The same deletes on 1.18's batched walk end well within 10 s.
    fast = simulate(
        resolve_flags(entries="4M", pods="1", delete_schedule="1/min for 30m", horizon="1h", cilium_version="1.18.2")
    ).to_dict()
    assert fast["latency_s"]["cni_del"]["max"] < 10.0


def test_deletes_that_time_out_are_retried_until_the_endpoint_is_gone() -> None:
    # 16M entries: a 75 s scrub per DEL, queued behind one another: some outlast cilium-cni's 90 s.
    d = simulate(resolve_flags(entries="16M", pods="1", delete_schedule="10/min for 1m")).to_dict()
    assert d["deletes"]["deleted"] == 10
    assert d["deletes"]["del_attempts"] > 10 and d["cni"]["del_timeouts"] > 0
    assert d["deletes"]["delete_latency_s"]["max"] > 90.0


def test_the_cli_refuses_a_schedule_in_one_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctsim", "run", "--pods", "1", "--arrivals", "4.4/s"], capture_output=True, text=True
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--arrivals" in out.stderr
