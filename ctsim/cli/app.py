"""The ``ctsim`` command line (typer). Bad input: one line on stderr, exit code 2.

Each command is a module of ``ctsim.cli.commands``; this module makes the
app, registers them in --help's order, and hands typer only the one asked for.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ctsim.cli.command import run_cli
from ctsim.cli.commands import backtest, calibrate, emulate, fleet, nft, plan, run, sweep
from ctsim.cli.options import LIBRARY_FLAGS

app = typer.Typer(
    help="Model Cilium's conntrack GC drift and the scrub convoy that stalls pod start-up.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion, --show-completion: typer installs it for bash, zsh, fish
    pretty_exceptions_enable=False,
    # Plain (click-style) help: rendering it with rich imports rich.markdown and friends, twice the
    # cost of the help itself; the report still uses rich.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from ctsim import __version__

        print(f"ctsim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """ctsim: will pod start-up stall behind a conntrack scrub on this node?"""


for _command in (run, emulate, sweep, plan, fleet, backtest, calibrate):  # --help's order
    app.command(short_help=_command.SHORT_HELP)(getattr(_command, _command.__name__.rsplit(".", 1)[1]))
app.add_typer(nft.app, name="nft", short_help=nft.SHORT_HELP)  # the second hazard: a group of its own


def main() -> None:
    run_cli(_app_for(sys.argv[1:]), "ctsim", LIBRARY_FLAGS)


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the command asked for: typer reads every command's options before it
    parses any, which was a quarter of the main job's start-up. Help and errors about the
    command name itself come from the whole app."""
    name = args[0] if args else ""
    for info in app.registered_commands:
        if info.callback is not None and (info.name or info.callback.__name__) == name:
            one = typer.Typer(
                help=app.info.help, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                rich_markup_mode=None,
            )  # fmt: skip
            one.registered_callback = app.registered_callback
            one.registered_commands = [info]
            return one
    return app
