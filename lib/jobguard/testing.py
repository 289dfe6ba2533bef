"""Helpers for testing guarded handlers: a clock you move by hand.

Example:
    >>> from datetime import timedelta
    >>> clock = ManualClock()
    >>> before = clock.now()
    >>> clock.advance(timedelta(minutes=6))  # every lease of 5 minutes has expired
    >>> clock.now() - before
    datetime.timedelta(seconds=360)
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
        if self._base is not None:
            self._base.advance(delta)
            return
        with self._lock:
            self._now += delta
            self._mono += delta.total_seconds()

    def skewed(self, offset: timedelta) -> ManualClock:
        """The same clock, as seen by a worker whose wall clock is off by ``offset``."""
        return ManualClock(_base=self, _offset=offset)
