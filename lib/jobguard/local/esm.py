"""A local stand-in for a Lambda SQS event source mapping (FIFO, batch size 1).

Receives from a queue, hands the batch to a handler in the Lambda SQS event shape,
deletes what the handler did not report in ``batchItemFailures`` and leaves the rest
to come back after their visibility timeout, as the AWS mapping does.

Example:
    >>> delivered = deliver_once(sqs, queue_url, lambda_handler)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["deliver_once"]


def deliver_once(
    sqs: Any,
    queue_url: str,
    handler: Callable[[Any, Any], Any],
    *,
    context: Any = None,
    wait_s: int = 0,
    visibility_s: int = 30,
    times: int = 1,
) -> int:
    """Deliver at most one message. Returns the number of messages delivered.

    ``times`` > 1 hands the same message to the handler that many times before it is
    deleted: SQS's at-least-once delivery (a visibility timeout that ran out while the
    first delivery worked, a delete that was lost). It is deleted unless the last
    delivery reported it failed."""
    response = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=1,
        WaitTimeSeconds=wait_s,
        VisibilityTimeout=visibility_s,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    messages = response.get("Messages", [])
    if not messages:
        return 0
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    records = [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": {},
            "md5OfBody": m.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": arn,
            "awsRegion": arn.split(":")[3],
        }
        for m in messages
    ]
    for _ in range(max(1, times)):
        result = handler({"Records": records}, context) or {}
    failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
    for m in messages:
        if m["MessageId"] not in failed:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
    return len(messages)
