"""ctsim calibrate on real, throwaway BPF maps and a real netns (no mocks)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctsim.core.calibration import load
from ctsim.core.defaults import CT_KEY_SIZES
from ctsim.kernel import calibrate as cal
from ctsim.kernel.bpf import BPF_MAP_TYPE_LRU_HASH
from tests.support.needs import need_bpf, need_netns


@pytest.fixture
def bpf() -> None:
    need_bpf()


def test_maps_have_ciliums_shape(bpf: None) -> None:
    for family, key_size in CT_KEY_SIZES.items():
        with cal.new_ct_map(4096, key_size) as m:
            info = m.info()
            assert info.type == BPF_MAP_TYPE_LRU_HASH, family
            assert (info.key_size, info.value_size, info.max_entries) == (key_size, 56, 4096)
            # An LRU hash can evict before it is full: its free list is per CPU, and a filler moved between
            # CPUs (it was, once, beside 4 busy processes) finds its CPU's list empty and evicts. Most stay.
            count = m.count()
            assert 0.9 * 4096 <= count <= 4096, count
            assert sum(1 for _ in m.walk()) == count


def test_rates_are_positive_and_batched_is_faster(bpf: None) -> None:
    plan = cal.Plan(entries=1 << 17, trials=3, sizes=(1 << 14,), deletes=2000, nf_entries=0)
    measured = cal.calibrate(plan, nf_conntrack=False)
    doc = measured.to_dict()  # the calibration file's figures
    per_entry, batch = doc["per_entry_entries_per_s"], doc["batch_entries_per_s"]
    assert (per_entry, batch) == (measured.per_entry_entries_per_s, measured.batch_entries_per_s)
    assert per_entry > 0 and batch > 0
    assert batch > 2 * per_entry  # batched lookups: ~10x cheaper per entry
    assert 0 < doc["delete_seconds_per_entry"] < 1e-3
    assert doc["bpf"]["per_entry"]["syscalls_per_s"] == pytest.approx(2 * per_entry)
    # A batched walk visits every bucket: the same 1,000 entries cost more in a 1Mi map than in a 64Ki one.
    # How much more is the machine's: 3.5-5x on the project's VM, 1.96x once in CI (its empty buckets were
    # 0.24 ns, not 0.9), so the test holds the bucket term's presence (1.3x), not this VM's ratio.
    buckets = doc["bpf"]["batch_buckets"]
    assert buckets["walk_seconds"][1] > 1.3 * buckets["walk_seconds"][0]
    assert 1e-11 < doc["batch_bucket_seconds"] < 1e-7


def test_rates_reproduce_within_a_stated_tolerance(bpf: None) -> None:
    # Two calibrations on one machine agree within a factor of 2 (the machine is
    # shared; run-to-run spread seen here is ~1-10 %, see docs/calibration.md).
    plan = cal.Plan(entries=1 << 17, trials=3, sizes=(), nf_entries=0)
    a = cal.calibrate(plan, nf_conntrack=False).per_entry_entries_per_s
    b = cal.calibrate(plan, nf_conntrack=False).per_entry_entries_per_s
    assert 0.5 < a / b < 2.0


def test_nf_conntrack_dump_in_a_throwaway_netns() -> None:
    need_netns()
    nf = cal.measure_nf_conntrack(300)
    assert nf.entries == nf.kernel_count == 300
    assert nf.dump_entries_per_s.median > 0
    assert nf.count_query_seconds.median > 0
    after = subprocess.run(["ip", "netns"], capture_output=True, text=True, check=True).stdout.split()
    assert nf.netns.startswith("ctsim-calib-") and nf.netns not in after  # its namespace is gone


def test_calibration_file_feeds_ctsim_run(bpf: None, tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    p = subprocess.run(
        [sys.executable, "-m", "ctsim", "calibrate", "--entries", "64Ki", "--trials", "2", "--sizes", "16Ki",
         "--nf-entries", "0", "--output", str(out), "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["per_entry_entries_per_s"] > 0 and doc["batch_entries_per_s"] > 0
    c = load(str(out))
    run = subprocess.run(
        [sys.executable, "-m", "ctsim", "run", "--entries", "1M", "--pods", "2", "--horizon", "5m",
         "--calibration", str(out), "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    d = json.loads(run.stdout)
    assert d["inputs"]["walk_rate"] == c.per_entry_entries_per_s
    assert str(out) in d["inputs"]["rate_source"]
    assert d["walk_seconds"] == pytest.approx(1_000_000 / c.per_entry_entries_per_s)
    # cilium-1.18 walks in batches: the file's batched rate per entry, and its cost per bucket of both maps.
    batched = subprocess.run(
        [sys.executable, "-m", "ctsim", "run", "--entries", "1M", "--max-entries", "4Mi", "--pods", "2",
         "--horizon", "5m", "--profile", "cilium-1.18", "--calibration", str(out), "--json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    b = json.loads(batched.stdout)
    assert c.batch_bucket_seconds is not None
    buckets = b["families"]["ipv4"]["max_entries"] + b["families"]["ipv4"]["any_max_entries"]
    assert b["walk_seconds"] == pytest.approx(1_000_000 / c.batch_entries_per_s + buckets * c.batch_bucket_seconds)


def test_a_bad_calibration_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "ctsim-calibration/1", "per_entry_entries_per_s": -1}')
    p = subprocess.run(
        [sys.executable, "-m", "ctsim", "run", "--calibration", str(bad)], capture_output=True, text=True, check=False
    )
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1


def test_without_privilege_it_says_so_and_exits_2() -> None:
    # setpriv empties the capability bounding set: the kernel refuses bpf(2)
    # as it would for an unprivileged user.
    need_bpf()
    p = subprocess.run(
        ["setpriv", "--bounding-set=-all", "--inh-caps=-all",
         sys.executable, "-m", "ctsim", "calibrate", "--entries", "64Ki"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    assert "--rate" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_ctrl_c_or_sigterm_removes_the_namespace_and_says_so_in_one_line(sig: int, code: int, word: str) -> None:
    need_bpf()
    need_netns()
    before = set(subprocess.run(["ip", "netns"], capture_output=True, text=True, check=True).stdout.split())
    p = subprocess.Popen(
        [sys.executable, "-m", "ctsim", "calibrate", "--entries", "64Ki", "--sizes", "16Ki", "--nf-entries", "500k"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as at a terminal, even under CI
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until it is filling its namespace
        now = set(subprocess.run(["ip", "netns"], capture_output=True, text=True, check=True).stdout.split())
        mine = {n for n in now - before if n.startswith("ctsim-calib-")}  # another run's may come and go too
        if mine:
            break
        time.sleep(0.2)
    else:
        p.kill()
        pytest.fail("calibrate never created its namespace")
    time.sleep(0.5)
    p.send_signal(sig)  # SIGTERM to the process alone, as kubectl's and systemd's stop of one process is
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    lines = err.strip().splitlines()  # piped stderr: a line as each step starts, then the interruption
    assert lines[-1] == f"ctsim: {word} (what it had created is removed)"
    assert all(line.startswith("ctsim: ") and line.endswith(" steps)...") for line in lines[:-1]), lines
    after = set(subprocess.run(["ip", "netns"], capture_output=True, text=True, check=True).stdout.split())
    assert not mine & after
