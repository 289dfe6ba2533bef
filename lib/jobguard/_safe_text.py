"""Text from records, events and remote systems made safe to show (private).

A run's error, its ``requested_by``, an item's work id, a pause reason, a remote API's
answer: anyone who may invoke a job's function, write its table or answer its calls
chooses these characters. Shown raw, an escape sequence clears the operator's screen,
recolours or hides text or sets the window title; a newline or a carriage return forges
a line (a fake "succeeded" run under a failed one); a bidirectional override shows a
value reversed. So every character Python's ``repr`` would not print as itself (C0 and
C1 controls, DEL, format characters such as the bidi overrides and isolates, line and
paragraph separators, lone surrogates, unassigned code points) is shown as its escape
(``\\x1b``, ``\\u202e``, ``\\ud800``), visibly, and nothing else changes: a backslash
stays a backslash, a space a space.

:func:`safe_text` makes one value one line (what a table cell, a text row's field or a
sentence quoting a record needs); :func:`safe_lines` keeps a text's line breaks and tabs
and escapes everything else (what a stream of output lines needs). The CLI and the timeline
use these two and nothing else; while the CLI runs a command, :func:`safe_streams`
applies :func:`safe_lines` to everything written to stdout and stderr, so a command or
a message that forgets to is still safe.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["SafeStream", "safe_lines", "safe_streams", "safe_text"]

ELLIPSIS = "\u2026"
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _pieces(text: str) -> list[str]:
    return [ch if ch.isprintable() else _escape(ch) for ch in text]


def safe_text(value: object, limit: int | None = None) -> str:
    """``value`` as one line of printable text: every character ``repr`` would escape is
    shown as its escape; at most ``limit`` characters (cut between two characters or
    escapes, ending in an ellipsis) when ``limit`` is given.

    Example:
        >>> safe_text("failed\\n01K0  succeeded\\x1b[2J\\u202e")
        'failed\\\\n01K0  succeeded\\\\x1b[2J\\\\u202e'
        >>> safe_text("x" * 10, limit=5)
        'xxxx…'
    """
    text = value if isinstance(value, str) else str(value)
    if limit is not None:
        text = text[: limit + 1]  # bounded work: a record's text may be 400 KB
    if text.isprintable() and (limit is None or len(text) <= limit):
        return text
    pieces = _pieces(text)
    if limit is None or (len(text) <= limit and sum(map(len, pieces)) <= limit):
        return "".join(pieces)
    out: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) > limit - 1:
            break
        out.append(piece)
        used += len(piece)
    return "".join(out) + ELLIPSIS


def safe_lines(text: str) -> str:
    """``text`` with its line breaks and tabs kept and every other character that
    :func:`safe_text` escapes escaped: text the CLI composed (lines, tab-separated
    fields), made safe whatever a value inside it held. A value's own newline or tab
    cannot be told from the text's here: values are made one line with
    :func:`safe_text` before they are joined.

    Example:
        >>> safe_lines("job\\tcrm-sync\\npaused\\t\\x1b]0;title\\x07")
        'job\\tcrm-sync\\npaused\\t\\\\x1b]0;title\\\\x07'
    """
    if text.isprintable():
        return text
    return "\n".join("\t".join(safe_text(field) for field in line.split("\t"))
                     for line in text.split("\n"))


class SafeStream:
    """A text stream (stdout, stderr) that writes what :func:`safe_lines` makes of
    each text written to it; everything else is the stream's own (``flush``,
    ``isatty``, ``fileno``...). ``inner`` is the stream itself, for the few
    characters the program composes on purpose (a progress line's carriage return).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(safe_lines(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextlib.contextmanager
def safe_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` made :class:`SafeStream` for the block: whatever
    any code prints meanwhile (a command, a library it calls, a parser's error) reaches
    the terminal with every control and bidirectional character escaped."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
