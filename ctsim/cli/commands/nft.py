"""``ctsim nft``: kube-proxy's nftables programming time, measured on this kernel, projected against its deadlines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctsim.cli.command import whole_number
from ctsim.cli.options import Str
from ctsim.core.errors import InputError
from ctsim.core.files import STDOUT, check_writable

if TYPE_CHECKING:
    from ctsim.core.kube_proxy_sync import SyncProjection
    from ctsim.core.nft_cost import NftCalibration
    from ctsim.core.nft_layout import Layout
    from ctsim.core.origin import Origin

SHORT_HELP = "kube-proxy's nftables sync time: measure it on this kernel, project it against kube-proxy's deadlines."

app = typer.Typer(
    help="The second hazard: kube-proxy's nftables programming time, which grows faster than its Services.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

LAYOUT_HELP = "today (a numgen vmap per Service), stopgap (PR #140723), dispatch (PR #140362)."


def _layouts(text: str, flag: str) -> list[Layout]:
    from ctsim.core.nft_layout import Layout
    from ctsim.core.quantity import split_list

    known = {layout.value: layout for layout in Layout}
    out = []
    for name in split_list(text, flag):
        if name not in known:
            raise InputError(f"{flag}: unknown layout {name!r} (known: {', '.join(known)})")
        out.append(known[name])
    return out


@app.command(
    short_help="Program kube-proxy's table at a few sizes in a throwaway netns and fit this kernel's cost law."
)
def calibrate(
    sizes: Annotated[
        str, typer.Option(metavar="COUNT,COUNT,...", help="Services per measured table (at least two sizes).")
    ] = "2k,4k,8k,12k",
    endpoints: Annotated[
        str, typer.Option(metavar="N,N,...", help="Endpoints per Service, each measured at every size.")
    ] = "1,3",
    layouts: Annotated[str, typer.Option(metavar="LAYOUT,...", help=LAYOUT_HELP)] = "today,stopgap,dispatch",
    trials: Annotated[
        int,
        typer.Option(
            metavar="INT", help="Loads per size; the fastest counts.", click_type=whole_number("--trials", 1, 20)
        ),
    ] = 2,
    output: Annotated[
        Str, typer.Option("--output", "-o", metavar="FILE", help="Write the fit and the timings here ('-': stdout).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the fit and the timings as JSON.")] = False,
) -> None:
    """Program kube-proxy's own table layout with the real `nft` in a throwaway network namespace (root).

    Each size is loaded whole from empty (a full sync), listed as kube-proxy
    lists it on every sync, and given one more Service (a partial sync); each
    figure is the CPU time of `nft` (user and kernel), the fastest of
    --trials. The namespace is removed however the run ends, SIGTERM included.
    The defaults took 9m38s on a 2-core VM, most of it today's layout at
    12,000 Services. Small --sizes (1k,2k,4k) take seconds and show the
    shape, but a law fitted below the size where the table outgrows the CPU's
    caches (6k-8k Services here) underestimates a larger cluster by half:
    measure sizes beyond it (docs/model.md).
    """
    from ctsim.cli.progress import with_progress
    from ctsim.cli.term import print_json
    from ctsim.core.files import write_atomic
    from ctsim.core.quantity import parse_count, split_list
    from ctsim.kernel import nft_calibrate as cal

    size_list = sorted({parse_count(s, "--sizes", minimum=10, maximum=cal.MAX_SERVICES)
                        for s in split_list(sizes, "--sizes")})  # fmt: skip
    if len(size_list) < 2:
        raise InputError("--sizes: give at least two distinct sizes: the law is fitted across them")
    counts = sorted(
        {parse_count(e, "--endpoints", minimum=1, maximum=64) for e in split_list(endpoints, "--endpoints")}
    )
    plan = cal.Plan(tuple(dict.fromkeys(_layouts(layouts, "--layouts"))), tuple(size_list), tuple(counts), trials)
    if output == STDOUT and as_json:
        raise InputError("--output - and --json: both would print the calibration; give --output a file")
    if output is not None and output != STDOUT:
        check_writable(output, "--output")
    cal.probe()
    measured = with_progress(lambda progress: cal.calibrate(plan, progress), announce=True)
    doc = measured.to_dict()
    if output:
        import json

        text = json.dumps(doc, indent=2) + "\n"
        if output == STDOUT:
            print(text, end="")
        else:
            write_atomic(output, text)
    if as_json:
        print_json(doc)
    elif output != STDOUT:
        _print_calibration(measured, output)


def _print_calibration(measured: NftCalibration, output: str | None) -> None:
    from ctsim.core.quantity import format_duration

    print(f"kernel {measured.kernel}, {measured.nft}; CPU seconds of nft, fastest of the trials")
    print(f"{'layout':<9} {'endpoints':>9} {'Services':>9} {'full sync':>10} {'listing':>9} {'+1 Service':>10}")
    for s in measured.samples:
        print(
            f"{s.layout.value:<9} {s.endpoints:>9} {s.services:>9,} {format_duration(s.full_s):>10} "
            f"{s.list_s:>8.3f}s {s.partial_s:>9.4f}s"
        )
    for layout, f in measured.fits.items():
        growth = ", ".join(f"N^{g:.2f} at {e} endpoint{'s' if e > 1 else ''}" for e, g in f.growth.items())
        law = f"{f.per_object_s * 1e6:.2f} us/object"
        if f.bind_exponent is not None:
            law += f" + {f.per_bind_s:.3g} s x (maps x objects / 2)^{f.bind_exponent:.3g}"
        print(f"{layout.value}: full sync grows {growth}; law {law}; worst fit error {f.worst_error:.0%}")
    if output:
        print(f"written to {output}")


def _calibration(path: str | None) -> tuple[NftCalibration, Origin]:
    from ctsim.core import nft_cost
    from ctsim.core.origin import Origin

    if path:
        cal = nft_cost.load(path)
        return cal, Origin.calibration(f"calibration {path}: kernel {cal.kernel}, measured {cal.measured[:10]}")
    cal = nft_cost.packaged()
    return cal, Origin.published(
        f"ctsim's packaged calibration: kernel {cal.kernel}, {cal.nft}, measured {cal.measured[:10]}; "
        "for this machine's kernel: `ctsim nft calibrate -o FILE`, then --calibration FILE"
    )


@app.command(short_help="Project kube-proxy's full and partial sync time for a cluster, against its deadlines.")
def run(
    services: Annotated[str, typer.Option(metavar="COUNT", help="Services (Service ports) in the cluster.")],
    endpoints: Annotated[
        str, typer.Option(metavar="DIST", help="Endpoints per Service: '3', or a mix such as '1:70%,3:25%,10:5%'.")
    ] = "1",
    layout: Annotated[str, typer.Option(metavar="LAYOUT", help=LAYOUT_HELP)] = "today",
    calibration: Annotated[
        Str, typer.Option(metavar="FILE", help="A `ctsim nft calibrate -o` file (default: ctsim's packaged one).")
    ] = None,
    sync_period: Annotated[
        str, typer.Option(metavar="DURATION", help="kube-proxy's syncPeriod: /healthz fails after twice it.")
    ] = "30s",
    min_sync_period: Annotated[str, typer.Option(metavar="DURATION", help="kube-proxy's minSyncPeriod.")] = "1s",
    as_json: Annotated[bool, typer.Option("--json", help="Print the projection as JSON.")] = False,
) -> None:
    """Project a full sync (a restart) and a partial sync (one Service changed), and what they mean for kube-proxy."""
    from ctsim.core import kube_proxy_sync as kps
    from ctsim.core.nft_layout import EndpointMix
    from ctsim.core.origin import Origin
    from ctsim.core.quantity import parse_count, parse_duration

    n = parse_count(services, "--services", minimum=1, maximum=kps.MAX_SERVICES)
    mix = EndpointMix.parse(endpoints, "--endpoints")
    (chosen,) = _one_layout(layout)
    deadlines = kps.Deadlines.of(
        parse_duration(sync_period, "--sync-period", minimum=1.0, maximum=86400.0),
        parse_duration(min_sync_period, "--min-sync-period", allow_zero=True, maximum=3600.0),
    )
    cal, law_origin = _calibration(calibration)
    if chosen not in cal.fits:
        raise InputError(f"--calibration: {calibration} has no fit for layout {chosen.value!r}")
    given = _given_flags()
    origins = {
        "services": Origin.given("--services"),
        "endpoints": Origin.given("--endpoints") if "endpoints" in given else Origin.default("1 endpoint each"),
        "layout": Origin.given("--layout") if "layout" in given else Origin.default("today's kube-proxy"),
        "cost_law": law_origin,
        "deadlines": Origin.given("--sync-period, --min-sync-period")
        if {"sync_period", "min_sync_period"} & given
        else Origin.default("kube-proxy's defaults"),
    }
    projection = kps.project(cal, chosen, n, mix, deadlines)
    each = {lay: kps.project(cal, lay, n, mix, deadlines) for lay in cal.fits}
    largest = {lay: kps.largest_fitting(cal, lay, mix, deadlines) for lay in cal.fits}
    if as_json:
        from ctsim.cli.term import print_json

        print_json(_to_dict(projection, each, largest, origins))
        return
    _print_projection(projection, each, largest, origins)


def _one_layout(text: str) -> list[Layout]:
    chosen = _layouts(text, "--layout")
    if len(chosen) != 1:
        raise InputError("--layout: give one layout (today, stopgap or dispatch)")
    return chosen


def _given_flags() -> set[str]:
    """The parameters the user typed (click knows; the defaults look the same otherwise)."""
    try:  # the click typer runs on: its vendored copy where it has one
        from typer._click.globals import get_current_context
    except ImportError:
        from click import get_current_context

    ctx = get_current_context(silent=True)
    if ctx is None:
        return set()
    return {name for name in ctx.params if ctx.get_parameter_source(name).name == "COMMANDLINE"}


def _projection_dict(p: SyncProjection) -> dict[str, Any]:
    return {
        "full_sync_s": round(p.full_sync_s, 4),
        "partial_sync_s": round(p.partial_sync_s, 4),
        "network_programming_s": round(p.network_programming_s, 4),
        "healthz_fails_on_full_sync": p.healthz_fails_on_full_sync,
        "healthz_fails_always": p.healthz_fails_always,
        "misses_programming_slo": p.misses_programming_slo,
        "back_to_back": p.back_to_back,
        "fits": p.fits,
        "extrapolated": p.extrapolated,
        "measured_up_to_services": p.measured_up_to,
    }


def _to_dict(
    p: SyncProjection, each: dict[Layout, SyncProjection], largest: dict[Layout, int], origins: dict[str, Origin]
) -> dict[str, Any]:
    return {
        "layout": p.layout.value,
        "services": p.services,
        "endpoints": p.mix.text,
        **_projection_dict(p),
        "deadlines": {
            "min_sync_period_s": p.deadlines.min_sync_period_s,
            "healthz_s": p.deadlines.healthz_s,
            "network_programming_slo_s": p.deadlines.network_programming_slo_s,
        },
        "layouts": {
            lay.value: {**_projection_dict(q), "largest_fitting_services": largest[lay]} for lay, q in each.items()
        },
        "origins": {k: str(v) for k, v in origins.items()},
    }


def _print_projection(
    p: SyncProjection, each: dict[Layout, SyncProjection], largest: dict[Layout, int], origins: dict[str, Origin]
) -> None:
    from ctsim.core import kube_proxy_sync as kps
    from ctsim.core.printable import printable
    from ctsim.core.quantity import format_duration as d

    mix = p.mix.text
    ends = f"{mix} endpoint{'s' if mix != '1' else ''} each" if "," not in mix else f"endpoints {mix}"
    dl = p.deadlines
    rows = [
        ("cluster", f"{p.services:,} Services, {ends}", f"{origins['services']}; {origins['endpoints']}"),
        ("layout", p.layout.words, str(origins["layout"])),
        ("cost law", _law(p), printable(str(origins["cost_law"]))),
        ("deadlines", f"minSyncPeriod {d(dl.min_sync_period_s)}, /healthz 2 x syncPeriod = {d(dl.healthz_s)}, "
                      f"network programming SLO {d(dl.network_programming_slo_s)}", str(origins["deadlines"])),
        ("full sync", f"{d(p.full_sync_s)}: a restart, a failed sync's retry, a node label change",
         _against(p.full_sync_s, dl.healthz_s, "/healthz")),
        ("partial sync", f"{_seconds(p.partial_sync_s)}: one Service changed (kube-proxy lists the table's chains and "
                         "sets first)", _against(p.partial_sync_s, dl.min_sync_period_s, "minSyncPeriod")),
        ("programming", f"{_seconds(p.network_programming_s)} worst: the sync in progress, then the change's own",
         _against(p.network_programming_s, dl.network_programming_slo_s, "the SLO")),
    ]  # fmt: skip
    for name, value, origin in rows:
        print(f"{name:<14}{value}" + (f"  [{origin}]" if origin else ""))
    if p.extrapolated:
        print(f"{'':<14}(extrapolated: the calibration measured this layout up to {p.measured_up_to:,} Services)")
    print(f"{'verdict':<14}{_verdict(p)}")
    print(f"{'each layout':<14}at {p.services:,} Services, {ends}:")
    for lay, q in each.items():
        fits = f"fits up to {largest[lay]:,} Services" if largest[lay] else "fits no cluster"
        if largest[lay] >= kps.MAX_SERVICES:
            fits = f"fits every cluster (up to the {kps.MAX_SERVICES:,} Services a /12 Service CIDR holds)"
        print(f"{'':<14}{lay.value:<9} full {d(q.full_sync_s):>7}, partial {_seconds(q.partial_sync_s):>6}; {fits}")


def _law(p: SyncProjection) -> str:
    from ctsim.core.nft_layout import shape

    sh = shape(p.layout, p.services, p.mix)
    return f"the table: {sh.objects:,} objects, {sh.anonymous_maps:,} anonymous maps, {sh.chains:,} chains"


def _seconds(value: float) -> str:
    from ctsim.core.quantity import format_duration

    return f"{value:.2f}s" if value < 10 else format_duration(value)


def _against(value: float, limit: float, name: str) -> str:
    from ctsim.core.quantity import format_duration

    if value > limit:
        return f"over {name} ({format_duration(limit)}) by {value / limit:.2f}x"
    return f"{value / limit:.0%} of {name} ({format_duration(limit)})"


def _verdict(p: SyncProjection) -> str:
    if p.healthz_fails_always:
        return "kube-proxy is unhealthy: every sync outlasts /healthz's threshold"
    if p.healthz_fails_on_full_sync:
        return (
            "/healthz fails on every start-up and after every failed sync: the full sync outlasts "
            f"{p.deadlines.healthz_s:.0f}s; a liveness probe on it restarts kube-proxy into another full sync"
        )
    if p.misses_programming_slo:
        return "Service changes miss the network programming SLO"
    if p.back_to_back:
        return "fits, but under steady churn kube-proxy syncs back to back (a partial sync outlasts minSyncPeriod)"
    return "fits: every sync within kube-proxy's deadlines"
