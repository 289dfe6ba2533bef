"""A trigger-queue message that can never become a trigger: its run-log record (private).

Only jobguard writes a job's trigger queue, but a queue takes whatever anyone with
``sqs:SendMessage`` sends: a hand-made test message, another job's message on a shared
URL, a message from a jobguard too old or too new to read. Such a message is not a
trigger, and redelivering it changes nothing: each delivery is refused the same way,
and until SQS moves it to the dead-letter queue (the whole redrive budget, each receive
a visibility timeout long) every queued trigger behind it in its FIFO group waits. So
the guard records it ``rejected`` and reports it processed: SQS deletes it.

The record is one conditional ``PutItem`` keyed on the message: its run id is made
from the message's first receive time and its message id (:func:`jobguard.ids.keyed_run_id`),
so a redelivery (the first attempt's write failed, or its worker died after writing)
never writes a second record. Everything on it from the message is bounded and escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._bounds import bounded_extra, bounded_text
from ._redact import Redactor, redacted
from .errors import InvalidTriggerError
from .ids import keyed_run_id
from .records import Decision, RunRecord, RunStatus

__all__ = ["EXCERPT_BYTES", "EXCERPT_CHARS", "REJECTED_KIND", "rejected_record",
           "rejected_trigger_id"]

REJECTED_KIND = "message"
"""The trigger kind on a rejected message's record: it never became a trigger."""
EXCERPT_CHARS = 200
"""How much of the body the record keeps (characters, before escaping)."""
EXCERPT_BYTES = 512
"""The escaped excerpt's bound in UTF-8 bytes."""
_MESSAGE_ID_BYTES = 128
_FIRST_RECEIVE = "ApproximateFirstReceiveTimestamp"
_SENT = "SentTimestamp"


def rejected_trigger_id(job: str, message_id: str) -> str:
    """The trigger id a rejected message is recorded under: ``<job>@message:<id>``."""
    return f"{job}@message:{_safe(message_id, _MESSAGE_ID_BYTES)}"


def rejected_record(*, job: str, policy: str, owner: str, message_id: str, body: str,
                    attributes: Mapping[str, Any] | None, error: InvalidTriggerError,
                    now_ms: int, redact: Redactor | None = None) -> RunRecord:
    """The run record of a trigger-queue message refused with ``error``.

    It starts when the message was first received (SQS's
    ``ApproximateFirstReceiveTimestamp``, the same on every redelivery; else its
    ``SentTimestamp``; else ``now_ms``) and ends ``now_ms``. It names the message id, the
    field and the reason, the sender's id, the body's size and an excerpt of the body:
    its first :data:`EXCERPT_CHARS` characters with every character that is not
    printable (controls, bidirectional overrides, a lone surrogate) written as a Python
    escape, at most :data:`EXCERPT_BYTES` bytes. The reason and the body pass through
    the job's ``redact`` first (:mod:`jobguard._redact`).

    Example:
        >>> from jobguard.errors import InvalidTriggerError
        >>> record = rejected_record(
        ...     job="crm-sync", policy="QUEUE", owner="fn/1", message_id="m-1",
        ...     body="{job: crm-sync", attributes={"ApproximateFirstReceiveTimestamp":
        ...     "1764400000000"}, error=InvalidTriggerError("body", "is not JSON"),
        ...     now_ms=1_764_400_000_250)
        >>> record.status.value, record.trigger_id, record.extra["field"]
        ('rejected', 'crm-sync@message:m-1', 'body')
    """
    attributes = attributes or {}
    first_ms = _natural(attributes.get(_FIRST_RECEIVE)) or _natural(
        attributes.get(_SENT)) or now_ms
    extra: dict[str, Any] = {
        "message_id": _safe(message_id, _MESSAGE_ID_BYTES),
        "field": _safe(error.field, 256),
        "body_bytes": len(body.encode("utf-8", "surrogatepass")),
        "excerpt": excerpt(redacted(body, redact) or ""),
    }
    sender = attributes.get("SenderId")
    if isinstance(sender, str) and sender:
        extra["sender_id"] = _safe(sender, 256)
    receives = _natural(attributes.get("ApproximateReceiveCount"))
    if receives is not None:
        extra["receive_count"] = receives
    return RunRecord(
        job=job,
        # keyed on the job too: one queue's message is one record per job it reached
        run_id=keyed_run_id(first_ms, f"{job}\n{message_id}"),
        trigger_id=rejected_trigger_id(job, message_id),
        trigger_kind=REJECTED_KIND,
        policy=policy,
        decision=Decision.REJECTED,
        status=RunStatus.REJECTED,
        started_at_ms=first_ms,
        ended_at_ms=max(first_ms, now_ms),
        owner=owner,
        error=_safe(redacted(str(error), redact) or "", 1000),
        detail="not a trigger of this job: recorded and deleted from the trigger queue "
               "(never redelivered); nothing ran",
        extra=bounded_extra(extra),
    )


def excerpt(body: str) -> str:
    """The first :data:`EXCERPT_CHARS` characters of ``body``, escaped (``repr``'s
    escapes without its quotes) and bounded to :data:`EXCERPT_BYTES` bytes.

    Example:
        >>> excerpt("a\\x1b[2Jb\\u202e")
        'a\\\\x1b[2Jb\\\\u202e'
    """
    head = body[:EXCERPT_CHARS]
    text = repr(head)[1:-1]
    if len(body) > EXCERPT_CHARS:
        text += "..."
    return _safe(text, EXCERPT_BYTES)


def _safe(text: str, limit: int) -> str:
    """``text`` with lone surrogates escaped (DynamoDB stores only UTF-8), bounded."""
    clean = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return bounded_text(clean, limit) or ""


def _natural(value: Any) -> int | None:
    """An SQS attribute holding a non-negative integer (a time in ms, a count), else None."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 16:
        return int(value)
    return None
