"""The alerts' runbook, shipped with ctwatch and served at ``/runbook``.

An alert's ``runbook_url`` must open from a pager, and this project hosts no
web site: so each ctwatch serves the runbook itself, and the default rules
link the firing ctwatch's page. The text is ``runbook.md`` beside this file,
the same sections docs/watchdog.md shows (a test keeps them equal). The page
is the text, escaped, one paragraph per paragraph, with an anchor per alert:
no Markdown renderer, since the sections are plain prose.
"""

from __future__ import annotations

import html
import re
from functools import cache
from importlib.resources import files

from ctwatch import __version__

RUNBOOK_PATH = "/runbook"


def anchor(alert: str) -> str:
    """The anchor of an alert's section: GitHub's for its ``### Alert`` heading, and the page's id."""
    return alert.lower()


@cache
def text() -> str:
    return files("ctwatch").joinpath("runbook.md").read_text(encoding="utf-8")


def sections() -> dict[str, list[str]]:
    """Alert name -> its paragraphs, in the runbook's order."""
    out: dict[str, list[str]] = {}
    for block in re.split(r"^### ", text(), flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        out[title.strip()] = [" ".join(p.split()) for p in body.split("\n\n") if p.strip()]
    return out


def _inline(paragraph: str) -> str:
    """Escaped text; `code` spans are the one markup the sections use."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(paragraph))


@cache
def page() -> bytes:
    parts = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8"><title>ctwatch runbook</title></head>',
        f"<body>\n<h1>ctwatch {html.escape(__version__)}: runbook</h1>",
    ]
    for alert, paragraphs in sections().items():
        parts.append(f'<h2 id="{anchor(alert)}">{html.escape(alert)}</h2>')
        parts.extend(f"<p>{_inline(p)}</p>" for p in paragraphs)
    parts.append("</body></html>\n")
    return "\n".join(parts).encode()
