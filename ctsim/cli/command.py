"""How a typer command is run and given flags, for ``ctsim`` and ``ctwatch`` alike.

``run_cli``: every input error becomes one line and exit code 2, never a
traceback (typer is imported only when a command runs). ``with_flags``: a
group of flags declared once, appended to any command that takes it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import inspect
import io
import os
import sys
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, NoReturn

from ctsim.core.errors import InputError, WorkFailed

MAX_LINE = 400  # characters of an error line: a 100,000-character value is cut, its flag still named first


def one_line(message: str) -> str:
    """What an error line says: one line, no password, at most ``MAX_LINE`` characters."""
    from ctsim.core.printable import printable
    from ctsim.core.urls import redact_text

    text = printable(redact_text(" ".join(message.split("\n"))))
    if len(text) > MAX_LINE:
        text = f"{text[:MAX_LINE]}... ({len(text) - MAX_LINE:,} more characters)"
    return text


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    if message and sys.stderr is not None:  # typer's no-args help carries none: the help is the message
        with contextlib.suppress(OSError, ValueError):  # stderr gone too: the exit code is all that is left
            print(f"{prog}: error: {one_line(message)}", file=sys.stderr, flush=True)
    sys.exit(code)


# Output errors: a full disk, a closed stdout, a reader that went away.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EPIPE, errno.EBADF, errno.EIO, errno.EFBIG})


class _ClosedStream(io.TextIOBase):
    """Standard output closed at start (``>&-``): writing to it is an error, said in one line, not a traceback."""

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def _ascii_fallback(exc: UnicodeError) -> tuple[str, int]:
    """Where the terminal's encoding cannot hold a character (``PYTHONIOENCODING=latin-1``): its ASCII stand-in."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    return "".join(_ASCII.get(c, "?") for c in bad), exc.end


_ASCII = {
    "→": "->", "—": "-", "–": "-", "≤": "<=", "≥": ">=", "✔": "+", "✘": "x", "µ": "u", "…": "...", "×": "x",
    "·": ".", "±": "+/-", "≈": "~", "’": "'", "“": '"', "”": '"', "━": "-", "─": "-", "│": "|", "┃": "|",
}  # fmt: skip


def _safe_streams() -> None:
    """stdout and stderr that cannot raise on a character their encoding lacks, and a closed stdout that says so."""
    import codecs

    codecs.register_error("ctsim-ascii", _ascii_fallback)
    if sys.stdout is None:
        sys.stdout = _ClosedStream()
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and (getattr(stream, "encoding", "") or "").lower().replace("-", "") != "utf8":
            reconfigure(errors="ctsim-ascii")


def _quiet_stdout() -> None:
    """After an output error, the interpreter's last flush must not print a second complaint."""
    with contextlib.suppress(OSError, ValueError):
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.close(fd)


def _output_error(prog: str, exc: OSError) -> NoReturn:
    if exc.errno == errno.EPIPE:  # the reader went away (`| head`): quietly, exit 1, as click does mid-command
        _quiet_stdout()
        sys.exit(1)
    _quiet_stdout()
    fail(prog, f"cannot write to standard output: {exc.strerror or exc}", 1)


def interrupted(prog: str) -> NoReturn:
    # Half-built objects of interrupted libraries (an event loop pyroute2 was
    # making) may complain while the interpreter exits; what ctsim made was
    # removed by its own finally blocks before we got here.
    from ctsim.core import termination

    sys.unraisablehook = lambda _: None
    why = "terminated" if termination.received else "interrupted"
    os.write(2, f"{prog}: {why} (what it had created is removed)\n".encode())
    sys.exit(143 if termination.received else 130)


def flag_of(param: str, flags: Mapping[str, str] | None = None) -> str:
    """The flag that gives a library's parameter: ``flags``' word for it, else ``--`` and its name with dashes."""
    return (flags or {}).get(param) or "--" + param.replace("_", "-")


def run_cli(app: Any, prog: str, flags: Mapping[str, str] | None = None) -> NoReturn:
    """Runs a typer app; every input error, typer's or ours, becomes one line and exit 2.

    ``flags``: the command line's word for each library parameter whose flag is not its name with dashes.
    """
    import typer

    from ctsim.core import termination

    _safe_streams()
    termination.install()
    try:
        rv = app(standalone_mode=False)
        sys.stdout.flush()  # here, not at exit: a full disk is one line, not "Exception ignored"
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            raise
        _output_error(prog, exc)
    except InputError as exc:
        fail(prog, exc.said(lambda param: flag_of(param, flags)))
    except WorkFailed as exc:
        fail(prog, str(exc), 1)
    except typer.Exit as exc:
        if exc.exit_code == 130:  # typer's word for Ctrl-C
            interrupted(prog)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        interrupted(prog)
    except Exception as exc:
        # typer's (vendored or real) click usage errors carry their own message.
        message = getattr(exc, "format_message", None)
        if message is None:
            raise
        fail(prog, message(), getattr(exc, "exit_code", 2))
    if rv == 130:  # typer returns Ctrl-C as exit code 130 when not standalone
        interrupted(prog)
    sys.exit(rv if isinstance(rv, int) else 0)


def with_flags(
    command: Callable[..., Any],
    flags: dict[str, tuple[Any, Any]],
    build: Callable[[dict[str, Any]], dict[str, Any]],
    provides: Collection[str],
    last: bool = False,
    localns: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """``command`` with ``flags`` (name -> (annotation, default)) appended, as typer reads a signature.

    ``build`` turns the flags' values into arguments the command takes instead
    (of ``provides``: each one the command declares is handed to it, the
    others dropped); ``last`` puts the flags after the command's own in --help.
    """
    hints = typing.get_type_hints(command, localns=localns, include_extras=True)
    takes = set(inspect.signature(command).parameters)
    own = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[p.name])
        for p in inspect.signature(command).parameters.values()
        if p.name not in provides
    ]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for name, (annotation, default) in flags.items()
    ]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in flags}
        built = {k: v for k, v in build(values).items() if k in takes}
        return command(**built, **kwargs)

    order = [*own, *added] if last else [*added, *own]
    wrapper.__signature__ = inspect.Signature(order)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{p.name: p.annotation for p in own},
        **{name: annotation for name, (annotation, _) in flags.items()},
    }
    return wrapper


def whole_number(flag: str, minimum: int | None = None, maximum: int | None = None) -> Any:
    """A typer ``click_type`` for ``flag``'s whole number in ASCII digits, within [minimum, maximum].

    click's own INT is Python's ``int()``, which reads ``1_0`` as 10 and Arabic-Indic or full-width digits
    as numbers: a typo read silently as another number. Every numeric flag takes ASCII digits only.
    """
    import re

    try:  # the click typer runs on: its own vendored copy where it has one (importing click itself costs ~4 %)
        from typer._click.exceptions import BadParameter
        from typer._click.types import ParamType
    except ImportError:
        from click import BadParameter, ParamType

    class WholeNumber(ParamType):
        name = "integer"

        def convert(self, value: object, param: Any, ctx: Any) -> int:
            if isinstance(value, int) and not isinstance(value, bool):
                n = value
            elif isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value.strip(), flags=re.ASCII):
                n = int(value.strip())
            else:
                raise BadParameter(f"{value!r} is not a whole number (ASCII digits)", ctx, param, flag)
            if (minimum is not None and n < minimum) or (maximum is not None and n > maximum):
                low = "" if minimum is None else f"{minimum}<="
                high = "" if maximum is None else f"<={maximum}"
                raise BadParameter(f"{n} is not in the range {low}x{high}", ctx, param, flag)
            return n

    return WholeNumber()
