"""A metrics page over HTTP(S), for the sources that read one (Cilium's agent, kube-proxy).

Only http and https, redirects included; the whole page within a timeout;
SIGTERM ends the wait. Parsing stays each source's (prometheus-client's parser).
"""

from __future__ import annotations

import functools
import threading
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import urllib.request


class BadMetrics(Exception):
    """The page is not a Prometheus exposition, or has nothing we can use."""


SCHEMES = ("http", "https")


@functools.cache
def _opener() -> urllib.request.OpenerDirector:
    """Only HTTP and HTTPS: no file://, ftp:// or data: handlers at all (built on first use: start-up stays light)."""
    import urllib.request

    class HTTPOnlyRedirects(urllib.request.HTTPRedirectHandler):
        """Follows redirects only to http(s): the agent's page never points at a file."""

        def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
            if urllib.parse.urlsplit(newurl).scheme not in SCHEMES:
                raise BadMetrics(f"refusing a redirect to {urllib.parse.urlsplit(newurl).scheme}:")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        HTTPOnlyRedirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def check_url(url: str) -> str | None:
    """None if ``url`` may be fetched, else why not."""
    from ctsim.core.errors import shorten
    from ctsim.core.urls import redact

    shown = shorten(redact(url))
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # parses the port: 'http://h:x' fails here, not at the first fetch
    except ValueError as exc:
        return f"cannot parse {shown!r}: {exc}"
    if parts.scheme not in SCHEMES:
        return f"only http:// or https:// URLs are fetched, got {shown!r}"
    if not parts.hostname:
        return f"no host in {shown!r}"
    if port == 0:
        return f"invalid port 0 in {shown!r} (a TCP port is 1-65535)"
    return None


def fetch(url: str, timeout_s: float, one_at_a_time: threading.Semaphore) -> str:
    """The page, whole within ``timeout_s`` (connect, headers, body), or an exception; SIGTERM ends the wait.

    ``one_at_a_time``: the source's own; a request left waiting on a trickling server is not joined by another.
    """
    from ctsim.core.deadline import within
    from ctwatch.collector import STOPPING

    problem = check_url(url)
    if problem:
        raise BadMetrics(problem)

    def get() -> bytes:
        with _opener().open(url, timeout=timeout_s) as response:
            return response.read(16 << 20)

    body = within(timeout_s, get, cancel=STOPPING, one_at_a_time=one_at_a_time)
    return body.decode("utf-8", errors="strict")


def url_setting(flag: str, optional: bool = False) -> Callable[[str], str]:
    """A metrics URL flag's parser (a collector's ``Setting``): one line naming ``flag`` for a URL not fetched.

    ``optional``: an empty URL means "do not fetch".
    """

    def parse(text: str) -> str:
        from ctsim.core.errors import InputError

        if (text or not optional) and (problem := check_url(text)):
            raise InputError(f"{flag}: {problem}")
        return text

    return parse
