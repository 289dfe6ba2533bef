"""Run records and trigger decisions: what every trigger leaves behind."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from .clock import from_ms

__all__ = ["DamagedRun", "Decision", "Outcome", "RunLog", "RunOrigin", "RunRecord",
           "RunStatus"]


class Decision(StrEnum):
    """What a trigger did."""

    RAN = "ran"
    """It took the lease and ran the handler."""
    SKIPPED = "skipped"
    """``SKIP``: the lease was held; the trigger was recorded and dropped."""
    QUEUED = "queued"
    """``QUEUE``: the trigger became a pending run on the job's trigger queue."""
    COALESCED = "coalesced"
    """``COALESCE``: folded into the one follow-up run of the active run."""
    DROPPED = "dropped"
    """``QUEUE``: more than ``max_queued`` triggers were pending; this one was dropped."""
    STALE = "stale"
    """Delivered longer than ``stale_after`` after its scheduled time; not run."""
    PAUSED = "paused"
    """The job is paused; not run."""
    DUPLICATE = "duplicate"
    """Another delivery of a trigger that already ran, is running, or was decided."""
    REJECTED = "rejected"
    """A message on the job's trigger queue that can never become a trigger (not JSON,
    another shape, another job's message, a field that fails validation): recorded with
    the field, the reason and a bounded excerpt, then deleted (reported processed to
    SQS), so the triggers behind it in its FIFO group run at once. Nothing ran. Its
    record's trigger id is ``<job>@message:<SQS message id>``, its kind ``message``."""
    SUPERSEDED = "superseded"
    """A continuation (the next link of a chain) delivered after its hand-off was gone:
    the job was replaced, force-released, or taken over once the hand-off expired (its
    invoke lost or late). Nothing ran; the chain had ended."""


class RunStatus(StrEnum):
    """Status of a run record. Non-runs carry their decision as status."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    INCOMPLETE = "incomplete"
    """The handler returned, but some of its work items failed or stay uncertain (the
    counts are on the record): the trigger is done, the items are the recovery's."""
    FAILED = "failed"
    LEASE_LOST = "lease_lost"
    ABANDONED = "abandoned"
    RELEASED_BY_OPERATOR = "released_by_operator"
    """An operator force-released its lease (``jobguard release --force``)."""
    SKIPPED = "skipped"
    QUEUED = "queued"
    COALESCED = "coalesced"
    DROPPED = "dropped"
    STALE = "stale"
    PAUSED = "paused"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"


