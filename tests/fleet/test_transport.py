"""Reaching the API as the Prometheus ecosystem does: TLS, basic auth, headers, path prefixes; and every
way it can fail answered in one line with exit code 2, never a hang or a traceback."""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import httpx
import pytest

from tests.fleet.fleet_pages import fleet, render, sd_targets
from tests.support.http import free_port, send, serve
from tests.support.needs import need_binary
from tests.support.prometheus import pages, prometheus, wait_for


def ctsim(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctsim", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    for w in words:
        assert w in lines[0], lines[0]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[dict[str, object]], Path]]:
    """Eight nodes' pages, for servers configured each their own way."""
    nodes = fleet(8)
    by = {n.name: n for n in nodes}
    with pages(lambda path: render(by, path)) as address:
        yield address, sd_targets(address, nodes), tmp_path_factory.mktemp("tls")


def _cert(tmp: Path) -> tuple[Path, Path]:
    openssl = need_binary("openssl")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_tls_and_basic_auth_behind_prometheus_web_config(small: tuple[str, list, Path], tmp_path: Path) -> None:
    _, sd, tmp = small
    cert, key = _cert(tmp)
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    web = {"tls_server_config": {"cert_file": str(cert), "key_file": str(key)}, "basic_auth_users": {"sre": hashed}}
    (tmp_path / "pw").write_text("s3cret\n")
    (tmp_path / "bad").write_text("wrong\n")
    auth = httpx.BasicAuth("sre", "s3cret")
    ca = ssl.create_default_context(cafile=str(cert))
    with prometheus(tmp_path / "p", sd, web_config=web, auth=auth, verify=ca, scheme="https") as url:
        wait_for(url, "count(up == 1)", len(sd), auth=auth, verify=ca)
        creds = ["--basic-auth-user", "sre", "--basic-auth-password-file", str(tmp_path / "pw")]
        ok = ctsim("fleet", "--prometheus-url", url, "--ca-file", str(cert), *creds, "--json")
        assert ok.returncode == 0, ok.stderr
        assert len(json.loads(ok.stdout)["nodes"]) == 8
        skip = ctsim("fleet", "--prometheus-url", url, "--insecure-skip-verify", *creds, "--json")
        assert skip.returncode == 0, skip.stderr
        one_line_error(ctsim("fleet", "--prometheus-url", url, "--ca-file", str(cert)), "401", "--basic-auth-user")
        wrong = ["--basic-auth-user", "sre", "--basic-auth-password-file", str(tmp_path / "bad")]
        one_line_error(ctsim("fleet", "--prometheus-url", url, "--ca-file", str(cert), *wrong), "401")
        one_line_error(ctsim("fleet", "--prometheus-url", url, *creds), "cannot connect", "CERTIFICATE_VERIFY_FAILED")


def test_a_path_prefix_as_thanos_and_mimir_serve_the_api(small: tuple[str, list, Path], tmp_path: Path) -> None:
    _, sd, _ = small
    with prometheus(tmp_path / "p", sd, route_prefix="/prometheus") as url:
        wait_for(url, "count(up == 1)", len(sd))
        ok = ctsim("fleet", "--prometheus-url", url + "/", "--json")
        assert ok.returncode == 0, ok.stderr
        assert len(json.loads(ok.stdout)["nodes"]) == 8
        bare = url.removesuffix("/prometheus")
        one_line_error(ctsim("fleet", "--prometheus-url", bare), "not the Prometheus query API")


