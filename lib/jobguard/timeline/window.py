"""The time range of a timeline, from the command's options, checked.

``--since 24h`` (a duration back from now: ``90s``, ``15m``, ``1h30m``, ``2d``) or
``--from T --to T`` (ISO 8601 with a timezone, e.g. ``2026-11-29T02:00:00Z``). A
reversed, empty, open or over-long range, a duration that does not parse, a time without
its timezone: a :class:`WindowError` naming the option.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .model import Window

__all__ = ["DEFAULT_SINCE", "MAX_RANGE", "WindowError", "parse_duration", "parse_instant",
           "window_from_options"]

DEFAULT_SINCE = "24h"
MAX_RANGE = timedelta(days=31)
"""Run records are kept 30 days (their TTL): a longer range can only show less."""

_UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DURATION = re.compile(r"^(?:(\d{1,6})d)?(?:(\d{1,7})h)?(?:(\d{1,9})m)?(?:(\d{1,10})s)?$")


class WindowError(ValueError):
    """A range the command refuses: ``field`` is the option to fix."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def parse_duration(text: str, *, field: str = "--since") -> timedelta:
    """``90s``, ``15m``, ``1h30m``, ``2d`` as a timedelta (at least one second).

    Example:
        >>> parse_duration("1h30m")
        datetime.timedelta(seconds=5400)
    """
    match = _DURATION.fullmatch(text.strip().lower()) if text.strip() else None
    if match is None or not any(match.groups()):
        raise WindowError(field, f"{text!r} is not a duration: a number with its unit, "
                          "d, h, m or s, largest first (e.g. 24h, 90m, 1h30m, 7d)")
    seconds = sum(int(n) * _UNITS[u] for n, u in zip(match.groups(), "dhms", strict=True)
                  if n)
    if seconds <= 0:
        raise WindowError(field, f"{text!r} is an empty range: give at least 1s")
    return timedelta(seconds=seconds)


_DATE_ONLY = re.compile(r"^\d{4}-?\d{2}-?\d{2}(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _zoned(text: str) -> datetime | None:
    raw = text.strip()
    try:
        at = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        return None
    return at if at.tzinfo is not None and at.utcoffset() is not None else None


def parse_instant(text: str, *, field: str) -> datetime:
    """An ISO 8601 time with its timezone (``Z`` or ``+02:00``).

    Example:
        >>> parse_instant("2026-11-29T02:00:00Z", field="--from").isoformat()
        '2026-11-29T02:00:00+00:00'
    """
    raw = text.strip()
    try:
        at = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise WindowError(field, f"{text!r} is not an ISO 8601 time (e.g. "
                          "2026-11-29T02:00:00Z)") from None
    if at.tzinfo is None or at.utcoffset() is None:
        if _DATE_ONLY.fullmatch(raw):  # a date alone: Python drops any zone given with it
            raise WindowError(field, f"{text!r} is a date without a time: give the time "
                              f"and Z for UTC (e.g. {at.date().isoformat()}T00:00:00Z)")
        example = f"{raw}Z" if _zoned(f"{raw}Z") else "2026-11-29T02:00:00Z"
        raise WindowError(field, f"{text!r} has no timezone: add Z for UTC (e.g. "
                          f"{example})")
    if not 1970 <= at.year <= 9999 or at.timestamp() < 0:
        raise WindowError(field, f"{text!r} is before 1970")
    return at


def _ms(at: datetime) -> int:
    """Epoch milliseconds, exactly (no float: a microsecond never rounds up)."""
    return (at - _EPOCH) // timedelta(milliseconds=1)


def window_from_options(*, since: str | None, from_: str | None, to: str | None,
                        now_ms: int) -> Window:
    """The range the options ask for; ``--since 24h`` when none is given.

    Example:
        >>> w = window_from_options(since="1h", from_=None, to=None, now_ms=7_200_000)
        >>> (w.from_ms, w.to_ms)
        (3600000, 7200000)
    """
    if since is not None and (from_ is not None or to is not None):
        raise WindowError("--since", "give --since or --from/--to, not both")
    if from_ is None and to is None:
        span = parse_duration(since if since is not None else DEFAULT_SINCE)
        if span > MAX_RANGE:
            raise WindowError("--since", f"{since} is longer than {MAX_RANGE.days} days "
                              "(run records are kept 30 days)")
        return Window(now_ms - int(span.total_seconds() * 1000), now_ms)
    if from_ is None:
        raise WindowError("--from", "--to needs --from: a range has two ends (or use "
                          "--since)")
    if to is None:
        raise WindowError("--to", "--from needs --to: a range has two ends (or use "
                          "--since)")
    start, end = parse_instant(from_, field="--from"), parse_instant(to, field="--to")
    if end < start:
        raise WindowError("--to", f"{to} is before --from {from_}: the range is reversed")
    if end == start:
        raise WindowError("--to", f"{to} is --from itself: the range is empty")
    if end - start > MAX_RANGE:
        raise WindowError("--to", f"the range is {end - start}, longer than "
                          f"{MAX_RANGE.days} days (run records are kept 30 days)")
    from_ms, to_ms = _ms(start), _ms(end)
    if to_ms <= from_ms:
        raise WindowError("--to", f"{to} is within the millisecond of --from {from_}: the "
                          "range is shorter than a millisecond, the axis's unit (give at "
                          "least 1 ms)")
    return Window(from_ms, to_ms)
