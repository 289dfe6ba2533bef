"""Three histories the protocol explorer found (seeds 482518, 464696, 465056), each told
here without the explorer: the story as a user's job would meet it, checked on the
trigger items, the run log and what ran.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from botocore.exceptions import ClientError

from jobguard import OverlapPolicy, hooks
from jobguard.clock import to_ms
from jobguard.errors import DamagedRowError, SendError
from jobguard.requests import ForceRelease, Take
from jobguard.triggers import Trigger, TriggerKind
from tests.scenarios._support import make_job, tick
from tests.scenarios._trigger_support import (
    Script,
    call,
    decisions_of,
    deliver,
    drain,
    hold_a_run,
    manual,
    start,
    tick_id,
)

JOB = "crm-sync"


def _follow_up_delivered_while_paused(aws: Any, clock: Any) -> tuple[Any, ...]:
    """A COALESCE job whose run is held, a manual trigger coalesced into the holder's
    follow-up, the job paused and the follow-up's message delivered: it waits (failed
    delivery, redelivered later) for the holder it follows."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.COALESCE)
    gate, holder, _ = hold_a_run(job, script, JOB, clock.now())
    ev1, _ = manual(JOB, "one")
    assert call(job, ev1)["decision"] == "coalesced"
    follow_up = aws.store.read_lease(JOB).follow_up
    assert follow_up is not None
    aws.store.pause(JOB, reason="maintenance", now_ms=to_ms(clock.now()))
    first = deliver(aws, JOB, job)
    assert first is not None and first.failed  # it waits for the holder it follows
    return script, job, gate, holder, follow_up