@dataclass(frozen=True, kw_only=True)
class RunOrigin:
    """What a run's record says of how the run came about, beside its trigger's id and
    kind. Its acquisition keeps it on the trigger's item while the run holds the lease,
    so a record written from outside the run (an operator's force release) still says it.
    """

    policy: str
    """The job's policy the run was decided under (``SKIP``, ...)."""
    requested_by: str | None = None
    """Who asked for it (a manual run, a recovery)."""
    scheduled_at: str | None = None
    """A tick's scheduled time, as on the run's record."""
    delivery_id: str | None = None
    """The id its sender gave the delivery, as on the run's record."""


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One trigger decision, and for runs, one execution attempt."""

    job: str
    """The job's name."""
    run_id: str
    """This record's id: 26 characters, sorting by start time; a new one per attempt."""
    trigger_id: str
    """The trigger's stable identity (a tick's: job + scheduled time): every delivery of
    one trigger carries the same."""
    trigger_kind: str
    """``tick``, ``rule``, ``manual``, ``queued``, ``follow_up``, ``recovery``,
    ``continuation`` (:class:`jobguard.triggers.TriggerKind`), or ``message`` for a
    rejected queue message."""
    policy: str
    """The job's policy the trigger was decided under (``SKIP``, ``QUEUE``,
    ``COALESCE``, ``REPLACE``)."""
    decision: Decision
    """What the trigger did."""
    status: RunStatus
    """Where the run ended; a trigger that did not run carries its decision."""
    started_at_ms: int
    """When the run started or the trigger was decided."""
    ended_at_ms: int | None = None
    """When the run ended (None while it runs)."""
    fence: int | None = None
    """The lease's fence the run held (runs only)."""
    owner: str | None = None
    """Who ran it: the function and its instance (``<function>/<log stream>``)."""
    holder_run_id: str | None = None
    """A trigger that did not run: the run holding the lease at the time."""
    holder_fence: int | None = None
    """... and that run's fence."""
    scheduled_at: str | None = None
    """A tick's scheduled time, as its event carried it."""
    requested_by: str | None = None
    """Who asked for it (a manual run, a recovery, an operator's command)."""
    delivery_id: str | None = None
    """The id the trigger's sender gave this delivery, as its event carried it:
    EventBridge Scheduler's execution id for a tick, the event's ``id`` for a rule event
    (:attr:`jobguard.triggers.Trigger.delivery_id`). A tick or rule event without one
    was not sent by the stack's schedule or an EventBridge rule."""
    error: str | None = None
    """Why the run failed, as text (redacted as the job's config asks)."""
    detail: str | None = None
    """Why the decision was taken, in words (a stale trigger's age, a rejected message's
    field and reason)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What the run recorded beside these fields: item counts, cursor range, a
    recovery's figures."""

    @property
    def duration_ms(self) -> int | None:
        return None if self.ended_at_ms is None else self.ended_at_ms - self.started_at_ms

    @property
    def started_at(self) -> datetime:
        return from_ms(self.started_at_ms)

    def as_dict(self) -> dict[str, Any]:
        """JSON-serializable form (for logs, the CLI and tests)."""
        data: dict[str, Any] = {
            "job": self.job,
            "run_id": self.run_id,
            "trigger_id": self.trigger_id,
            "trigger_kind": self.trigger_kind,
            "policy": self.policy,
            "decision": self.decision.value,
            "status": self.status.value,
            "started_at_ms": self.started_at_ms,
            "ended_at_ms": self.ended_at_ms,
            "duration_ms": self.duration_ms,
            "fence": self.fence,
            "owner": self.owner,
            "holder_run_id": self.holder_run_id,
            "holder_fence": self.holder_fence,
            "scheduled_at": self.scheduled_at,
            "requested_by": self.requested_by,
            "delivery_id": self.delivery_id,
            "error": self.error,
            "detail": self.detail,
        }
        data.update(self.extra)
        return {k: v for k, v in data.items() if v is not None}


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What the wrapper returns when the handler did not run.

    ``as_dict()`` is JSON-serializable and names the decision and the holder.
    """

    job: str
    trigger_id: str
    decision: Decision
    run_id: str
    holder_run_id: str | None = None
    holder_fence: int | None = None
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "jobguard": self.decision.value,
            "job": self.job,
            "trigger_id": self.trigger_id,
            "decision": self.decision.value,
            "run_id": self.run_id,
            "holder_run_id": self.holder_run_id,
            "holder_fence": self.holder_fence,
            "detail": self.detail,
        }
        return {k: v for k, v in data.items() if v is not None}


@dataclass(frozen=True, kw_only=True)
class DamagedRun:
    """A row under a job's run log that is not a readable run record: an attribute
    missing or of the wrong type, a status no jobguard writes, an id that is not its
    key's (edited by hand, written by another tool, or by anyone who may write the
    table). Readers name it in its place and go on; nothing is decided from it.

    Example:
        >>> DamagedRun(job="crm-sync", sk="RUN#x", problem="status is missing").as_dict()
        ... # doctest: +NORMALIZE_WHITESPACE
        {'job': 'crm-sync', 'run_id': 'x',
         'damaged': {'sk': 'RUN#x', 'problem': 'status is missing'}}
    """

    job: str
    sk: str
    """The row's sort key (``RUN#<run id>``), which names it."""
    problem: str
    """What is wrong with it, each damaged attribute named (at most about 500
    characters; values quoted in part)."""

    @property
    def run_id(self) -> str:
        """The run id its key names (not necessarily a run id at all)."""
        return self.sk.removeprefix("RUN#")

    def as_dict(self) -> dict[str, Any]:
        """The shape the CLI's JSON gives it: ``{"job", "run_id", "damaged": {"sk",
        "problem"}}`` (a run record's has no ``damaged``)."""
        return {"job": self.job, "run_id": self.run_id,
                "damaged": {"sk": self.sk, "problem": self.problem}}

    def __str__(self) -> str:
        return f"{self.sk}: {self.problem}"


@dataclass(frozen=True)
class RunLog:
    """A stretch of a job's run log, as read (``DynamoJobStore.runs_between``)."""

    records: tuple[RunRecord, ...]
    """The run records, oldest run id first."""
    damaged: tuple[DamagedRun, ...] = ()
    """Rows under the run prefix that are not run records (damaged, or written by
    something else): shown, never silently dropped."""
    truncated: bool = False
    """More records than the reader's bound: the oldest ones are here, the rest not."""

    @property
    def unreadable(self) -> tuple[str, ...]:
        """Each damaged row as ``<sort key>: <problem>``."""
        return tuple(str(d) for d in self.damaged)
