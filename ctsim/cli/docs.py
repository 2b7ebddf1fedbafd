"""Regenerates every table and plot of docs/capacity-planning.md from the model.

    python -m ctsim.cli.docs            # rewrite the tables in place, redraw the plots
    python -m ctsim.cli.docs --check    # exit 1 if a committed table differs from today's model

Tables live between ``<!-- table:NAME -->`` and ``<!-- /table:NAME -->``
markers; the prose around them is left alone.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from ctsim.core.maptype import MapType
from ctsim.core.quantity import format_duration
from ctsim.inputs.scenario import resolve_flags
from ctsim.sim.model import Model, simulate
from ctsim.sim.result import Result

DOC = Path(__file__).resolve().parents[2] / "docs" / "capacity-planning.md"
IMG = DOC.parent / "img"


def _run(**flags: object) -> Result:
    return simulate(resolve_flags(**flags))  # type: ignore[arg-type]


def _md(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _s(x: float | None) -> str:
    return "—" if x is None else format_duration(x)


ENTRIES = ["262144", "1Mi", "4Mi", "7M", "16Mi"]


SIZING = [("2Gi", "0.0025"), ("16Gi", "0.0025"), ("64Gi", "0.0025"), ("240Gi", "0.0025"), ("512Gi", "0.005"),
          ("1Ti", "0.0025"), ("2Ti", "0.005")]  # fmt: skip


def table_sizing() -> str:
    """CT map sizes by node memory and bpf-map-dynamic-size-ratio, as the agent computes them."""
    from ctsim.core.quantity import parse_count
    from ctsim.core.sizing import ct_map_sizes

    rows = []
    for memory, ratio in SIZING:
        sizes = ct_map_sizes(parse_count(memory, "memory"), float(ratio))
        walk = _run(node_memory=memory, map_ratio=ratio, entries=str(sizes.tcp), pods="1", horizon="1s")
        rows.append(
            [
                memory,
                ratio,
                f"{sizes.tcp:,}",
                f"{sizes.any:,}",
                f"{sizes.memory_bytes() / 2**20:,.0f} MiB",
                f"{walk.walk_seconds:.1f} s",
                "any" if walk.advice.safe_burst is None else str(walk.advice.safe_burst),
            ]
        )
    header = ["node memory", "ratio", "TCP map", "non-TCP map", "IPv4 keys+values", "full TCP walk", "safe burst"]
    return _md(header, rows)


def table_walk() -> str:
    """Walk time (s) by table size and per-entry rate."""
    rates = [("130,000 (slow node)", "130000"), ("213,000 (incident, 1.16)", "213000"), ("400,000", "400000")]
    header = ["entries", *[name for name, _ in rates], "1.18 batched (scaled from the VM)"]
    rows = []
    for e in ENTRIES:
        walks = [_run(entries=e, rate=r, pods="1", horizon="1s").walk_seconds for _, r in rates]
        batched = _run(entries=e, pods="1", horizon="1s", profile="cilium-1.18").walk_seconds
        rows.append(
            [
                f"{resolve_flags(entries=e).map(MapType.IPV4_TCP).entries:,}",
                *[f"{w:.2f}" for w in walks],
                f"{batched:.2f}",
            ]
        )
    return _md(header, rows)


def table_burst() -> str:
    """Bursts against table size on the analytics node (drifted GC, 1.16)."""
    header = ["entries", "walk", "safe burst (projection)", "10 pods", "25 pods", "50 pods"]
    rows = []
    for e in ENTRIES:
        cells = []
        walk, safe = 0.0, None
        for pods in ("10", "25", "50"):
            r = _run(entries=e, pods=pods)
            walk, safe = r.walk_seconds, r.advice.safe_burst
            d = r.to_dict()["pods"]
            cells.append(f"{r.verdict}: {d['ready_first_attempt']}/{pods} first try, {d['ready']} Ready")
        rows.append(
            [
                f"{resolve_flags(entries=e).map(MapType.IPV4_TCP).entries:,}",
                f"{walk:.1f} s",
                "any" if safe is None else str(safe),
                *cells,
            ]
        )
    return _md(header, rows)


REPLICATIONS = 100


def table_burst_replications() -> str:
    """The burst table's boundary under 100 seeds each: collapse share with its 95 % interval."""
    from ctsim.capacity import replications as mc
    from ctsim.capacity.sweep import sweep

    axes = {"entries": ["1Mi", "4Mi", "7M"], "pods": ["10", "25", "50"]}
    rows = sweep({}, axes, seeds=mc.seeds(1, REPLICATIONS))
    header = ["entries", "pods", "collapse (95 % CI)", "all Ready p50", "all Ready p95", "ADD attempts p50"]
    out = []
    for point in mc.by_point(rows, list(axes), REPLICATIONS):
        s = point["summary"]
        collapse = s["verdicts"].get("collapse", {"count": 0, "ci95": mc.wilson(0, REPLICATIONS)})
        low, high = collapse["ci95"]
        ready, attempts = s["quantiles"]["all_ready_s"], s["quantiles"]["add_attempts"]
        out.append(
            [
                f"{resolve_flags(entries=point['entries']).map(MapType.IPV4_TCP).entries:,}",
                point["pods"],
                f"{collapse['count']}/{REPLICATIONS} ({low:.1%}–{high:.1%})",
                _s(ready["p50"]),
                _s(ready["p95"]),
                f"{attempts['p50']:,.0f}",
            ]
        )
    return _md(header, out)


