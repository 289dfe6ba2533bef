"""Record values made safe for the timeline's pages, and the pages' element ids (private).

Everything a record says is escaped here: a run id, an error or a ``requested_by`` is
text, never markup; element ids are counters, never record values. Changes when what a
page may show of a record does.
"""

from __future__ import annotations

from html import escape

from .._safe_text import safe_lines
from . import _format as f

__all__ = ["Ids", "esc", "hover_lines"]


def esc(value: object, limit: int = 300) -> str:
    """A value shown on the page: one line (:func:`jobguard.timeline._format.clean`),
    HTML-escaped."""
    return escape(f.clean(value, limit), quote=True)


def hover_lines(title: str, limit: int) -> str:
    """Hover text composed here, one fact a line: its own line breaks kept (each record
    value in it was made one line by ``f.clean`` as it was put in), anything else
    escaped, cut at ``limit`` characters, HTML-escaped."""
    if len(title) > limit:
        title = title[: limit - 1] + "\u2026"
    return escape(safe_lines(title), quote=True)


class Ids:
    """Element ids: counters, never record values (a run id could be anything)."""

    def __init__(self) -> None:
        self.bar: dict[tuple[int, str], int] = {}
        self.row: dict[tuple[int, str], int] = {}
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n
