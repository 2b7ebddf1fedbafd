"""``fleet.risk`` and ``fleet.live`` on facts built by hand: a row's figures, and the inputs a row gives a run.

No Prometheus here: these hold the rules (which source wins, what is unknown
and why, what a row hands to ``run --from-prometheus``); the subprocess tests
in this package hold the reading.
"""

from __future__ import annotations

import math

import pytest

from ctsim.core.defaults import CLIENT_TIMEOUT, DEFAULT_REGENERATION
from ctsim.core.errors import InputError
from ctsim.core.maptype import MapType
from ctsim.core.profiles import get_profile
from ctsim.core.projection import Level
from ctsim.fleet.live import from_prometheus, node_inputs, shown, with_live
from ctsim.fleet.prometheus import Transport
from ctsim.fleet.risk import DEFAULT_BURST, Assumptions, assess, rank
from ctsim.fleet.series import MapFacts, NodeFacts
from ctsim.inputs.given import Given
from ctsim.inputs.scenario import resolve

CILIUM_116 = Assumptions(profile=get_profile("cilium-1.16"))


def ctwatch_node(name: str = "n1", tcp: float = 2_130_000, rate: float = 213_000.0, **kw: object) -> NodeFacts:
    """A node whose ctwatch gives the TCP map's count and capacity and a measured rate."""
    facts = NodeFacts(name, sources={"ctwatch"}, **kw)  # type: ignore[arg-type]
    facts.maps["cilium_ct4_global"] = MapFacts(
        entries=tcp, entries_series="ctwatch_entries", max_entries=4_000_000, capacity_series="ctwatch_max_entries"
    )
    facts.rates["ipv4"] = (rate, "cilium_ct4_global")
    return facts


def test_a_row_is_the_projection_of_its_own_facts() -> None:
    # 2,130,000 entries at 213,000/s: a 10 s walk; ten scrubs queue on the one lock, then a regeneration.
    risk = assess(ctwatch_node(), CILIUM_116)
    assert risk.walk_seconds == {"ipv4": pytest.approx(10.0)}
    assert risk.scrub_seconds == pytest.approx(10.0)
    assert (risk.pods, risk.pods_source) == (DEFAULT_BURST, "default: ctwatch's")
    assert (risk.deadline, risk.deadline_source) == (CLIENT_TIMEOUT, "default: cilium-cni's ClientTimeout")
    assert risk.burst_seconds == pytest.approx(10 * 10.0 + DEFAULT_REGENERATION)
    assert risk.deadline_ratio == pytest.approx(102 / 90)
    assert risk.level is Level.CRITICAL
    assert risk.safe_burst == 8  # 8 x 10 s + 2 s fits 90 s, 9 x 10 s + 2 s does not
    assert risk.walk_rate["ipv4"].source == 'ctwatch_walk_rate_entries_per_second{source="cilium_ct4_global"}'
    assert risk.maps["cilium_ct4_global"].capacity_source == "ctwatch_max_entries"
    assert risk.seconds_until_deadline == 0.0  # already past it
    small = assess(ctwatch_node(tcp=213_000), CILIUM_116)
    assert small.level is Level.OK and math.isinf(small.seconds_until_deadline or 0)  # no growth series: not growing


def test_the_node_s_own_burst_and_deadline_win_over_the_defaults() -> None:
    risk = assess(ctwatch_node(burst=4, deadline=60.0), CILIUM_116)
    assert (risk.pods, risk.pods_source, risk.deadline_source) == (4, "ctwatch_burst_pods", "ctwatch_deadline_seconds")
    assert risk.deadline_ratio == pytest.approx(42 / 60) and risk.level is Level.WARNING
    given = assess(ctwatch_node(burst=4), Assumptions(profile=get_profile("cilium-1.16"), pods=1))
    assert (given.pods, given.pods_source) == (1, "--pods")


def test_a_measured_rate_wins_over_a_fleet_rate_and_the_profile() -> None:
    fleet_rate = Assumptions(profile=get_profile("cilium-1.16"), rate=50_000.0, rate_source="--rate", rate_short="x")
    assert assess(ctwatch_node(), fleet_rate).walk_rate["ipv4"].entries_per_second == 213_000.0
    unmeasured = ctwatch_node()
    unmeasured.rates.clear()
    row = assess(unmeasured, fleet_rate).walk_rate["ipv4"]
    assert (row.entries_per_second, row.source, row.short) == (50_000.0, "--rate", "x")
    row = assess(unmeasured, CILIUM_116).walk_rate["ipv4"]
    assert (row.source, row.short) == ("profile cilium-1.16", "cilium-1.16")


