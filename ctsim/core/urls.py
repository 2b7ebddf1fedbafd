"""URLs as they are shown: never with a password in them.

``http://user:s3cret@host/`` works as a Prometheus URL (httpx sends the
userinfo as basic auth), and every line that names the server would print
the secret — the footer, error lines, ``--json``, ctwatch's logs. ``redact``
is Go's ``url.URL.Redacted``: the password becomes ``xxxxx``, the user stays.
"""

from __future__ import annotations

import re
import urllib.parse

MASK = "xxxxx"
# What is left of a URL too broken to split: any "user:password@" after "//".
_USERINFO = re.compile(r"(//[^/?#@:]*):[^/?#@]*@")


def redact(url: str) -> str:
    """``url`` with its password, if any, as ``xxxxx``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return _USERINFO.sub(rf"\1:{MASK}@", url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return _USERINFO.sub(rf"\1:{MASK}@", url) if "@" in url else url
    user = userinfo.partition(":")[0]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{hostport}"))


def redact_text(text: str) -> str:
    """Every ``user:password@`` after ``//`` in ``text`` (an error line, a log line) as ``user:xxxxx@``."""
    return _USERINFO.sub(rf"\1:{MASK}@", text) if "@" in text else text


def check_port(port: int | None, flag: str) -> None:
    """A TCP port a connection can be made to: 1-65535 (a URL parser may take 65536 and fail at connect)."""
    from ctsim.core.errors import InputError

    if port is not None and not 0 < port < 65536:
        raise InputError(f"{flag}: invalid port {port} (a TCP port is 1-65535)")
