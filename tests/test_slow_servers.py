"""A server that sends its headers and then one byte a second: every request ends at its timeout, whole.

httpx's and urllib's timeouts bound each read, and a trickling server never trips them; these hold
``ctsim fleet --timeout``, ``ctwatch --cilium.metrics-timeout`` and ctwatch's SIGTERM against one.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.support.http import free_port, serve

ROOT = Path(__file__).resolve().parents[1]
PROCFS = ROOT / "tests" / "ctwatch" / "fixtures" / "proc"


@contextlib.contextmanager
def trickling() -> Iterator[str]:
    """Answers 200 with a long body, one byte a second, until the client goes (or the test ends)."""
    done = threading.Event()

    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        with contextlib.suppress(OSError):
            handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "100000")
            handler.end_headers()
            while not done.is_set():
                handler.wfile.write(b" ")
                handler.wfile.flush()
                done.wait(1.0)

    with serve(respond) as address:
        try:
            yield f"http://{address}"
        finally:
            done.set()


def _timed(args: list[str], limit: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=limit, check=False)
    return p, time.monotonic() - start


def test_fleet_timeout_bounds_the_whole_request() -> None:
    with trickling() as url:
        p, took = _timed(["-m", "ctsim", "fleet", "--prometheus-url", url, "--timeout", "2s"])
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.strip().splitlines() == [
        f"ctsim: error: Prometheus at {url}: no whole answer within 2s (--timeout)"
    ], p.stderr
    assert took < 15, took  # 2 s of waiting plus the interpreter's start, never the 100,000 s the body would take


def test_ctwatch_once_marks_a_trickling_agent_down_at_its_timeout() -> None:
    with trickling() as url:
        p, took = _timed(
            ["-m", "ctwatch", "--once", "--collector.disable-defaults", "--collector.cilium_metrics",
             "--cilium.metrics-url", url + "/metrics", "--cilium.metrics-timeout", "1s"]
        )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert 'ctwatch_source_up{source="cilium_metrics"} 0.0' in p.stdout
    assert "no whole answer within 1s" in p.stderr
    assert took < 15, took


def test_ctwatch_serves_beside_a_trickling_agent_and_ends_on_sigterm() -> None:
    with trickling() as url:
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctwatch", "--collector.disable-defaults", "--collector.nf_conntrack",
             "--collector.cilium_metrics", "--path.procfs", str(PROCFS), "--cilium.metrics-url", url + "/metrics",
             "--cilium.metrics-timeout", "30s", "--web.listen-address", f"127.0.0.1:{port}", "--interval", "5s"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            page = ""
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the first collection waits 30 s on the agent
                with contextlib.suppress(OSError):
                    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                    if 'ctwatch_source_up{source="nf_conntrack"}' in page:
                        break
                time.sleep(0.5)
            assert 'ctwatch_source_up{source="cilium_metrics"} 0.0' in page, page[-2000:]
            assert 'ctwatch_source_up{source="nf_conntrack"} 1.0' in page  # the rest of the page is served
            # Now the second collection waits on the agent: SIGTERM must end it, not the 30 s timeout.
            time.sleep(1.0)
            start = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
            took = time.monotonic() - start
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert took < 3, took