def test_pressure_without_a_capacity_is_unknown_and_says_what_is_missing() -> None:
    facts = NodeFacts("cilium-only", sources={"cilium"})
    facts.maps["cilium_ct4_global"] = MapFacts(pressure=0.5)
    risk = assess(facts, CILIUM_116)
    assert risk.level is Level.UNKNOWN and not risk.known and risk.deadline_ratio is None
    assert "no series gives its capacity" in risk.unknown[0] and "--max-entries" in risk.unknown[0]
    sized = assess(facts, Assumptions(profile=get_profile("cilium-1.16"), capacity=(1_000_000, 500_000)))
    assert sized.maps["cilium_ct4_global"].entries == 500_000 and sized.known


def test_rank_puts_the_worst_first_and_the_unknown_last() -> None:
    rows = [
        assess(ctwatch_node("small", tcp=213_000), CILIUM_116),
        assess(NodeFacts("blank"), CILIUM_116),
        assess(ctwatch_node("big", tcp=4_000_000), CILIUM_116),
    ]
    assert [r.node for r in rank(rows)] == ["big", "small", "blank"]
    assert rank(rows)[-1].unknown == [
        "no CT map count in any series (neither ctwatch_entries, cilium_bpf_map_pressure "
        "nor cilium_datapath_conntrack_gc_entries)"
    ]


def test_a_row_hands_a_run_the_numbers_it_holds_with_their_series() -> None:
    risk = assess(ctwatch_node(deadline=60.0), CILIUM_116)
    live = node_inputs(risk)
    assert live["entries"] == (2_130_000, "ctwatch_entries")
    assert live["max_entries"] == (4_000_000, "ctwatch_max_entries")
    assert live["rate"][0] == 213_000.0 and live["rate"][1].startswith("ctwatch_walk_rate")
    assert live["deadline"] == (60.0, "ctwatch_deadline_seconds")
    assert "any_entries" not in live  # no series: the preset's, and the inputs block says so
    # A row's values are numbers; they become text only to be shown as the flag a user would type.
    assert (shown("deadline", 60.0), shown("entries", 2_130_000)) == ("60s", "2130000")


def test_a_profile_rate_and_a_default_deadline_are_not_live() -> None:
    facts = ctwatch_node()
    facts.rates.clear()
    live = node_inputs(assess(facts, CILIUM_116))
    assert "rate" not in live and "deadline" not in live


def test_with_live_keeps_what_the_user_gave_and_records_each_series() -> None:
    live = node_inputs(assess(ctwatch_node(deadline=60.0), CILIUM_116))
    given = with_live(Given(entries=1_000), live, "n1")
    assert given.entries == 1_000  # the user's flag wins
    assert given.max_entries == 4_000_000 and given.deadline == 60.0
    assert dict(given.sources)["max_entries"] == "live: ctwatch_max_entries of n1"
    s = resolve(given)
    assert s.map(MapType.IPV4_TCP).entries == 1_000 and s.map(MapType.IPV4_TCP).max_entries == 4_000_000
    assert s.origin("capacity").startswith("live: ctwatch_max_entries of n1 (TCP)")
    assert s.origin("entries") == "given"


def test_a_missing_node_or_url_is_one_line() -> None:
    """The library names the parameters it refuses; the command line says each as its flag."""
    from ctsim.cli.command import flag_of

    with pytest.raises(InputError, match="node: give from_prometheus") as no_url:
        from_prometheus(Given(), None, "n1", "node", Transport())
    assert no_url.value.said(flag_of) == "--node: give --from-prometheus URL too"
    with pytest.raises(InputError, match="give node NAME") as no_node:
        from_prometheus(Given(), "http://127.0.0.1:1", " ", "node", Transport())
    assert no_node.value.said(flag_of).startswith("--from-prometheus: give --node NAME")


@pytest.mark.parametrize(
    "sizing",
    [
        {"max_entries": "1Mi"},
        {"node_memory": "256Gi"},
        {"node_memory": "256Gi", "map_ratio": "0.005"},
        {"max_entries": "1Mi", "node_memory": "64Gi"},
    ],
)
def test_the_fleet_sizes_a_map_as_run_sizes_it(sizing: dict[str, str]) -> None:
    """One sizing rule: the fleet's fallback is `ctsim run --preset standard` (Cilium's defaults) on the same flags."""
    from ctsim.cli.fleet_view import FALLBACK_PRESET, _assumptions
    from ctsim.inputs.given import parse_given
    from ctsim.inputs.scenario import resolve_flags

    a = _assumptions(parse_given(**sizing), None)
    run = resolve_flags(preset=FALLBACK_PRESET, **sizing)
    assert a.capacity == tuple(m.max_entries for m in run.maps)


