"""Counting the AWS requests a library sends, however it builds its client.

:meth:`RequestCounter.install` appends a ``before-send`` handler to botocore's
``BUILTIN_HANDLERS``, which every botocore session (and so every boto3 session)
registers when it is created, and copies into each client it creates. botocore emits
``before-send`` once per HTTP attempt, just before the request goes on the wire, so SDK
retries count too; the handler returns None, so the request is sent as usual.

Counts are kept per thread: a measurement reads the requests its own thread sent, not
those of a lease holder or a heartbeat running in another thread. Install it before
anything creates the session to be measured (jobguard and Powertools create theirs
lazily or at handler import, after the benchmark starts). Standard library and
botocore only.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

__all__ = ["COUNTER", "RequestCounter"]


class RequestCounter:
    """HTTP requests sent by botocore, per thread and per ``service.Operation``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_thread: dict[int, Counter[str]] = {}

    def install(self) -> None:
        """Count the requests of every botocore session created from now on."""
        from botocore import handlers

        entry = ("before-send", self._on_send)
        if entry not in handlers.BUILTIN_HANDLERS:
            handlers.BUILTIN_HANDLERS.append(entry)

    def _on_send(self, event_name: str, **_: Any) -> None:
        operation = event_name.removeprefix("before-send.")
        with self._lock:
            self._by_thread.setdefault(threading.get_ident(), Counter())[operation] += 1

    def reset(self) -> None:
        """Forget every count (all threads)."""
        with self._lock:
            self._by_thread.clear()

    def operations(self) -> dict[str, int]:
        """Requests sent by the calling thread since the last reset, per operation."""
        with self._lock:
            return dict(self._by_thread.get(threading.get_ident(), Counter()))

    def total(self) -> int:
        """Requests sent by the calling thread since the last reset."""
        return sum(self.operations().values())


COUNTER = RequestCounter()
"""The process-wide counter :mod:`bench.run` installs at start-up."""
