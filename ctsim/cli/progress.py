"""Progress for long work on stderr: a rich bar on a terminal, a line every ``PROGRESS_EVERY`` s in a log."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctsim.inputs.scenario import Scenario


def long_run(scenario: Scenario) -> bool:
    """Runs that may take more than a few seconds get a progress bar (on stderr)."""
    return scenario.pods > 1_000 or scenario.horizon > 30 * 86400


PROGRESS_EVERY = 10.0  # seconds between progress lines on a stderr that is not a terminal (a log)


@contextlib.contextmanager
def heartbeat(name: str, expected_s: float) -> Iterator[None]:
    """For work that reports no steps (an emulation sleeps out its horizon): off a terminal, a line every
    ``PROGRESS_EVERY`` seconds of how long it has run against how long it should."""
    if sys.stderr is None or sys.stderr.isatty():
        yield
        return
    import threading

    from ctsim.core.quantity import format_duration

    stop, start = threading.Event(), time.monotonic()

    def beat() -> None:
        while not stop.wait(PROGRESS_EVERY):
            spent = time.monotonic() - start
            with contextlib.suppress(OSError, ValueError):
                print(f"ctsim: {name} {format_duration(round(spent))} of about {format_duration(round(expected_s))}",
                      file=sys.stderr, flush=True)  # fmt: skip

    thread = threading.Thread(target=beat, name="ctsim-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def with_progress(work, announce: bool = False):  # type: ignore[no-untyped-def]
    """Runs ``work(progress)`` under a rich progress bar on stderr (a terminal's only).

    Off a terminal (a log, CI) long work is not silent: a line every
    ``PROGRESS_EVERY`` seconds with done/total and what is left; work that
    ends sooner prints nothing. ``announce``: also one line as each step
    starts (calibrate's steps are each a minute).
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    from ctsim.core.quantity import format_duration

    columns = (TextColumn("{task.description:>14}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    console = Console(stderr=True)  # a bar for a terminal only: piped stderr got a stray blank line before an error
    start = time.monotonic()
    said = [start]  # when the last line was printed
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        tasks: dict[str, int] = {}
        done: dict[str, int] = {}

        def progress(name: str, advance: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
                if announce and not console.is_terminal:
                    print(f"ctsim: {name} ({total:,} steps)...", file=sys.stderr, flush=True)
            bar.update(tasks[name], advance=advance)
            done[name] = done.get(name, 0) + advance
            now = time.monotonic()
            if not console.is_terminal and now - said[0] >= PROGRESS_EVERY:
                said[0] = now
                n, spent = done[name], now - start
                left = f", about {format_duration(round(spent * (total - n) / n))} left" if 0 < n < total else ""
                print(
                    f"ctsim: {name} {n:,}/{total:,} ({n / max(total, 1):.0%}), {format_duration(round(spent))}{left}",
                    file=sys.stderr,
                    flush=True,
                )

        return work(progress)
