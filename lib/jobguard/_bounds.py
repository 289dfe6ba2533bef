"""Byte bounds on what a user controls and jobguard writes (private).

DynamoDB refuses an item over 400 KB and a transaction over 4 MB, so every field whose
size a user controls (error text, details, run figures) is bounded in UTF-8 bytes, not
characters, before anything is written: a run's record can never stop its own release.
"""

from __future__ import annotations

from typing import Any

from .errors import ConfigError, CursorTooLargeError

__all__ = ["MAX_BATCH_SIZE", "MAX_CURSOR_BYTES", "MAX_EXTRA_BYTES", "MAX_TEXT_BYTES",
           "batch_size_problem", "bounded_extra", "bounded_text", "check_batch_size",
           "check_cursor"]

MAX_BATCH_SIZE = 1000
"""Items in one page, and so in one open claim on the job row."""
MAX_CURSOR_BYTES = 8192
"""A checkpoint's cursor (UTF-8): it lives on the job row, which the claim shares and
which every commit and lease acquisition pays for by its whole size."""

MAX_TEXT_BYTES = 1000
"""Error text and details on a run record."""
MAX_EXTRA_BYTES = 8000
"""All the figures a run puts on its record (counts, cursor range), together."""
_MARK = " [truncated]"


def batch_size_problem(value: object) -> str | None:
    """Why ``value`` cannot be a batch size (None: it can)."""
    if not isinstance(value, int) or isinstance(value, bool) \
            or not 1 <= value <= MAX_BATCH_SIZE:
        return f"must be an integer 1-{MAX_BATCH_SIZE}, got {value!r}"
    return None


def check_batch_size(value: object) -> int:
    """``value`` as a page size, or :class:`ConfigError` naming ``batch_size``."""
    problem = batch_size_problem(value)
    if problem is not None:
        raise ConfigError("batch_size", problem)
    assert isinstance(value, int)
    return value


def check_cursor(job: str, cursor: str | None) -> None:
    """Refuse a checkpoint cursor over :data:`MAX_CURSOR_BYTES` (``CursorTooLargeError``)."""
    if cursor is not None:
        size = len(cursor.encode("utf-8"))
        if size > MAX_CURSOR_BYTES:
            raise CursorTooLargeError(job, size, MAX_CURSOR_BYTES)


def bounded_text(text: str | None, limit: int = MAX_TEXT_BYTES) -> str | None:
    """``text`` cut to at most ``limit`` UTF-8 bytes (never inside a character). A lone
    surrogate (no store keeps one) is written as its escape, ``\\udc80``."""
    if text is None:
        return None
    raw = text.encode("utf-8", "backslashreplace")
    text = raw.decode("utf-8")
    if len(raw) <= limit:
        return text
    keep = limit - len(_MARK.encode())
    return raw[:keep].decode("utf-8", errors="ignore") + _MARK


def bounded_extra(values: dict[str, Any], limit: int = MAX_EXTRA_BYTES) -> dict[str, Any]:
    """Run figures that fit in ``limit`` bytes: strings bounded, the rest dropped in
    order once the budget is spent (a ``figures_truncated`` flag says so)."""
    out: dict[str, Any] = {}
    used = 0
    for key, value in values.items():
        if not isinstance(value, int | str | bool):
            continue
        if isinstance(value, str):
            value = bounded_text(value, 512)
        size = len(str(key).encode()) + len(str(value).encode())
        if used + size > limit or len(str(key).encode()) > 255:
            out["figures_truncated"] = True
            break
        out[key] = value
        used += size
    return out
