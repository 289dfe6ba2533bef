"""A message on a job's trigger queue that can never become a trigger (issue 33, #3).

A QUEUE job's FIFO trigger queue carries its queued triggers in one message group. A
message nobody can run (not JSON, another job's message, another shape) used to be
returned to SQS as a batch item failure: redelivered through the whole redrive budget,
each receive a visibility timeout long, while every trigger behind it waited. Now it is
recorded ``rejected`` with its reason, counted, and reported processed (deleted); only a
failure to record it (a throttled put) returns it.

Deliveries go through the real (emulated) FIFO queue with a dead-letter queue, as
Lambda's event source mapping hands them over (``_trigger_support.deliver``); every test
looks at the queue, the DLQ, the run log, the metric and the destination.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest

from jobguard import GuardedJob, JobConfig, OverlapPolicy, current_run
from jobguard.callsites import Fault
from jobguard.faults import Faults, Rule
from jobguard.local.esm import deliver_once
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import Trigger, TriggerKind, queue_message_body

from ._support import Gate, in_thread, tick
from ._trigger_support import cli, comes_back, deliver, drain

JOB = "export"
MAX_RECEIVES = 3

NOT_JSON = '{job: export, scheduled_at: 2026-11-29T07:35:00Z'
ANOTHER_JOBS = queue_message_body(
    Trigger("crm-sync", "crm-sync@2026-11-29T07:35:00Z", TriggerKind.QUEUED))
WRONG_SHAPE = json.dumps({"Records": [{"eventSource": "aws:s3",
                                       "eventName": "ObjectCreated:Put"}]})
GARBAGE = {"not JSON": (NOT_JSON, "body", "is not JSON"),
           "another job's message": (ANOTHER_JOBS, "body.job", "'crm-sync'"),
           "another shape": (WRONG_SHAPE, "body.jobguard", "is required")}


class Exports:
    """The job's destination: one item per trigger it ran (a DynamoDB table)."""

    def __init__(self, aws: Any) -> None:
        self.ddb = aws.ddb
        self.table = f"exports-{uuid.uuid4().hex[:8]}"
        self.ddb.create_table(TableName=self.table, BillingMode="PAY_PER_REQUEST",
                              AttributeDefinitions=[{"AttributeName": "trigger_id",
                                                     "AttributeType": "S"}],
                              KeySchema=[{"AttributeName": "trigger_id", "KeyType": "HASH"}])
        self.calls: list[str] = []
        self.gates: dict[str, Gate] = {}

    def handler(self, event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        trigger_id = run.trigger.trigger_id
        self.calls.append(trigger_id)
        gate = self.gates.get(trigger_id)
        if gate is not None:
            gate.hold()
        run.ensure_lease()
        self.ddb.put_item(TableName=self.table, Item={
            "trigger_id": {"S": trigger_id}, "run_id": {"S": run.run_id},
            "fence": {"N": str(run.fence)}})
        return {"exported": trigger_id}

    def held(self) -> dict[str, tuple[str, int]]:
        items = self.ddb.scan(TableName=self.table, ConsistentRead=True)["Items"]
        return {i["trigger_id"]["S"]: (i["run_id"]["S"], int(i["fence"]["N"])) for i in items}


def fifo_with_dlq(aws: Any, job: str) -> tuple[str, str]:
    """The job's FIFO trigger queue, redriven to a FIFO DLQ after MAX_RECEIVES receives
    (the stack's budget is larger: the test only needs the DLQ to be reachable)."""
    suffix = uuid.uuid4().hex[:8]
    dlq = aws.sqs.create_queue(QueueName=f"{job}-{suffix}-dlq.fifo",
                               Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = aws.sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = aws.sqs.create_queue(QueueName=f"{job}-{suffix}-triggers.fifo", Attributes={
        "FifoQueue": "true", "VisibilityTimeout": "30",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                     "maxReceiveCount": str(MAX_RECEIVES)})})["QueueUrl"]
    aws.queues[job] = url
    return url, dlq


def queue_job(aws: Any, clock: Any, exports: Exports) -> tuple[GuardedJob, str]:
    url, dlq = fifo_with_dlq(aws, JOB)
    config = JobConfig(name=JOB, policy=OverlapPolicy.QUEUE, lease=timedelta(seconds=60),
                       table_name=aws.table)
    job = GuardedJob(config, exports.handler, store=aws.store,
                     queue=TriggerQueue(url, client=aws.sqs), clock=clock, owner="fn/test")
    return job, dlq


def send_garbage(aws: Any, body: str) -> str:
    """A message in the job's message group, sent by someone who is not jobguard."""
    return str(aws.sqs.send_message(QueueUrl=aws.queues[JOB], MessageBody=body,
                                    MessageGroupId=JOB,
                                    MessageDeduplicationId=uuid.uuid4().hex)["MessageId"])


