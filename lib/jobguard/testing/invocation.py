"""What one invocation is handed, as AWS hands it: Lambda's context object
(:class:`LambdaContext`) and EventBridge Scheduler's tick event (:func:`tick_event`).

Its one reason to change: the shape of what Lambda and Scheduler give a handler (the
context's attributes and time left, the tick's fields).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clock import ManualClock

__all__ = ["LambdaContext", "tick_event"]


class LambdaContext:
    """What a handler reads of Lambda's context object: its request id (a new one per
    context, as per invocation), the function's name and ARN, its memory, and the time
    left before its timeout (counted on ``clock``'s monotonic time when given, so a
    :class:`ManualClock` moves it too).

    ``real_limit`` bounds the invocation in real seconds as well: once that much real
    time has passed, the time left is 0, as for a Lambda that timed out. A
    :class:`ManualClock` never moves by itself, so without it a run that never runs out
    of work (a ``select`` that never returns an empty page) would never end; the contexts
    of a :class:`WiredJob` have one (:attr:`Sandbox.real_limit`, 10 s).

    Example:
        >>> context = LambdaContext(timeout=timedelta(seconds=30))
        >>> 0 < context.get_remaining_time_in_millis() <= 30_000
        True
    """

    def __init__(self, *, function_name: str = "jobguard-test",
                 timeout: timedelta = timedelta(minutes=15), memory_limit_in_mb: int = 256,
                 clock: ManualClock | None = None, aws_request_id: str | None = None,
                 real_limit: timedelta | None = None) -> None:
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            raise ValueError(f"LambdaContext(timeout=...) must be a positive timedelta, "
                             f"got {timeout!r}")
        if real_limit is not None and (not isinstance(real_limit, timedelta)
                                       or real_limit <= timedelta(0)):
            raise ValueError(f"LambdaContext(real_limit=...) must be a positive timedelta "
                             f"or None, got {real_limit!r}")
        import time

        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_limit_in_mb
        self.invoked_function_arn = (
            f"arn:aws:lambda:us-east-1:000000000000:function:{function_name}")
        self.aws_request_id = aws_request_id or str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = f"local/{self.aws_request_id}"
        self._monotonic = clock.monotonic if clock is not None else time.monotonic
        self._deadline = self._monotonic() + timeout.total_seconds()
        self._real_limit_s = real_limit.total_seconds() if real_limit is not None else None
        self._real_deadline = (time.monotonic() + self._real_limit_s
                               if self._real_limit_s is not None else None)

    def get_remaining_time_in_millis(self) -> int:
        import time

        if self._real_deadline is not None and time.monotonic() >= self._real_deadline:
            return 0  # the kit's bound: out of time, as a Lambda that timed out
        return max(0, int((self._deadline - self._monotonic()) * 1000))

    def _restart_real_limit(self) -> None:
        """Count the real-time bound from now (the time a test held the run paused is
        the test's, not the run's)."""
        import time

        if self._real_limit_s is not None:
            self._real_deadline = time.monotonic() + self._real_limit_s


def tick_event(job: str, at: datetime, *, execution_id: str | None = None
               ) -> dict[str, Any]:
    """The event an EventBridge Scheduler tick delivers for ``job`` scheduled at ``at``
    (the stack's schedule input, ``<aws.scheduler.scheduled-time>`` filled in), with
    Scheduler's ``execution_id`` when one is given (the run record keeps it)."""
    if not isinstance(at, datetime) or at.utcoffset() is None:
        raise ValueError(f"a tick's time must be a datetime with a timezone, got {at!r}")
    event = {"job": job, "scheduled_at": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if execution_id is not None:
        event["execution_id"] = execution_id
    return event