def _coalesce_job_held_by_a_dead_run(aws: Any, clock: Any) -> tuple[Any, ...]:
    """A COALESCE job whose lease run H (owner ``dead``) took for 60 s and will never
    release: only its expiry, a recovery or the operator frees the row."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.COALESCE)
    held = aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:H", TriggerKind.MANUAL),
                               run_id="H", owner="dead", now_ms=to_ms(clock.now()),
                               lease_ms=60_000, skew_ms=5_000))
    return script, job, held


def test_a_follow_up_delivered_while_paused_under_its_holder_stays_coalescable(aws, clock):
    """Seed 482518. GIVEN a COALESCE job whose run holds the lease, a manual trigger
    coalesced into the holder's follow-up WHEN the job is paused, the follow-up's message
    is delivered while the holder still runs, the job resumed and another manual trigger
    arrives THEN that trigger is coalesced too (before: refused 8 times on the follow-up's
    item, "no stable decision"), and once the holder releases the follow-up runs once."""
    script, job, gate, holder, follow_up = _follow_up_delivered_while_paused(aws, clock)
    assert aws.store.read_trigger(JOB, follow_up).state.value == "queued"
    assert aws.store.resume(JOB)
    ev2, _ = manual(JOB, "two")
    second = call(job, ev2)
    gate.release.set()
    holder.join(10)
    drain(aws, JOB, job)
    assert isinstance(second, dict) and second["decision"] == "coalesced", second
    assert script.ran(follow_up) == 1


def test_a_follow_up_deferred_under_a_pause_is_recorded_paused_after_the_release(aws, clock):
    """Seed 482518, the job still paused. GIVEN the same coalesced follow-up, delivered
    while paused under its holder WHEN the holder releases (waking it) THEN it is
    recorded paused, never run, and the lease row no longer names it."""
    script, job, gate, holder, follow_up = _follow_up_delivered_while_paused(aws, clock)
    gate.release.set()
    holder.join(10)
    drain(aws, JOB, job)
    assert decisions_of(aws, JOB, follow_up) == ["paused"] and script.ran(follow_up) == 0
    assert aws.store.read_lease(JOB).follow_up is None


def test_a_follow_up_is_not_recorded_paused_under_a_recovery_that_took_the_lease_meanwhile(
        aws, clock):
    """Seed 482518, raced (found by review). GIVEN a COALESCE job whose holder died
    holding the lease with a follow-up named on the row, the holder's lease expired and
    the job paused WHEN the follow-up reads the row (paused, no live holder) and a
    recovery takes the lease (ignoring the pause, keeping the follow-up named) before the
    follow-up's paused write THEN that write is refused on the row and the follow-up waits
    for the recovery; after a resume a manual trigger meeting the recovery is coalesced
    (before: the follow-up was recorded paused and that trigger failed, no stable
    decision)."""
    script, job, held = _coalesce_job_held_by_a_dead_run(aws, clock)
    assert held.fence >= 1
    ev1, _ = manual(JOB, "one")
    assert call(job, ev1)["decision"] == "coalesced"
    follow_up = aws.store.read_lease(JOB).follow_up
    assert follow_up is not None
    clock.advance(timedelta(minutes=3))
    aws.store.pause(JOB, reason="maintenance", now_ms=to_ms(clock.now()))
    recovery = f"{JOB}@recovery:r"
    gate = script.hold(recovery)
    started = threading.Event()
    box: dict[str, Any] = {}

    guarded = job

    def between(job: str, trigger_id: str) -> None:
        if trigger_id == follow_up and not started.is_set():
            started.set()
            thread, result = start(lambda: guarded.run_exclusive(
                Trigger(JOB, recovery, TriggerKind.RECOVERY), wait=0, ignore_pause=True))
            box.update(thread=thread, result=result)
            assert gate.entered.wait(10), result

    with hooks.on("after_lease_read", between):
        delivered = deliver(aws, JOB, job)
    assert delivered is not None and started.is_set()
    assert aws.store.read_trigger(JOB, follow_up).state.value == "queued"
    assert aws.store.resume(JOB)
    ev2, _ = manual(JOB, "two")
    second = call(job, ev2)
    gate.release.set()
    box["thread"].join(10)
    drain(aws, JOB, job)
    assert isinstance(second, dict) and second["decision"] == "coalesced", second
    assert script.ran(follow_up) == 1


def test_a_queued_trigger_sent_again_after_its_undo_still_runs(aws, clock):
    """Seed 464696. GIVEN a QUEUE job whose run holds the lease, and SQS's FIFO
    deduplication as AWS has it (an id sent in the last 5 minutes is accepted and not
    delivered, even after its message was deleted) WHEN a manual trigger's queue send fails
    while Lambda's second copy of it meets the item queued and sends the message again,
    the first delivery undoes its decision, the orphan message is handled, and Lambda
    retries the first delivery under a new holder THEN the retry's message is delivered
    and the trigger runs once (before: its send reused the first decision's id, SQS
    dropped it, and the trigger stayed queued for ever)."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.QUEUE, max_queued=2)
    gate, holder, _ = hold_a_run(job, script, JOB, clock.now())
    ev, m1 = manual(JOB, "export")
    queue_client = job.runtime().queue._client
    failed = threading.Event()
    second: dict[str, Any] = {}
    sent: dict[str, Any] = {}

    def before_call(params: dict[str, Any], **_: Any) -> Any:
        if not failed.is_set():
            failed.set()
            second["out"] = call(job, ev)
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "injected 4xx"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "SendMessage")
        body = params.get("body")
        if isinstance(body, (bytes, str)):
            body = json.loads(body)
        key = body["MessageDeduplicationId"]
        first_sent = sent.get(key)
        if first_sent is not None and clock.now() - first_sent < timedelta(minutes=5):
            return (SimpleNamespace(status_code=200, headers={}),
                    {"MessageId": "deduplicated", "MD5OfMessageBody": "",
                     "SequenceNumber": "0", "ResponseMetadata": {"HTTPStatusCode": 200}})
        sent[key] = clock.now()
        return None

    queue_client.meta.events.register("before-call.sqs.SendMessage", before_call,
                                      unique_id="fifo-dedup")
    try:
        first = call(job, ev)
        assert isinstance(first, SendError) and second["out"]["decision"] == "duplicate"
        gate.release.set()
        holder.join(10)
        drain(aws, JOB, job)  # the resent message meets no queued item: a duplicate
        clock.advance(timedelta(seconds=90))
        gate2, holder2, _ = hold_a_run(job, script, JOB, clock.now())
        retry = call(job, ev)
        assert isinstance(retry, dict) and retry["decision"] == "queued", retry
        gate2.release.set()
        holder2.join(10)
        drain(aws, JOB, job)
    finally:
        queue_client.meta.events.unregister("before-call.sqs.SendMessage",
                                            unique_id="fifo-dedup")
    assert script.ran(m1) == 1, "the queued manual trigger never ran"
    assert aws.store.read_lease(JOB).queued_n == 0


