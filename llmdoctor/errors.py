"""Errors that mean "could not check": the CLI prints the message and exits 2, never a traceback."""


class UserError(Exception):
    """Bad input from the user: a missing file, a malformed config, an invalid option value.

    The message must name what was wrong (file and line, or the option) and what to do.
    """

    exit_code = 2