def on_queue(aws: Any, url: str) -> int:
    """Messages on ``url``: visible, or in flight (they come back)."""
    attributes = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"])


def rejected(aws: Any) -> dict[str, Any]:
    """The job's ``rejected`` records by the message id they name."""
    return {r.extra["message_id"]: r for r in aws.runs(JOB) if r.decision.value == "rejected"}


def queue_two_behind_a_held_run(aws: Any, clock: Any, job: GuardedJob, exports: Exports,
                                garbage: list[str]) -> tuple[list[str], list[str]]:
    """Tick 0's run holds the lease; ``garbage`` is sent to the queue, then ticks 1 and 2
    are queued behind it; tick 0's run ends. (message ids, the three tick ids)"""
    t0 = clock.now() - timedelta(minutes=10)  # the three ticks: none ahead of the clock
    ticks = [tick(JOB, t0 + timedelta(minutes=m)) for m in range(3)]
    ids = [f"{JOB}@{t['scheduled_at']}" for t in ticks]
    gate = exports.gates[ids[0]] = Gate()
    thread, box = in_thread(lambda: job(ticks[0], None))
    assert gate.entered.wait(10)
    message_ids = [send_garbage(aws, body) for body in garbage]
    clock.advance(timedelta(seconds=10))
    assert [job(t, None)["decision"] for t in ticks[1:]] == ["queued", "queued"]
    gate.release.set()
    thread.join(10)
    assert box["result"] == {"exported": ids[0]}
    return message_ids, ids


def test_garbage_ahead_of_two_queued_triggers_is_rejected_and_they_run_at_once(
        aws, clock, metrics):
    """GIVEN a QUEUE job whose FIFO trigger queue holds, in its message group, three
    messages that can never become a trigger (not JSON, another job's message, another
    shape) ahead of two triggers queued while a run held the lease
    WHEN the queue is delivered as Lambda's event source mapping does (one message per
    invocation, deleted unless reported failed)
    THEN each garbage message is reported processed on its first delivery and deleted
    (never redelivered, never in the DLQ), recorded ``rejected`` in the run log with its
    message id, field, reason and an excerpt, and counted by TriggerMessagesRejected;
    and both queued triggers ran right behind them, in order, each with its run record
    and its export."""
    exports = Exports(aws)
    job, dlq = queue_job(aws, clock, exports)
    bodies = [body for body, _, _ in GARBAGE.values()]
    message_ids, ids = queue_two_behind_a_held_run(aws, clock, job, exports, bodies)
    metrics()  # what the run and the queued decisions emitted

    deliveries = drain(aws, JOB, job)

    # the garbage: one delivery each, none returned, then the two triggers
    assert [d.message_id for d in deliveries[:3]] == message_ids
    assert [d.failed for d in deliveries] == [False] * 5
    assert [d.body.get("trigger_id") for d in deliveries[3:]] == ids[1:]
    assert on_queue(aws, aws.queues[JOB]) == 0 and on_queue(aws, dlq) == 0
    # recorded with its reason, bounded and escaped
    records = rejected(aws)
    assert sorted(records) == sorted(message_ids)
    for message_id, (body, field, reason) in zip(message_ids, GARBAGE.values(), strict=True):
        record = records[message_id]
        assert (record.status.value, record.trigger_kind, record.policy) == (
            "rejected", "message", "QUEUE")
        assert record.trigger_id == f"{JOB}@message:{message_id}"
        assert record.extra["field"] == field
        assert record.error.startswith(f"{field}: ") and reason in record.error
        assert record.extra["excerpt"] == repr(body[:200])[1:-1]
        assert record.extra["body_bytes"] == len(body.encode())
        assert record.extra["receive_count"] == 1
    # counted
    assert metrics().get("TriggerMessagesRejected") == 3
    # both queued triggers ran, in order, with their records and their exports
    assert exports.calls == ids
    ran = {r.trigger_id: r for r in aws.runs(JOB) if r.decision.value == "ran"}
    assert [ran[t].status.value for t in ids] == ["succeeded"] * 3
    assert [ran[t].fence for t in ids] == [1, 2, 3]
    assert exports.held() == {t: (ran[t].run_id, ran[t].fence) for t in ids}
    queued = [r.trigger_id for r in aws.runs(JOB) if r.decision.value == "queued"]
    assert sorted(queued) == ids[1:]
    assert aws.store.read_lease(JOB).queued_n == 0
    # what the alarm's runbook tells the operator to run names each one
    code, out, err = cli(aws, "runs", JOB, "--status", "rejected", "--json")
    assert code == 0, err
    listed = {r["extra"]["message_id"]: r["extra"] for r in json.loads(out)}
    assert sorted(listed) == sorted(message_ids)
    assert [listed[m]["field"] for m in message_ids] == [f for _, f, _ in GARBAGE.values()]


