"""``GuardedJob.run_exclusive``: the lease whatever the policy, for recovery runs.

GIVEN a job on the in-process emulator, WHEN a recovery asks for its lease (waiting up to
a bound), THEN it runs the handler under a fresh fence once the lease is free: at once
when free, after the holder when a live run holds it (real threads; the holder is let go
when the recovery's acquisition has been refused), over a dead holder's expired lease
(recorded ``abandoned``), and never over a pause unless asked to. When it cannot, it
says who holds the lease until when, or that the job is paused and why, and it never
runs a trigger twice. These close the gaps ``make mutate`` found in
``GuardedJob.run_exclusive`` (docs/mutation.md): only the explorer reached it, and a
recovery that crashed there was a valid history to it.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from jobguard import GuardedJob, JobConfig, OverlapPolicy, current_run
from jobguard.clock import to_ms
from jobguard.errors import LeaseBusyError, StoreError
from jobguard.lease import Acquired
from jobguard.records import RunStatus
from jobguard.requests import Take
from jobguard.testing import ManualClock
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import Trigger, TriggerKind

JOB = "exclusive-job"
LEASE = timedelta(seconds=60)


def recovery(n: int = 1) -> Trigger:
    return Trigger(JOB, f"{JOB}@recovery:{n}", TriggerKind.RECOVERY, requested_by="ops")


def job_of(aws: Any, clock: Any, handler: Any = None,
           policy: OverlapPolicy = OverlapPolicy.SKIP) -> GuardedJob:
    def ran(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        return {"ran": run.trigger.trigger_id, "fence": run.fence, "event": event,
                "context": context}

    config = JobConfig(name=JOB, policy=policy, lease=LEASE, table_name=aws.table)
    return GuardedJob(config, handler or ran, store=aws.store, clock=clock, owner="recoverer")


def record_of(aws: Any, trigger_id: str) -> Any:
    [record] = [r for r in aws.runs(JOB) if r.trigger_id == trigger_id]
    return record


def test_a_free_lease_is_taken_and_released_around_the_handler(aws, clock):
    """GIVEN a job nobody runs WHEN a recovery runs exclusively (no wait) THEN the handler
    runs once with fence 1 and the event and Lambda context it was given, the run is
    recorded succeeded as a recovery, and the lease is free again afterwards."""
    job = job_of(aws, clock)
    context = SimpleNamespace(aws_request_id="req-1")

    result = job.run_exclusive(recovery(), wait=0, event={"range": [1, 9]}, context=context)

    assert result == {"ran": recovery().trigger_id, "fence": 1, "event": {"range": [1, 9]},
                      "context": context}
    record = record_of(aws, recovery().trigger_id)
    assert (record.status, record.trigger_kind, record.fence, record.owner) == (
        RunStatus.SUCCEEDED, "recovery", 1, "recoverer")
    lease = aws.store.read_lease(JOB)
    assert (lease.run_id, lease.fence) == (None, 1)


def test_a_recovery_waits_for_the_running_run_then_runs_after_it(aws, clock):
    """GIVEN run R1 of the job running (held in its handler) WHEN a recovery asks for the
    lease, waiting up to 10 minutes, and R1 finishes once the recovery found it held
    THEN the recovery runs after R1, with the next fence; R1 succeeded."""
    release = threading.Event()

    def holder(event: Any, context: Any) -> str:
        entered.set()
        assert release.wait(10), "the recovery never found the lease held"
        return "R1 done"

    entered = threading.Event()
    job = job_of(aws, clock, holder)
    box: dict[str, Any] = {}
    r1 = threading.Thread(target=lambda: box.setdefault("r1", job(
        {"job": JOB, "manual": True, "trigger_id": "r1"}, None)), daemon=True)
    r1.start()
    assert entered.wait(10)
    me = threading.get_ident()

    def refused(http_response: Any, **_: Any) -> None:
        if threading.get_ident() == me and http_response.status_code == 400:
            release.set()  # R1 may finish now: the recovery saw it hold the lease

    aws.ddb.meta.events.register("after-call.dynamodb.TransactWriteItems", refused,
                                 unique_id="let-r1-go")
    try:
        result = job_of(aws, clock).run_exclusive(recovery(), wait=600)
    finally:
        aws.ddb.meta.events.unregister("after-call.dynamodb.TransactWriteItems",
                                       unique_id="let-r1-go")
    r1.join(10)

    assert release.is_set()
    assert box["r1"] == "R1 done"
    assert result["fence"] == 2
    assert record_of(aws, f"{JOB}@manual:r1").status is RunStatus.SUCCEEDED
    assert record_of(aws, recovery().trigger_id).status is RunStatus.SUCCEEDED


def test_a_lease_held_past_the_wait_is_refused_naming_the_holder_and_its_expiry(aws):
    """GIVEN worker R0 holding the job's lease from 07:35:00 for 60 s WHEN a recovery asks
    for it without waiting THEN LeaseBusyError names the job, R0 and 07:36:00 (ISO, UTC),
    and nothing ran."""
    clock = ManualClock(datetime(2026, 11, 29, 7, 35, tzinfo=UTC))
    t0 = to_ms(clock.now())
    taken = aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:r0", TriggerKind.MANUAL), run_id="R0",
                                owner="worker-R0", now_ms=t0, lease_ms=60_000, skew_ms=5_000))
    assert isinstance(taken, Acquired)

    with pytest.raises(LeaseBusyError) as caught:
        job_of(aws, clock).run_exclusive(recovery(), wait=0)

    busy = caught.value
    assert (busy.job, busy.holder_run_id, busy.lease_expires_at_ms, busy.paused_reason) == (
        JOB, "R0", t0 + 60_000, None)
    assert str(busy) == (f"job {JOB!r} is held by run R0 until 2026-11-29T07:36:00.000Z; "
                         "try again after it ends")
    assert [r.trigger_id for r in aws.runs(JOB)] == [f"{JOB}@manual:r0"]


@pytest.mark.parametrize("policy", [OverlapPolicy.SKIP, OverlapPolicy.REPLACE])
def test_a_dead_holders_expired_lease_is_taken_over_and_its_run_recorded_abandoned(
        aws, clock, policy):
    """GIVEN a ``policy`` job whose worker R0 took the lease and died (its lease expired
    2 minutes ago) WHEN a recovery runs exclusively THEN it runs with fence 2, and R0's
    run is recorded ``abandoned`` (not replaced: it was not running) by the same
    acquisition, expiring after record_ttl (30 days) like every record."""
    t0 = to_ms(clock.now())
    aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:r0", TriggerKind.MANUAL), run_id="R0",
                        owner="worker-R0", now_ms=t0 - 180_000, lease_ms=60_000, skew_ms=5_000))

    result = job_of(aws, clock, policy=policy).run_exclusive(recovery(), wait=0)

    assert result["fence"] == 2
    abandoned = [r for r in aws.runs(JOB) if r.run_id == "R0"]
    assert [(r.status, r.fence, r.owner) for r in abandoned] == [
        (RunStatus.ABANDONED, 1, "worker-R0")]
    item = aws.ddb.get_item(TableName=aws.table, Key={
        "pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "RUN#R0"}})["Item"]
    assert int(item["ttl_epoch_s"]["N"]) == t0 // 1000 + 30 * 86_400  # like every record


@pytest.mark.parametrize("ignore_pause", [False, True])
def test_a_paused_job_is_refused_at_once_naming_the_pause_unless_ignored(
        aws, clock, ignore_pause):
    """GIVEN a job paused by an operator ("vendor outage") WHEN a recovery asks for the
    lease, willing to wait 10 minutes THEN without ``ignore_pause`` it is refused at once
    (a pause is not waited out) naming the pause; with it, the recovery runs."""
    job = job_of(aws, clock)
    job.run_exclusive(recovery(1), wait=0)  # the job has run before (its fence is known)
    aws.store.pause(JOB, reason="vendor outage", now_ms=to_ms(clock.now()))

    if not ignore_pause:
        with pytest.raises(LeaseBusyError) as caught:
            job.run_exclusive(recovery(2), wait=600)
        assert (caught.value.holder_run_id, caught.value.paused_reason) == (
            None, "vendor outage")
        assert str(caught.value) == (f"job {JOB!r} is paused (vendor outage); "
                                     "try again after it ends")
    else:
        assert job.run_exclusive(recovery(2), wait=600, ignore_pause=True)["fence"] == 2


def test_a_recovery_trigger_that_already_ran_is_refused_naming_it(aws, clock):
    """GIVEN a recovery trigger that ran to the end WHEN the same trigger asks for the
    lease again THEN a StoreError says it already ran, and the handler did not run."""
    calls: list[str] = []

    def handler(event: Any, context: Any) -> None:
        calls.append(current_run().trigger.trigger_id)

    job = job_of(aws, clock, handler)
    job.run_exclusive(recovery(), wait=0)
    clock.advance(timedelta(seconds=1))

    with pytest.raises(StoreError) as caught:
        job.run_exclusive(recovery(), wait=0)
    assert str(caught.value) == (f"acquire for job {JOB!r}: trigger {recovery().trigger_id} "
                                 "already done")
    assert calls == [recovery().trigger_id]


@pytest.mark.parametrize("service", ["a recovery", "the reconciler's sweep"])
def test_a_service_run_over_a_dead_holder_leaves_its_pending_follow_up_to_run(
        aws, clock, service):
    """GIVEN a COALESCE job whose worker R0 had a trigger coalesced into its follow-up
    (sent to the queue) and then died, its lease expired WHEN ``service``, which does not
    do the job's regular work, takes the lease over THEN the follow-up stays pending: the
    lease row still names it (``jobguard status`` shows it), and delivered, it runs the
    job's handler."""
    url = aws.fifo_queue(JOB)
    ran: list[str] = []

    def handler(event: Any, context: Any) -> str:
        ran.append(current_run().trigger.kind.value)
        return "ok"

    config = JobConfig(name=JOB, policy=OverlapPolicy.COALESCE, lease=LEASE,
                       table_name=aws.table)
    job = GuardedJob(config, handler, store=aws.store, queue=TriggerQueue(url, client=aws.sqs),
                     clock=clock)
    aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:r0", TriggerKind.MANUAL), run_id="R0",
                        owner="worker-R0", now_ms=to_ms(clock.now()), lease_ms=60_000,
                        skew_ms=5_000))
    assert job({"job": JOB, "manual": True, "trigger_id": "during"}, None)[
        "decision"] == "coalesced"
    follow_up = aws.store.read_lease(JOB).follow_up
    assert follow_up is not None
    clock.advance(timedelta(seconds=70))  # R0 is dead: its lease expired past the margin

    if service == "a recovery":
        job_of(aws, clock).run_exclusive(recovery(), wait=0)
    else:
        sweep = GuardedJob(JobConfig(name=JOB, policy=OverlapPolicy.SKIP, lease=LEASE,
                                     table_name=aws.table, trigger_queue_url=url),
                           lambda e, c: "swept", store=aws.store, clock=clock,
                           serves_triggers=False)
        assert sweep({"job": JOB, "manual": True, "trigger_id": "sweep"}, None) == "swept"

    assert aws.store.read_lease(JOB).follow_up == follow_up
    delivered = aws.deliver(JOB, job)
    assert delivered is not None and not delivered[1]
    assert ran == ["follow_up"]


