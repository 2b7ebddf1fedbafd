"""How a typer command is run and given flags, for ``ctsim`` and ``ctwatch`` alike.

``run_cli``: every input error becomes one line and exit code 2, never a
traceback (typer is imported only when a command runs). ``with_flags``: a
group of flags declared once, appended to any command that takes it.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import typing
from collections.abc import Callable, Collection
from typing import Any, NoReturn

from ctsim.core.errors import InputError


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    if message:  # typer's no-args help carries none: the help is the message
        print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(code)


def interrupted(prog: str) -> NoReturn:
    # Half-built objects of interrupted libraries (an event loop pyroute2 was
    # making) may complain while the interpreter exits; what ctsim made was
    # removed by its own finally blocks before we got here.
    sys.unraisablehook = lambda _: None
    os.write(2, f"{prog}: interrupted (what it had created is removed)\n".encode())
    sys.exit(130)


def run_cli(app: Any, prog: str) -> NoReturn:
    """Runs a typer app; every input error, typer's or ours, becomes one line and exit 2."""
    import typer

    try:
        rv = app(standalone_mode=False)
    except InputError as exc:
        fail(prog, str(exc))
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