def test_a_garbage_message_whose_record_cannot_be_written_comes_back_and_is_rejected_once(
        aws, clock, metrics):
    """GIVEN a QUEUE job's trigger queue holding a message that is not JSON ahead of a
    queued trigger
    WHEN its first delivery finds the run log's writes throttled (every attempt of the
    record's PutItem)
    THEN that delivery reports it failed (a batch item failure): it stays on the queue,
    unrecorded and uncounted, and the trigger behind it waits; once the throttling is
    over and the message comes back, it is rejected (one record, counted once) and the
    queued trigger runs."""
    exports = Exports(aws)
    job, dlq = queue_job(aws, clock, exports)
    [message_id], ids = queue_two_behind_a_held_run(aws, clock, job, exports, [NOT_JSON])
    metrics()

    with Faults([Rule(Fault.THROTTLE, operation="PutItem", site="dynamodb.put_run")],
                clients=(aws.ddb,), backoff_scale=0.001) as faults:
        first = deliver(aws, JOB, job)
    assert first is not None and first.message_id == message_id
    assert first.failed and [c.site for c in faults.injected] == ["dynamodb.put_run"]
    assert on_queue(aws, aws.queues[JOB]) == 3 and on_queue(aws, dlq) == 0
    assert rejected(aws) == {} and "TriggerMessagesRejected" not in metrics()
    assert deliver(aws, JOB, job) is None  # its group waits behind it
    assert exports.calls == ids[:1]

    comes_back(aws, JOB, first)
    deliveries = drain(aws, JOB, job)

    assert [d.failed for d in deliveries] == [False] * 3
    assert deliveries[0].message_id == message_id
    [record] = rejected(aws).values()
    assert record.extra["field"] == "body" and record.extra["receive_count"] == 2
    assert metrics().get("TriggerMessagesRejected") == 1
    assert on_queue(aws, aws.queues[JOB]) == 0 and on_queue(aws, dlq) == 0
    assert exports.calls == ids and sorted(exports.held()) == sorted(ids)


@pytest.mark.parametrize("how", ["delivered twice", "its record's answer lost"])
def test_a_garbage_message_is_recorded_once_however_often_it_comes(aws, clock, how):
    """GIVEN a QUEUE job's trigger queue holding another job's message
    WHEN it is ``how``: delivered twice (SQS's at-least-once: a worker died after
    recording it), or its record's PutItem lands but the answer is lost and the SDK
    sends it again
    THEN the run log holds one ``rejected`` record of it, and each delivery reports it
    processed: it is deleted."""
    exports = Exports(aws)
    job, dlq = queue_job(aws, clock, exports)
    message_id = send_garbage(aws, ANOTHER_JOBS)

    answers: list[Any] = []

    def invoke(event: Any, context: Any) -> Any:
        answers.append(job(event, context))
        return answers[-1]

    if how == "delivered twice":
        assert deliver_once(aws.sqs, aws.queues[JOB], invoke, times=2) == 1
    else:
        with Faults([Rule(Fault.LOST, operation="PutItem", site="dynamodb.put_run")],
                    clients=(aws.ddb,), backoff_scale=0.001) as faults:
            assert deliver_once(aws.sqs, aws.queues[JOB], invoke) == 1
        assert [c.fault for c in faults.injected] == [Fault.LOST]
    assert answers == [{"batchItemFailures": []}] * (2 if how == "delivered twice" else 1)

    [record] = [r for r in aws.runs(JOB)]
    assert (record.status.value, record.extra["message_id"]) == ("rejected", message_id)
    assert record.extra["field"] == "body.job"
    assert on_queue(aws, aws.queues[JOB]) == 0 and on_queue(aws, dlq) == 0
    assert exports.calls == []


def test_a_message_of_a_newer_jobguard_is_left_on_the_queue_for_a_worker_that_reads_it(
        aws, clock, metrics):
    """GIVEN a QUEUE job's trigger queue holding a message for this job written by a newer
    jobguard (``jobguard: 2``: a deployment under way, the new code not yet everywhere)
    WHEN this worker receives it
    THEN it is not garbage: reported failed (it stays on the queue for a worker that
    reads it, or the DLQ and its alarm if none ever does), not recorded, not counted."""
    exports = Exports(aws)
    job, dlq = queue_job(aws, clock, exports)
    body = json.loads(queue_message_body(
        Trigger(JOB, f"{JOB}@2026-11-29T07:35:00Z", TriggerKind.QUEUED)))
    message_id = send_garbage(aws, json.dumps({**body, "jobguard": 2}))
    metrics()

    delivery = deliver(aws, JOB, job)

    assert delivery is not None and delivery.message_id == message_id and delivery.failed
    assert on_queue(aws, aws.queues[JOB]) == 1 and on_queue(aws, dlq) == 0
    assert aws.runs(JOB) == [] and "TriggerMessagesRejected" not in metrics()
