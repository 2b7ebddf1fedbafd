"""Real HTTP servers on loopback for the tests: a free port, a threaded server, a text reply."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections.abc import Callable, Iterator

Respond = Callable[[http.server.BaseHTTPRequestHandler], None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
