"""Every Cilium release from 1.16 to 1.20, as a user names it, playing its own walk and GC interval caching."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctsim.core.profiles import WalkKind, get_profile
from ctsim.core.releases import IntervalCache, Release, parse_release, played, rules
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import simulate

# (as typed, the release it names, its walk, its interval cache)
RELEASES = [
    ("1.16.5", Release(1, 16, 5), WalkKind.PER_ENTRY, IntervalCache.UNCAPPED),
    ("v1.17.14", Release(1, 17, 14), WalkKind.PER_ENTRY, IntervalCache.UNCAPPED),
    ("1.17", Release(1, 17, 18), WalkKind.PER_ENTRY, IntervalCache.UNCAPPED),
    ("1.18.1", Release(1, 18, 1), WalkKind.BATCHED, IntervalCache.UNCAPPED),
    ("1.18.2", Release(1, 18, 2), WalkKind.BATCHED, IntervalCache.CAPPED),
    ("1.18.10", Release(1, 18, 10), WalkKind.BATCHED, IntervalCache.CAPPED),
    ("v1.19.3", Release(1, 19, 3), WalkKind.BATCHED, IntervalCache.CAPPED),
    ("1.19.4", Release(1, 19, 4), WalkKind.BATCHED, IntervalCache.CAPPED),
    ("1.20", Release(1, 20, 2), WalkKind.BATCHED, IntervalCache.CAPPED),
    ("1.20.2", Release(1, 20, 2), WalkKind.BATCHED, IntervalCache.CAPPED),
]


@pytest.mark.parametrize(("text", "release", "walk", "cache"), RELEASES, ids=[r[0] for r in RELEASES])
def test_every_release_parses_and_plays_its_walk_and_gc_rule(
    text: str, release: Release, walk: WalkKind, cache: IntervalCache
) -> None:
    s = resolve_flags(cilium_version=text, entries="4M", pods="1", horizon="1m")
    assert s.release == release and rules(release).interval_cache is cache
    assert get_profile(s.profile).walk is walk
    assert s.origin("release") == "given"


def test_the_patch_decides_where_a_patch_changed_a_path() -> None:
    assert rules(Release(1, 17, 8)).ct_fill_signal != rules(Release(1, 17, 9)).ct_fill_signal
    assert rules(Release(1, 18, 2)).ct_fill_signal != rules(Release(1, 18, 3)).ct_fill_signal
    assert not rules(Release(1, 18, 12)).gc_walks_all_families and rules(Release(1, 19, 0)).gc_walks_all_families
    assert rules(Release(1, 19, 8)).gc_duration_reads_zero and not rules(Release(1, 20, 0)).gc_duration_reads_zero


def test_a_newer_release_is_played_as_the_newest_known_and_an_older_one_is_refused() -> None:
    assert played(parse_release("1.21.0")) == (Release(1, 20, 2), "Cilium v1.21.0 is newer than the newest "
                                               "release ctsim knows: played as v1.20.2")  # fmt: skip
    s = resolve_flags(cilium_version="1.21.3", pods="1", horizon="1m")
    assert s.release == Release(1, 20, 2) and any("played as v1.20.2" in n for n in s.notes)
    for bad in ("1.15.9", "v1.9", "1.2O", "latest", ""):
        p = subprocess.run(
            [sys.executable, "-m", "ctsim", "run", "--cilium-version", bad], capture_output=True, text=True, check=False
        )
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--cilium-version" in p.stderr, (bad, p.stderr)


def test_profiles_are_the_newest_patch_of_their_line_and_the_default_is_the_incidents() -> None:
    assert resolve_flags(pods="1").release == Release(1, 16, 5)
    assert resolve_flags(pods="1").origin("release") == "default: the incident's release"
    assert resolve_flags(profile="cilium-1.19", pods="1").release == Release(1, 19, 8)
    assert resolve_flags(profile="cilium-1.20", pods="1").release == Release(1, 20, 2)


# A fresh agent on a 4Mi map, --gc-max-interval 1h: quiet churn for 12 h (the interval grows), then a flood.
DRIFT = {
    "entries": "0", "max_entries": "4Mi", "churn": "2000/min for 12h, 200000/min for 12h", "agent_state": "fresh",
    "gc_max_interval": "1h", "horizon": "20h", "pods": "1",
}  # fmt: skip


@pytest.mark.parametrize("dual", [False, True], ids=["ipv4", "dual-stack"])
def test_v1_18_2_caches_the_capped_interval_where_v1_18_1_kept_12h(dual: bool) -> None:
    """Up to 1.18.1 the cached interval grows to 12 h past the cap, so the flood's first passes scale from 12 h
    and stay at the 1h cap; from 1.18.2 they scale from 1h and shrink: more passes, a smaller table."""
    v6 = {"ipv6_entries": "0", "ipv6_churn": "1000/min"} if dual else {}
    old, new = (simulate(resolve_flags(**DRIFT, **v6, cilium_version=v)) for v in ("1.18.1", "1.18.2"))
    assert len(new.gc.passes) > len(old.gc.passes)
    assert new.entries_at_end < old.entries_at_end
    assert max(old.gc.intervals) == 3600.0 == max(new.gc.intervals)  # both capped
    later = simulate(resolve_flags(**DRIFT, **v6, cilium_version="1.20.2"))
    assert later.gc.intervals == new.gc.intervals  # the same walk and the same caching rule


def test_a_warm_agents_cached_interval_is_capped_from_v1_18_2() -> None:
    flags = {"entries": "16M", "pods": "1", "horizon": "1m", "gc_max_interval": "1h"}
    assert resolve_flags(**flags, cilium_version="1.18.1").gc_initial_interval == 43200.0
    assert resolve_flags(**flags, cilium_version="1.18.2").gc_initial_interval == 3600.0


def test_the_upgrade_advice_keeps_a_given_release_flag_working() -> None:
    """Advice on a per-entry release given by version: its argv, added after the user's flags, still parses."""
    from ctsim.capacity.mitigations import simulate_mitigations

    s = resolve_flags(entries="16M", pods="10", cilium_version="1.17.14")
    upgrade = next(m for m in simulate_mitigations(s) if "upgrade" in m.action)
    assert upgrade.argv[:4] == ["--profile", "cilium-1.18", "--cilium-version", "1.18"]
    again = resolve_flags(entries="16M", pods="10", profile="cilium-1.18", cilium_version="1.18")
    assert again.release == Release(1, 18, 12)


def test_from_1_18_a_del_of_a_missing_endpoint_is_answered_before_the_limiter() -> None:
    """0fd97811e5: the teardown's DEL after a 429 no longer waits for an endpoint-delete slot (same walk rate)."""
    runs = {
        v: simulate(resolve_flags(cilium_version=v, entries="16M", pods="50", rate="213000")).to_dict()
        for v in ("1.17.14", "1.18.0")
    }
    old, new = runs["1.17.14"], runs["1.18.0"]
    # Up to 1.17 a DEL without an endpoint queues behind scrubbing DELs until containerd's 60 s run out.
    assert old["latency_s"]["cni_del"]["p90"] == pytest.approx(60.0)
    assert old["latency_s"]["limiter_wait"]["endpoint-delete"]["max"] > 50.0
    # From 1.18.0 only DELs that scrub take a slot, and none of them waited for one here.
    assert new["latency_s"]["cni_del"]["p90"] == 0.0
    assert new["latency_s"]["limiter_wait"]["endpoint-delete"]["max"] == 0.0
    assert new["cni"]["del_timeouts"] < old["cni"]["del_timeouts"] / 5
