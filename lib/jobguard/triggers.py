"""Triggers: every way a run can be requested, parsed into one stable identity.

A trigger's id never depends on the delivery: for a tick it is the job plus the
scheduled time, so two Scheduler registrations firing the same tick, an EventBridge
rule firing the same minute, and three redeliveries of one tick are all one trigger.

Accepted events (``events/`` holds a sample of each):

- EventBridge Scheduler input ``{"job": "crm-sync", "scheduled_at":
  "<aws.scheduler.scheduled-time>"}`` (the stack writes this input);
- an EventBridge rule's ``Scheduled Event`` (``detail-type``, ``time``);
- a manual invoke ``{"job": "crm-sync", "manual": true, "requested_by": "alice"}``,
  optionally with its own ``trigger_id`` (otherwise the Lambda request id, which
  async retries keep);
- SQS messages from the job's trigger queue carrying a queued trigger or a coalesced
  follow-up (written only by jobguard itself).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, ValidationError, field_validator

from .config import JOB_NAME_PATTERN, OverlapPolicy
from .errors import InvalidTriggerError

__all__ = ["Trigger", "TriggerKind", "format_instant", "parse_event", "parse_queue_message"]

_PLACEHOLDER = "<aws.scheduler."
_TRIGGER_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/+=-]{0,127}$")


class TriggerKind(StrEnum):
    """Where a trigger came from."""

    TICK = "tick"
    """An EventBridge Scheduler schedule fired."""
    RULE = "rule"
    """An EventBridge rule's ``Scheduled Event`` fired."""
    MANUAL = "manual"
    """Someone invoked the function by hand."""
    QUEUED = "queued"
    """A trigger that waited in the job's queue (``QUEUE`` policy)."""
    FOLLOW_UP = "follow_up"
    """The one follow-up run of coalesced triggers (``COALESCE`` policy)."""
    RECOVERY = "recovery"
    """A recovery run."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """One request to run a job, with an identity stable across deliveries."""

    job: str
    trigger_id: str
    kind: TriggerKind
    scheduled_at: datetime | None = None
    """The tick's scheduled time (ticks and rules; carried by queued triggers)."""
    requested_by: str | None = None
    delivery_id: str | None = None
    """The delivery's own id (Scheduler execution id, event id, SQS message id): for
    logs only, never part of the identity."""

    @property
    def is_from_queue(self) -> bool:
        return self.kind in (TriggerKind.QUEUED, TriggerKind.FOLLOW_UP)


def format_instant(at: datetime) -> str:
    """UTC ISO-8601 with ``Z``; milliseconds only when present."""
    at = at.astimezone(UTC)
    if at.microsecond:
        return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def tick_trigger_id(job: str, scheduled_at: datetime) -> str:
    return f"{job}@{format_instant(scheduled_at)}"


def follow_up_trigger_id(job: str, holder_run_id: str) -> str:
    return f"{job}@follow-up:{holder_run_id}"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, str_strip_whitespace=True)

    @field_validator("job", check_fields=False)
    @classmethod
    def _job_name(cls, value: str) -> str:
        if not JOB_NAME_PATTERN.fullmatch(value):
            raise ValueError(
                "must be 1-64 letters, digits, '_', '.', '-' ('#' is the key delimiter)"
            )
        return value


def _no_placeholder(value: Any) -> Any:
    if isinstance(value, str) and _PLACEHOLDER in value:
        raise ValueError(
            f"the Scheduler placeholder {value!r} was not filled in; the event must come "
            "from EventBridge Scheduler, or carry a real ISO-8601 time with a timezone"
        )
    return value


class _SchedulerInput(_Model):
    job: str
    scheduled_at: AwareDatetime
    execution_id: str | None = None
    policy: OverlapPolicy | None = None

    _placeholder = field_validator("scheduled_at", "execution_id", mode="before")(
        classmethod(lambda cls, v: _no_placeholder(v))
    )


class _RuleEvent(_Model):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    detail_type: Literal["Scheduled Event"] = "Scheduled Event"
    time: AwareDatetime
    id: str | None = None
    job: str | None = None


class _ManualInput(_Model):
    job: str
    manual: Literal[True]
    trigger_id: str | None = None
    requested_by: str | None = None
    policy: OverlapPolicy | None = None

    @field_validator("trigger_id")
    @classmethod
    def _trigger_id(cls, value: str | None) -> str | None:
        if value is not None and not _TRIGGER_ID_PATTERN.fullmatch(value):
            raise ValueError("must be 1-128 characters of letters, digits and _.:@/+=-")
        return value


class _QueueMessage(_Model):
    jobguard: Literal[1]
    job: str
    trigger_id: str
    kind: Literal["queued", "follow_up"]
    scheduled_at: AwareDatetime | None = None
    requested_by: str | None = None
    event: Any = None