def test_the_fleet_takes_the_walk_rate_by_run_s_rule() -> None:
    from ctsim.cli.fleet_view import _assumptions
    from ctsim.inputs.given import parse_given
    from ctsim.inputs.scenario import resolve_flags

    for flags in ({"rate": "50000"}, {"profile": "cilium-1.18"}, {"rate": "50000", "profile": "cilium-1.18"}):
        a = _assumptions(parse_given(**flags), None)
        run = resolve_flags(**flags)
        assert (a.rate or a.profile.walk_rate) == run.walk_rate, flags


def test_the_table_fits_120_columns_and_its_notes_are_whole_lines() -> None:
    """kubectl's layout on a 120-column terminal: the narrow default fits, each note is one line below."""
    from rich.console import Console

    from ctsim.cli.fleet_view import render
    from ctsim.fleet.series import FleetRead

    rows = rank(
        [
            assess(
                ctwatch_node(f"ip-10-0-{i}-{i * 7}.eu-west-1.compute.internal", tcp=1_000_000 + 400_000 * i), CILIUM_116
            )
            for i in range(6)
        ]
    )
    rows[0].unknown.append(
        "ct6_global: cilium_bpf_map_pressure absent while ctwatch reports the map, a dead controller"
    )
    read = FleetRead(nodes={}, queried_at=0.0, queries={"q": "up"}, series={"q": 6}, unlabelled=0)
    narrow = Console(width=120, record=True, force_terminal=True, color_system=None)
    render(rows, read, "http://prometheus:9090", console=narrow)
    text = narrow.export_text()
    assert max(len(line) for line in text.splitlines()) <= 120, text
    assert "rate from" not in text and "GC interval" not in text and "safe burst" in text
    lines = text.splitlines()
    assert sum(1 for line in lines if ".compute.internal" in line) == 6 + 1  # a row each, whole names; one note
    note = next(i for i, line in enumerate(lines) if line.startswith(f"  1 {rows[0].node}: ct6_global:"))
    assert " ".join(lines[note : note + 2]).endswith("ctwatch reports the map, a dead controller")  # words kept
    wide = Console(width=400, record=True, force_terminal=True, color_system=None)
    render(rows, read, "http://prometheus:9090", wide=True, console=wide)
    every = wide.export_text()
    assert all(h in every for h in ("walk s", "growth/h", "GC interval", "rate from", "4,000,000"))


def _dual_stack_without_ct6(name: str = "v6") -> NodeFacts:
    """Cilium with pressure for three CT maps: ct6_global's is absent (0, or a stopped controller)."""
    facts = NodeFacts(name, sources={"cilium"})
    for m, p in (("cilium_ct4_global", 0.5), ("cilium_ct_any4_global", 0.1), ("cilium_ct_any6_global", 0.2)):
        facts.maps[m] = MapFacts(pressure=p, entries_series=f"cilium_bpf_map_pressure of {m}", max_entries=1 << 20)
    return facts


def test_an_absent_ct6_count_is_said_and_never_run_as_zero() -> None:
    risk = assess(_dual_stack_without_ct6(), CILIUM_116)
    assert risk.known and "cilium_ct6_global" not in risk.maps
    assert any("no series counts cilium_ct6_global" in f for f in risk.flags), risk.flags
    live = node_inputs(risk)
    assert "ipv6_any_entries" in live and "ipv6_entries" not in live  # not (0, "taken as empty")
    from ctsim.fleet.simulate import simulate

    assert simulate([risk], 1, Given(), {}) == []  # not run with a 0 it was never told
    assert any(f.startswith("not simulated: no series counts cilium_ct6_global") for f in risk.flags)


def test_an_absent_gc_interval_says_why_and_is_no_interval() -> None:
    risk = assess(_dual_stack_without_ct6(), CILIUM_116)
    assert risk.gc_interval is None and "--conntrack-gc-interval is fixed" in risk.gc_interval_source
    assert assess(ctwatch_node(), CILIUM_116).gc_interval_source == ""  # no Cilium series: nothing to explain
