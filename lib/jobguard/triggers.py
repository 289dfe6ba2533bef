"""Triggers: every way a run can be requested, parsed into one stable identity.

A trigger's id never depends on the delivery: for a tick it is the job plus the
scheduled time, so two Scheduler registrations firing the same tick, an EventBridge
rule firing the same minute, and three redeliveries of one tick are all one trigger.

Accepted events (``events/`` holds a sample of each):

- EventBridge Scheduler input ``{"job": "crm-sync", "scheduled_at":
  "<aws.scheduler.scheduled-time>", "execution_id": "<aws.scheduler.execution-id>"}``
  (the stack writes this input; the execution id is kept as the run's ``delivery_id``);
- an EventBridge rule's ``Scheduled Event`` (``detail-type``, ``time``);
- a manual invoke ``{"job": "crm-sync", "manual": true, "requested_by": "alice"}``,
  optionally with its own ``trigger_id`` (otherwise the Lambda request id, which
  async retries keep);
- a continuation ``{"job": "crm-sync", "continues": "<run id>", "link": 2}``, sent
  asynchronously by a run of the job to its own function (never by hand: it runs only
  from the hand-off its run left on the lease row);
- SQS messages from the job's trigger queue carrying a queued trigger or a coalesced
  follow-up (written only by jobguard itself).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from .config import JOB_NAME_PATTERN, OverlapPolicy
from .errors import InvalidTriggerError, NewerMessageError

__all__ = ["Trigger", "TriggerKind", "check_sqs_event", "format_instant", "parse_event",
           "parse_queue_message"]

_PLACEHOLDER = "<aws.scheduler."
QUEUE_MESSAGE_VERSION = 1
"""The ``jobguard`` version of the trigger-queue messages this jobguard writes and reads."""
_TRIGGER_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/+=-]{0,127}$")
# What follows "<job>@" in an id jobguard wrote: "manual:" or "follow-up:" + up to 128.
_WRITTEN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/+=-]{0,159}$")
DELIVERY_ID_CHARS = 128
"""The longest delivery id taken (a Scheduler execution id or an event id is 16-36)."""


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
    CONTINUATION = "continuation"
    """The next link of a chain: a run that stopped for time with records left handed
    the job on (``JobConfig.max_chain``); invoked asynchronously by that run."""


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
    """The id its sender gave the delivery, as the event carries it: EventBridge
    Scheduler's execution id (a tick's ``execution_id``, the stack's schedule input
    fills it in) or a rule event's ``id``; kept when a tick waits on the trigger queue.
    Recorded on the run record (``delivery_id``) so an operator can tell a delivery
    the sender made from a hand-made event (which usually carries none); never part of
    the identity. None for manual, follow-up and recovery runs."""
    continues: str | None = None
    """A continuation: the run id of the link before it."""
    link: int = 1
    """A continuation: its place in the chain (the run that started it is link 1)."""

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


def continuation_trigger_id(job: str, previous_run_id: str, link: int) -> str:
    """The next link's trigger id: the run before it and its place in the chain, so an
    event naming another place never matches the hand-off (``max_chain`` holds)."""
    return f"{job}@continue:{previous_run_id}:{link}"


MAX_CHAIN = 100
"""The longest chain ``JobConfig.max_chain`` allows (100 links of 15 minutes: 25 hours)."""


def continuation_event(job: str, previous_run_id: str, link: int) -> dict[str, Any]:
    """The event a link sends its own function to start the next link."""
    return {"job": job, "continues": previous_run_id, "link": link}


def _link(field: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 2 <= value <= MAX_CHAIN:
        raise InvalidTriggerError(field, f"must be a whole number 2-{MAX_CHAIN}, got {value!r}")
    return value


# Each event shape: field -> (check, required). Validation is a few lines of plain
# Python on purpose: it runs on every cold start, and a validation library's import
# would cost more than everything else jobguard imports (measured in bench/).
_Check = Callable[[str, Any], Any]


def _instant(field: str, value: Any) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        if _PLACEHOLDER in value:
            raise InvalidTriggerError(
                field,
                f"the Scheduler placeholder {value!r} was not filled in; the event must come "
                "from EventBridge Scheduler, or carry a real ISO-8601 time with a timezone",
            )
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidTriggerError(
                field, f"{value!r} is not an ISO-8601 time (e.g. 2026-11-29T07:35:00Z)"
            ) from None
    else:
        raise InvalidTriggerError(field, f"must be an ISO-8601 string, got {type(value).__name__}")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise InvalidTriggerError(
            field, "must include a timezone (e.g. 2026-11-29T07:35:00Z); naive times are refused"
        )
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise InvalidTriggerError(field, f"{value!r} is out of range in UTC") from None


def _text(max_length: int, pattern: re.Pattern[str] | None = None, what: str = "") -> _Check:
    def check(field: str, value: Any) -> str:
        if not isinstance(value, str):
            raise InvalidTriggerError(field, f"must be a string, got {type(value).__name__}")
        text = value.strip()
        if _PLACEHOLDER in text:
            raise InvalidTriggerError(field, f"the placeholder {text!r} was not filled in")
        if not text or len(text) > max_length:
            raise InvalidTriggerError(field, f"must be 1-{max_length} characters")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidTriggerError(field, "holds a lone UTF-16 surrogate (a broken \\u "
                                      "escape): not text DynamoDB can store") from None
        if pattern is not None and not pattern.fullmatch(text):
            raise InvalidTriggerError(field, f"{text!r} is not {what}")
        return text

    return check


_DELIVERY_TEXT = _text(DELIVERY_ID_CHARS)


def _delivery_id(field: str, value: Any) -> str:
    """A delivery id as text: 1-``DELIVERY_ID_CHARS`` printable characters (no control,
    format or bidirectional-override character: it is shown to operators), filled in."""
    text = str(_DELIVERY_TEXT(field, value))
    if not text.isprintable():
        bad = next(c for c in text if not c.isprintable())
        raise InvalidTriggerError(
            field, f"holds the unprintable character U+{ord(bad):04X}: a delivery id "
            "from EventBridge is printable text")
    return text


def _literal(*allowed: Any) -> _Check:
    def check(field: str, value: Any) -> Any:
        if not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
            raise InvalidTriggerError(field, f"must be one of {list(allowed)!r}, got {value!r}")
        return value

    return check


def _anything(field: str, value: Any) -> Any:
    return value


_JOB = _text(64, JOB_NAME_PATTERN,
             "a job name: 1-64 letters, digits, '_', '.', '-' ('#' is the key delimiter)")
_SHAPES: dict[str, dict[str, tuple[_Check, bool]]] = {
    "tick": {"job": (_JOB, True), "scheduled_at": (_instant, True),
             "execution_id": (_delivery_id, False)},
    "rule": {"time": (_instant, True), "id": (_delivery_id, False), "job": (_JOB, False)},
    "manual": {"job": (_JOB, True), "manual": (_literal(True), True),
               "trigger_id": (_text(128, _TRIGGER_ID_PATTERN,
                                    "a trigger id: letters, digits and _.:@/+=-"), False),
               "requested_by": (_text(256), False)},
    "continuation": {"job": (_JOB, True),
                     "continues": (_text(64, _TRIGGER_ID_PATTERN, "a run id"), True),
                     "link": (_link, True)},
    "queue": {"jobguard": (_literal(QUEUE_MESSAGE_VERSION), True), "job": (_JOB, True),
              "trigger_id": (_text(512), True),
              "kind": (_literal("queued", "follow_up"), True),
              "scheduled_at": (_instant, False), "requested_by": (_text(256), False),
              "delivery_id": (_delivery_id, False), "event": (_anything, False)},
}


def _validate(shape: str, data: object, prefix: str = "") -> dict[str, Any]:
    """Check ``data`` against one event shape; the first problem names its field."""
    if not isinstance(data, dict):
        raise InvalidTriggerError(prefix.rstrip(".") or "event",
                                  f"must be a JSON object, got {type(data).__name__}")
    result: dict[str, Any] = {}
    for name, (check, required) in _SHAPES[shape].items():
        value = data.get(name)
        if value is None:
            if required:
                raise InvalidTriggerError(prefix + name, "is required")
            continue
        try:
            result[name] = check(name, value)
        except InvalidTriggerError as exc:
            raise InvalidTriggerError(prefix + exc.field, str(exc).split(": ", 1)[1]) from None
    return result


def _policy(event: dict[str, Any], configured: OverlapPolicy) -> None:
    raw = event.get("policy")
    if raw is None:
        return
    if not isinstance(raw, str) or raw.upper() not in OverlapPolicy.__members__:
        names = ", ".join(p.value for p in OverlapPolicy)
        raise InvalidTriggerError("policy", f"unknown policy {raw!r}; one of {names}")
    if OverlapPolicy(raw.upper()) is not configured:
        raise InvalidTriggerError(
            "policy",
            f"event says policy {raw.upper()} but the job is defined with "
            f"{configured.value}: the schedule and the code disagree",
        )


def _same_job(parsed_job: str | None, job: str) -> None:
    if parsed_job is not None and parsed_job != job:
        raise InvalidTriggerError(
            "job", f"event is for job {parsed_job!r} but this handler guards {job!r}"
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
    _policy(event, policy)
    if event.get("detail-type") is not None or event.get("source") == "aws.events":
        if event.get("detail-type") != "Scheduled Event":
            raise InvalidTriggerError(
                "detail-type",
                f"only 'Scheduled Event' is a trigger, got {event.get('detail-type')!r}",
            )
        rule = _validate("rule", event)
        _same_job(rule.get("job"), job)
        at: datetime = rule["time"].astimezone(UTC)
        return Trigger(job, tick_trigger_id(job, at), TriggerKind.RULE, scheduled_at=at,
                       delivery_id=rule.get("id"))
    if "continues" in event:
        cont = _validate("continuation", event)
        _same_job(cont["job"], job)
        return Trigger(job, continuation_trigger_id(job, cont["continues"], cont["link"]),
                       TriggerKind.CONTINUATION, continues=cont["continues"],
                       link=cont["link"])
    if "manual" in event:
        manual = _validate("manual", event)
        _same_job(manual["job"], job)
        suffix = manual.get("trigger_id") or request_id
        if suffix is None:
            raise InvalidTriggerError("trigger_id", "is required outside Lambda")
        return Trigger(job, f"{job}@manual:{suffix}", TriggerKind.MANUAL,
                       requested_by=manual.get("requested_by"))
    tick = _validate("tick", event)
    _same_job(tick["job"], job)
    at = tick["scheduled_at"].astimezone(UTC)
    return Trigger(job, tick_trigger_id(job, at), TriggerKind.TICK, scheduled_at=at,
                   delivery_id=tick.get("execution_id"))


def parse_queue_message(body: str, *, job: str) -> tuple[Trigger, object]:
    """Parse a trigger-queue message written by jobguard: the trigger and its event.

    Raises:
        NewerMessageError: a message of a newer jobguard (``body.jobguard`` above
            :data:`QUEUE_MESSAGE_VERSION`): a trigger, for a worker that reads it.
        InvalidTriggerError: naming the field (``body``, ``body.job``, ...), for a
            message that can never become a trigger of ``job``: the guard records it
            ``rejected`` and reports it processed (:mod:`jobguard.guard`).
    """
    import json

    try:
        data = json.loads(body)
    except (TypeError, ValueError) as exc:
        raise InvalidTriggerError("body", f"is not JSON: {exc}") from None
    except RecursionError:  # thousands of nested brackets: no message jobguard writes
        raise InvalidTriggerError("body", "is JSON nested too deeply to read") from None
    version = data.get("jobguard") if isinstance(data, dict) else None
    if type(version) is int and version > QUEUE_MESSAGE_VERSION:
        raise NewerMessageError(version, QUEUE_MESSAGE_VERSION)
    message = _validate("queue", data, "body.")
    if message["job"] != job:
        raise InvalidTriggerError(
            "body.job", f"message is for job {message['job']!r} but this handler guards {job!r}")
    # Only ids jobguard writes: "<job>@<time>", "<job>@manual:...", "<job>@follow-up:...".
    if not (message["trigger_id"].startswith(f"{job}@")
            and _WRITTEN_ID_PATTERN.fullmatch(message["trigger_id"].removeprefix(f"{job}@"))):
        raise InvalidTriggerError(
            "body.trigger_id", f"{message['trigger_id']!r} is not a trigger id of job {job!r} "
            "(<job>@...): the message was not written by jobguard for this job")
    scheduled = message.get("scheduled_at")
    trigger = Trigger(job, message["trigger_id"], TriggerKind(message["kind"]),
                      scheduled_at=scheduled.astimezone(UTC) if scheduled else None,
                      requested_by=message.get("requested_by"),
                      delivery_id=message.get("delivery_id"))
    return trigger, message.get("event")


_SQS_RECORD_FIELDS = ("messageId", "receiptHandle", "body")


def check_sqs_event(event: dict[str, Any]) -> None:
    """Refuse an SQS event whose envelope is not one from an event source mapping.

    Each message's body is checked later, one by one (:func:`parse_queue_message`); a
    bad body fails that message only.

    Raises:
        InvalidTriggerError: naming the field (``Records``, ``Records[0].body``, ...).
    """
    records = event.get("Records")
    if not isinstance(records, list) or not records:
        raise InvalidTriggerError("Records", "must be a non-empty list of SQS messages")
    for i, record in enumerate(records):
        where = f"Records[{i}]"
        if not isinstance(record, dict):
            raise InvalidTriggerError(where, f"must be an SQS message, got "
                                      f"{type(record).__name__}")
        if record.get("eventSource") != "aws:sqs":
            raise InvalidTriggerError(f"{where}.eventSource",
                                      f"must be 'aws:sqs', got {record.get('eventSource')!r}")
        for name in _SQS_RECORD_FIELDS:
            if not isinstance(record.get(name), str) or not record[name]:
                raise InvalidTriggerError(f"{where}.{name}", "must be a non-empty string")


def queue_message_body(trigger: Trigger, *, event: object = None) -> str:
    """The JSON body jobguard writes to the trigger queue for ``trigger``.

    ``event`` is the original invocation event, replayed to the handler when the queued
    trigger runs, so the handler sees the input it would have seen.
    """
    import json

    body: dict[str, Any] = {
        "event": event,
        "jobguard": QUEUE_MESSAGE_VERSION,
        "job": trigger.job,
        "trigger_id": trigger.trigger_id,
        "kind": trigger.kind.value,
        "scheduled_at": format_instant(trigger.scheduled_at) if trigger.scheduled_at else None,
        "requested_by": trigger.requested_by,
    }
    if trigger.delivery_id is not None:  # (a reader of version 1 without it ignores it)
        body["delivery_id"] = trigger.delivery_id
    return json.dumps(body, separators=(",", ":"))
