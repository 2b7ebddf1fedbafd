"""Real HTTP servers on loopback for the tests: a free port, a threaded server, a text reply."""

from __future__ import annotations

import contextlib
import http.server
import random
import socket
import threading
from collections.abc import Callable, Iterator

Respond = Callable[[http.server.BaseHTTPRequestHandler], None]


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default range is 32768-60999


def free_port() -> int:
    """A loopback port free now, below the ephemeral range: a port bind(0) gives is one that any outgoing
    connection (a Prometheus scraping hundreds of targets, a client) may take as its source port before the
    server the test starts binds it; below the range, only another listener can."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(10_000, _ephemeral_low())
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port below the ephemeral range")


class _Server(http.server.ThreadingHTTPServer):
    """Hundreds of targets scraped each second: the default backlog of 5 refused some, and each refusal
    made Prometheus mark that target's series stale."""

    daemon_threads = True
    request_queue_size = 1024


@contextlib.contextmanager
def serve(respond: Respond) -> Iterator[str]:
    """``respond(handler)`` answers every GET and POST; yields host:port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            respond(self)

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def send(
    handler: http.server.BaseHTTPRequestHandler,
    body: str | bytes,
    status: int = 200,
    content_type: str = "text/plain; version=0.0.4",
) -> None:
    """One whole reply; a client that went away is not the test's failure."""
    data = body.encode() if isinstance(body, str) else body
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass
