"""What operators see: the guard's metrics (EMF) and log lines, per decision.

GIVEN a guarded job on the in-process emulator, WHEN a trigger runs, is skipped, is
queued, takes over a dead worker's lease, or loses its lease, THEN the metrics the
stack's alarms read are emitted under their names (``RunSucceeded`` for the dead-man
alarm only when the job did its work, ``LeaseTakeovers``, ``LeaseLost``,
``QueueDepth``, ...), and the log lines carry the keys operators filter on (run id,
trigger id and fence during a run, and never after it; the decision and the holder for a
trigger not run). The fast suites had none of this (``make mutate``, docs/mutation.md);
tests/scenarios/test_observability.py checks it with threads, outside mutmut's selection.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from jobguard import GuardedJob, JobConfig, LeaseLostError, OverlapPolicy, current_run
from jobguard.clock import to_ms
from jobguard.lease import Acquired
from jobguard.requests import Take
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import Trigger, TriggerKind

JOB = "watched-job"
LEASE = timedelta(seconds=60)


def job_of(aws: Any, clock: Any, handler: Any = None,
           policy: OverlapPolicy = OverlapPolicy.SKIP) -> GuardedJob:
    config = JobConfig(name=JOB, policy=policy, lease=LEASE, table_name=aws.table)
    queue = TriggerQueue(aws.fifo_queue(JOB), client=aws.sqs) if config.needs_queue else None
    return GuardedJob(config, handler or (lambda e, c: "done"), store=aws.store, queue=queue,
                      clock=clock, owner="watched-worker")


def manual(name: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": name}


def worker_holds(aws: Any, run_id: str, at_ms: int) -> None:
    taken = aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:{run_id}", TriggerKind.MANUAL),
                                run_id=run_id, owner=f"worker-{run_id}", now_ms=at_ms,
                                lease_ms=60_000, skew_ms=5_000))
    assert isinstance(taken, Acquired)


def logs(log_lines: Any, message: str) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    return [e for e in entries if e["message"] == message]


def test_a_run_emits_its_metrics_and_logs_its_keys_only_while_it_runs(
        aws, clock, metrics, log_lines):
    """GIVEN a SKIP job WHEN a trigger runs it, and then a trigger finds worker R0 holding
    the lease THEN the run emits LeaseAcquireAttempts, RunDuration (the 20 s its handler
    took, on the job's clock) and RunSucceeded (the dead-man alarm's heartbeat), and its
    log lines carry its run id, trigger id and
    fence ("run ended", with its status); the skip emits TriggersSkipped and logs "trigger
    not run" with the decision, its trigger and the holder's run id and fence, and none
    of the ended run's keys."""
    seen: dict[str, Any] = {}

    def handler(event: Any, context: Any) -> str:
        run = current_run()
        seen.update(run_id=run.run_id, fence=run.fence)
        clock.advance(timedelta(seconds=20))
        return "done"

    job = job_of(aws, clock, handler)
    assert job(manual("first"), None) == "done"
    ran = metrics()
    clock.advance(timedelta(seconds=1))
    worker_holds(aws, "R0", to_ms(clock.now()))
    assert job(manual("second"), None)["decision"] == "skipped"
    skipped = metrics()

    assert (ran["LeaseAcquireAttempts"], ran["RunSucceeded"]) == (1, 1)
    assert ran["RunDuration"] == 20_000 and "TriggersSkipped" not in ran
    assert skipped["TriggersSkipped"] == 1
    assert "RunSucceeded" not in skipped and "RunDuration" not in skipped
    keys = {"run_id": seen["run_id"], "trigger_id": f"{JOB}@manual:first", "fence": 1}
    [ended] = logs(log_lines, "run ended")
    assert {k: ended[k] for k in keys} == keys and ended["status"] == "succeeded"
    [not_run] = logs(log_lines, "trigger not run")
    assert (not_run["decision"], not_run["trigger_id"], not_run["holder_run_id"],
            not_run["holder_fence"]) == ("skipped", f"{JOB}@manual:second", "R0", 2)
    assert "run_id" not in not_run and "fence" not in not_run


