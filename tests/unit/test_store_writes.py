"""The store's smaller writes, against the in-process emulator (no server): the wake
receipt a deferred message leaves, the operator's repair of a damaged row, and an
acquisition whose answer was lost.

GIVEN rows written by the store (or by hand, for damage), WHEN one of these writes runs,
THEN it changes exactly what it promises, only under its condition, and says whether it
did. ``make mutate`` found these reached only by the slow scenario suites
(docs/mutation.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from jobguard.dynamodb import DynamoJobStore
from jobguard.errors import StoreError
from jobguard.lease import Acquired
from jobguard.requests import DecisionWrite, ForceRelease, Release, Take
from jobguard.trigger_state import State
from jobguard.triggers import Trigger, TriggerKind

JOB = "writes-job"
T0 = 1_800_000_000_000
LEASE_MS = 60_000


def take(store: DynamoJobStore, n: int, run_id: str, *, job: str = JOB, now_ms: int = T0):
    result = store.take(Take(Trigger(job, f"{job}@manual:{n}", TriggerKind.MANUAL), run_id=run_id,
                             owner=f"worker-{run_id}", now_ms=now_ms, lease_ms=LEASE_MS,
                             skew_ms=5_000))
    assert isinstance(result, Acquired)
    return result


def _pk(job: str) -> dict[str, Any]:
    from jobguard.schema import LEASE_SK, PARTITION_KEY, SORT_KEY, job_pk

    return {PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": LEASE_SK}}


# -- set_wake ----------------------------------------------------------------------------

def test_the_holder_gets_the_wake_receipt_and_nobody_else_does(aws):
    """GIVEN R1 holds the lease of job A, and job B has a lease row held by R9
    WHEN a deferred message of A leaves its receipt for R1, then one for a run that does
    not hold A's lease, then one for a job with no row
    THEN only the first is kept (True), on A's row alone; the others change nothing and
    say so (False)."""
    take(aws.store, 1, "R1")
    take(aws.store, 1, "R9", job="other-job")
    assert aws.store.set_wake(JOB, holder_run_id="R1", receipt="rcpt-1") is True
    assert aws.store.read_lease(JOB).wake_receipt == "rcpt-1"
    assert aws.store.set_wake(JOB, holder_run_id="R2", receipt="rcpt-2") is False
    assert aws.store.read_lease(JOB).wake_receipt == "rcpt-1"
    assert aws.store.set_wake("no-row-job", holder_run_id="R1", receipt="rcpt-3") is False
    assert aws.store.read_lease_raw("no-row-job") is None
    assert aws.store.read_lease("other-job").wake_receipt is None


def test_a_wake_receipt_the_backend_fails_is_a_store_error_naming_set_wake_and_the_job(aws):
    """GIVEN a backend that refuses the write for another reason than the condition
    WHEN set_wake runs THEN a StoreError names ``set_wake`` and the job."""
    take(aws.store, 1, "R1")
    store = DynamoJobStore("no-such-table", client=aws.ddb)
    with pytest.raises(StoreError) as info:
        store.set_wake(JOB, holder_run_id="R1", receipt="rcpt")
    assert info.value.operation == "set_wake" and info.value.job == JOB
    assert "no-such-table" in str(info.value) or "not found" in str(info.value).lower()


# -- repair ------------------------------------------------------------------------------

def _damage(aws, job: str, **attributes: dict[str, Any]) -> None:
    names = {f"#a{i}": k for i, k in enumerate(attributes)}
    values = {f":v{i}": v for i, v in enumerate(attributes.values())}
    aws.ddb.update_item(TableName=aws.table, Key=_pk(job),
                        UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}"
                                                            for i in range(len(names))),
                        ExpressionAttributeNames=names, ExpressionAttributeValues=values)


def test_repair_of_a_row_with_a_garbled_fence_issues_the_next_fence_above_the_high_water(aws):
    """GIVEN R1 took the lease three times (fence 3, high-water 3) and the row's fence
    was overwritten with text WHEN the operator repairs the row THEN the new fence is
    exactly 4 (never 1, never skipping), the holder is gone, the release names the
    operator and the stuck run, and the next acquisition gets fence 5."""
    for n in (1, 2, 3):
        take(aws.store, n, f"R{n}", now_ms=T0 + n * 2 * LEASE_MS)
    _damage(aws, JOB, fence={"S": "three"})
    assert aws.store.repair(JOB, now_ms=T0 + 10 * LEASE_MS, by="alice") == 4
    raw = aws.store.read_lease_raw(JOB)
    assert raw["fence"] == 4 and "run_id" not in raw and raw["last_run_id"] == "R3"
    assert raw["released_by"] == "operator:alice"
    assert raw["released_at_ms"] == T0 + 10 * LEASE_MS and raw["queued_n"] == 0
    assert not {"prev_run_id", "paused_at_ms", "paused_reason", "trigger_id", "owner",
                "expires_at_ms"} & set(raw), raw
    assert aws.store.high_water(JOB) == 4
    assert aws.store.read_trigger(JOB, f"{JOB}@manual:3").state is State.RELEASED
    assert take(aws.store, 4, "R4", now_ms=T0 + 11 * LEASE_MS).fence == 5


def test_repair_keeps_a_row_fence_above_the_high_water_and_a_pause(aws):
    """GIVEN a row whose fence (9) is above the high-water mark (1), paused, held by R1
    WHEN the operator repairs it (default actor) THEN the fence is 10, the pause and its
    reason stay, and the release names ``operator:operator``."""
    take(aws.store, 1, "R1")
    aws.store.pause(JOB, reason="maintenance", now_ms=T0 + 1_000)
    _damage(aws, JOB, fence={"N": "9"})
    assert aws.store.repair(JOB, now_ms=T0 + 2_000) == 10
    raw = aws.store.read_lease_raw(JOB)
    assert raw["fence"] == 10 and raw["released_by"] == "operator:operator"
    assert raw["paused_reason"] == "maintenance" and "paused_at_ms" in raw
    assert aws.store.high_water(JOB) == 10


def test_repair_of_a_row_nobody_holds_clears_no_trigger_and_never_clobbers_a_new_holder(aws):
    """GIVEN a released row (no holder) with a boolean where the fence belongs
    WHEN repaired THEN the fence is above the high-water mark and no last run is named;
    AND GIVEN a row that gained a holder after the repair read it, the repair is refused
    (StoreError naming ``repair``) and the holder keeps its lease."""
    take(aws.store, 1, "R1")
    aws.store.force_release(ForceRelease(JOB, holder_run_id="R1", fence=1, now_ms=T0 + 1_000,
                                         by="bob", reason="test"))
    hw = aws.store.high_water(JOB)
    _damage(aws, JOB, fence={"BOOL": True})
    new = aws.store.repair(JOB, now_ms=T0 + 2_000)
    assert new == hw + 1
    raw = aws.store.read_lease_raw(JOB)
    assert "last_run_id" not in raw and "run_id" not in raw

    # a second operator repairs and a run takes the lease between this repair's read
    # and its write
    _damage(aws, JOB, fence={"S": "again"})

    def meanwhile(**_: Any) -> None:
        aws.ddb.meta.events.unregister("before-call.dynamodb.TransactWriteItems",
                                       unique_id="meanwhile")
        DynamoJobStore(aws.table, client=aws.ddb).repair(JOB, now_ms=T0 + 3_000, by="carol")
        take(aws.store, 2, "R2", now_ms=T0 + 3_000)

    aws.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", meanwhile,
                                 unique_id="meanwhile")
    with pytest.raises(StoreError) as info:
        aws.store.repair(JOB, now_ms=T0 + 4_000, by="dave")
    assert info.value.operation == "repair" and info.value.job == JOB
    lease = aws.store.read_lease(JOB)
    assert lease.run_id == "R2" and lease.fence == new + 2


# -- an acquisition whose answer was lost --------------------------------------------------

def _lose_answer(client: Any, *, apply: bool) -> Any:
    """The next TransactWriteItems times out on the way back (applied) or out (not)."""
    state = {"done": False}

    def before(**kwargs: Any) -> None:
        if state["done"]:
            return
        state["done"] = True
        if not apply:
            raise ReadTimeoutError(endpoint_url="emulator")

    def after(**kwargs: Any) -> None:
        if state.get("raised"):
            return
        if apply and state["done"]:
            state["raised"] = True
            raise ReadTimeoutError(endpoint_url="emulator")

    client.meta.events.register("before-call.dynamodb.TransactWriteItems", before,
                                unique_id="lose-before")
    client.meta.events.register("after-call.dynamodb.TransactWriteItems", after,
                                unique_id="lose-after")
    return state


def _unregister(client: Any) -> None:
    client.meta.events.unregister("before-call.dynamodb.TransactWriteItems",
                                  unique_id="lose-before")
    client.meta.events.unregister("after-call.dynamodb.TransactWriteItems",
                                  unique_id="lose-after")


@pytest.mark.parametrize("applied", [True, False], ids=["landed", "never-sent"])
def test_an_acquisition_whose_answer_was_lost_reads_back_whether_it_landed(aws, applied):
    """GIVEN R1's acquisition times out (after DynamoDB applied it, or before it was sent)
    WHEN the store reads back THEN it knows: when it landed it reports fence 1 without a
    second attempt; when it did not, it tries again and gets fence 1. Never fence 2, and
    never Busy against its own lease."""
    sent: list[int] = []
    aws.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems",
                                 lambda **_: sent.append(1), unique_id="count")
    _lose_answer(aws.ddb, apply=applied)
    try:
        result = aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:1", TriggerKind.MANUAL),
                                     run_id="R1", owner="w", now_ms=T0, lease_ms=LEASE_MS,
                                     skew_ms=5_000))
    finally:
        _unregister(aws.ddb)
        aws.ddb.meta.events.unregister("before-call.dynamodb.TransactWriteItems",
                                       unique_id="count")
    assert isinstance(result, Acquired) and result.fence == 1, result
    assert result.displaced_run_id is None
    assert aws.store.read_lease(JOB).run_id == "R1" and aws.store.high_water(JOB) == 1
    assert len(sent) == (1 if applied else 2)


def test_repair_of_a_paused_row_without_its_reason_keeps_the_pause_and_says_paused(aws):
    """GIVEN a paused row whose reason was lost (and a garbled fence) WHEN repaired THEN
    the pause stays with the reason ``paused``."""
    take(aws.store, 1, "R1")
    aws.store.pause(JOB, reason="maintenance", now_ms=T0 + 1_000)
    _damage(aws, JOB, fence={"S": "x"})
    aws.ddb.update_item(TableName=aws.table, Key=_pk(JOB), UpdateExpression="REMOVE #r",
                        ExpressionAttributeNames={"#r": "paused_reason"})
    aws.store.repair(JOB, now_ms=T0 + 2_000)
    raw = aws.store.read_lease_raw(JOB)
    assert raw["paused_reason"] == "paused" and raw["paused_at_ms"] == T0 + 1_000


def test_repair_of_a_held_row_that_lost_its_trigger_id_still_repairs(aws):
    """GIVEN a held row whose trigger_id attribute is gone WHEN repaired THEN the row is
    rewritten (no trigger to mark released) and the holder is gone."""
    take(aws.store, 1, "R1")
    aws.ddb.update_item(TableName=aws.table, Key=_pk(JOB), UpdateExpression="REMOVE #t",
                        ExpressionAttributeNames={"#t": "trigger_id"})
    assert aws.store.repair(JOB, now_ms=T0 + 2_000) == 2
    assert aws.store.read_lease(JOB).run_id is None
    assert aws.store.read_trigger(JOB, f"{JOB}@manual:1").state is State.RUNNING


@pytest.mark.parametrize("meanwhile", ["holder released", "trigger queued", "paused"])
def test_repair_is_refused_when_the_row_moved_without_a_new_fence(aws, meanwhile):
    """GIVEN a repair that read the row (held by R1, or free with no queued trigger)
    WHEN, before its write, R1 releases (no new fence) or a trigger is queued (the count
    moves) THEN the repair is refused: it would erase what happened."""
    from jobguard.records import Decision, RunRecord, RunStatus
    from jobguard.trigger_state import Next, Route

    take(aws.store, 1, "R1")
    if meanwhile == "trigger queued":
        aws.store.force_release(ForceRelease(JOB, holder_run_id="R1", fence=1, now_ms=T0 + 500,
                                             by="bob", reason="test"))
        take(aws.store, 2, "R2", now_ms=T0 + 600)

    def act(**_: Any) -> None:
        aws.ddb.meta.events.unregister("before-call.dynamodb.TransactWriteItems",
                                       unique_id="act")
        if meanwhile == "paused":
            aws.store.pause(JOB, reason="maintenance", now_ms=T0 + 900)
        elif meanwhile == "holder released":
            record = RunRecord(job=JOB, run_id="R1", trigger_id=f"{JOB}@manual:1",
                               trigger_kind="manual", policy="QUEUE", decision=Decision.RAN,
                               status=RunStatus.SUCCEEDED, started_at_ms=T0,
                               ended_at_ms=T0 + 1_000)
            released = aws.store.release(Release(JOB, run_id="R1", fence=1,
                                                 trigger_id=f"{JOB}@manual:1", outcome=State.DONE,
                                                 record=record, record_ttl_s=10**10,
                                                 trigger_ttl_s=10**10))
            assert released.released
        else:
            record = RunRecord(job=JOB, run_id="Q1", trigger_id=f"{JOB}@manual:q",
                               trigger_kind="manual", policy="QUEUE",
                               decision=Decision.QUEUED, status=RunStatus.QUEUED,
                               started_at_ms=T0 + 700, ended_at_ms=T0 + 700)
            lease = aws.store.read_lease(JOB)
            refused = aws.store.record_decision(DecisionWrite(record, step=Next.QUEUE, lease=lease,
                                                              item=None, route=Route.QUEUE,
                                                              now_ms=T0 + 700, skew_ms=5_000,
                                                              max_queued=5, trigger_ttl_s=10**10,
                                                              record_ttl_s=10**10))
            assert refused is None and aws.store.read_lease(JOB).queued_n == 1

    aws.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", act,
                                 unique_id="act")
    before = aws.store.high_water(JOB)
    with pytest.raises(StoreError):
        aws.store.repair(JOB, now_ms=T0 + 2_000)
    assert aws.store.high_water(JOB) == before
    if meanwhile == "paused":
        assert aws.store.read_lease(JOB).paused_reason == "maintenance"
    elif meanwhile == "trigger queued":
        lease = aws.store.read_lease(JOB)
        assert lease.queued_n == 1 and lease.run_id == "R2"
    else:
        assert aws.store.read_lease(JOB).released_by == "run"


def test_repair_keeps_a_pending_follow_up(aws):
    """GIVEN a held row naming a pending follow-up (coalesced triggers are owed a run)
    WHEN the operator repairs it THEN the holder goes and the follow-up stays named."""
    take(aws.store, 1, "R1")
    _damage(aws, JOB, follow_up={"S": f"{JOB}@follow-up:R1"}, fence={"S": "x"})
    aws.store.repair(JOB, now_ms=T0 + 2_000)
    raw = aws.store.read_lease_raw(JOB)
    assert raw["follow_up"] == f"{JOB}@follow-up:R1" and "run_id" not in raw


# -- put_run -----------------------------------------------------------------------------

def test_a_run_record_the_backend_refuses_is_a_store_error_naming_put_run_and_the_job(aws):
    """GIVEN a backend that refuses the write for another reason than the condition
    WHEN a run record is written THEN a StoreError names ``put_run`` and the record's job
    (what the operator's message and the fault inventory key on)."""
    from jobguard.records import Decision, RunRecord, RunStatus

    record = RunRecord(job=JOB, run_id="R1", trigger_id=f"{JOB}@manual:1",
                       trigger_kind="manual", policy="SKIP", decision=Decision.RAN,
                       status=RunStatus.SUCCEEDED, started_at_ms=T0, ended_at_ms=T0 + 1_000)
    store = DynamoJobStore("no-such-table", client=aws.ddb)
    with pytest.raises(StoreError) as info:
        store.put_run(record, ttl_epoch_s=2_000_000_000)
    assert info.value.operation == "put_run" and info.value.job == JOB


# -- record_decision -----------------------------------------------------------------------

def test_a_duplicates_record_never_replaces_the_record_under_its_run_id(aws):
    """GIVEN run R1 took the lease and released it, its record saying it succeeded
    WHEN a decision DUPLICATE is recorded under the same run id (a delivery whose own
    acquisition landed unseen) THEN the record stays the run's: a record under that id
    says what ended it, and "duplicate" would erase it. Nothing else is written."""
    from jobguard.records import Decision, RunRecord, RunStatus
    from jobguard.requests import Release
    from jobguard.trigger_state import Next, Route, TriggerRecord

    take(aws.store, 1, "R1")
    trigger_id = f"{JOB}@manual:1"
    ran = RunRecord(job=JOB, run_id="R1", trigger_id=trigger_id, trigger_kind="manual",
                    policy="SKIP", decision=Decision.RAN, status=RunStatus.SUCCEEDED,
                    started_at_ms=T0, ended_at_ms=T0 + 1_000)
    assert aws.store.release(Release(JOB, run_id="R1", fence=1, trigger_id=trigger_id,
                                     outcome=State.DONE, record=ran, record_ttl_s=10**10,
                                     trigger_ttl_s=10**10)).released
    lease_before = aws.store.read_lease_raw(JOB)

    duplicate = RunRecord(job=JOB, run_id="R1", trigger_id=trigger_id, trigger_kind="manual",
                          policy="SKIP", decision=Decision.DUPLICATE,
                          status=RunStatus.DUPLICATE, started_at_ms=T0 + 2_000,
                          ended_at_ms=T0 + 2_000)
    done = TriggerRecord(trigger_id=trigger_id, state=State.DONE, route=Route.DIRECT,
                         run_id="R1", ttl_epoch_s=10**10)
    assert aws.store.record_decision(DecisionWrite(
        duplicate, step=Next.DUPLICATE, lease=aws.store.read_lease(JOB), item=done,
        route=Route.DIRECT, now_ms=T0 + 2_000, skew_ms=5_000, max_queued=5,
        trigger_ttl_s=10**10, record_ttl_s=10**10)) is None

    kept = aws.store.get_run(JOB, "R1")
    assert isinstance(kept, RunRecord)
    assert (kept.decision, kept.status, kept.ended_at_ms) == (
        Decision.RAN, RunStatus.SUCCEEDED, T0 + 1_000)
    assert aws.store.read_lease_raw(JOB) == lease_before


# -- release: its own landed attempt, recognised from a read ------------------------------

def test_a_release_whose_landed_answer_was_lost_still_returns_the_follow_up(aws, clock):
    """GIVEN a COALESCE job whose lease R1 holds, and a tick that coalesced into it (the
    row names the follow-up) WHEN R1 releases: its first attempt learns the follow-up,
    its second lands but its answer is lost, its third finds the row released by R1
    THEN the release says released and still returns the follow-up, so R1 sends its
    message (the coalesced trigger is owed a run); the row is free and names no
    follow-up."""
    from datetime import timedelta

    from jobguard import GuardedJob, JobConfig, OverlapPolicy
    from jobguard.clock import to_ms
    from jobguard.records import Decision, RunRecord, RunStatus
    from jobguard.triggerqueue import TriggerQueue

    job = "lost-release-follow-up"
    now_ms = to_ms(clock.now())
    take(aws.store, 1, "R1", job=job, now_ms=now_ms)
    config = JobConfig(name=job, policy=OverlapPolicy.COALESCE, table_name=aws.table,
                       lease=timedelta(milliseconds=LEASE_MS))
    guarded = GuardedJob(config, lambda e, c: "ran", store=aws.store, clock=clock,
                         queue=TriggerQueue(aws.fifo_queue(job), client=aws.sqs),
                         owner="test-worker")
    out = guarded({"job": job, "manual": True, "trigger_id": "during",
                   "requested_by": "ops"}, None)
    assert out["decision"] == "coalesced"
    follow_up = aws.store.read_lease(job).follow_up
    assert follow_up is not None
    calls: list[int] = []

    def lose_second(http_response: Any, **_: Any) -> None:
        calls.append(http_response.status_code)
        if len(calls) == 2 and http_response.status_code == 200:
            raise ReadTimeoutError(endpoint_url="emulator (answer lost)")

    aws.ddb.meta.events.register("after-call.dynamodb.TransactWriteItems", lose_second,
                                 unique_id="lose-second-release")
    trigger_id = f"{job}@manual:1"
    record = RunRecord(job=job, run_id="R1", trigger_id=trigger_id, trigger_kind="manual",
                       policy="COALESCE", decision=Decision.RAN,
                       status=RunStatus.SUCCEEDED, started_at_ms=now_ms,
                       ended_at_ms=now_ms + 1_000, fence=1)
    try:
        released = aws.store.release(Release(
            job, run_id="R1", fence=1, trigger_id=trigger_id, outcome=State.DONE,
            record=record, record_ttl_s=now_ms // 1000 + 60,
            trigger_ttl_s=now_ms // 1000 + 60))
    finally:
        aws.ddb.meta.events.unregister("after-call.dynamodb.TransactWriteItems",
                                       unique_id="lose-second-release")
    assert len(calls) >= 2, calls
    assert released.released is True and released.follow_up == follow_up
    lease = aws.store.read_lease(job)
    assert lease.run_id is None and lease.follow_up is None and lease.last_run_id == "R1"
