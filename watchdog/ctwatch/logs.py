"""ctwatch's log: one line per event on stderr, logfmt or JSON, filtered by level.

node_exporter's ``--log.level`` and ``--log.format``. ctwatch logs what changed
(a source going down or up, a level change), never a heartbeat.
"""

from __future__ import annotations

import json
import sys
import time

LEVELS = ("debug", "info", "warn", "error")
FORMATS = ("logfmt", "json")


class _Config:
    level = LEVELS.index("info")
    format = "logfmt"


def configure(level: str = "info", fmt: str = "logfmt") -> None:
    """Raises ValueError naming the bad value (the CLI turns it into one line)."""
    if level not in LEVELS:
        raise ValueError(f"--log.level: one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"--log.format: one of {', '.join(FORMATS)}, got {fmt!r}")
    _Config.level, _Config.format = LEVELS.index(level), fmt


def _logfmt_value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text == "" or any(c in text for c in ' ="\\') or not text.isprintable():
        return json.dumps(text)
    return text


def log_event(msg: str, level: str = "info", **fields: object) -> None:
    """Never raises: a log line must not be what stops the watchdog."""
    rank = LEVELS.index(level) if level in LEVELS else LEVELS.index("info")
    if rank < _Config.level:
        return
    record = {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "level": level, "msg": msg, **fields}
    if _Config.format == "json":
        line = json.dumps(record, sort_keys=False, default=str)
    else:
        line = " ".join(f"{k}={_logfmt_value(v)}" for k, v in record.items())
    if "@" in line:  # a URL's password never reaches a log (--cilium.metrics-url http://user:pass@...)
        from ctsim.core.urls import redact_text

        line = redact_text(line)
    print(line, file=sys.stderr, flush=True)