def test_a_recovery_of_a_job_this_process_ran_takes_the_lease_in_one_write(aws, clock):
    """GIVEN the job ran here before (its fence, 1, is known) WHEN a recovery runs
    exclusively THEN its acquisition expects that row and lands first time: no refused
    transaction (each one is billed) and no read before it; the run gets fence 2."""
    job = job_of(aws, clock)
    job.run_exclusive(recovery(1), wait=0)
    calls: list[tuple[str, int]] = []

    def count(http_response: Any, model: Any, **_: Any) -> None:
        calls.append((model.name, http_response.status_code))

    aws.ddb.meta.events.register("after-call.dynamodb", count, unique_id="count-calls")
    try:
        result = job.run_exclusive(recovery(2), wait=0)
    finally:
        aws.ddb.meta.events.unregister("after-call.dynamodb", unique_id="count-calls")

    assert result["fence"] == 2
    assert calls[0] == ("TransactWriteItems", 200), calls


def test_a_dead_holder_whose_trigger_item_cannot_be_marked_does_not_block_a_recovery(
        aws, clock):
    """GIVEN worker R0 died holding the lease, and its trigger's item no longer says R0 is
    running it (an operator marked it done by hand) WHEN a recovery runs exclusively THEN
    the recovery runs (the acquisition leaves that item as it is instead of failing on it
    every time), R0's run is recorded abandoned, and the item still says done."""
    from jobguard.schema import PARTITION_KEY, SORT_KEY, job_pk, trigger_sk

    t0 = to_ms(clock.now())
    r0_trigger = f"{JOB}@manual:r0"
    aws.store.take(Take(Trigger(JOB, r0_trigger, TriggerKind.MANUAL), run_id="R0",
                        owner="worker-R0", now_ms=t0 - 180_000, lease_ms=60_000, skew_ms=5_000))
    aws.ddb.update_item(
        TableName=aws.table,
        Key={PARTITION_KEY: {"S": job_pk(JOB)}, SORT_KEY: {"S": trigger_sk(r0_trigger)}},
        UpdateExpression="SET #s = :done", ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":done": {"S": "done"}})

    result = job_of(aws, clock).run_exclusive(recovery(), wait=0)

    assert result["ran"] == recovery().trigger_id
    assert [r.status for r in aws.runs(JOB) if r.run_id == "R0"] == [RunStatus.ABANDONED]
    item = aws.store.read_trigger(JOB, r0_trigger)
    assert item is not None and item.state.value == "done"
