"""What the parts of :class:`jobguard.guard.GuardedJob` (decisions, asks, the run, the
trigger queue: one module each) may use of the job they are parts of, declared once for
the type checker. Changes when a part needs more of the job; nothing runs here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clock import Clock
    from .config import JobConfig
    from .guard import _Runtime
    from .ports import ContinuationPort, TriggerQueuePort
    from .records import RunRecord
    from .triggers import Trigger

__all__ = ["GuardParts"]


class GuardParts:
    """The job's attributes (set by ``GuardedJob.__init__``) and the methods one part
    calls on another (defined by that part)."""

    config: JobConfig
    handler: Callable[[Any, Any], Any]
    clock: Clock
    owner: str
    serves_triggers: bool
    _continuation: ContinuationPort | None
    _lease_ms: int
    _skew_ms: int

    if TYPE_CHECKING:
        def runtime(self) -> _Runtime: ...

        def handle(self, trigger: Trigger, event: Any, context: Any) -> Any: ...

        def _outcome(self, record: RunRecord) -> dict[str, Any]: ...

        def _trigger_queue(self) -> TriggerQueuePort: ...

        def _queue_if_configured(self) -> TriggerQueuePort | None: ...

        def _ttl(self, now_ms: int) -> int: ...

        def _trigger_ttl(self, trigger: Trigger, now_ms: int) -> int: ...

        def _retried_ttl(self, trigger: Trigger, now_ms: int) -> int: ...

        def _running_ttl(self, trigger: Trigger, now_ms: int) -> int: ...

        def _queue_ttl(self, now_ms: int) -> int: ...