def test_an_acquisition_that_saw_no_row_never_overwrites_a_held_row_without_fence(aws, clock):
    """Seed 465056. GIVEN a REPLACE job, a manual trigger that read the lease row before
    any run (none) WHEN a tick takes the lease and runs, its row loses its fence (damaged),
    and the manual trigger's acquisition is sent THEN it is refused and names the damage
    (before: "no row" matched the damaged row, and the manual trigger ran beside the live
    run); after the operator's force release the tick's retry is a duplicate and the
    manual trigger's retry runs, each once."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.REPLACE)
    t0 = clock.now()
    ev, m = manual(JOB, "export")
    read, go = threading.Event(), threading.Event()

    def park(job: str, trigger_id: str) -> None:
        if trigger_id == m and not read.is_set():
            read.set()
            assert go.wait(10)

    with hooks.on("after_lease_read", park):
        mthread, mbox = start(lambda: call(job, ev))
        assert read.wait(10)
        gate = script.hold(tick_id(JOB, t0))
        tthread, _ = start(lambda: call(job, tick(JOB, t0)))
        assert gate.entered.wait(10)
        aws.ddb.update_item(TableName=aws.table,
                            Key={"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "LEASE"}},
                            UpdateExpression="REMOVE fence")
        go.set()
        mthread.join(10)
    out = mbox.get("result")
    assert script.ran(m) == 0, "ran while another run held the lease"
    assert isinstance(out, DamagedRowError) and "fence" in str(out)
    assert aws.lease_item(JOB)["trigger_id"]["S"] == tick_id(JOB, t0)
    gate.release.set()
    tthread.join(10)
    holder = aws.lease_item(JOB)["run_id"]["S"]
    assert aws.store.force_release(ForceRelease(
        job=JOB, holder_run_id=holder, fence=1, now_ms=to_ms(clock.now()), by="ops",
        reason="damaged"))
    clock.advance(timedelta(minutes=2))
    call(job, tick(JOB, t0))
    call(job, ev)
    assert script.ran(tick_id(JOB, t0)) == 1 and script.ran(m) == 1


def test_a_follow_up_named_on_a_repaired_row_runs_after_a_recovery(aws, clock):
    """Seed 486604. GIVEN a COALESCE job whose holder died holding the lease, a manual
    trigger coalesced into its follow-up (named on the row, its message on the queue), the
    row damaged and repaired by the operator's ``release --force`` (the fence moves on, the
    follow-up stays named, its gate stays the dead holder's fence) WHEN a recovery (a
    service run) takes the lease and releases THEN the recovery carries the follow-up on
    and the follow-up's message runs it once (before: the recovery's gate move was refused
    on ``gate_fence = row fence``, it concluded the follow-up had been served, took the
    lease as a serving run, and the follow-up was absorbed: the coalesced trigger never
    ran)."""
    script, job, held = _coalesce_job_held_by_a_dead_run(aws, clock)
    assert held.fence == 1
    ev1, _ = manual(JOB, "one")
    assert call(job, ev1)["decision"] == "coalesced"
    follow_up = aws.store.read_lease(JOB).follow_up
    assert follow_up is not None
    aws.ddb.update_item(TableName=aws.table,
                        Key={"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "LEASE"}},
                        UpdateExpression="SET expires_at_ms = :g",
                        ExpressionAttributeValues={":g": {"S": "garbage"}})
    # jobguard release --force on the damaged row: repaired (holder freed, fence 2)
    assert aws.store.force_release(ForceRelease(
        job=JOB, holder_run_id="H", fence=1, now_ms=to_ms(clock.now()), by="ops",
        reason="damaged"))
    lease = aws.store.read_lease(JOB)
    assert lease.run_id is None and lease.fence == 2 and lease.follow_up == follow_up
    assert aws.store.read_trigger(JOB, follow_up).gate_fence == 1
    recovery = f"{JOB}@recovery:r"
    job.run_exclusive(Trigger(JOB, recovery, TriggerKind.RECOVERY), wait=0)
    assert script.ran(recovery) == 1
    drain(aws, JOB, job)
    assert aws.store.read_trigger(JOB, follow_up).state.value == "done", \
        decisions_of(aws, JOB, follow_up)
    assert script.ran(follow_up) == 1
