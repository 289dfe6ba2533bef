"""What the guard talks to, as protocols: the job store, the trigger queue and the
continuation invoke.

:class:`jobguard.dynamodb.DynamoJobStore` and :class:`jobguard.triggerqueue.TriggerQueue`
are the implementations; a test or another backend passes anything that has these
methods. Nothing here imports boto3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .lease import Acquired, HandOff, LeaseState, Released
    from .records import RunRecord
    from .requests import Acquisition, DecisionWrite, Release
    from .trigger_state import Refused, TriggerRecord
    from .triggers import Trigger

__all__ = ["ContinuationPort", "JobStore", "TriggerQueuePort"]


class JobStore(Protocol):
    """Leases, trigger items and run records (see ``DynamoJobStore`` for each method)."""

    table_name: str

    @property
    def client(self) -> Any: ...

    def expected_lease(self, job: str) -> LeaseState: ...

    def read_lease(self, job: str) -> LeaseState: ...

    def acquire(self, request: Acquisition) -> Acquired | Refused: ...

    def renew(self, job: str, *, run_id: str, fence: int, now_ms: int, lease_ms: int
              ) -> bool: ...

    def release(self, request: Release) -> Released: ...

    def hand_off(self, request: HandOff) -> Released | None: ...

    def withdraw_hand_off(self, job: str, *, next_run_id: str, fence: int, now_ms: int,
                          reason: str) -> bool: ...

    def set_wake(self, job: str, *, holder_run_id: str, receipt: str) -> bool: ...

    def record_decision(self, request: DecisionWrite) -> Refused | None: ...

    def undo_queued(self, record: RunRecord, *, prior: TriggerRecord | None,
                    now_ms: int) -> bool: ...

    def put_run(self, record: RunRecord, ttl_epoch_s: int, *, only_if_absent: bool = False,
                keep_operator_record: bool = False) -> bool: ...


class TriggerQueuePort(Protocol):
    """The job's FIFO trigger queue (see ``TriggerQueue``)."""

    def send(self, trigger: Trigger, *, event: object = None,
             decision: str | None = None) -> None: ...

    def defer(self, receipt: str, seconds: int) -> None: ...

    def wake(self, receipt: str) -> bool: ...


class ContinuationPort(Protocol):
    """Starts the next link of a chain: an asynchronous invoke of the job's own function
    (see ``jobguard.continuation.LambdaContinuation``). ``send`` raises
    :class:`~jobguard.errors.ContinuationRefused` when the invoke surely was not queued
    (the link then withdraws its hand-off) and any other error when it may have been (the
    hand-off then expires like a lease); either way the next tick takes over."""

    def send(self, event: dict[str, Any]) -> None: ...
