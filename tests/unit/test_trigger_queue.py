"""The trigger queue against the in-process emulator's SQS FIFO queue (no server).

GIVEN a job's FIFO trigger queue, WHEN jobguard sends, defers, wakes or counts trigger
messages, THEN the queue holds what the consumer needs: one message per trigger (in the
job's group, deduplicated across senders), a failed send says whether the message may
have landed, a deferred message comes back when asked, and the depth counts messages in
flight too. These close the gaps ``make mutate`` found in ``jobguard.triggerqueue``
(docs/mutation.md): no fast test read a message back or called ``depth``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobguard._clients import client
from jobguard.callsites import Fault
from jobguard.errors import SendError
from jobguard.faults import Faults, Rule
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import Trigger, TriggerKind, parse_queue_message

JOB = "queue-job"
AT = datetime(2026, 11, 29, 7, 35, tzinfo=UTC)


def queued(n: int, job: str = JOB) -> Trigger:
    return Trigger(job, f"{job}@manual:{n}", TriggerKind.QUEUED, requested_by=f"user-{n}")


def receive(aws: Any, url: str, n: int = 10) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = aws.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=n, MessageSystemAttributeNames=["All"],
    ).get("Messages", [])
    return messages


def test_a_sent_trigger_is_one_message_in_the_jobs_group_carrying_trigger_and_event(aws):
    """GIVEN a job's FIFO queue WHEN a queued tick is sent with its original event THEN
    the queue holds one message, in the job's message group, whose body the consumer
    parses back into the same trigger and event."""
    url = aws.fifo_queue(JOB)
    tick = Trigger(JOB, f"{JOB}@2026-11-29T07:35:00Z", TriggerKind.QUEUED, scheduled_at=AT,
                   requested_by="scheduler")
    TriggerQueue(url, client=aws.sqs).send(tick, event={"job": JOB, "page": 3})

    [message] = receive(aws, url)
    assert message["Attributes"]["MessageGroupId"] == JOB
    trigger, event = parse_queue_message(message["Body"], job=JOB)
    assert (trigger.trigger_id, trigger.kind, trigger.scheduled_at, trigger.requested_by) == (
        tick.trigger_id, TriggerKind.QUEUED, AT, "scheduler")
    assert event == {"job": JOB, "page": 3}


def test_resends_of_one_trigger_from_two_workers_are_one_message_and_triggers_keep_order(aws):
    """GIVEN two workers with their own queue clients WHEN both send trigger 1 (a retry
    resending it) and then trigger 2 is sent THEN the queue holds two messages, trigger 1
    first: the deduplication id is the trigger's, not the sender's or the send's."""
    url = aws.fifo_queue(JOB)
    TriggerQueue(url, client=aws.sqs).send(queued(1))
    TriggerQueue(url, client=aws.sqs).send(queued(1))
    TriggerQueue(url, client=aws.sqs).send(queued(2))

    bodies = [parse_queue_message(m["Body"], job=JOB)[0].trigger_id for m in receive(aws, url)]
    assert bodies == [queued(1).trigger_id, queued(2).trigger_id]


@pytest.mark.parametrize(("fault", "maybe_applied", "on_queue", "cause"), [
    pytest.param(Fault.THROTTLE, False, 0, "(RequestThrottled)", id="throttled: never applied"),
    pytest.param(Fault.TIMEOUT, False, 0, "Connect timeout", id="connect timeout: never sent"),
    pytest.param(Fault.SERVER_ERROR, True, 0, "(InternalFailure)",
                 id="5xx: may have been applied"),
    pytest.param(Fault.LOST, True, 1, "Read timeout", id="lost response: it landed"),
])
def test_a_failed_send_says_whether_the_message_may_be_on_the_queue(
        aws, fault, maybe_applied, on_queue, cause):
    """GIVEN every attempt of SendMessage fails with ``fault`` WHEN a trigger is sent THEN
    a SendError names the job and the SDK's error, and says ``maybe_applied`` exactly
    when the queue may hold the message (QUEUE undoes its decision only when it surely
    does not)."""
    url = aws.fifo_queue(JOB)
    sqs = client("sqs")  # the client a Lambda's guard builds: standard retries, 3 attempts
    queue = TriggerQueue(url, client=sqs)
    rule = Rule(fault, operation="SendMessage", attempts=99)
    with Faults([rule], backoff_scale=0.001, clients=[sqs]), \
            pytest.raises(SendError) as caught:
        queue.send(queued(1))

    assert (caught.value.operation, caught.value.job) == ("send_trigger", JOB)
    assert caught.value.maybe_applied is maybe_applied
    assert str(caught.value).startswith(f"send_trigger for job {JOB!r}: ")
    assert cause in str(caught.value)
    assert len(receive(aws, url)) == on_queue


def test_a_message_deferred_for_zero_seconds_is_visible_at_once(aws):
    """GIVEN a delivered trigger message (in flight) WHEN it is deferred for 0 s (its
    holder is already gone) THEN the next receive gets it again; deferred for 30 s it
    stays hidden."""
    url = aws.fifo_queue(JOB)
    queue = TriggerQueue(url, client=aws.sqs)
    queue.send(queued(1))
    [first] = receive(aws, url)

    queue.defer(first["ReceiptHandle"], 0)
    [again] = receive(aws, url)
    assert again["MessageId"] == first["MessageId"]

    queue.defer(again["ReceiptHandle"], 30)
    assert receive(aws, url) == []


def test_wake_makes_a_deferred_message_visible_and_says_false_once_it_is_gone(aws):
    """GIVEN a deferred trigger message WHEN the holder's release wakes it THEN wake says
    True and the message is delivered at once; GIVEN the message was deleted (it ran)
    THEN wake says False and raises nothing (best effort)."""
    url = aws.fifo_queue(JOB)
    queue = TriggerQueue(url, client=aws.sqs)
    queue.send(queued(1))
    [message] = receive(aws, url)
    queue.defer(message["ReceiptHandle"], 600)

    assert queue.wake(message["ReceiptHandle"]) is True
    [woken] = receive(aws, url)
    assert woken["MessageId"] == message["MessageId"]

    aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=woken["ReceiptHandle"])
    assert queue.wake(woken["ReceiptHandle"]) is False


def test_depth_counts_waiting_and_in_flight_messages(aws):
    """GIVEN an empty queue THEN its depth is 0; GIVEN three queued triggers, one of them
    delivered and in flight THEN the depth is 3 (the one running still counts)."""
    url = aws.fifo_queue(JOB)
    queue = TriggerQueue(url, client=aws.sqs)
    assert queue.depth() == 0
    for n in (1, 2, 3):
        queue.send(queued(n))
    assert len(receive(aws, url, n=1)) == 1

    assert queue.depth() == 3