def table_drift() -> str:
    """A fresh agent's adaptive interval on a quiet 16Mi map (500 connections/min)."""
    r = _run(entries="0", max_entries="16Mi", churn="500/min", gc_initial_interval="5m", horizon="40h", pods="1")
    rows = []
    for i, p in enumerate(r.gc.passes, start=1):
        rows.append([str(i), _s(p.start), f"{p.deleted:,}", f"{p.max_delete_ratio:.2%}", _s(p.interval_after)])
        if p.interval_after >= 12 * 3600 and i > 1 and r.gc.passes[i - 2].interval_after >= 12 * 3600:
            break
    return _md(["pass", "starts at", "deleted", "deleted / capacity", "next interval"], rows)


def table_mitigations() -> str:
    """The incident's 50-pod burst on 16M entries, and what each mitigation does to it."""
    cases = [
        ("as in the incident (adaptive GC, 12h)", {}),
        ("--gc-interval 60s", {"gc_interval": "60s"}),
        ("--max-entries 374880 (table capped)", {"max_entries": "374880"}),
        ("--profile cilium-1.18 (batched walk)", {"profile": "cilium-1.18"}),
    ]
    header = ["node", "verdict", "walk", "Ready", "first try", "p50", "max", "ADD timeouts", "429s", "orphaned walk"]
    rows = []
    for name, extra in cases:
        r = _run(**{"entries": "16M", "pods": "50", **extra})
        d = r.to_dict()
        lat = d["pods"]["ready_latency_s"]
        rows.append(
            [
                name,
                r.verdict,
                f"{r.walk_seconds:.1f} s",
                f"{d['pods']['ready']}/50",
                str(d["pods"]["ready_first_attempt"]),
                _s(lat["p50"]),
                _s(lat["max"]),
                f"{d['cni']['add_timeouts']:,}",
                f"{d['cni']['add_429']:,}",
                _s(d["lock"]["orphaned_walk_seconds"]),
            ]
        )
    return _md(header, rows)


