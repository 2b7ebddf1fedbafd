"""SIGTERM taken as Ctrl-C: what ``kubectl delete``, systemd and CI send gets the same clean-up, and exit 143.

The handler raises ``Terminated``, a ``KeyboardInterrupt``, so every
``finally`` and ``except KeyboardInterrupt`` that cleans up after Ctrl-C
(namespaces, BPF maps, a worker pool, a partial output) runs for it too.
Forked workers set it back to the default (``reset``): a worker is ended by
its parent, quietly.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived."""


received = False  # a SIGTERM arrived in this process (the CLI's exit code: 143, not 130)


def _raise(signum: int, frame: FrameType | None) -> None:
    global received
    received = True
    raise Terminated


def install() -> None:
    """In the main thread: SIGTERM raises ``Terminated`` where the program is."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise)


def reset() -> None:
    """In a forked worker: SIGTERM ends it, as it did before ``install``."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
