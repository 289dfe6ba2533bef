"""Durations as jobguard writes them for people (private): one format everywhere, in
errors, the runbook and the CLI (``7 days``, ``2 minutes``, ``90 s``), never Python's
``7 days, 0:00:00``.

Example:
    >>> from datetime import timedelta
    >>> human(timedelta(days=7)), human(timedelta(seconds=90)), human(timedelta(hours=1))
    ('7 days', '90 s', '1 hour')
"""

from __future__ import annotations

from datetime import timedelta

__all__ = ["human"]

_UNITS = (("day", 86_400), ("hour", 3600), ("minute", 60))


def human(delta: timedelta) -> str:
    """``delta`` in the largest unit that states it exactly, else in seconds."""
    if not isinstance(delta, timedelta):
        return str(delta)
    total = delta.total_seconds()
    if total == int(total):
        seconds = int(total)
        for unit, size in _UNITS:
            if seconds and seconds % size == 0:
                n = seconds // size
                return f"{n} {unit}{'s' if abs(n) != 1 else ''}"
        return f"{seconds} s"
    return f"{total:g} s"
