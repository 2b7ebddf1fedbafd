"""What every command that fans out shares: ``--replications``, ``--scheduler``, and their checks."""

from __future__ import annotations

from typing import Any

import typer

from ctsim.core.errors import InputError


def replications_option(help_text: str) -> Any:
    """``--replications R``; its bounds are checked by ``ctsim.capacity.replications.check`` (loaded only if used)."""
    from ctsim.cli.command import whole_number

    return typer.Option(metavar="R", help=help_text, click_type=whole_number("--replications"))


def scheduler_option(what: str) -> Any:
    return typer.Option(metavar="ADDRESS", help=f"Run {what} on this Dask scheduler (tcp://host:8786).")


def check_cluster(replications: int, scheduler: str | None, single: bool) -> None:
    """Before any work: R within bounds, a scheduler address that is there (and, for ``run``, worth it)."""
    from ctsim.capacity.pool import check_scheduler

    check_scheduler(scheduler)
    if replications != 1:
        from ctsim.capacity.replications import check

        check(replications)
    if single and scheduler is not None and replications == 1:
        raise InputError("--scheduler: give --replications too (one run is not worth a cluster)")
