"""How a command's answer is printed: ``--output`` table, json or text, every time as ISO
8601 UTC with its ``Z``, every text one safe line. Changes when the CLI's output formats
change, never for one command's content."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .._safe_text import safe_text

_LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the last a date can show


def _ms(ms: int | None) -> str | None:
    """An epoch-milliseconds time as ISO 8601 UTC with its ``Z`` (None when unset: null in
    JSON, "-" in a table or text; a number no date can show, as that number)."""
    if not ms:
        return None
    if not 0 < ms <= _LAST_MS:  # a row anyone may write: said, never a crash
        return f"{ms} ms (not a time)"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_times(row: dict[str, Any]) -> dict[str, Any]:
    """``*_at_ms`` times and the ``ttl_epoch_s`` expiry shown as ISO 8601 UTC (``*_at``,
    ``ttl_at``); durations (``*_ms`` without ``_at``) stay numbers, and so does a time no
    date can show (after the year 9999), under its own name."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        number = isinstance(value, int) and not isinstance(value, bool)
        if (key.endswith("_at_ms") or key == "ttl_epoch_s") and (number or value is None):
            ms = value * 1000 if key == "ttl_epoch_s" and value else value
            if ms and not 0 < ms <= _LAST_MS:
                out[key] = value  # a row anyone may write: shown, never a crash
            else:
                out["ttl_at" if key == "ttl_epoch_s" else key.removesuffix("_ms")] = _ms(ms)
        else:
            out[key] = value
    return out


def _shown(value: Any) -> Any:
    """``value`` with every text in it made one safe line (:func:`safe_text`), for human
    text composed from it; numbers and None stay as they are. JSON uses the values
    themselves (its escapes are exact and safe)."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(k): _shown(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_shown(v) for v in value]
    return value


def _table_text(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    """Rows as an aligned table, one line per row: each cell one safe line."""
    if not rows:
        return "(none)"
    cells = [[safe_text(row.get(c, "") if row.get(c) is not None else "-") for c in columns]
             for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def _text(data: Any) -> str:
    """``--output text``: one line per row (or per key), fields separated by tabs. A
    field is one safe line (a tab, a newline or an escape inside a value is shown as its
    escape: it never makes a new field or a new line); a map or a list is compact JSON."""
    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, dict | list):
            return json.dumps(value, default=str, separators=(",", ":"))
        return safe_text(value)

    if isinstance(data, list):
        columns: list[str] = []
        for row in data:
            columns += [k for k in row if k not in columns]
        return "\n".join("\t".join(cell(row.get(c)) for c in columns) for row in data)
    if isinstance(data, dict):
        return "\n".join(f"{safe_text(k)}\t{cell(v)}" for k, v in data.items())
    return cell(data)


def _out(args: argparse.Namespace, data: Any, human: str) -> None:
    """Print the command's answer: ``data`` as JSON (exact: ``json.dumps`` escapes every
    control and non-ASCII character) or as text lines, else ``human``, which the
    command composed from :func:`_shown` values (and which the stream escapes again)."""
    output = getattr(args, "output", None) or "table"
    if output == "json":
        print(json.dumps(data, indent=2, default=str, ensure_ascii=True))
    elif output == "text":
        print(_text(data))
    else:
        print(human)


def _counts(value: Any) -> str:
    """Counts as people write them (``ran 3, queued 2``), not as a Python dict."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_counts(v)}" for k, v in value.items()) or "none"
    return str(value)