def table_incident() -> str:
    """The write-up's numbers, each from the command beside it."""
    seven, full = _run(entries="7M", pods="1", horizon="1s"), _run(entries="16Mi", pods="1", horizon="1s")
    drift = _run(entries="0", max_entries="16Mi", churn="500/min", gc_initial_interval="5m", horizon="40h", pods="1")
    quiet = [p for p in drift.gc.passes if 0 < p.max_delete_ratio < 0.05]
    capped = next(i for i, p in enumerate(quiet) if p.interval_after >= 12 * 3600)
    burst = _run(entries="16Mi", pods="50").to_dict()
    fixed = _run(entries="16Mi", pods="50", gc_interval="60s").to_dict()
    rows = [
        [
            "walk of ~7 M entries (`ct list` count)",
            f"{seven.walk_seconds:.1f} s",
            "ctsim run --entries 7M --pods 1 --json",
        ],
        ["walk of the full 16,777,216 map", f"{full.walk_seconds:.1f} s", "ctsim run --entries 16Mi --pods 1 --json"],
        [
            "quiet passes until the 12 h cap",
            f"{capped + 1} passes, {format_duration(quiet[capped].start)}",
            "ctsim run --entries 0 --max-entries 16Mi --churn 500/min --gc-initial-interval 5m "
            "--horizon 40h --pods 1 --json",
        ],
        [
            "50-pod burst on the full map",
            f"{burst['verdict']}: {burst['pods']['ready_first_attempt']} Ready at first try, "
            f"{burst['cni']['add_timeouts']} ADD timeouts, {_s(burst['lock']['orphaned_walk_seconds'])} orphaned walks",
            "ctsim run --entries 16Mi --pods 50",
        ],
        [
            "the fix: conntrack-gc-interval 60s",
            f"{fixed['verdict']}: {fixed['pods']['ready']}/50 Ready by {_s(fixed['pods']['recovered_at_s'])}",
            "ctsim run --entries 16Mi --pods 50 --gc-interval 60s",
        ],
    ]
    return _md(["figure", "model", "command"], [[a, b, f"`{c}`"] for a, b, c in rows])


RELEASES = ["1.16.5", "1.17.14", "1.18.1", "1.18.10", "1.19.4", "1.20.2"]


def table_releases() -> str:
    """The incident's node (16M entries, 50 pods) under each release, with --gc-max-interval 1h, and restarted."""
    header = ["release", "walk", "verdict", "all Ready by", "ADD timeouts", "with --gc-max-interval 1h",
              "restarted (`--agent-state fresh`)"]  # fmt: skip
    rows = []
    for version in RELEASES:
        r = _run(entries="16M", pods="50", cilium_version=version)
        capped = _run(entries="16M", pods="50", cilium_version=version, gc_max_interval="1h", horizon="12h")
        fresh = _run(entries="16M", pods="50", cilium_version=version, agent_state="fresh")
        exits = fresh.agent["fatal_exits_at_s"] if fresh.agent is not None else []
        assert isinstance(exits, list)
        fatal = f"; {len(exits)} log.Fatal exits before its API answered" if exits else ""
        rows.append(
            [
                f"v{version}",
                f"{r.walk_seconds:.1f} s",
                r.verdict,
                _s(r.recovered_at),
                f"{r.counters.add_timeouts:,}",
                f"{capped.verdict}, all Ready by {_s(capped.recovered_at)}",
                f"{fresh.verdict}, all Ready by {_s(fresh.recovered_at)}{fatal}",
            ]
        )
    return _md(header, rows)


