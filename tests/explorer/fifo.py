"""The job's SQS FIFO trigger queue, modelled on the explorer's clock.

moto's SQS runs on the real wall clock, so the explorer answers the library's SQS calls
itself (from a botocore ``before-call`` hook): visibility timeouts on the explorer's
clock, receive counts, a redrive to a dead-letter queue at ``max_receives``, FIFO group
order, and deduplication by ``MessageDeduplicationId`` for five minutes (even after a
delete, as on AWS).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

DEDUP_MS = 5 * 60 * 1000


@dataclass
class Message:
    seq: int
    body: str
    group: str
    dedup_id: str
    sent_ms: int
    visible_ms: int = 0
    receive_count: int = 0
    first_receive_ms: int | None = None
    """When it was first received (SQS's ``ApproximateFirstReceiveTimestamp``)."""
    receipt: str | None = None
    state: str = "queued"  # queued | inflight | deleted | dlq
    history: list[str] = field(default_factory=list)
    deferred_on: str | None = None
    """The run holding the lease when a delivery hid this message to wait for it."""
    deferred_by: object = None
    excused: bool = False
    """The deferring delivery met a fault: its wake-up may never have been left."""

    @property
    def message_id(self) -> str:
        return f"m{self.seq:04d}"

    def fields(self) -> dict[str, Any]:
        """Its body as a JSON object; ``{}`` for a body that is not one (a message that
        is no trigger: not JSON, a list, ...)."""
        import json

        try:
            body = json.loads(self.body)
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    def trigger_id(self) -> str:
        return str(self.fields().get("trigger_id", "?"))


class SqsError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class FifoQueue:
    """One FIFO queue and its DLQ. ``now_ms`` is read from the explorer's clock."""

    def __init__(self, url: str, *, visibility_s: int, max_receives: int) -> None:
        self.url = url
        self.visibility_ms = visibility_s * 1000
        self.max_receives = max_receives
        self.messages: list[Message] = []
        self.dlq: list[Message] = []
        self._dedup: dict[str, tuple[int, Message]] = {}
        self._receipts = 0

    # -- state ------------------------------------------------------------------------

    def _refresh(self, now_ms: int) -> None:
        for m in self.messages:
            if m.state == "inflight" and m.visible_ms <= now_ms:
                m.state = "queued"
                m.receipt = None

    def live(self) -> list[Message]:
        return [m for m in self.messages if m.state in ("queued", "inflight")]

    def next_visible(self, now_ms: int) -> Message | None:
        """The head of the first group whose head is visible (FIFO: an in-flight head
        blocks its group)."""
        self._refresh(now_ms)
        heads: dict[str, Message] = {}
        for m in self.messages:
            if m.state in ("queued", "inflight") and m.group not in heads:
                heads[m.group] = m
        for m in heads.values():
            if m.state == "queued" and m.visible_ms <= now_ms:
                return m
        return None

    def inflight(self, now_ms: int) -> list[Message]:
        self._refresh(now_ms)
        return [m for m in self.messages if m.state == "inflight"]

    # -- what the event source mapping does (not library calls) ----------------------------

    def receive(self, m: Message, now_ms: int) -> str | None:
        """Receive ``m``: a new receipt, or None when it went to the DLQ instead."""
        if m.receive_count >= self.max_receives:
            m.state = "dlq"
            m.receipt = None
            self.dlq.append(m)
            m.history.append(f"dlq@{now_ms}")
            return None
        m.receive_count += 1
        if m.first_receive_ms is None:
            m.first_receive_ms = now_ms
        m.deferred_on, m.deferred_by, m.excused = None, None, False
        self._receipts += 1
        m.receipt = f"rh-{m.message_id}-{self._receipts}"
        m.state = "inflight"
        m.visible_ms = now_ms + self.visibility_ms
        m.history.append(f"recv{m.receive_count}@{now_ms}")
        return m.receipt

    def delete_by_receipt(self, receipt: str) -> bool:
        for m in self.messages:
            if m.receipt == receipt and m.state == "inflight":
                m.state = "deleted"
                m.receipt = None
                return True
        return False

    def expire_visibility(self, m: Message, now_ms: int) -> None:
        m.visible_ms = now_ms
        m.state = "queued"
        m.receipt = None

    # -- the library's calls -------------------------------------------------------------

    def send(self, body: str, group: str, dedup_id: str, now_ms: int) -> Message:
        seen = self._dedup.get(dedup_id)
        if seen is not None and now_ms - seen[0] < DEDUP_MS:
            return seen[1]
        m = Message(len(self.messages) + 1, body, group, dedup_id, now_ms, visible_ms=now_ms)
        self.messages.append(m)
        self._dedup[dedup_id] = (now_ms, m)
        return m

    def change_visibility(self, receipt: str, seconds: int, now_ms: int) -> None:
        self._refresh(now_ms)
        for m in self.messages:
            if m.receipt == receipt:
                if m.state != "inflight":
                    break
                m.visible_ms = now_ms + seconds * 1000
                if seconds == 0:
                    m.state = "queued"
                    m.receipt = None
                return
        raise SqsError("ReceiptHandleIsInvalid", f"receipt {receipt} is not in flight")

    def answer(self, op: str, params: dict[str, Any], now_ms: int) -> dict[str, Any]:
        """The parsed response of one SQS call (raises :class:`SqsError`)."""
        if op == "SendMessage":
            body = params["MessageBody"]
            m = self.send(body, params.get("MessageGroupId", ""),
                          params.get("MessageDeduplicationId", ""), now_ms)
            return {"MessageId": m.message_id,
                    "MD5OfMessageBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324
                    "SequenceNumber": str(m.seq)}
        if op == "ChangeMessageVisibility":
            self.change_visibility(params["ReceiptHandle"], int(params["VisibilityTimeout"]),
                                   now_ms)
            return {}
        if op == "DeleteMessage":
            if not self.delete_by_receipt(params["ReceiptHandle"]):
                raise SqsError("ReceiptHandleIsInvalid", "receipt is not current")
            return {}
        if op == "GetQueueAttributes":
            self._refresh(now_ms)
            visible = sum(1 for m in self.messages if m.state == "queued")
            hidden = sum(1 for m in self.messages if m.state == "inflight")
            return {"Attributes": {"ApproximateNumberOfMessages": str(visible),
                                   "ApproximateNumberOfMessagesNotVisible": str(hidden),
                                   "QueueArn": "arn:aws:sqs:us-east-1:123456789012:triggers.fifo"}}
        raise SqsError("UnsupportedOperation", f"the explorer's queue does not model {op}")
