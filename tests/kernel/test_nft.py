"""kube-proxy's table programmed with the real `nft` in throwaway namespaces (no mocks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from ctsim.core.nft_cost import fit_layout
from ctsim.core.nft_layout import EndpointMix, Layout, one_service, shape
from ctsim.kernel import nft_calibrate, nft_ruleset
from tests.support.needs import need_binary, need_netns


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _kinds(script: str) -> Counter[str]:
    """What a script adds, by kind: 'add chain', 'add rule', 'add map', elements one per entry."""
    kinds: Counter[str] = Counter()
    for line in script.splitlines():
        words = line.split()
        if words[:2] == ["add", "element"]:
            kinds["element"] += len(line.split("{", 1)[1].rstrip(" }").split(","))
        elif words[0] == "add":
            kinds[words[1]] += 1
        if "numgen random mod" in line and "vmap {" in line:
            kinds["anonymous_map"] += 1
            kinds["anonymous_element"] += line.count("goto")
    return kinds


@pytest.mark.parametrize("layout", list(Layout))
@pytest.mark.parametrize("mix", ["1", "3", "1:60%,2:30%,7:10%"])
def test_the_counted_shape_is_what_the_script_writes(layout: Layout, mix: str) -> None:
    m = EndpointMix.parse(mix)
    script = nft_ruleset.full(layout, 50, m)
    kinds = _kinds(script)
    sh = shape(layout, 50, m)
    assert kinds["chain"] == sh.chains
    assert kinds["rule"] == sh.rules
    assert kinds["set"] + kinds["map"] == sh.sets
    assert kinds["anonymous_map"] == sh.anonymous_maps
    assert kinds["anonymous_element"] == sh.anonymous_elements
    assert kinds["element"] == sh.elements


def test_chain_names_are_kube_proxys() -> None:
    svc = nft_ruleset.services(1, EndpointMix.every(1))[0]
    # hashAndTruncate: 8 base32 characters of the SHA-256 of the name, then the name
    assert svc.chain.startswith("service-") and svc.chain.endswith("-ns-0/svc-0/tcp/p80")
    assert len(svc.chain.split("-", 2)[1]) == 8
    assert svc.endpoint_chain(svc.endpoints[0]).endswith(f"ns-0/svc-0/tcp/p80__{svc.endpoints[0]}/80")


def test_one_service_is_the_difference_a_service_makes() -> None:
    for layout in (Layout.TODAY, Layout.STOPGAP):
        for e in (1, 4):
            a = shape(layout, 10, EndpointMix.every(e))
            b = shape(layout, 11, EndpointMix.every(e))
            assert b.objects - a.objects == one_service(layout, e).objects


@pytest.fixture
def nft() -> None:
    need_netns()
    need_binary("nft")
    need_binary("nsenter")


def test_the_kernel_takes_every_layout(nft: None) -> None:
    for layout in Layout:
        sample = nft_calibrate.measure(layout, 200, 3)
        assert sample.full_s > 0 and sample.partial_s > 0 and sample.list_s > 0


def test_calibrate_finds_todays_growth_superlinear_and_the_stopgaps_linear(nft: None) -> None:
    # Small sizes, within CI's time (about 20 s): one endpoint each, as the report's user had. Below 2,000
    # Services the per-object term still hides the growth (1k-4k once measured N^1.41 in CI, N^1.64 here);
    # 2k-6k measured N^1.8 here, below the step at 6k-8k (docs/model.md). The fastest of 2 loads each.
    plan = nft_calibrate.Plan((Layout.TODAY, Layout.STOPGAP), (2000, 4000, 6000), (1,), trials=2)
    before = _netns()
    cal = nft_calibrate.calibrate(plan)
    assert not {n for n in _netns() - before if n.startswith(nft_calibrate.NETNS_PREFIX)}
    today, stopgap = cal.fits[Layout.TODAY], cal.fits[Layout.STOPGAP]
    assert today.exponent is not None and today.exponent > 1.5, today
    assert stopgap.exponent is not None and stopgap.exponent < 1.3, stopgap
    assert today.bind_exponent is not None and today.per_bind_s > 0  # the anonymous maps carry today's growth
    # The law holds its own samples, and the stop-gap at 6,000 Services costs a fraction of today's.
    assert today.worst_error < 0.25 and stopgap.worst_error < 0.25
    big = [s for s in cal.samples if s.services == 6000]
    t, g = sorted(big, key=lambda s: s.layout.value == "stopgap")
    assert g.full_s < t.full_s / 2


def test_fit_recovers_a_law_it_is_given() -> None:
    # The fit's arithmetic, on figures made from a known law (what the kernel's are held against above).
    from ctsim.core.nft_cost import Sample

    samples = []
    for e in (1, 3):
        for n in (1000, 2000, 4000, 8000):
            sh = shape(Layout.TODAY, n, EndpointMix.every(e))
            full = 2e-5 * sh.objects + 3e-12 * (sh.anonymous_maps * sh.objects / 2) ** 1.35
            samples.append(Sample(Layout.TODAY, n, e, full, 2e-8 * sh.objects**1.8, 0.01, full))
    law = fit_layout(samples)
    assert law.bind_exponent == pytest.approx(1.35)
    assert law.per_object_s == pytest.approx(2e-5, rel=1e-6)
    assert law.per_bind_s == pytest.approx(3e-12, rel=1e-6)
    assert law.worst_error < 1e-6
    assert law.list_exponent == pytest.approx(1.8) and law.per_listed_s == pytest.approx(2e-8, rel=1e-6)


def test_sigterm_removes_the_namespace(nft: None) -> None:
    before = _netns()
    p = subprocess.Popen(
        [sys.executable, "-m", "ctsim", "nft", "calibrate", "--sizes", "30k,40k", "--layouts", "today",
         "--endpoints", "3", "--trials", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    mine: set[str] = set()
    while time.monotonic() < deadline:
        mine = {n for n in _netns() - before if n.startswith(nft_calibrate.NETNS_PREFIX)}
        if mine and p.poll() is None:
            break
        time.sleep(0.1)
    else:
        p.kill()
        pytest.fail("nft calibrate never created its namespace")
    time.sleep(1.0)  # inside the 30k load: nft is running in the namespace
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert err.strip().splitlines()[-1] == "ctsim: terminated (what it had created is removed)"
    assert not mine & _netns()
    # ...and no nft of its own is left running in a namespace that is gone
    left = subprocess.run(["pgrep", "-f", "nsenter --net=/run/netns/ctsim-nft"], capture_output=True, text=True)
    assert not any(n in left.stdout for n in mine)


def _ctsim(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctsim", *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def test_calibrate_refuses_without_nft_in_one_line() -> None:
    env = {**os.environ, "PATH": "/nonexistent"}
    p = _ctsim("nft", "calibrate", env=env)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert "`nft` is not installed" in p.stderr and "nothing was measured" in p.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--sizes", "1k"], "at least two distinct sizes"),
        (["--sizes", "1k,x"], "--sizes"),
        (["--layouts", "iptables"], "unknown layout 'iptables'"),
        (["--trials", "0"], "--trials"),
    ],
)
def test_calibrate_refuses_bad_flags_in_one_line(args: list[str], words: str) -> None:
    p = _ctsim("nft", "calibrate", *args)
    assert p.returncode == 2, p.stderr
    assert words in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_calibrate_writes_the_fit_per_layout(nft: None, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "nft.json"
    p = _ctsim("nft", "calibrate", "--sizes", "300,600", "--endpoints", "1", "--trials", "1", "-o", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert set(doc["fit"]) == {"today", "stopgap", "dispatch"}
    assert all("exponent" in f for f in doc["fit"].values())
    assert len(doc["samples"]) == 6
    run = _ctsim("nft", "run", "--services", "1000", "--calibration", str(out), "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["origins"]["cost_law"].startswith(f"calibration {out}")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--services", "0"], "--services"),
        (["--services", "2M"], "--services"),
        (["--services", "1k", "--endpoints", "1:50%"], "sum to 50%"),
        (["--services", "1k", "--endpoints", "1:50%,1:50%"], "names an endpoint count twice"),
        (["--services", "1k", "--endpoints", "0"], "give 1 to 10000"),
        (["--services", "1k", "--layout", "ipvs"], "unknown layout 'ipvs'"),
        (["--services", "1k", "--layout", "today,stopgap"], "give one layout"),
        (["--services", "1k", "--calibration", "/nonexistent.json"], "no such file"),
        (["--services", "1k", "--sync-period", "0s"], "--sync-period"),
    ],
)
def test_run_refuses_bad_input_in_one_line(args: list[str], words: str) -> None:
    p = _ctsim("nft", "run", *args)
    assert p.returncode == 2, p.stderr
    assert words in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_run_refuses_a_file_that_is_not_a_calibration(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "x.json"
    bad.write_text('{"kind": "ctsim calibration"}')
    p = _ctsim("nft", "run", "--services", "1k", "--calibration", str(bad))
    assert p.returncode == 2 and "not a file `ctsim nft calibrate -o` wrote" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_run_json_projects_each_layout_against_kube_proxys_deadlines() -> None:
    p = _ctsim("nft", "run", "--services", "30k", "--endpoints", "1:70%,3:30%", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    for key in ("layout", "services", "full_sync_s", "partial_sync_s", "deadlines"):
        assert key in doc
    assert doc["layout"] == "today" and doc["services"] == 30_000 and doc["endpoints"] == "1:70%,3:30%"
    assert doc["deadlines"] == {"min_sync_period_s": 1.0, "healthz_s": 60.0, "network_programming_slo_s": 30.0}
    assert doc["origins"]["cost_law"].startswith("ctsim's packaged calibration")
    layouts = doc["layouts"]
    # what each layout buys: the stop-gap and the redesign are faster, and fit larger clusters
    assert layouts["stopgap"]["full_sync_s"] < layouts["today"]["full_sync_s"]
    assert layouts["dispatch"]["full_sync_s"] < layouts["today"]["full_sync_s"]
    assert layouts["today"]["largest_fitting_services"] < layouts["dispatch"]["largest_fitting_services"]
    assert doc["healthz_fails_on_full_sync"] == (doc["full_sync_s"] > 60.0)


def test_the_largest_fitting_cluster_is_the_edge() -> None:
    from ctsim.core import kube_proxy_sync as kps
    from ctsim.core.nft_cost import packaged

    cal, d = packaged(), kps.Deadlines.of()
    for layout in (Layout.TODAY, Layout.STOPGAP):
        mix = EndpointMix.every(1)
        n = kps.largest_fitting(cal, layout, mix, d)
        assert 0 < n < kps.MAX_SERVICES
        assert kps.project(cal, layout, n, mix, d).fits
        assert not kps.project(cal, layout, n + 1, mix, d).fits