def test_a_takeover_of_a_dead_workers_lease_is_counted_and_names_the_run_it_displaced(
        aws, clock, metrics, log_lines):
    """GIVEN worker R0 died holding the lease (expired 2 minutes ago) WHEN a trigger runs
    THEN LeaseTakeovers is counted, a warning names R0 as the previous run, and the run
    record says whom it displaced."""
    worker_holds(aws, "R0", to_ms(clock.now()) - 180_000)
    job = job_of(aws, clock)

    assert job(manual("next"), None) == "done"

    assert metrics()["LeaseTakeovers"] == 1
    [warning] = logs(log_lines, "lease taken over")
    assert (warning["level"], warning["previous_run_id"]) == ("WARNING", "R0")
    [record] = [r for r in aws.runs(JOB) if r.trigger_id == f"{JOB}@manual:next"]
    assert record.extra["displaced_run_id"] == "R0"


def test_a_run_that_lost_its_lease_is_counted_lost_and_never_succeeded(
        aws, clock, metrics, log_lines):
    """GIVEN a run whose worker's clock passes its local deadline while the handler works
    WHEN the handler finds it out (``ensure_lease``) and stops THEN LeaseLost is counted,
    RunSucceeded is not, and "run ended" says lease_lost."""
    def handler(event: Any, context: Any) -> None:
        clock.advance(timedelta(seconds=56))
        current_run().ensure_lease()

    job = job_of(aws, clock, handler)
    outcome = job(manual("slow"), None)

    assert outcome["jobguard"] == "lease_lost"
    emitted = metrics()
    assert emitted["LeaseLost"] == 1 and "RunSucceeded" not in emitted
    assert [e["status"] for e in logs(log_lines, "run ended")] == ["lease_lost"]
    assert LeaseLostError.__name__ in (aws.runs(JOB)[0].error or "")


def test_a_queued_trigger_counts_itself_and_the_queue_depth_it_leaves(aws, clock, metrics):
    """GIVEN a QUEUE job whose lease worker R0 holds WHEN two triggers are queued THEN each
    emits TriggersQueued, and QueueDepth the pending count including itself (1, then 2)."""
    worker_holds(aws, "R0", to_ms(clock.now()))
    job = job_of(aws, clock, policy=OverlapPolicy.QUEUE)

    depths = []
    for name in ("a", "b"):
        assert job(manual(name), None)["decision"] == "queued"
        emitted = metrics()
        assert emitted["TriggersQueued"] == 1
        depths.append(emitted["QueueDepth"])
    assert depths == [1, 2]


def test_a_malformed_queue_message_is_logged_with_its_field_counted_and_deleted(
        aws, clock, log_lines, metrics):
    """GIVEN a QUEUE job WHEN its queue delivers a message that is not a jobguard trigger
    (its ``kind`` is unknown) THEN the message is reported processed (SQS deletes it: it
    can never run, and redelivered it would hold up the triggers behind it), a warning
    names the field, the error, the message id and its record's run id, and
    TriggerMessagesRejected counts it (the alarm's metric)."""
    job = job_of(aws, clock, policy=OverlapPolicy.QUEUE)
    body = json.dumps({"jobguard": 1, "job": JOB, "trigger_id": f"{JOB}@x", "kind": "bogus",
                       "event": None, "scheduled_at": None, "requested_by": None})
    aws.sqs.send_message(QueueUrl=aws.queues[JOB], MessageBody=body, MessageGroupId=JOB,
                         MessageDeduplicationId="bogus")

    delivered = aws.deliver(JOB, job)

    assert delivered is not None
    message, failed = delivered
    assert not failed
    [warning] = logs(log_lines, "malformed trigger message")
    assert (warning["level"], warning["field"], warning["message_id"]) == (
        "WARNING", "body.kind", message["MessageId"])
    assert "kind" in warning["error"]
    [record] = aws.runs(JOB)
    assert (record.status.value, record.run_id) == ("rejected", warning["run_id"])
    assert metrics()["TriggerMessagesRejected"] == 1
