"""The job's SQS FIFO trigger queue: the only module that talks to SQS.

The queue only carries triggers; it never decides. Whether a queued trigger or a
follow-up may run is decided by its trigger item (``queued``), so SQS deduplication (five
minutes on AWS, different on emulators) is a saving, never a correctness requirement.
It must also never drop a message that is needed: a queued trigger's deduplication id is
its queue decision's (the trigger and the decision's run id), so a later decision of the
same trigger (after the first was taken back) is always delivered.
"""

from __future__ import annotations

import hashlib
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)

from .callsites import RETRY, SURFACE, Path, call_site
from .errors import SendError
from .triggers import Trigger, queue_message_body

__all__ = ["TriggerQueue"]

MAX_VISIBILITY_S = 43_200

SEND = call_site(
    "queue.send", "sqs", "SendMessage", "TriggerQueue.send",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="QUEUE: the decision is taken back and `StoreError` reaches its sender; COALESCE: "
         "the decision stands and the holder's release sends the follow-up; the SDK's resend "
         "keeps the deduplication id, and only a delivery finding the item queued runs",
    paths=(Path.QUEUE, Path.FOLLOW_UP),
)
DEFER = call_site(
    "queue.defer", "sqs", "ChangeMessageVisibility", "TriggerQueue.defer",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="the message is reported failed and comes back after its visibility timeout",
    paths=(Path.QUEUE,),
)
WAKE = call_site(
    "queue.wake", "sqs", "ChangeMessageVisibility", "TriggerQueue.wake",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="best effort: unwoken, the deferred message comes back by itself when the "
         "holder's lease would have ended",
    paths=(Path.QUEUE, Path.FOLLOW_UP),
)
DEPTH = call_site(
    "queue.depth", "sqs", "GetQueueAttributes", "TriggerQueue.depth",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read",
    paths=(Path.OPERATOR,),
)


class TriggerQueue:
    """Send, defer and wake trigger messages on one FIFO queue (group = job).

    Example:
        >>> queue = TriggerQueue(url, client=boto3.client("sqs"))  # doctest: +SKIP
        >>> queue.send(trigger, event={"job": "crm-sync"})  # doctest: +SKIP
    """

    def __init__(self, url: str, *, client: Any) -> None:
        self.url = url
        self._client = client

    def send(self, trigger: Trigger, *, event: object = None,
             decision: str | None = None) -> None:
        body = queue_message_body(trigger, event=event)
        # One deduplication id per queue decision (its run id): a resend of the same
        # decision is dropped, a message of a later decision of the trigger never is (SQS
        # keeps an id 5 minutes, even after its message was deleted).
        dedup = trigger.trigger_id if decision is None else f"{trigger.trigger_id}#{decision}"
        try:
            self._client.send_message(
                QueueUrl=self.url,
                MessageBody=body,
                MessageGroupId=trigger.job,
                MessageDeduplicationId=hashlib.sha256(dedup.encode()).hexdigest(),
            )
        except ClientError as exc:
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            raise SendError(trigger.job, str(exc), maybe_applied=status >= 500) from exc
        except (EndpointConnectionError, ConnectTimeoutError) as exc:
            raise SendError(trigger.job, str(exc), maybe_applied=False) from exc
        except BotoCoreError as exc:  # read timeout, connection closed: it may have landed
            raise SendError(trigger.job, str(exc), maybe_applied=True) from exc

    def defer(self, receipt: str, seconds: int) -> None:
        """Keep a delivered message invisible for ``seconds`` (0 = visible now)."""
        self._client.change_message_visibility(
            QueueUrl=self.url,
            ReceiptHandle=receipt,
            VisibilityTimeout=max(0, min(int(seconds), MAX_VISIBILITY_S)),
        )

    def wake(self, receipt: str) -> bool:
        """Best effort: make a deferred message visible now. False if it is gone."""
        try:
            self._client.change_message_visibility(
                QueueUrl=self.url, ReceiptHandle=receipt, VisibilityTimeout=0)
        except (ClientError, BotoCoreError):
            return False  # deleted, or no longer in flight: it will come back on its own
        return True

    def depth(self) -> int:
        attributes = self._client.get_queue_attributes(
            QueueUrl=self.url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes.get("ApproximateNumberOfMessages", 0)) + int(
            attributes.get("ApproximateNumberOfMessagesNotVisible", 0)
        )
