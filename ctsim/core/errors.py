"""Bad input is an ``InputError``: the command line shows its message as one line, exit code 2."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


class InputError(ValueError):
    """Bad user input: the message is shown as is, never with a traceback."""


class WorkFailed(RuntimeError):
    """The work itself failed (not the input): one line and exit code 1, never a run that looks whole."""


def pick(table: Mapping[str, T], name: str, flag: str, what: str) -> T:
    """``table[name]``, or one line naming the choices."""
    try:
        return table[name]
    except KeyError:
        raise InputError(f"{flag}: unknown {what} {name!r} (known: {', '.join(table)})") from None


def shorten(text: str, limit: int = 80) -> str:
    """A value as an error line echoes it: whole when short, else its start and how much was cut."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit:,} more characters)"
