"""The Prometheus HTTP API (``/api/v1/query``), through httpx, with the ecosystem's transport options.

Thanos, VictoriaMetrics and Mimir serve the same API under a path prefix,
so the URL is a base: ``https://thanos.example/`` or
``https://mimir.example/prometheus``. Every failure is one ``InputError``
line naming what went wrong (down, refused, not Prometheus, a bad query),
and every request has a timeout.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from ctsim.core.deadline import within
from ctsim.core.errors import InputError, shorten
from ctsim.core.files import read_text
from ctsim.core.urls import check_port, redact

DEFAULT_TIMEOUT_S = 30.0


class PrometheusError(InputError):
    """The API could not answer a query."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Transport:
    """How to reach the API: what Prometheus's own ``http_config`` offers a scrape."""

    bearer_token_file: str | None = None
    basic_auth_user: str | None = None
    basic_auth_password_file: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False
    headers: tuple[str, ...] = ()  # "Name: value"
    timeout_s: float = DEFAULT_TIMEOUT_S


def _secret(path: str, param: str) -> str:
    """A token or password file's first line (Prometheus trims the trailing newline too)."""
    text = read_text(path, f"{{param:{param}}}", limit=64 * 1024).strip()
    if not text:
        raise InputError(f"{path} is empty", param)
    return text


def _headers(lines: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            raise InputError(f"expected 'Name: value', got {line!r}", "headers")
        out[name.strip()] = value.strip()
    return out


def _check_file(path: str | None, param: str) -> None:
    if path is not None and not os.path.isfile(path):
        raise InputError(f"{path}: not a readable file", param)


@dataclass
class Client:
    """One base URL, one connection pool; ``queries`` counts what was asked (the benchmark's floor)."""

    url: str
    transport: Transport = field(default_factory=Transport)
    queries: int = 0
    seconds: float = 0.0  # wall time spent waiting for answers
    _http: Any = None

    def __post_init__(self) -> None:
        import httpx

        base = self.url.strip()
        try:
            parsed = httpx.URL(base)
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise InputError(f"not a URL: {shorten(self.shown)!r} ({redact(str(exc))})", "url") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise InputError(f"expected http(s)://host[:port][/prefix], got {shorten(self.shown)!r}", "url")
        check_port(parsed.port, "{param:url}")
        host = parsed.host
        if ":" not in host and (len(host) > 253 or any(len(label) > 63 for label in host.split("."))):
            raise InputError(f"{shorten(host)!r} is not a host name (labels of at most 63 characters)", "url")
        t = self.transport
        if not t.timeout_s > 0 or not math.isfinite(t.timeout_s):
            raise InputError(f"must be a positive number of seconds, got {t.timeout_s}", "timeout_s")
        if t.key_file is not None and t.cert_file is None:
            raise InputError("give {param:cert_file} too", "key_file")
        if (t.basic_auth_user is None) != (t.basic_auth_password_file is None):
            raise InputError("{param:basic_auth_user} and {param:basic_auth_password_file} go together")
        if t.bearer_token_file is not None and t.basic_auth_user is not None:
            raise InputError("{param:bearer_token_file} and {param:basic_auth_user}: give one way to authenticate")
        for path, param in ((t.ca_file, "ca_file"), (t.cert_file, "cert_file"), (t.key_file, "key_file")):
            _check_file(path, param)
        headers = _headers(t.headers)
        auth = None
        if t.bearer_token_file is not None:
            headers["Authorization"] = f"Bearer {_secret(t.bearer_token_file, 'bearer_token_file')}"
        if t.basic_auth_user is not None and t.basic_auth_password_file is not None:
            auth = httpx.BasicAuth(t.basic_auth_user, _secret(t.basic_auth_password_file, "basic_auth_password_file"))
        verify: Any = True
        if t.insecure_skip_verify:
            verify = False
        elif t.ca_file is not None:
            import ssl

            try:
                verify = ssl.create_default_context(cafile=t.ca_file)
            except (ssl.SSLError, OSError) as exc:
                raise InputError(f"{t.ca_file}: not a PEM CA bundle ({exc})", "ca_file") from None
        cert = None
        if t.cert_file is not None:
            cert = (t.cert_file, t.key_file) if t.key_file is not None else t.cert_file
        prefix = base.rstrip("/") + "/"
        try:
            self._http = httpx.Client(
                base_url=prefix, headers=headers, auth=auth, verify=verify, cert=cert, timeout=t.timeout_s
            )
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: a bad certificate or key
            raise InputError(f"cannot load the client certificate: {exc}", "cert_file") from None

    @property
    def shown(self) -> str:
        """The URL as every line shows it: without its password."""
        return redact(self.url.strip())

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """An instant query: one sample per series (a scalar answer is one sample with no labels)."""
        import time

        import httpx

        form = {"query": expr}
        if at is not None:
            form["time"] = f"{at:.3f}"
        where = f"Prometheus at {self.shown}"
        start = time.perf_counter()
        self.queries += 1
        timeout = self.transport.timeout_s
        try:
            # The whole request within --timeout: httpx bounds each read, a trickling server never trips that.
            response = within(timeout, lambda: self._http.post("api/v1/query", data=form))
        except (httpx.TimeoutException, TimeoutError):
            raise PrometheusError(f"{where}: no whole answer within {timeout:g}s (--timeout)") from None
        except httpx.HTTPError as exc:
            raise PrometheusError(f"{where}: cannot connect: {_reason(exc)}") from None
        except UnicodeError:  # the resolver's IDNA codec: a label over 63 characters, or a name over 253
            raise PrometheusError(f"{where}: cannot connect: not a valid host name") from None
        finally:
            self.seconds += time.perf_counter() - start
        return _samples(response, where, expr)


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _samples(response: Any, where: str, expr: str) -> list[Sample]:
    code = response.status_code
    if code in (401, 403):
        raise PrometheusError(
            f"{where}: {code} {response.reason_phrase}: give credentials "
            "(--bearer-token-file, or --basic-auth-user and --basic-auth-password-file)"
        )
    try:
        doc = response.json()
    except ValueError:
        kind = response.headers.get("content-type", "no content type")
        raise PrometheusError(
            f"{where}: HTTP {code}, {kind}: not the Prometheus query API (check the URL and its path prefix)"
        ) from None
    if not isinstance(doc, dict) or "status" not in doc:
        raise PrometheusError(f"{where}: HTTP {code}: a JSON answer that is not the Prometheus query API")
    if doc["status"] != "success":
        error = str(doc.get("error", "no error given"))[:300]
        raise PrometheusError(f"{where}: query {expr!r} failed: {doc.get('errorType', 'error')}: {error}")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise PrometheusError(f"{where}: an answer with no data for {expr!r}")
    kind, result = data.get("resultType"), data.get("result")
    try:
        if kind == "vector":
            return [Sample(dict(s["metric"]), float(s["value"][1])) for s in result]
        if kind == "scalar":
            return [Sample({}, float(result[1]))]
    except (KeyError, IndexError, TypeError, ValueError):
        raise PrometheusError(f"{where}: a malformed {kind} for {expr!r}") from None
    raise PrometheusError(f"{where}: expected an instant vector for {expr!r}, got {kind!r}")
