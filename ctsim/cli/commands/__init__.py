"""One module per ``ctsim`` command: its flags, its checks and what it runs; ``ctsim.cli.app`` registers each.

Each module names its command's function after the command and gives its
``SHORT_HELP``; heavy imports (the model, the fleet's HTTP client, the
kernel) stay inside the function, so ``ctsim --help`` loads none of them.
"""
