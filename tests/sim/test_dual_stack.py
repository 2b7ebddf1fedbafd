"""A dual-stack node: IPv6 maps and lock, one GC interval over both families, scrubs IPv4 then IPv6."""

from __future__ import annotations

import pytest

from ctsim.core.errors import InputError
from ctsim.core.maptype import MapType
from ctsim.core.projection import FamilyWalk, burst_seconds, safe_burst
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import Model
from tests.support.scenarios import run


def test_ipv6_entries_make_the_node_dual_stack() -> None:
    r = run(entries="4M", ipv6_entries="2M", pods="1", horizon="1m")
    d = r.to_dict()
    assert list(d["families"]) == ["ipv4", "ipv6"]
    v4, v6 = d["families"]["ipv4"], d["families"]["ipv6"]
    assert v4["walk_seconds"] == pytest.approx(4_000_000 / 213_000)
    assert v6["walk_seconds"] == pytest.approx(2_000_000 / 213_000)
    # walk_seconds is the whole scrub: both families.
    assert d["walk_seconds"] == pytest.approx(v4["walk_seconds"] + v6["walk_seconds"])
    # IPv6 maps are sized like IPv4's unless told otherwise.
    assert v6["max_entries"] == v4["max_entries"] and v6["any_max_entries"] == v4["any_max_entries"]
    assert d["inputs"]["ipv6_entries"] == 2_000_000


def test_ipv4_only_has_one_family() -> None:
    d = run(entries="4M", pods="1", horizon="1m").to_dict()
    assert list(d["families"]) == ["ipv4"]
    assert d["inputs"]["ipv6_entries"] is None


def test_ipv6_max_entries_and_its_checks() -> None:
    s = resolve_flags(entries="1M", ipv6_entries="1M", ipv6_max_entries="2Mi")
    assert s.map(MapType.IPV6_TCP).max_entries == 2 * 2**20
    capped = resolve_flags(entries="1M", ipv6_entries="3M", ipv6_max_entries="2Mi")
    v6 = capped.map(MapType.IPV6_TCP)
    assert v6.entries == v6.max_entries == 2 * 2**20
    assert any("clamped" in note for note in capped.notes)
    with pytest.raises(InputError, match="--ipv6-entries"):
        resolve_flags(entries="1M", ipv6_entries="20M")
    with pytest.raises(InputError, match="--ipv6-max-entries"):
        resolve_flags(entries="1M", ipv6_max_entries="2Mi")


def test_a_scrub_walks_ipv4_then_ipv6_each_under_its_own_lock() -> None:
    model = Model(
        resolve_flags(entries="2130000", ipv6_entries="1065000", expired_fraction="0", pods="1", horizon="2m")
    )
    order: list[tuple[str, float]] = []
    for family in model.node.families:
        original = family.lock.record_hold

        def record(seconds: float, name: str = family.name, original=original) -> None:  # type: ignore[no-untyped-def]
            if seconds > 0:
                order.append((name, seconds))
            original(seconds)

        family.lock.record_hold = record  # type: ignore[method-assign]
    r = model.run()
    # IPv4's walk also covers the connections its churn opened before the scrub began (a few seconds' worth)
    assert order == [("ipv4", pytest.approx(10, rel=1e-3)), ("ipv6", pytest.approx(5))]
    assert r.families[0].lock_held_seconds == pytest.approx(10, rel=1e-3)
    assert r.families[1].lock_held_seconds == pytest.approx(5)


def test_gc_adapts_one_interval_from_the_largest_ratio_over_both_families() -> None:
    # IPv4 is quiet (1 % expired: < 5 % of capacity); IPv6 is 60 % garbage.
    # One pass walks both; the max ratio (0.6) shortens the single interval.
    common = {"max_entries": "1Mi", "pods": "1", "horizon": "1m", "gc_initial_interval": "10m"}
    quiet = run(entries="1Mi", expired_fraction="0.01", **common)
    assert quiet.gc.intervals[0] == 900  # grew by half
    both = run(entries="1Mi", ipv6_entries="1Mi", expired_fraction="0.6", **common)
    assert both.gc.passes[0].max_delete_ratio == pytest.approx(0.6, abs=1e-3)
    assert both.gc.intervals[0] == 240  # 10m * (1 - 0.6)
    mixed = Model(resolve_flags(entries="1Mi", ipv6_entries="1Mi", expired_fraction="0.01", **common))
    ipv6_tcp = mixed.node.families[1].maps[0]
    ipv6_tcp.delete_expired(0.0)  # IPv6 now holds only live entries ...
    from ctsim.sim.ctmap import NEVER

    ipv6_tcp.insert(0.0, 629_146, -NEVER)  # ... plus 60 % of its capacity expired
    r = mixed.run()
    assert r.gc.passes[0].max_delete_ratio == pytest.approx(0.6, abs=1e-3)
    assert r.gc.intervals == [240]


@pytest.mark.parametrize(("v4", "v6"), [(3_000_000, 1_000_000), (1_000_000, 3_000_000), (2_000_000, 2_000_000)])
def test_the_burst_projection_is_the_dual_stack_models(v4: int, v6: int) -> None:
    # Four pods fit the create limiter's slots and tokens: every scrub queues at once.
    walks = [FamilyWalk("ipv4", (v4, 0), 213_000), FamilyWalk("ipv6", (v6, 0), 213_000)]
    overhead = 2.0
    fits = safe_burst(walks, 90.0, overhead)
    scale_fit = (90.0 - overhead) / burst_seconds(walks, 4)
    for factor, ok in ((0.95, True), (1.05, False)):
        r = run(
            entries=str(int(v4 * scale_fit * factor)),
            ipv6_entries=str(int(v6 * scale_fit * factor)),
            expired_fraction="0",
            pods="4",
            horizon="10m",
        )
        assert (r.verdict == "ok") is ok, (factor, r.verdict)
    assert fits is not None


def test_burst_seconds_closed_form() -> None:
    one = [FamilyWalk("ipv4", (30, 10), 1.0)]
    assert burst_seconds(one, 3) == 3 * 40
    two = [FamilyWalk("ipv4", (30, 10), 1.0), FamilyWalk("ipv6", (20, 0), 1.0)]
    # max(N·t1 + a1 + N·W2, N·W1 + W2) with t1=30, a1=10, W1=40, W2=20.
    assert burst_seconds(two, 3) == max(3 * 30 + 10 + 3 * 20, 3 * 40 + 20)
    assert burst_seconds(two, 3) == 160
    assert safe_burst(two, 160.0) == 3
    assert safe_burst(two, 159.0) == 2
    assert safe_burst([FamilyWalk("ipv4", (0, 0), 1.0)], 90.0) is None
