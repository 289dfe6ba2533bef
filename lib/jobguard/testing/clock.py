"""The test's time: :class:`ManualClock`, wall and monotonic time that move on request.

Its one reason to change: how a test moves time (advancing it, one worker's clock skewed
from another's) for the guard, the Lambda contexts and the trigger queue alike.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

__all__ = ["ManualClock"]


class ManualClock:
    """Wall and monotonic time that only move when :meth:`advance` is called.

    Shared by several workers (threads) it lets a test expire a lease without
    sleeping. ``offset`` makes one worker's wall clock run ahead (or behind) of
    another's view of the same clock: see :meth:`skewed`.
    """

    def __init__(self, start: datetime | None = None, *, _base: ManualClock | None = None,
                 _offset: timedelta = timedelta(0)) -> None:
        if start is not None and (not isinstance(start, datetime) or start.utcoffset() is None):
            raise TypeError(f"ManualClock(start=...) must be a datetime with a timezone, "
                            f"got {start!r}")
        self._base = _base
        self._offset = _offset
        self._lock = threading.Lock()
        self._now = start or datetime.now(UTC).replace(microsecond=0)
        self._mono = 1000.0

    def now(self) -> datetime:
        if self._base is not None:
            return self._base.now() + self._offset
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        if self._base is not None:
            return self._base.monotonic()
        with self._lock:
            return self._mono

    def advance(self, delta: timedelta) -> None:
        if not isinstance(delta, timedelta) or delta < timedelta(0):
            raise ValueError(f"advance() takes a timedelta >= 0 (time never runs back), "
                             f"got {delta!r}")
        if self._base is not None:
            self._base.advance(delta)
            return
        with self._lock:
            self._now += delta
            self._mono += delta.total_seconds()

    def skewed(self, offset: timedelta) -> ManualClock:
        """The same clock, as seen by a worker whose wall clock is off by ``offset``."""
        return ManualClock(_base=self, _offset=offset)
