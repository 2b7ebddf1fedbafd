"""Styled lines for the run report: ANSI bold and colour on a terminal, plain text elsewhere.

The run report is the main job's output: a dozen lines with a few words in
bold. rich would cost ~25 ms of imports for them, a sixth of the whole job,
so these are written directly. Colour follows the conventions rich and most
CLIs honour: a terminal, unless ``NO_COLOR`` is set or ``TERM=dumb``;
``FORCE_COLOR`` forces it. Lines are not wrapped: piped, each stays one line
for grep; on a terminal, the terminal wraps.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

_SGR = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33"}


def wants_color(stream: TextIO) -> bool:
    if os.environ.get("FORCE_COLOR"):
        return True
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


class Terminal:
    """Where the report goes, and whether it may be styled."""

    def __init__(self, stream: TextIO | None = None, color: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.color = wants_color(self.stream) if color is None else color

    def style(self, text: str, style: str) -> str:
        """``text`` in ``style`` ("bold", "bold red", ...)."""
        if not self.color or not style:
            return text
        codes = ";".join(_SGR[word] for word in style.split())
        return f"\033[{codes}m{text}\033[0m"

    def print(self, text: str = "") -> None:
        self.stream.write(text + "\n")

    def grid(self, rows: list[tuple[str, str]], label_style: str = "dim") -> None:
        """Two columns, labels padded to the widest, two spaces apart."""
        width = max((len(label) for label, _ in rows), default=0)
        for label, value in rows:
            self.print(f"{self.style(label.ljust(width), label_style)}  {value}")


def print_json(doc: object, allow_nan: bool = True) -> None:
    """One JSON document on stdout, written in pieces of about 64 KiB as it is encoded.

    Not ``print(json.dumps(...))``: with an indent, dumps joins every piece
    into one string first, and a 10,000-node fleet's pieces held at once
    cost more than the rows themselves (the peak of ``fleet --json``); nor
    ``json.dump``, whose one write per piece costs more than the encoding.
    """
    import json

    pieces: list[str] = []
    size = 0
    for piece in json.JSONEncoder(indent=2, allow_nan=allow_nan).iterencode(doc):
        pieces.append(piece)
        size += len(piece)
        if size >= 1 << 16:
            sys.stdout.write("".join(pieces))
            pieces, size = [], 0
    pieces.append("\n")
    sys.stdout.write("".join(pieces))
