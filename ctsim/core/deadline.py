"""A whole request, bounded: connect, headers and body within one time, whatever the server trickles.

httpx's and urllib's timeouts are per socket operation: a server that sends
its headers and then one byte a second never trips them. ``within`` runs the
request on a daemon thread and stops waiting for it at the deadline (or when
``cancel`` is set: SIGTERM); the caller goes on, and the thread ends with its
socket. At most ``one_at_a_time`` such threads are left behind per caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL = 0.05  # how often a wait looks at ``cancel``: SIGTERM ends it this soon


class Cancelled(Exception):
    """The wait was called off (the process is stopping)."""


class StillWaiting(Exception):
    """The last request to this server has not ended yet: no new one is started beside it."""


def within(
    seconds: float,
    work: Callable[[], T],
    cancel: threading.Event | None = None,
    one_at_a_time: threading.Semaphore | None = None,
) -> T:
    """``work()``'s result; TimeoutError once ``seconds`` pass, Cancelled once ``cancel`` is set."""
    if one_at_a_time is not None and not one_at_a_time.acquire(blocking=False):
        raise StillWaiting("the previous request to this server has not ended (it sends too slowly)")
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the waiting thread, which raises it
            box["error"] = exc
        finally:
            done.set()
            if one_at_a_time is not None:
                one_at_a_time.release()

    threading.Thread(target=run, name="ctsim-request", daemon=True).start()
    end = time.monotonic() + seconds
    while not done.wait(max(0.0, min(POLL, end - time.monotonic()))):
        if cancel is not None and cancel.is_set():
            raise Cancelled("stopping")
        if time.monotonic() >= end:
            raise TimeoutError(f"no whole answer within {seconds:g}s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
