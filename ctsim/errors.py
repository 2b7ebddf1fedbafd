"""The one error type that reaches the user as a single line and exit code 2."""


class InputError(ValueError):
    """Bad user input: the message is shown as is, never with a traceback."""
