"""Bad input is an ``InputError``: the command line shows its message as one line, exit code 2."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")
_PARAM = re.compile(r"\{param:([a-z0-9_]+)\}")


class InputError(ValueError):
    """Bad user input: the message is shown as is, never with a traceback.

    A library names what it refuses in its own words: ``param``, the
    parameter the message is about, and ``{param:NAME}`` for any other it
    mentions. ``str()`` says them as parameters; a command line says each as
    the flag that gives it (``as_flags``), so only the CLI knows its flags.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def said(self, name: Callable[[str], str]) -> str:
        """The message with every parameter said as ``name`` says it, the refused one first."""
        text = _PARAM.sub(lambda m: name(m.group(1)), self.message)
        return f"{name(self.param)}: {text}" if self.param is not None else text

    def __str__(self) -> str:
        return self.said(lambda param: param)


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
