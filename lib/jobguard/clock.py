"""Injectable clocks. Nothing in jobguard calls ``datetime.now()`` directly.

Wall time (``now``) is what other workers see: it goes into lease rows and records.
Monotonic time (``monotonic``) is what a worker trusts for its own deadlines.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "SystemClock", "to_ms", "from_ms"]


class Clock(Protocol):
    """A source of wall and monotonic time."""

    def now(self) -> datetime:
        """Current wall time, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...


class SystemClock:
    """The real clock, optionally skewed (a worker whose wall clock is off).

    Example:
        >>> clock = SystemClock(skew=timedelta(seconds=2))  # runs 2 s ahead
    """

    def __init__(self, *, skew: timedelta = timedelta(0)) -> None:
        self._skew = skew

    def now(self) -> datetime:
        return datetime.now(UTC) + self._skew

    def monotonic(self) -> float:
        return time.monotonic()


def to_ms(at: datetime) -> int:
    """Epoch milliseconds of an aware datetime."""
    return int(at.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    """Aware UTC datetime from epoch milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
