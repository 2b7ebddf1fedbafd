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
# An answer's size once decoded: a 10,000-node fleet's largest is a few MB. A gzip reply of 1 MiB can inflate to
# gigabytes; reading stops past this.
MAX_ANSWER_BYTES = 128 << 20
MAX_WARNINGS = 20  # Prometheus' warnings kept per read, in order, each once


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
    warnings: list[str] = field(default_factory=list)  # what Prometheus warned of (a partial answer), each once
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
            # A 307/308 to the API keeps the method and the form; httpx drops credentials on a change of origin.
            self._http = httpx.Client(
                base_url=prefix, headers=headers, auth=auth, verify=verify, cert=cert, timeout=t.timeout_s,
                follow_redirects=True,
            )  # fmt: skip
        except ImportError:  # httpx without its socks extra, given a socks5:// proxy by the environment
            proxy = _proxy_for(parsed)
            raise InputError(
                f"a SOCKS proxy ({proxy[0]}={redact(proxy[1])}) needs httpx's socks extra "
                "(pip install 'httpx[socks]'), or unset it",
                "url",
            ) from None
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: a bad certificate or key
            raise _setup_error(exc, parsed, t) from None

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
            response, body = within(timeout, lambda: self._post(form, where))
        except (httpx.TimeoutException, TimeoutError):
            raise PrometheusError(f"{where}: no whole answer within {timeout:g}s (--timeout)") from None
        except httpx.TooManyRedirects:
            raise PrometheusError(f"{where}: redirected round and round (over 20 redirects)") from None
        except httpx.HTTPError as exc:
            proxy = _proxy_for(httpx.URL(self.url.strip()))
            if proxy is not None and isinstance(exc, httpx.TransportError):
                raise PrometheusError(
                    f"cannot reach {where} through the proxy {redact(proxy[1])} (from ${proxy[0]}): {_reason(exc)}"
                ) from None
            raise PrometheusError(f"{where}: cannot connect: {_reason(exc)}") from None
        except UnicodeError:  # the resolver's IDNA codec: a label over 63 characters, or a name over 253
            raise PrometheusError(f"{where}: cannot connect: not a valid host name") from None
        finally:
            self.seconds += time.perf_counter() - start
        return _samples(response, body, where, expr, self.warnings)

    def _post(self, form: dict[str, str], where: str) -> tuple[Any, bytes]:
        """The answer and its body, decoded, read up to ``MAX_ANSWER_BYTES``."""
        with self._http.stream("POST", "api/v1/query", data=form) as response:
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise PrometheusError(
                        f"{where}: an answer over {MAX_ANSWER_BYTES >> 20} MiB once decoded "
                        f"({response.headers.get('content-encoding', 'not compressed')}): not read further"
                    )
                chunks.append(chunk)
            return response, b"".join(chunks)


def _proxy_for(url: Any) -> tuple[str, str] | None:
    """The environment's proxy for ``url`` as httpx takes it (``*_proxy``, ``NO_PROXY``): (variable, proxy URL)."""
    import urllib.request

    found = {k.lower(): (k, v) for k, v in os.environ.items() if k.lower().endswith("_proxy") and v}
    if "no_proxy" in found and urllib.request.proxy_bypass_environment(url.host, {"no": found["no_proxy"][1]}):
        return None
    for name in (f"{url.scheme}_proxy", "all_proxy"):
        if name in found:
            return found[name]
    return None


def _setup_error(exc: Exception, url: Any, t: Transport) -> InputError:
    """What setting up the client failed on, blamed on what the user gave: a proxy, a certificate, the CA store."""
    proxy = _proxy_for(url)
    if proxy is not None and "proxy" in str(exc).lower():
        return InputError(f"the proxy {proxy[0]}={redact(proxy[1])}: {_reason(exc)}", "url")
    if t.cert_file is not None:
        return InputError(f"cannot load the client certificate: {exc}", "cert_file")
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        if os.environ.get(name):
            return InputError(f"${name}={os.environ[name]}: not a readable CA bundle ({_reason(exc)})", "url")
    return InputError(f"cannot set up the HTTP client: {_reason(exc)}", "url")


def _reason(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _samples(response: Any, body: bytes, where: str, expr: str, warnings: list[str]) -> list[Sample]:
    import json

    code = response.status_code
    if code in (401, 403):
        raise PrometheusError(
            f"{where}: {code} {response.reason_phrase}: give credentials "
            "(--bearer-token-file, or --basic-auth-user and --basic-auth-password-file)"
        )
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: an answer nested deeper than any API's
        kind = response.headers.get("content-type", "no content type")
        raise PrometheusError(
            f"{where}: HTTP {code}, {kind}: not the Prometheus query API (check the URL and its path prefix)"
        ) from None
    if not isinstance(doc, dict) or "status" not in doc:
        raise PrometheusError(f"{where}: HTTP {code}: a JSON answer that is not the Prometheus query API")
    if doc["status"] != "success":
        error = str(doc.get("error", "no error given"))[:300]
        raise PrometheusError(f"{where}: query {expr!r} failed: {doc.get('errorType', 'error')}: {error}")
    said = doc.get("warnings")
    if isinstance(said, list):  # a partial answer (a store down, a limit hit): kept to be said, not dropped
        for w in said:
            text = str(w)[:300]
            if text not in warnings and len(warnings) < MAX_WARNINGS:
                warnings.append(text)
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