def _invalid(exc: ValidationError, prefix: str = "") -> InvalidTriggerError:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "event"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "timezone_aware":
        message = "must include a timezone (e.g. 2026-11-29T07:35:00Z); naive times are refused"
    elif error["type"] == "missing":
        message = "is required"
    return InvalidTriggerError(prefix + field, message)


def _check_job(parsed_job: str | None, job: str, policy: OverlapPolicy | None,
               configured: OverlapPolicy) -> None:
    if parsed_job is not None and parsed_job != job:
        raise InvalidTriggerError(
            "job", f"event is for job {parsed_job!r} but this handler guards {job!r}"
        )
    if policy is not None and policy is not configured:
        raise InvalidTriggerError(
            "policy",
            f"event says policy {policy.value} but job {job!r} is defined with "
            f"{configured.value}: the schedule and the code disagree",
        )


def parse_event(
    event: object, *, job: str, policy: OverlapPolicy, request_id: str | None = None
) -> Trigger:
    """Parse a direct invocation event into a :class:`Trigger`.

    Raises:
        InvalidTriggerError: naming the field, for anything that is not a trigger of
            ``job``. Nothing has been written when it is raised.

    Example:
        >>> t = parse_event({"job": "crm-sync", "scheduled_at": "2026-11-29T07:35:00Z"},
        ...                 job="crm-sync", policy=OverlapPolicy.SKIP)
        >>> t.trigger_id
        'crm-sync@2026-11-29T07:35:00Z'
    """
    if not isinstance(event, dict):
        raise InvalidTriggerError(
            "event", f"must be a JSON object, got {type(event).__name__}"
        )
    if "policy" in event and event["policy"] is not None:
        raw = event["policy"]
        if not isinstance(raw, str) or raw.upper() not in OverlapPolicy.__members__:
            names = ", ".join(p.value for p in OverlapPolicy)
            raise InvalidTriggerError("policy", f"unknown policy {raw!r}; one of {names}")
    try:
        if event.get("detail-type") is not None or event.get("source") == "aws.events":
            if event.get("detail-type") != "Scheduled Event":
                raise InvalidTriggerError(
                    "detail-type",
                    f"only 'Scheduled Event' is a trigger, got {event.get('detail-type')!r}",
                )
            rule = _RuleEvent.model_validate(event)
            _check_job(rule.job, job, None, policy)
            return Trigger(job, tick_trigger_id(job, rule.time), TriggerKind.RULE,
                           scheduled_at=rule.time.astimezone(UTC), delivery_id=rule.id)
        if "manual" in event:
            manual = _ManualInput.model_validate(event)
            _check_job(manual.job, job, manual.policy, policy)
            suffix = manual.trigger_id or request_id
            if suffix is None:
                raise InvalidTriggerError("trigger_id", "is required outside Lambda")
            return Trigger(job, f"{job}@manual:{suffix}", TriggerKind.MANUAL,
                           requested_by=manual.requested_by, delivery_id=request_id)
        if "job" not in event:
            raise InvalidTriggerError("job", "is required")
        tick = _SchedulerInput.model_validate(event)
        _check_job(tick.job, job, tick.policy, policy)
        return Trigger(job, tick_trigger_id(job, tick.scheduled_at), TriggerKind.TICK,
                       scheduled_at=tick.scheduled_at.astimezone(UTC),
                       delivery_id=tick.execution_id or request_id)
    except ValidationError as exc:
        raise _invalid(exc) from None


def parse_queue_message(body: str, *, job: str) -> tuple[Trigger, object]:
    """Parse a trigger-queue message written by jobguard: the trigger and its event."""
    import json

    try:
        data = json.loads(body)
    except (TypeError, ValueError) as exc:
        raise InvalidTriggerError("body", f"is not JSON: {exc}") from None
    try:
        message = _QueueMessage.model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc, "body.") from None
    _check_job(message.job, job, None, OverlapPolicy.SKIP)
    trigger = Trigger(job, message.trigger_id, TriggerKind(message.kind),
                      scheduled_at=message.scheduled_at, requested_by=message.requested_by)
    return trigger, message.event


def queue_message_body(trigger: Trigger, *, event: object = None) -> str:
    """The JSON body jobguard writes to the trigger queue for ``trigger``.

    ``event`` is the original invocation event, replayed to the handler when the queued
    trigger runs, so the handler sees the input it would have seen.
    """
    import json

    return json.dumps({
        "event": event,
        "jobguard": 1,
        "job": trigger.job,
        "trigger_id": trigger.trigger_id,
        "kind": trigger.kind.value,
        "scheduled_at": format_instant(trigger.scheduled_at) if trigger.scheduled_at else None,
        "requested_by": trigger.requested_by,
    }, separators=(",", ":"))