def table_kube_proxy() -> str:
    """kube-proxy's syncs per layout, Services x endpoints, from ctsim's packaged nft calibration."""
    from ctsim.core import kube_proxy_sync as kps
    from ctsim.core.nft_cost import packaged
    from ctsim.core.nft_layout import EndpointMix, Layout

    cal = packaged()
    deadlines = kps.Deadlines.of()
    header = ["Services", "endpoints each", *(f"{layout.value}: full / partial" for layout in Layout)]
    rows = []
    for services in (5_000, 10_000, 20_000, 30_000, 45_000):
        for endpoints in (1, 3):
            mix = EndpointMix.every(endpoints)
            cells = []
            for layout in Layout:
                p = kps.project(cal, layout, services, mix, deadlines)
                over = " **/healthz fails**" if p.healthz_fails_on_full_sync else ""
                cells.append(f"{_s(p.full_sync_s)} / {p.partial_sync_s:.2f} s{over}")
            rows.append([f"{services:,}", str(endpoints), *cells])
    largest = []
    for endpoints in (1, 3):
        mix = EndpointMix.every(endpoints)
        fits = ", ".join(f"{layout.value} {kps.largest_fitting(cal, layout, mix, deadlines):,}" for layout in Layout)
        largest.append(f"{endpoints} endpoint{'s' if endpoints > 1 else ''} each: {fits}")
    measured = sorted({s.services for s in cal.samples})
    return (
        _md(header, rows)
        + f"\n\nMeasured on kernel {cal.kernel} with {cal.nft} ({cal.measured[:10]}) at "
        + ", ".join(f"{n:,}" for n in measured)
        + " Services; larger sizes are the fitted law's. The largest cluster whose full sync keeps "
        + f"/healthz up ({_s(deadlines.healthz_s)}) and whose changes meet the programming SLO: "
        + "; ".join(largest)
        + " Services."
    )


TABLES: dict[str, Callable[[], str]] = {
    "incident": table_incident,
    "sizing": table_sizing,
    "walk": table_walk,
    "burst": table_burst,
    "burst-replications": table_burst_replications,
    "drift": table_drift,
    "mitigations": table_mitigations,
    "releases": table_releases,
    "kube-proxy": table_kube_proxy,
}


def render(text: str) -> str:
    """``text`` with every marked table regenerated."""
    for name, make in TABLES.items():
        text = fill(text, name, make, DOC)
    return text


def fill(text: str, name: str, make: Callable[[], str], doc: Path) -> str:
    """``text`` with what stands between ``<!-- table:NAME -->`` and its end marker made again."""
    pattern = re.compile(rf"(<!-- table:{name} -->\n)(?:.*?\n)?(<!-- /table:{name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{doc}: no markers for table {name!r}")
    body = make()
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def regenerate(doc: Path, render: Callable[[str], str], argv: list[str], module: str) -> int:
    """Rewrites ``doc``'s generated parts, or with ``--check`` exits 1 where they differ from today's model."""
    if not doc.is_file():  # an installed package carries no docs: say so, not a traceback
        print(f"{module}: {doc} is not here: run it from a clone of the repository", file=sys.stderr)
        return 2
    current = doc.read_text()
    fresh = render(current)
    if "--check" in argv:
        if fresh != current:
            print(f"{doc} is out of date: run `python -m {module}`", file=sys.stderr)
            return 1
        return 0
    doc.write_text(fresh)
    return 0


def draw_plots() -> None:
    from ctsim.capacity.sweep import sweep
    from ctsim.cli.plots import drift_of, heatmap

    IMG.mkdir(exist_ok=True)
    rows = sweep({}, {"entries": ["256Ki", "1Mi", "4Mi", "7M", "16Mi"], "pods": ["5", "10", "25", "50"]})
    heatmap(rows, "entries", "pods", "ready_first_attempt_fraction", str(IMG / "burst-heatmap.png"),
            title="Pods Ready at their first attempt (hatched: collapse)")  # fmt: skip
    scenario = resolve_flags(
        entries="0", max_entries="16Mi", churn="50000/min for 8h, 500/min for 16h", gc_initial_interval="5m",
        horizon="3d", pods="1",
    )  # fmt: skip
    model = Model(scenario, trace_every=scenario.horizon / 600)
    title = "Busy days, quiet nights: 50,000/min for 8h, 500/min for 16h"
    drift_of(model, model.run(), str(IMG / "drift.png"), title=title)


def main(argv: list[str]) -> int:
    rc = regenerate(DOC, render, argv, "ctsim.cli.docs")
    if rc == 0 and "--check" not in argv and "--no-plots" not in argv:
        draw_plots()
    return rc


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
