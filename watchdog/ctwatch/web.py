"""ctwatch's HTTP face, with node_exporter's conventions.

``/`` is a landing page linking ``/metrics``; ``/healthz`` answers 200 once a
collection has run (503 before); anything else is 404. A threaded server with
a real listen backlog serves many scrapers at once, and ``--web.max-requests``
bounds concurrent ``/metrics`` requests (503 beyond, as node_exporter does).
The metrics page itself is prometheus-client's exposition of the registry.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from ctwatch import __version__

BACKLOG = 128  # socketserver's default of 5 drops scrapers that arrive together

LANDING = """<!DOCTYPE html>
<html><head><title>ctwatch</title></head>
<body>
<h1>ctwatch {version}</h1>
<p>Projects how long a burst of pod creates waits behind Cilium's conntrack scrubs.</p>
<ul>
<li><a href="/metrics">/metrics</a></li>
<li><a href="/healthz">/healthz</a></li>
</ul>
</body></html>
"""


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = BACKLOG
    allow_reuse_address = True


def serve(
    host: str,
    port: int,
    registry: CollectorRegistry,
    healthy: Callable[[], bool],
    max_requests: int = 40,
) -> Server:
    """Starts serving in a daemon thread; returns the server (``shutdown()`` stops it)."""
    slots = threading.BoundedSemaphore(max_requests) if max_requests > 0 else None
    landing = LANDING.format(version=html.escape(__version__)).encode()

    class Handler(BaseHTTPRequestHandler):
        server_version = f"ctwatch/{__version__}"

        def log_message(self, format: str, *args: object) -> None:
            """Access logs stay off: ctwatch logs what changed, not every scrape."""

        def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._metrics()
            elif path == "/":
                self._send(200, landing, "text/html; charset=utf-8")
            elif path == "/healthz":
                ok = healthy()
                self._send(200 if ok else 503, b"ok\n" if ok else b"no collection yet\n")
            else:
                self._send(404, b"404 page not found\n")

        do_HEAD = do_GET

        def _metrics(self) -> None:
            if slots is not None and not slots.acquire(blocking=False):
                self._send(503, b"too many concurrent scrapes (--web.max-requests)\n")
                return
            try:
                body = generate_latest(registry)
            finally:
                if slots is not None:
                    slots.release()
            self._send(200, body, CONTENT_TYPE_LATEST)

    server = Server((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="ctwatch-http", daemon=True).start()
    return server
