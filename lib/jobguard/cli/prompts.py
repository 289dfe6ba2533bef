"""Asking the operator: a yes/no question on stderr answered on stdin (a terminal, or a
pipe's first line), and who the operator is. Changes when the way a command confirms or
names its operator changes."""

from __future__ import annotations

import sys

from .refusal import CommandError


def _ask(question: str) -> str | None:
    """A yes/no question on stderr (stdout is the command's answer: ``--output json``
    stays parseable), the reply from stdin: a terminal's, or a pipe's first line (``echo
    y | jobguard release JOB --force``, as ``rm -i`` reads it). None when stdin has no
    line to give (closed, at its end, or not readable)."""
    print(question, end="", file=sys.stderr, flush=True)
    stdin = sys.stdin
    try:
        line = stdin.readline() if stdin is not None else ""
    except (OSError, ValueError):  # closed, or not readable (a test's stand-in)
        line = ""
    try:
        terminal = stdin is not None and stdin.isatty()
    except (OSError, ValueError):
        terminal = False
    if not terminal:
        print(file=sys.stderr)  # the answer came from a pipe: end the question's line
    return line.strip() if line else None


def _confirm(question: str) -> None:
    """Go on only if the operator answers y (or yes); else refused naming ``--yes``."""
    answer = _ask(question)
    if answer is None:
        raise CommandError("--yes", "not confirmed: stdin gave no answer, nothing written "
                           "(pipe y into the command, or pass --yes)")
    if answer.lower() not in ("y", "yes"):
        said = f"the answer was {answer!r}, not y" if answer else "an empty answer"
        raise CommandError("--yes", f"not confirmed: {said}, nothing written (answer y, "
                           "or pass --yes)")


def _login() -> str | None:
    """The operator's login name ($LOGNAME, $USER, ..., else the account's), or None."""
    import getpass

    try:
        return getpass.getuser() or None
    except (OSError, KeyError):
        return None