@contextlib.contextmanager
def recording(status: int, body: bytes, content_type: str) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A server that answers every request the same way and keeps the headers it was sent."""
    seen: list[dict[str, str]] = []

    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(dict(handler.headers))
        handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
        send(handler, body, status, content_type)

    with serve(respond) as address:
        yield f"http://{address}", seen


def test_bearer_token_and_headers_are_sent(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t0ken\n")
    with recording(403, b"forbidden", "text/plain") as (url, seen):
        out = ctsim(
            "fleet", "--prometheus-url", url, "--bearer-token-file", str(tmp_path / "token"),
            "--header", "X-Scope-OrgID: prod", "--header", "X-Other:1",
        )  # fmt: skip
        one_line_error(out, "403")
    assert seen[0]["Authorization"] == "Bearer t0ken"
    assert seen[0]["X-Scope-OrgID"] == "prod" and seen[0]["X-Other"] == "1"


@pytest.mark.parametrize(
    ("status", "body", "kind", "words"),
    [
        (200, b"<html>Grafana</html>", "text/html", ["not the Prometheus query API"]),
        (200, b'{"hello": 1}', "application/json", ["not the Prometheus query API"]),
        (200, b'{"status": "success", "data": {"resultType": "matrix", "result": []}}', "application/json",
         ["expected an instant vector"]),
        (200, b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": 3}]}}',
         "application/json", ["malformed"]),
        (503, b'{"status": "error", "errorType": "unavailable", "error": "overloaded"}', "application/json",
         ["unavailable", "overloaded"]),
    ],
)  # fmt: skip
def test_answers_that_are_not_the_query_api(status: int, body: bytes, kind: str, words: list[str]) -> None:
    with recording(status, body, kind) as (url, _):
        one_line_error(ctsim("fleet", "--prometheus-url", url), *words)


def test_down_silent_and_malformed_servers_fail_in_one_line_without_hanging() -> None:
    one_line_error(ctsim("fleet", "--prometheus-url", f"http://127.0.0.1:{free_port()}"), "cannot connect")
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        start = time.monotonic()
        out = ctsim("fleet", "--prometheus-url", f"http://127.0.0.1:{silent.getsockname()[1]}", "--timeout", "1s")
        one_line_error(out, "no whole answer within 1s")
        assert time.monotonic() - start < 20
    for url in ("http://[::1", "ftp://prometheus", "prometheus:9090", ""):
        one_line_error(ctsim("fleet", "--prometheus-url", url), "--prometheus-url")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--window", "1 hour"], ["--window"]),
        (["--node-label", "node-name"], ["--node-label"]),
        (["--selector", "{cluster='x'}"], ["--selector"]),
        (["--fail-on", "error"], ["--fail-on"]),
        (["--header", "nocolon"], ["--header"]),
        (["--key-file", "/etc/hostname"], ["--key-file", "--cert-file"]),
        (["--basic-auth-user", "sre"], ["--basic-auth-password-file"]),
        (["--ca-file", "/nonexistent.pem"], ["--ca-file"]),
        (["--bearer-token-file", "/dev/null"], ["--bearer-token-file"]),
        (["--timeout", "0s"], ["--timeout"]),
        (["--max-entries", "32Mi"], ["--max-entries", "LimitTableMax"]),
        (["--max-entries", "lots"], ["--max-entries"]),
        (["--map-ratio", "0.005"], ["--node-memory"]),
        (["--pods", "0"], ["--pods"]),
        (["--csv", "/proc/version"], ["--csv"]),
    ],
)
def test_bad_flags_before_any_query(args: list[str], words: list[str]) -> None:
    with recording(500, b"", "text/plain") as (url, seen):
        one_line_error(ctsim("fleet", "--prometheus-url", url, *args), *words)
    assert not seen  # refused before asking the server anything


def test_bad_selectors_and_empty_answers_from_a_real_prometheus(small: tuple[str, list, Path], tmp_path: Path) -> None:
    _, sd, _ = small
    with prometheus(tmp_path / "p", sd) as url:
        wait_for(url, "count(up == 1)", len(sd))
        one_line_error(ctsim("fleet", "--prometheus-url", url, "--selector", "cluster="), "failed", "bad_data")
        one_line_error(
            ctsim("fleet", "--prometheus-url", url, "--selector", 'cluster="nowhere"'), "no ctwatch or Cilium CT series"
        )
        one_line_error(ctsim("fleet", "--prometheus-url", url, "--node-label", "pod"), "no ctwatch or Cilium CT series")
