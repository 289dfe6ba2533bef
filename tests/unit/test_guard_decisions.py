"""What the guard records and sends when a trigger does not simply run.

GIVEN a guarded job on the in-process emulator whose lease a worker holds (taken with the
store, as a worker that is still running or has died would leave it), WHEN a tick comes
late, a queued trigger's message is delivered while the lease is held, or a holder's
release cannot send the pending follow-up, THEN the run log, the trigger queue and the
job's logs say what an operator and the consumer rely on: a stale tick's record says how
late it was and expires like every record; a queued trigger's message carries its
scheduled time and requester to the run; a deferred message stays hidden exactly until
the holder's lease would end (plus the skew margin) and is woken by the holder, or comes
back at once when the holder is already gone; a follow-up the release could not send is
logged with its id and the error. These close gaps ``make mutate`` found in
``jobguard.guard`` (docs/mutation.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from jobguard import GuardedJob, JobConfig, JobGuardError, OverlapPolicy, current_run, hooks
from jobguard._clients import client
from jobguard.callsites import Fault
from jobguard.clock import to_ms
from jobguard.errors import SendError
from jobguard.faults import Faults, Rule
from jobguard.lease import Acquired
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import Release, Take
from jobguard.trigger_state import State
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import Trigger, TriggerKind, format_instant, parse_queue_message

JOB = "decided-job"
LEASE_MS = 60_000
SKEW_MS = 5_000  # JobConfig's default skew margin


def job_of(aws: Any, clock: Any, policy: OverlapPolicy, handler: Any = None,
           sqs: Any = None) -> GuardedJob:
    config = JobConfig(name=JOB, policy=policy, lease=timedelta(milliseconds=LEASE_MS),
                       table_name=aws.table)
    queue = TriggerQueue(aws.fifo_queue(JOB), client=sqs or aws.sqs) \
        if config.needs_queue else None
    return GuardedJob(config, handler or ran, store=aws.store, queue=queue, clock=clock,
                      owner="test-worker")


def ran(event: Any, context: Any) -> dict[str, Any]:
    trigger = current_run().trigger
    return {"ran": trigger.trigger_id, "scheduled_at": trigger.scheduled_at,
            "requested_by": trigger.requested_by}


def held_by_worker(aws: Any, run_id: str, *, at_ms: int) -> None:
    """Worker ``run_id`` took the job's lease at ``at_ms`` (and is still running, or
    died: nothing in this test renews or releases it unless the test says so)."""
    result = aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:{run_id}", TriggerKind.MANUAL),
                                 run_id=run_id, owner=f"worker-{run_id}", now_ms=at_ms,
                                 lease_ms=LEASE_MS, skew_ms=SKEW_MS))
    assert isinstance(result, Acquired)


def release_worker(aws: Any, run_id: str, *, at_ms: int) -> None:
    trigger_id = f"{JOB}@manual:{run_id}"
    record = RunRecord(job=JOB, run_id=run_id, trigger_id=trigger_id, trigger_kind="manual",
                       policy="QUEUE", decision=Decision.RAN, status=RunStatus.SUCCEEDED,
                       started_at_ms=at_ms, ended_at_ms=at_ms, fence=1)
    assert aws.store.release(Release(JOB, run_id=run_id, fence=1, trigger_id=trigger_id,
                                     outcome=State.DONE, record=record,
                                     record_ttl_s=at_ms // 1000 + 60,
                                     trigger_ttl_s=at_ms // 1000 + 60)).released


def receive(aws: Any, n: int = 10) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = aws.sqs.receive_message(
        QueueUrl=aws.queues[JOB], MaxNumberOfMessages=n, AttributeNames=["All"],
    ).get("Messages", [])
    return messages


def deliver(aws: Any, job: GuardedJob) -> tuple[dict[str, Any], bool]:
    delivered = aws.deliver(JOB, job)
    assert delivered is not None, "no message was visible"
    return delivered


@pytest.fixture
def visibility(aws: Any) -> Iterator[list[int]]:
    """The VisibilityTimeout of every ChangeMessageVisibility the job sends."""
    sent: list[int] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.append(params["VisibilityTimeout"])

    aws.sqs.meta.events.register("before-parameter-build.sqs.ChangeMessageVisibility", record,
                                 unique_id="record-visibility")
    yield sent
    aws.sqs.meta.events.unregister("before-parameter-build.sqs.ChangeMessageVisibility",
                                   unique_id="record-visibility")


# -- a late tick ------------------------------------------------------------------------------

def test_a_late_tick_of_a_skip_job_is_recorded_stale_saying_how_late_and_expires(aws, clock):
    """GIVEN a SKIP job (stale_after 1 h) WHEN a tick is delivered 2 h 30 min after its
    scheduled time THEN the handler does not run; one ``stale`` record, at the delivery's
    time, says how late it came against stale_after, and expires after record_ttl
    (30 days) like every record."""
    job = job_of(aws, clock, OverlapPolicy.SKIP)
    scheduled = clock.now() - timedelta(hours=2, minutes=30)

    outcome = job({"job": JOB, "scheduled_at": format_instant(scheduled)}, None)

    assert outcome["decision"] == "stale"
    [record] = aws.runs(JOB)
    now_ms = to_ms(clock.now())
    assert (record.status.value, record.started_at_ms, record.ended_at_ms) == (
        "stale", now_ms, now_ms)
    assert record.detail == "delivered 2:30:00 after its scheduled time (stale_after 1:00:00)"
    item = aws.ddb.get_item(TableName=aws.table, Key={
        "pk": {"S": f"JOB#{JOB}"}, "sk": {"S": f"RUN#{record.run_id}"}})["Item"]
    assert int(item["ttl_epoch_s"]["N"]) == now_ms // 1000 + 30 * 86_400


# -- a queued trigger ---------------------------------------------------------------------------

def test_a_queued_trigger_reaches_its_run_with_its_scheduled_time_and_requester(aws, clock):
    """GIVEN a QUEUE job whose lease worker R0 holds WHEN a tick and a manual trigger
    (requested by ``ops``) are queued, R0 finishes, and their messages are delivered THEN
    each runs with what it was queued with: the tick its scheduled time, the manual
    trigger its requester, on the trigger the handler sees and on the run record."""
    now_ms = to_ms(clock.now())
    held_by_worker(aws, "R0", at_ms=now_ms - 1_000)
    job = job_of(aws, clock, OverlapPolicy.QUEUE)
    scheduled = clock.now() - timedelta(seconds=30)
    assert job({"job": JOB, "scheduled_at": format_instant(scheduled)}, None)[
        "decision"] == "queued"
    assert job({"job": JOB, "manual": True, "trigger_id": "export",
                "requested_by": "ops"}, None)["decision"] == "queued"
    release_worker(aws, "R0", at_ms=now_ms)

    for _ in range(2):
        _, failed = deliver(aws, job)
        assert not failed
    runs = {r.trigger_id: r for r in aws.runs(JOB) if r.decision is Decision.RAN}
    tick = runs[f"{JOB}@{format_instant(scheduled)}"]
    export = runs[f"{JOB}@manual:export"]
    assert (tick.trigger_kind, tick.scheduled_at) == ("queued", format_instant(scheduled))
    assert (export.trigger_kind, export.requested_by) == ("queued", "ops")


@pytest.mark.parametrize(("held_for_ms", "hidden_s"), [
    pytest.param(9_980, 56, id="mid-lease: 55.02 s left, rounded up"),
    pytest.param(64_200, 1, id="0.8 s left: at least one second"),
])
def test_a_queued_message_finding_the_lease_held_is_hidden_until_the_lease_would_end(
        aws, clock, visibility, held_for_ms, hidden_s):
    """GIVEN a QUEUE job whose lease (60 s) worker R0 took ``held_for_ms`` ago, and a
    queued trigger WHEN its message is delivered THEN it is reported failed and hidden
    for the rest of R0's lease plus the skew margin (5 s), in whole seconds rounded up
    and at least 1, and R0's lease row names its receipt, for R0's release to wake it
    (one visibility change: nothing makes it visible now)."""
    now_ms = to_ms(clock.now())
    held_by_worker(aws, "R0", at_ms=now_ms - held_for_ms)
    job = job_of(aws, clock, OverlapPolicy.QUEUE)
    assert job({"job": JOB, "manual": True, "trigger_id": "next"}, None)["decision"] == "queued"

    message, failed = deliver(aws, job)

    assert failed
    assert visibility == [hidden_s]
    assert receive(aws) == []
    lease = aws.store.read_lease(JOB)
    assert (lease.run_id, lease.wake_receipt) == ("R0", message["ReceiptHandle"])


def test_a_queued_message_whose_holder_ends_before_the_wake_request_comes_back_at_once(
        aws, clock, visibility):
    """GIVEN a QUEUE job whose lease worker R0 holds, and a queued trigger WHEN its
    message is delivered and R0 releases between the delivery reading the lease and
    asking R0 to wake it THEN no one is left to wake it: the message is hidden until R0's
    lease would have ended, then made visible at once, and its next delivery runs it."""
    now_ms = to_ms(clock.now())
    held_by_worker(aws, "R0", at_ms=now_ms - 10_000)
    job = job_of(aws, clock, OverlapPolicy.QUEUE)
    assert job({"job": JOB, "manual": True, "trigger_id": "next"}, None)["decision"] == "queued"
    trigger_id = f"{JOB}@manual:next"

    def holder_ends(**context: Any) -> None:
        if context["trigger_id"] == trigger_id:
            release_worker(aws, "R0", at_ms=now_ms)

    with hooks.on("after_lease_read", holder_ends):
        _, failed = deliver(aws, job)

    assert failed
    assert visibility == [55, 0]
    _, failed = deliver(aws, job)
    assert not failed
    assert [r.status for r in aws.runs(JOB) if r.trigger_id == trigger_id
            and r.decision is Decision.RAN] == [RunStatus.SUCCEEDED]


def test_a_queued_trigger_handed_to_handle_while_the_lease_is_held_names_the_holder(
        aws, clock):
    """GIVEN a QUEUE job whose lease worker R0 holds, and a queued trigger WHEN the
    trigger is handed to ``GuardedJob.handle`` directly (not through SQS) THEN it raises
    a JobGuardError naming the job and the holder: the trigger has to wait."""
    held_by_worker(aws, "R0", at_ms=to_ms(clock.now()))
    job = job_of(aws, clock, OverlapPolicy.QUEUE)
    assert job({"job": JOB, "manual": True, "trigger_id": "next"}, None)["decision"] == "queued"
    [message] = receive(aws)
    trigger, event = parse_queue_message(message["Body"], job=JOB)

    with pytest.raises(JobGuardError) as caught:
        job.handle(trigger, event, None)
    assert str(caught.value) == f"job {JOB!r} is held by run R0"


# -- the follow-up a release sends again ------------------------------------------------------

def test_a_follow_up_the_release_cannot_send_is_logged_and_the_run_still_succeeds(
        aws, clock, log_lines):
    """GIVEN a COALESCE job running R1, and a trigger coalesced during the run whose
    follow-up send failed WHEN R1 ends and its release's resend is throttled too THEN R1
    still succeeds, and a warning names the follow-up and the error (the next trigger
    absorbs it)."""
    def handler(event: Any, context: Any) -> str:
        with pytest.raises(SendError):
            job({"job": JOB, "manual": True, "trigger_id": "during"}, None)
        return "done"

    sqs = client("sqs")  # the client a Lambda's guard builds: standard retries, 3 attempts
    job = job_of(aws, clock, OverlapPolicy.COALESCE, handler, sqs=sqs)
    with Faults([Rule(Fault.THROTTLE, operation="SendMessage")], backoff_scale=0.001,
                clients=[sqs]):
        assert job({"job": JOB, "manual": True, "trigger_id": "first"}, None) == "done"

    [first] = [r for r in aws.runs(JOB) if r.decision is Decision.RAN]
    assert first.status is RunStatus.SUCCEEDED
    warnings = [line for line in map(json.loads, log_lines.getvalue().splitlines())
                if line["level"] == "WARNING"]
    assert [w["message"] for w in warnings] == [
        "follow-up not re-sent: the next trigger absorbs it"]
    assert warnings[0]["follow_up"] == f"{JOB}@follow-up:{first.run_id}"
    assert "RequestThrottled" in warnings[0]["error"]
