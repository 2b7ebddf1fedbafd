"""ctwatch's HTTP face, with node_exporter's conventions.

``/`` is a landing page linking ``/metrics``; ``/healthz`` answers 200 once a
collection has run (503 before); ``/runbook`` is the alerts' runbook (their
default ``runbook_url``); anything else is 404. A threaded server with
a real listen backlog serves many scrapers at once, and ``--web.max-requests``
bounds concurrent ``/metrics`` requests (503 beyond, as node_exporter does).
The metrics page itself is prometheus-client's exposition of the registry.
With ``--web.config.file`` (``ctwatch.webconfig``) it serves TLS and asks for
basic auth on every path, as the exporter-toolkit does.
"""

from __future__ import annotations

import html
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from ctwatch import __version__, runbook
from ctwatch.webconfig import WebConfig

BACKLOG = 128  # socketserver's default of 5 drops scrapers that arrive together

LANDING = """<!DOCTYPE html>
<html><head><title>ctwatch</title></head>
<body>
<h1>ctwatch {version}</h1>
<p>Projects how long a burst of pod creates waits behind Cilium's conntrack scrubs.</p>
<ul>
<li><a href="/metrics">/metrics</a></li>
<li><a href="/healthz">/healthz</a></li>
<li><a href="/runbook">/runbook</a> (what each alert means, and what to do)</li>
</ul>
</body></html>
"""


HANDSHAKE_TIMEOUT_S = 10.0


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = BACKLOG
    allow_reuse_address = True
    web = WebConfig()

    def get_request(self) -> tuple[socket.socket, Any]:
        """With TLS, the handshake happens in the request's own thread: a slow client blocks nobody."""
        conn, addr = super().get_request()
        if self.web.tls is not None:
            conn = self.web.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that fails its handshake or hangs up is not ctwatch's error: no traceback."""


def serve(
    host: str,
    port: int,
    registry: CollectorRegistry,
    healthy: Callable[[], bool],
    max_requests: int = 40,
    web: WebConfig | None = None,
) -> Server:
    """Starts serving in a daemon thread; returns the server (``shutdown()`` stops it)."""
    slots = threading.BoundedSemaphore(max_requests) if max_requests > 0 else None
    landing = LANDING.format(version=html.escape(__version__)).encode()

    web = web or WebConfig()

    class Handler(BaseHTTPRequestHandler):
        server_version = f"ctwatch/{__version__}"

        def setup(self) -> None:
            if web.tls is not None:
                self.request.settimeout(HANDSHAKE_TIMEOUT_S)
                self.request.do_handshake()
                self.request.settimeout(None)
            super().setup()

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
            if not web.authorized(self.headers.get("Authorization")):
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="ctwatch"')
                self.send_header("Content-Length", "13")
                self.end_headers()
                self.wfile.write(b"Unauthorized\n")
                return
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._metrics()
            elif path == "/":
                self._send(200, landing, "text/html; charset=utf-8")
            elif path == runbook.RUNBOOK_PATH:
                self._send(200, runbook.page(), "text/html; charset=utf-8")
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
    server.web = web
    threading.Thread(target=server.serve_forever, name="ctwatch-http", daemon=True).start()
    return server
