"""The longest time between two ticks of an EventBridge Scheduler ``cron()`` expression.

A dead-man alarm needs it: "no successful run in N intervals" means nothing without the
interval. It is derived for the expressions whose ticks repeat every week: minutes and
hours as ``*``, numbers, ranges, lists and steps; any day of the month (``*`` or ``?``)
and any month and year; the day of the week as ``*``, ``?`` or days (``1-7`` or
``SUN``-``SAT``, ranges, lists, steps). Anything else (a day of the month, a month, ``L``,
``W``, ``#``, a year) returns None: the job must then say its interval itself
(:attr:`jobguard.definitions.JobDefinition.cron_interval`).

Example:
    >>> longest_gap("cron(0 9 ? * MON-FRI *)")
    datetime.timedelta(days=3)
    >>> longest_gap("cron(0 2 1 * ? *)") is None  # monthly: not derived
    True
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["longest_gap"]

_CRON = re.compile(r"^cron\((\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\)$")
_DAYS = {name: number for number, name in enumerate(
    ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"), start=1)}
_WEEK_MINUTES = 7 * 24 * 60


def _values(field: str, low: int, high: int,
            names: dict[str, int] | None = None) -> set[int] | None:
    """The values a cron field selects, or None if this parser does not know its form."""
    result: set[int] = set()
    for part in field.split(","):
        base, _, step_text = part.partition("/")
        if step_text and not step_text.isdigit():
            return None
        step = int(step_text) if step_text else 1
        if step < 1:
            return None
        if base in ("*", "?"):
            start, end = low, high
        else:
            first, _, last = base.partition("-")
            start_value, end_value = _number(first, names), _number(last or first, names)
            if start_value is None or end_value is None:
                return None
            start, end = start_value, (high if step_text and not last else end_value)
        if not (low <= start <= high and low <= end <= high) or start > end:
            return None
        result.update(range(start, end + 1, step))
    return result or None


def _number(text: str, names: dict[str, int] | None) -> int | None:
    if text.isdigit():
        return int(text)
    if names is not None:
        return names.get(text.upper())
    return None


def longest_gap(expression: str) -> timedelta | None:
    """The longest time between two consecutive ticks of ``expression``, or None when
    the expression is not one whose ticks this module can enumerate (see the module)."""
    match = _CRON.fullmatch(expression)
    if match is None:
        return None
    minute, hour, day_of_month, month, day_of_week, year = match.groups()
    if month != "*" or year != "*" or day_of_month not in ("*", "?"):
        return None
    minutes = _values(minute, 0, 59)
    hours = _values(hour, 0, 23)
    days = (set(range(1, 8)) if day_of_week in ("*", "?")
            else _values(day_of_week, 1, 7, _DAYS))
    if minutes is None or hours is None or days is None:
        return None
    ticks = sorted((day - 1) * 24 * 60 + h * 60 + m
                   for day in days for h in hours for m in minutes)
    gaps = [later - earlier for earlier, later in zip(ticks, ticks[1:], strict=False)]
    gaps.append(ticks[0] + _WEEK_MINUTES - ticks[-1])  # around the week's end
    return timedelta(minutes=max(gaps))
