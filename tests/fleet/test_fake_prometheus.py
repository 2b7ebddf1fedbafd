"""A Prometheus that answers oddly: control characters in labels, warnings, duplicates, redirects, a gzip bomb,
and the proxies and CA settings of the environment. Each is said plainly, in one line where it stops the run."""

from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Callable

from tests.support.http import free_port, send, serve

NODE = "evil\x1b]0;pwned\x07\x1b[2J\nforged-node  critical"
Answer = Callable[[str], list[dict[str, object]]]


def _series(query: str, node: str = NODE, copies: int = 1) -> list[dict[str, object]]:
    """A ctwatch node: one TCP map, its deadline; ``copies`` identical series but for the scrape job."""

    def many(metric: dict[str, str], value: float) -> list[dict[str, object]]:
        return [
            {"metric": {**metric, "node": node, "job": f"ctwatch-{i}"}, "value": [1.0, repr(value)]}
            for i in range(copies)
        ]

    if query.startswith("ctwatch_entries{"):
        return many({"map": "cilium_ct4_global", "source": "bpf"}, 4_000_000.0)
    if query.startswith("ctwatch_max_entries{"):
        return many({"map": "cilium_ct4_global", "source": "bpf"}, 16_777_216.0)
    if query.startswith("ctwatch_deadline_seconds{"):
        return many({}, 90.0)
    return []


def _prometheus(answer: Answer, warnings: tuple[str, ...] = ()) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        form = urllib.parse.parse_qs(handler.rfile.read(int(handler.headers.get("Content-Length", 0))).decode())
        doc: dict[str, object] = {
            "status": "success",
            "data": {"resultType": "vector", "result": answer(form.get("query", [""])[0])},
        }
        if warnings:
            doc["warnings"] = list(warnings)
        send(handler, json.dumps(doc), content_type="application/json")

    return respond


def _fleet(url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    return subprocess.run(
        [sys.executable, "-m", "ctsim", "fleet", "--prometheus-url", url, *args],
        capture_output=True, text=True, timeout=120, check=False, env={**clean, **(env or {})},
    )  # fmt: skip


def _one_line(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 2 and "Traceback" not in out.stderr, (out.returncode, out.stderr)
    line = out.stderr.strip()
    assert "\n" not in line and "\x1b" not in line, line
    for w in words:
        assert w in line, line


def test_control_characters_from_a_label_are_shown_escaped_and_json_keeps_them() -> None:
    with serve(_prometheus(_series)) as address:
        table = _fleet(f"http://{address}")
        doc = _fleet(f"http://{address}", "--json")
    assert table.returncode in (0, 1), table.stderr
    assert "\x1b" not in table.stdout and "\x07" not in table.stdout, table.stdout
    assert not any(line.startswith("forged-node") for line in table.stdout.splitlines()), table.stdout
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J\\nforged-node" in table.stdout
    assert [r["node"] for r in json.loads(doc.stdout)["nodes"]] == [NODE]


def test_identical_series_from_two_scrape_jobs_are_read_once() -> None:
    with serve(_prometheus(lambda q: _series(q, node="n1", copies=2))) as address:
        doc = json.loads(_fleet(f"http://{address}", "--json").stdout)
    (row,) = doc["nodes"]
    assert row["deadline"] == 90.0, row
    assert row["maps"]["cilium_ct4_global"]["entries"] == 4_000_000, row


def test_prometheus_warnings_are_said_below_the_table_and_in_json() -> None:
    said = ("store eu-1 unreachable: partial response", "\x1b[31mred\x1b[0m")
    with serve(_prometheus(lambda q: _series(q, node="n1"), warnings=said)) as address:
        table = _fleet(f"http://{address}")
        doc = json.loads(_fleet(f"http://{address}", "--json").stdout)
    assert "Prometheus warned, so its answers may be partial: store eu-1 unreachable" in table.stdout
    assert "\x1b" not in table.stdout
    assert doc["sources"]["prometheus_warnings"] == list(said)


def test_a_307_to_the_api_is_followed() -> None:
    with serve(_prometheus(lambda q: _series(q, node="n1"))) as api:

        def redirect(handler: http.server.BaseHTTPRequestHandler) -> None:
            handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
            handler.send_response(307)
            handler.send_header("Location", f"http://{api}/api/v1/query")
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        with serve(redirect) as front:
            doc = _fleet(f"http://{front}", "--json")
    assert doc.returncode in (0, 1), doc.stderr
    assert [r["node"] for r in json.loads(doc.stdout)["nodes"]] == ["n1"]


def test_a_gzip_bomb_is_read_no_further_than_the_bound() -> None:
    bomb = gzip.compress(b" " * (300 << 20), compresslevel=9)  # ~300 KiB that inflate to 300 MiB

    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(bomb)))
        handler.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            handler.wfile.write(bomb)

    with serve(respond) as address:
        out = subprocess.run(
            [sys.executable, "-c", _PEAK, "fleet", "--prometheus-url", f"http://{address}"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    _one_line(out, "MiB once decoded", "gzip")
    assert int(out.stdout.strip().splitlines()[-1]) < 600 << 10, out.stdout  # peak RSS in KiB


# ctsim's CLI in a child that prints its own peak RSS (KiB) once it exits, whatever the exit code.
_PEAK = """
import resource, sys
from ctsim.cli.app import main
sys.argv = ["ctsim", *sys.argv[1:]]
try:
    main()
finally:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
"""


def test_the_environments_proxy_and_ca_settings_are_blamed_by_name() -> None:
    closed = free_port()
    url = f"http://127.0.0.1:{free_port()}"
    _one_line(_fleet(url, env={"ALL_PROXY": f"socks5://127.0.0.1:{closed}"}), "SOCKS proxy", "ALL_PROXY")
    _one_line(_fleet(url, env={"http_proxy": f"http://127.0.0.1:{closed}"}), "through the proxy", "$http_proxy")
    _one_line(_fleet(url, env={"SSL_CERT_FILE": "/nonexistent/ca.pem"}), "$SSL_CERT_FILE", "CA bundle")


def test_a_non_finite_sample_is_named_as_unusable_not_taken_as_absent() -> None:
    def answer(query: str) -> list[dict[str, object]]:
        if query.startswith("ctwatch_deadline_seconds{"):
            return [{"metric": {"node": "n1"}, "value": [1.0, "NaN"]}]
        if query.startswith("ctwatch_burst_pods{"):
            return [{"metric": {"node": "n1"}, "value": [1.0, "+Inf"]}]
        return _series(query, node="n1")

    with serve(_prometheus(answer)) as address:
        doc = json.loads(_fleet(f"http://{address}", "--json").stdout)
    (row,) = doc["nodes"]
    said = " ".join(row["flags"])
    assert "ctwatch_deadline_seconds = nan is not a usable number: left out" in said, said
    assert "ctwatch_burst_pods = inf is not a usable number: left out" in said, said
    assert row["deadline"] == 90.0  # the default, said as such, where the series was unusable


def test_an_answer_nested_deeper_than_any_api_is_one_line() -> None:
    deep = "[" * 100_000 + "]" * 100_000

    def respond(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
        send(handler, deep, content_type="application/json")

    with serve(respond) as address:
        _one_line(_fleet(f"http://{address}"), "not the Prometheus query API")
