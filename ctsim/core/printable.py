"""Outside text made safe for a terminal: control characters shown escaped, as ``kubectl`` and ``ls`` show them.

A node's name, a label, a server's error or a calibration file's words come
from outside. Printed raw, an escape sequence in one clears the screen or
sets the title, and a newline forges a row of a table. Human output shows
each such character as its escape (``\\x1b``, ``\\n``, ``\\u202e``); JSON keeps
the text as it is, JSON-escaped.
"""

from __future__ import annotations

import re

# C0 and DEL, C1, and the Unicode line separators and bidirectional controls that reorder what follows them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character escaped; unchanged (the same object) where it has none."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text)
