"""Contention on demand: busy processes beside a timing-sensitive test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def busy(n: int) -> Iterator[None]:
    """``n`` processes spinning on the CPU (this machine has 2 cores); always killed."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
