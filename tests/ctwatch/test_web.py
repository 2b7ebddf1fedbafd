"""--web.config.file in the exporter-toolkit's format: a real TLS client, real bcrypt hashes."""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from tests.ctwatch.env import copy_procfs
from tests.support.http import free_port
from tests.support.needs import need_binary


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = need_binary("openssl")
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(d / "server.key"), "-out", str(d / "server.crt")],
        check=True, capture_output=True,
    )  # fmt: skip
    return d / "server.crt", d / "server.key"


def _start(tmp_path: Path, config: Path) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctwatch", "--path.procfs", str(copy_procfs(tmp_path)), "--collector.disable-defaults",
         "--collector.nf_conntrack", "--web.listen-address", f"127.0.0.1:{port}", "--web.config.file", str(config)],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proc, port


@pytest.fixture
def tls_and_auth(tmp_path: Path, certificate: tuple[Path, Path]) -> Iterator[tuple[str, ssl.SSLContext]]:
    cert, key = certificate
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$")
    config = tmp_path / "web.yml"
    config.write_text(
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\nbasic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    proc, port = _start(tmp_path, config)
    context = ssl.create_default_context(cafile=str(cert))
    base = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + 15
    while True:
        try:
            urllib.request.urlopen(base + "/healthz", timeout=2, context=context)
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(proc.stderr.read() if proc.stderr else "ctwatch did not start") from None
            time.sleep(0.1)
    try:
        yield base, context
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def _get(url: str, context: ssl.SSLContext, auth: str | None = None) -> int:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_tls_with_basic_auth(tls_and_auth: tuple[str, ssl.SSLContext]) -> None:
    base, context = tls_and_auth
    assert _get(base + "/metrics", context) == 401
    assert _get(base + "/metrics", context, "prometheus:wrong") == 401
    assert _get(base + "/metrics", context, "nobody:s3cret") == 401
    assert _get(base + "/metrics", context, "prometheus:s3cret") == 200
    assert _get(base + "/healthz", context, "prometheus:s3cret") == 200
    # Plain HTTP to the TLS port gets nothing.
    with pytest.raises(OSError):
        urllib.request.urlopen(base.replace("https", "http") + "/metrics", timeout=5)
    # A client that does not trust the certificate is refused by its own TLS stack.
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(base + "/metrics", timeout=5, context=ssl.create_default_context())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n", "cannot load"),
        ("basic_auth_users:\n  prometheus: plaintext\n", "bcrypt hash"),
        ("tls_server_config:\n  cert_file: a\n", "needs key_file"),
        ("nonsense: 1\n", "unknown key"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS99\n", "min_version"),
        ("[not a mapping", "not YAML"),
    ],
)
def test_a_bad_web_config_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "web.yml"
    config.write_text(text)
    p = subprocess.run(
        [sys.executable, "-m", "ctwatch", "--once", "--collector.disable-defaults", "--collector.nf_conntrack",
         "--web.config.file", str(config)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and message in p.stderr, p.stderr
