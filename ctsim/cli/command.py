"""How a typer command is run: every input error becomes one line and exit code 2, never a traceback.

Shared by ``ctsim`` and ``ctwatch``: it imports typer only when a command runs.
"""

from __future__ import annotations

import os
import sys
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
