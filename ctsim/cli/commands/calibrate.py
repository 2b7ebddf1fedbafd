"""``ctsim calibrate``: this kernel's CT walk rates, measured on throwaway BPF maps (root)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ctsim.cli.command import whole_number
from ctsim.cli.options import (
    Str,
)
from ctsim.cli.progress import with_progress
from ctsim.cli.term import print_json
from ctsim.core.errors import InputError
from ctsim.core.files import STDOUT, check_writable

if TYPE_CHECKING:
    pass

SHORT_HELP = "Measure this kernel's CT walk rates on throwaway BPF maps (root)."


def calibrate(
    entries: Annotated[str, typer.Option(metavar="COUNT", help="Entries in the measured map.")] = "1Mi",
    trials: Annotated[
        int,
        typer.Option(
            metavar="INT",
            help="Repeated walks; median and spread are reported.",
            click_type=whole_number("--trials", 1, 100),
        ),
    ] = 5,
    family: Annotated[
        str, typer.Option(metavar="ipv4|ipv6", help="ipv4 (14-byte keys) or ipv6 (38-byte keys).")
    ] = "ipv4",
    sizes: Annotated[
        str, typer.Option(metavar="COUNT,COUNT,...", help="Map sizes for the per-entry cost curve.")
    ] = "64Ki,256Ki,1Mi",
    nf_entries: Annotated[
        str, typer.Option(metavar="COUNT", help="nf_conntrack entries to add in a throwaway netns (0: skip).")
    ] = "5k",
    output: Annotated[
        Str, typer.Option("--output", "-o", metavar="FILE", help="Write the calibration file here ('-': stdout).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the measurements as JSON.")] = False,
) -> None:
    """Measure this kernel's CT walk rates on real, throwaway BPF maps (needs root or CAP_BPF)."""
    from ctsim.core.calibration import dump
    from ctsim.core.defaults import CT_KEY_SIZES
    from ctsim.core.quantity import parse_count, split_list
    from ctsim.kernel import calibrate as cal

    if family not in CT_KEY_SIZES:
        raise InputError(f"--family: must be ipv4 or ipv6, got {family!r}")
    size_list = split_list(sizes, "--sizes")
    plan = cal.Plan(
        entries=parse_count(entries, "--entries", minimum=1024, maximum=cal.MAX_ENTRIES),
        trials=trials,
        family=family,
        sizes=tuple(parse_count(s, "--sizes", minimum=1024, maximum=cal.MAX_ENTRIES) for s in size_list),
        nf_entries=parse_count(nf_entries, "--nf-entries", maximum=cal.MAX_NF_ENTRIES),
    )
    if output == STDOUT and as_json:
        raise InputError("--output - and --json: both would print the measurements; give --output a file")
    if output is not None:
        check_writable(output, "--output")
    cal.probe()
    measured = with_progress(lambda progress: cal.calibrate(plan, progress), announce=True)
    if output:
        dump(measured.to_dict(), output)
    if as_json:
        print_json(measured.to_dict())
        return
    if output == STDOUT:  # the calibration file is on standard output: no table beside it
        return
    from ctsim.cli.tables import render_calibration

    render_calibration(measured, output)
