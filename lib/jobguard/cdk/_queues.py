"""Queues as jobguard uses them: encrypted (SSE-SQS, or a customer-managed KMS key), TLS
only, 14 days of retention, kept when the stack is deleted.

Retention is the maximum because a pending trigger's mark stays on the lease row until
its message runs: a message SQS dropped early would leave a queued mark behind.

Every queue is kept (``RemovalPolicy.RETAIN``), as the table is: a trigger queue holds
triggers whose marks are on the table's lease rows, a dead-letter or failed-ticks queue
holds the only copy of a tick or trigger waiting to be replayed. Deleting the stack must
not delete them; delete a queue yourself once it is empty. An empty queue costs nothing.
"""

from __future__ import annotations

import jsii
from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
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
        removal_policy=RemovalPolicy.RETAIN,
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


FAILED_EVENT_ACTIONS = ("sqs:SendMessage",)
"""All Lambda needs, with the function's role, to put a failed asynchronous event on the
function's failed-ticks (or failed-sweeps) queue. CDK's ``SqsDestination`` grants
``grant_send_messages`` (``GetQueueAttributes`` and ``GetQueueUrl`` too): no jobguard
code reads that queue, so :class:`SendOnlyDestination` grants this alone."""


@jsii.implements(lambda_.IDestination)
class SendOnlyDestination:
    """An on-failure destination on ``queue`` whose grant is ``sqs:SendMessage`` on that
    queue (and the queue's KMS key, to encrypt the message), nothing else."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self.queue = queue

    def bind(self, scope: Construct, fn: lambda_.IFunction, *,
             type: lambda_.DestinationType | None = None) -> lambda_.DestinationConfig:  # noqa: A002 - jsii's name
        iam.Grant.add_to_principal(grantee=fn, actions=list(FAILED_EVENT_ACTIONS),
                                   resource_arns=[self.queue.queue_arn])
        if self.queue.encryption_master_key is not None:
            self.queue.encryption_master_key.grant_encrypt_decrypt(fn)
        return lambda_.DestinationConfig(destination=self.queue.queue_arn)
