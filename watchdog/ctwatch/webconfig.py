"""``--web.config.file``: TLS and basic auth in the Prometheus exporter-toolkit's format.

```yaml
tls_server_config:
  cert_file: server.crt      # relative paths are relative to this file
  key_file: server.key
  min_version: TLS12         # TLS10..TLS13, default TLS12
basic_auth_users:
  prometheus: $2y$10$...     # bcrypt hashes, as `htpasswd -nBC 10 prometheus` prints them
```

Everything is checked when ctwatch starts (one line, exit 2): unknown keys,
missing or unloadable certificates, hashes that are not bcrypt. A correct
password is remembered (its SHA-256, never the password), so a scraper pays
bcrypt's cost once, not on every scrape.
"""

from __future__ import annotations

import base64
import hashlib
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ctsim.core.errors import InputError
from ctsim.core.files import read_text

FLAG = "--web.config.file"
TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
TLS_KEYS = {"cert_file", "key_file", "min_version", "client_auth_type"}


@dataclass
class WebConfig:
    tls: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    _good: set[tuple[str, bytes]] = field(default_factory=set)  # (user, sha256(password)) seen to match
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authorized(self, header: str | None) -> bool:
        """The ``Authorization`` header's verdict; always True without users."""
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        key = (user, hashlib.sha256(password.encode()).digest())
        with self._lock:
            if key in self._good:
                return True
        import bcrypt

        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            if len(self._good) > 1024:
                self._good.clear()
            self._good.add(key)
        return True


def _tls(doc: Any, base: Path) -> ssl.SSLContext:
    if not isinstance(doc, dict):
        raise InputError(f"{FLAG}: tls_server_config must be a mapping")
    unknown = set(doc) - TLS_KEYS
    if unknown:
        raise InputError(f"{FLAG}: unknown tls_server_config key {sorted(unknown)[0]!r}")
    if doc.get("client_auth_type", "NoClientCert") != "NoClientCert":
        raise InputError(f"{FLAG}: client_auth_type: only NoClientCert is supported")
    for key in ("cert_file", "key_file"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise InputError(f"{FLAG}: tls_server_config needs {key}")
    version = doc.get("min_version", "TLS12")
    if version not in TLS_VERSIONS:
        raise InputError(f"{FLAG}: min_version must be one of {', '.join(TLS_VERSIONS)}, got {version!r}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = TLS_VERSIONS[version]
    cert, key = (base / doc["cert_file"]), (base / doc["key_file"])
    try:
        context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise InputError(f"{FLAG}: cannot load {cert} / {key}: {getattr(exc, 'strerror', None) or exc}") from None
    return context


def _users(doc: Any) -> dict[str, bytes]:
    if not isinstance(doc, dict):
        raise InputError(f"{FLAG}: basic_auth_users must be a mapping of user: bcrypt hash")
    users = {}
    for user, hashed in doc.items():
        if not isinstance(user, str) or ":" in user or not user:
            raise InputError(f"{FLAG}: basic_auth_users: bad user name {user!r}")
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")) or len(hashed) != 60:
            raise InputError(f"{FLAG}: basic_auth_users: {user}'s password must be a bcrypt hash ($2y$...)")
        users[user] = hashed.encode()
    return users


def load(path: str) -> WebConfig:
    text = read_text(path, FLAG)
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"{FLAG}: {path} is not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{FLAG}: {path} must be a mapping")
    unknown = set(doc) - {"tls_server_config", "basic_auth_users", "http_server_config"}
    if unknown:
        raise InputError(f"{FLAG}: unknown key {sorted(unknown)[0]!r} (tls_server_config, basic_auth_users)")
    base = Path(path).resolve().parent
    config = WebConfig()
    if doc.get("tls_server_config") is not None:
        config.tls = _tls(doc["tls_server_config"], base)
    if doc.get("basic_auth_users") is not None:
        config.users = _users(doc["basic_auth_users"])
    return config
