"""Where many runs execute: a local process pool, or a Dask cluster (``--scheduler``).

One run is a few milliseconds to a few seconds of pure CPU; a sweep or a
set of replications is many of them. Up to one machine, forked worker
processes; beyond it, an existing distributed engine, ``dask.distributed``
(the ``ctsim[dask]`` extra), never a home-made one. Results come back in the
order of the inputs, whichever finishes first.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ctsim.core.errors import InputError

T = TypeVar("T")
R = TypeVar("R")

DASK_TIMEOUT_S = 10  # connecting to the scheduler
CHUNKS_PER_WORKER = 8  # enough to even out unequal chunks, few enough that Dask's cost per task is small


def run_all(
    fn: Callable[[T], R],
    items: Sequence[T],
    processes: int | None = None,
    scheduler: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[R]:
    """``[fn(x) for x in items]``, on ``processes`` local workers or the Dask ``scheduler``'s."""
    if scheduler:
        return _on_dask(fn, items, scheduler, progress)
    n = processes or os.cpu_count() or 1
    results: list[R] = []
    if n == 1 or len(items) <= 1:
        for item in items:
            results.append(fn(item))
            if progress:
                progress(len(results), len(items))
        return results
    import multiprocessing  # here: every command checks --scheduler in this module, and one run needs no pool

    with multiprocessing.get_context("fork").Pool(n, initializer=_worker_init) as pool:
        # One item at a time: a collapse costs several times what its neighbours do, and a chunk of them
        # at the end keeps one worker busy while the other waits. A row's trip costs ~0.1 ms.
        for result in pool.imap(fn, items):
            results.append(result)
            if progress:
                progress(len(results), len(items))
    return results


def _worker_init() -> None:
    """Ctrl-C and SIGTERM are the parent's to handle: workers die quietly when it ends the pool."""
    from ctsim.core import termination

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    termination.reset()


def check_scheduler(scheduler: str | None) -> None:
    """Before any work: Dask is installed and the address parses (reaching it is ``connect``'s to judge).

    A ``Client`` made with an address that does not parse fails, then
    complains again with a traceback when it is collected at exit.
    """
    if scheduler is None:
        return
    if not scheduler.strip():
        raise InputError("empty; give the Dask scheduler's address, e.g. tcp://10.0.0.5:8786", "scheduler")
    _dask()
    from distributed.comm.addressing import parse_address, parse_host_port

    from ctsim.core.urls import check_port

    port = None
    try:
        scheme, location = parse_address(scheduler)
        if scheme in ("tcp", "tls"):
            _, port = parse_host_port(location)
    except ValueError as exc:
        raise InputError(f"not a Dask address ({exc}), e.g. tcp://10.0.0.5:8786", "scheduler") from None
    check_port(port, "{param:scheduler}")


def _dask() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise InputError("needs Dask (pip install 'ctsim[dask]')", "scheduler") from None


def connect(scheduler: str) -> Any:
    """A ``dask.distributed.Client`` on ``scheduler``; one clear line when Dask is missing or unreachable."""
    check_scheduler(scheduler)
    from distributed import Client

    try:
        return Client(scheduler, timeout=DASK_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise InputError(f"cannot reach {scheduler!r}: {str(exc).splitlines()[0][:160]}", "scheduler") from None


def chunks(n: int, workers: int) -> list[range]:
    """Strided chunks of ``range(n)``: ``CHUNKS_PER_WORKER`` per worker, each a slice ``j::k``.

    A Dask task costs milliseconds of scheduling and transfer, about what a
    run does: one point per task cost 28 % of the work on top of it,
    ctsim's chunks 1 % (``benchmarks/bench_dask.py``).
    Striding spreads a grid's expensive corner (its collapses sit together)
    over every chunk, so equal chunks cost about the same and the last one
    does not keep one worker busy while the others wait.
    """
    k = max(1, min(n, workers * CHUNKS_PER_WORKER))
    return [range(j, n, k) for j in range(k)]


def _apply(fn: Callable[[T], R], chunk: list[T]) -> list[R]:
    return [fn(x) for x in chunk]


def _on_dask(
    fn: Callable[[T], R], items: Sequence[T], scheduler: str, progress: Callable[[int, int], None] | None
) -> list[R]:
    from distributed import as_completed

    client = connect(scheduler)
    futures: list[Any] = []
    try:
        workers = sum(client.nthreads().values()) or 1
        parts = chunks(len(items), workers)
        futures = client.map(_apply, [fn] * len(parts), [[items[i] for i in part] for part in parts], pure=False)
        which = {future.key: part for future, part in zip(futures, parts, strict=True)}
        results: list[Any] = [None] * len(items)
        done = 0
        # A worker that dies mid-task loses nothing: the scheduler gives its tasks to another worker.
        for future, rows in as_completed(futures, loop=client.loop, with_results=True):
            if future.status != "finished":  # cancelled: the scheduler went away, or was told to drop it
                raise InputError(f"{scheduler!r} dropped the work ({future.status}); run it again", "scheduler")
            for i, row in zip(which[future.key], rows, strict=True):
                results[i] = row
            done += len(rows)
            if progress:
                progress(done, len(items))
        return results
    except BaseException:
        # Ctrl-C (or a failed task): nothing of this run goes on computing on the cluster.
        if futures:
            client.cancel(futures)
        raise
    finally:
        client.close()
