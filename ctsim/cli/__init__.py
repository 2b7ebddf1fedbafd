"""The command line: typer commands, their flags, and what they print.

``app`` (the ``ctsim`` commands), ``options`` (flag groups declared once),
``command`` (how a command runs: one line and exit 2 on bad input; shared
with ctwatch), ``report``, ``tables``, ``plots``, ``term`` and
``fleet_view`` (renderers), ``docs`` (the model's tables into docs/).

May import: every layer. Nothing imports it but ``__main__`` and ctwatch's
command line (``command`` alone).
"""
