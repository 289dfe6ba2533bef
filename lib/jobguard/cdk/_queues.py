"""Queues as jobguard uses them: encrypted (SSE-SQS, or a customer-managed KMS key), TLS
only, 14 days of retention.

Retention is the maximum because a pending trigger's mark stays on the lease row until
its message runs: a message SQS dropped early would leave a queued mark behind.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from ._lint import acknowledge

RETENTION = Duration.days(14)


def secure_queue(
    scope: Construct,
    construct_id: str,
    *,
    fifo: bool,
    visibility_timeout: Duration | None = None,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
    encryption_key: kms.IKey | None = None,
) -> sqs.Queue:
    queue = sqs.Queue(
        scope, construct_id,
        fifo=fifo or None,
        content_based_deduplication=False if fifo else None,
        visibility_timeout=visibility_timeout,
        retention_period=RETENTION,
        encryption=(sqs.QueueEncryption.KMS if encryption_key is not None
                    else sqs.QueueEncryption.SQS_MANAGED),
        encryption_master_key=encryption_key,
        enforce_ssl=True,
        dead_letter_queue=dead_letter_queue,
    )
    acknowledge(queue, "CKV_AWS_27",
                "encrypted at rest with SSE-SQS (SqsManagedSseEnabled); checkov counts only a "
                "KMS key. The messages are trigger ids and times, no business data")
    return queue


def dead_letter_queue(scope: Construct, construct_id: str, *, fifo: bool, holds: str,
                      for_queue: bool, of: str = "an EventBridge Scheduler schedule",
                      encryption_key: kms.IKey | None = None) -> sqs.Queue:
    """A dead-letter queue. ``holds`` says what lands in it; ``of`` whose it is.

    A queue's DLQ satisfies cdk-nag's SQS3 (it is used as a DLQ); a DLQ that only a
    schedule (or a function's on-failure destination) points at does not look like one
    to cdk-nag, so it is acknowledged here.
    """
    queue = secure_queue(scope, construct_id, fifo=fifo, encryption_key=encryption_key)
    if not for_queue:
        Validations.of(queue).acknowledge(Acknowledgment(
            id="AwsSolutions-SQS3",
            reason=f"This queue is the dead-letter queue of {of} ({holds}); cdk-nag only "
                   "recognizes DLQs of other queues, and a DLQ of a DLQ would only hide "
                   "messages further. Its depth is alarmed.",
        ))
    return queue
