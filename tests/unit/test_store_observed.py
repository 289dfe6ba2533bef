"""What the store says and sends, seen from outside: its return values, the rows it
leaves, and the requests themselves, on the in-process emulator.

GIVEN the job store (leases, triggers, run records) or the item store (job row, items)
on the emulator, WHEN a decision, a refusal, an operator's release or a commit happens,
THEN a user sees what the store promises: the record names the holder and its fence and
the run's trigger; a refusal names exactly the item that refused; a force release never
lowers the fence mark; a queue decision lands only while the lease row still allows it;
reads are strongly consistent, transactions carry a request token, counted requests are
the requests sent, and every expression uses exactly the placeholders it defines, in
their case (DynamoDB refuses anything else; the emulator is more lenient, so these are
checked on the wire, with a botocore event hook, as a user auditing the calls would).

``make mutate`` found each of these unasserted (docs/mutation.md).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from jobguard import GuardedJob, JobConfig, OverlapPolicy, hooks
from jobguard.clock import to_ms
from jobguard.dynamodb_items import MAX_CLAIM, DynamoItemStore
from jobguard.errors import StoreError
from jobguard.lease import Acquired, Busy, LeaseState
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import Acquisition, ForceRelease, Release, Take
from jobguard.trigger_state import Refused, Route, State, TriggerRecord
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import Trigger, TriggerKind
from jobguard.workitems import Commit, Fence, ItemState, Unresolved

JOB = "observed-job"
LEASE = timedelta(seconds=60)
LEASE_MS = 60_000
SKEW_MS = 5_000  # JobConfig's default skew margin
DAY_S = 86_400


# -- helpers -------------------------------------------------------------------------------

Call = tuple[str, dict[str, Any]]


@pytest.fixture
def wire(aws: Any) -> Iterator[list[Call]]:
    """Every DynamoDB request sent through the test's client: (operation, parameters)."""
    sent: list[Call] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        sent.append((model.name, copy.deepcopy(params)))

    aws.ddb.meta.events.register("before-parameter-build.dynamodb", record,
                                 unique_id="record-wire")
    yield sent
    aws.ddb.meta.events.unregister("before-parameter-build.dynamodb", unique_id="record-wire")


@pytest.fixture
def injected(aws: Any) -> Iterator[Callable[[str, Callable[[int], None]], None]]:
    """``injected(operation, fault)``: ``fault(n)`` runs before the n-th call (1, 2, ...)
    of ``operation`` is sent, and may raise the error that call gets instead."""
    registered: list[str] = []

    def inject(operation: str, fault: Callable[[int], None]) -> None:
        calls = [0]

        def before(**_: Any) -> None:
            calls[0] += 1
            fault(calls[0])

        event = f"before-call.dynamodb.{operation}"
        aws.ddb.meta.events.register(event, before, unique_id=f"inject-{operation}")
        registered.append(event)

    yield inject
    for event in registered:
        aws.ddb.meta.events.unregister(event, unique_id=f"inject-{event.rsplit('.', 1)[1]}")


def client_error(code: str, operation: str, status: int = 400, **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"injected {code}"},
                        "ResponseMetadata": {"HTTPStatusCode": status}, **extra}, operation)


_EXPRESSIONS = ("ConditionExpression", "UpdateExpression", "KeyConditionExpression",
                "FilterExpression", "ProjectionExpression")
# DynamoDB's expression functions; "these function names are case-sensitive"
_FUNCTIONS = {"attribute_exists", "attribute_not_exists", "attribute_type", "begins_with",
              "contains", "size", "if_not_exists", "list_append"}
_OPERATORS = {"AND", "OR", "NOT", "IN", "BETWEEN", "SET", "REMOVE", "ADD", "DELETE"}


def expression_problems(params: dict[str, Any]) -> list[str]:
    """What DynamoDB would refuse in one request's (or transaction action's) expressions:
    a placeholder used but not defined (names and values are case-sensitive), one defined
    but unused, a function it does not know (case-sensitive too)."""
    text = " ".join(params[k] for k in _EXPRESSIONS if k in params)
    names = set(params.get("ExpressionAttributeNames", {}))
    values = set(params.get("ExpressionAttributeValues", {}))
    used_names = set(re.findall(r"#[A-Za-z0-9_]+", text))
    used_values = set(re.findall(r":[A-Za-z0-9_]+", text))
    problems = [f"undefined {p}" for p in sorted((used_names - names) | (used_values - values))]
    problems += [f"unused {p}" for p in sorted((names - used_names) | (values - used_values))]
    problems += [f"unknown function {f}" for f in re.findall(r"([A-Za-z_]+)\s*\(", text)
                 if f not in _FUNCTIONS | _OPERATORS]
    return problems


def wire_problems(sent: list[Call]) -> list[tuple[str, list[str]]]:
    found = []
    for operation, params in sent:
        parts = [params]
        if operation == "TransactWriteItems":
            parts = [next(iter(a.values())) for a in params["TransactItems"]]
        for part in parts:
            problems = expression_problems(part)
            if problems:
                found.append((operation, problems))
    return found


def take(aws: Any, run_id: str, *, at_ms: int, trigger: str | None = None,
         job: str = JOB) -> Acquired:
    result = aws.store.take(Take(
        Trigger(job, f"{job}@manual:{trigger or run_id}", TriggerKind.MANUAL), run_id=run_id,
        owner=f"worker-{run_id}", now_ms=at_ms, lease_ms=LEASE_MS, skew_ms=SKEW_MS))
    assert isinstance(result, Acquired), result
    return result


def release(aws: Any, run_id: str, fence: int, *, at_ms: int, outcome: State = State.DONE,
            trigger: str | None = None, job: str = JOB) -> None:
    trigger_id = f"{job}@manual:{trigger or run_id}"
    record = RunRecord(job=job, run_id=run_id, trigger_id=trigger_id, trigger_kind="manual",
                       policy="SKIP", decision=Decision.RAN,
                       status=RunStatus.FAILED if outcome is State.FAILED else RunStatus.SUCCEEDED,
                       started_at_ms=at_ms, ended_at_ms=at_ms, fence=fence)
    assert aws.store.release(Release(job, run_id=run_id, fence=fence, trigger_id=trigger_id,
                                     outcome=outcome, record=record,
                                     record_ttl_s=at_ms // 1000 + 600,
                                     trigger_ttl_s=at_ms // 1000 + 600)).released


def guarded(aws: Any, clock: Any, policy: OverlapPolicy, **options: Any) -> GuardedJob:
    config = JobConfig(name=JOB, policy=policy, lease=LEASE, table_name=aws.table, **options)
    queue = TriggerQueue(aws.fifo_queue(JOB), client=aws.sqs) if config.needs_queue else None
    return GuardedJob(config, lambda event, context: "done", store=aws.store, queue=queue,
                      clock=clock, owner="test-worker")


def manual(name: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": name}


def acquire(aws: Any, run_id: str, trigger: str, *, at_ms: int, lease: LeaseState,
            item: TriggerRecord | None = None) -> Acquired | Refused:
    return aws.store.acquire(Acquisition(trigger_id=f"{JOB}@manual:{trigger}", job=JOB,
                                         run_id=run_id, owner=f"worker-{run_id}", now_ms=at_ms,
                                         lease_ms=LEASE_MS, skew_ms=SKEW_MS, lease=lease, item=item,
                                         route=Route.DIRECT, trigger_kind="manual",
                                         trigger_ttl_s=at_ms // 1000 + DAY_S))


# -- run records -----------------------------------------------------------------------------

def test_a_skipped_triggers_record_names_the_holder_and_the_holders_fence(aws, clock):
    """GIVEN a SKIP job whose first worker died and whose lease R1 took over (fence 2)
    WHEN a trigger is skipped THEN its record, read back from the run log, names R1 and
    fence 2 (what an operator needs to find the run that was in the way)."""
    now_ms = to_ms(clock.now())
    take(aws, "R0", at_ms=now_ms - 3 * LEASE_MS)
    assert take(aws, "R1", at_ms=now_ms).fence == 2
    outcome = guarded(aws, clock, OverlapPolicy.SKIP)(manual("late"), None)
    assert (outcome["decision"], outcome["holder_run_id"], outcome["holder_fence"]) == (
        "skipped", "R1", 2)
    [skipped] = [r for r in aws.runs(JOB) if r.decision is Decision.SKIPPED]
    assert (skipped.holder_run_id, skipped.holder_fence) == ("R1", 2)


def test_a_run_record_put_only_if_absent_never_overwrites_and_is_well_formed(aws, wire):
    """GIVEN no record of run R9 WHEN it is put "only if absent" twice, then with "keep
    the operator's record" THEN the first put lands (True), the second changes nothing
    (False), and each request's condition uses exactly the placeholders it defines, in
    their case, and DynamoDB's own function names (which are case-sensitive)."""
    record = RunRecord(job=JOB, run_id="R9", trigger_id=f"{JOB}@manual:x", trigger_kind="manual",
                       policy="SKIP", decision=Decision.STALE, status=RunStatus.STALE,
                       started_at_ms=1, ended_at_ms=1, detail="first")
    assert aws.store.put_run(record, 2_000_000_000, only_if_absent=True) is True
    assert aws.store.put_run(dataclasses.replace(record, detail="second"), 2_000_000_000,
                             only_if_absent=True) is False
    assert aws.store.get_run(JOB, "R9").detail == "first"
    assert aws.store.put_run(record, 2_000_000_000, keep_operator_record=True) is True
    puts = [params for operation, params in wire if operation == "PutItem"]
    assert len(puts) == 3 and all("ConditionExpression" in p for p in puts)
    assert wire_problems(wire) == []


# -- refusals name what refused ------------------------------------------------------------------

def test_an_acquisition_refused_by_the_lease_alone_names_only_the_lease(aws, clock):
    """GIVEN R1 holds the lease (fence 1) WHEN R2 tries to acquire from an old view (the
    row free at fence 1) THEN it is refused with R1's row, and nothing else is named:
    no trigger item (R2's trigger was as expected), no fence mark, no conflict."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms)
    refused = acquire(aws, "R2", "b", at_ms=now_ms + 1_000, lease=LeaseState(job=JOB, fence=1))
    assert isinstance(refused, Refused)
    assert refused.lease is not None and (refused.lease.run_id, refused.lease.fence) == ("R1", 1)
    assert refused.trigger is None and refused.trigger_failed is False
    assert refused.high_water is None and refused.conflict is False
    assert not refused.displaced_failed and not refused.follow_up_failed


def test_an_acquisition_that_saw_no_row_is_refused_with_the_row_that_is_there(aws, clock):
    """GIVEN R1 took and released the lease (the row is free at fence 1) WHEN R2
    acquires from a view taken before the row existed THEN it is refused with the row
    as it is (fence 1, no holder) and the fence mark (1), never acquired."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms)
    release(aws, "R1", 1, at_ms=now_ms + 1_000)
    refused = acquire(aws, "R2", "b", at_ms=now_ms + 2_000,
                      lease=LeaseState(job=JOB, exists=False))
    assert isinstance(refused, Refused)
    assert refused.lease is not None
    assert (refused.lease.fence, refused.lease.run_id, refused.lease.last_run_id) == (1, None, "R1")
    assert refused.high_water == 1
    assert aws.store.read_lease(JOB).run_id is None


def test_an_acquisition_of_a_trigger_retried_by_another_run_meanwhile_is_refused(aws, clock):
    """GIVEN trigger A failed under R1, then failed again under R5 WHEN R6 acquires from
    the view in which A failed under R1 THEN it is refused with A's item as it is now
    (failed under R5), never acquired: two retries of one trigger never both run."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms, trigger="a")
    release(aws, "R1", 1, at_ms=now_ms + 1_000, outcome=State.FAILED, trigger="a")
    take(aws, "R5", at_ms=now_ms + 2_000, trigger="a")
    release(aws, "R5", 2, at_ms=now_ms + 3_000, outcome=State.FAILED, trigger="a")
    seen = TriggerRecord(trigger_id=f"{JOB}@manual:a", state=State.FAILED, route=Route.DIRECT,
                         run_id="R1", ttl_epoch_s=now_ms // 1000 + 600)
    refused = acquire(aws, "R6", "a", at_ms=now_ms + 4_000, lease=aws.store.read_lease(JOB),
                      item=seen)
    assert isinstance(refused, Refused) and refused.trigger_failed
    assert (refused.trigger.state, refused.trigger.run_id) == (State.FAILED, "R5")
    assert aws.store.read_lease(JOB).run_id is None


def test_a_take_that_keeps_conflicting_gives_up_busy_with_the_lease_it_last_saw(
        aws, clock, injected):
    """GIVEN R1 died holding the lease WHEN R2 takes it after it expired, its first try is
    refused (R1's row comes back) and every later one is cancelled by a concurrent
    transaction THEN after 8 tries R2 gets Busy naming R1's row as it saw it (who held
    it, until when), and never the lease."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms)
    conflict = client_error("TransactionCanceledException", "TransactWriteItems",
                            CancellationReasons=[{"Code": "TransactionConflict"}] * 4)
    tries: list[int] = []

    def fault(n: int) -> None:
        tries.append(n)
        if n > 1:
            raise conflict

    injected("TransactWriteItems", fault)
    later = now_ms + 3 * LEASE_MS
    result = aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:R2", TriggerKind.MANUAL), run_id="R2",
                                 owner="worker-R2", now_ms=later, lease_ms=LEASE_MS,
                                 skew_ms=SKEW_MS))
    assert isinstance(result, Busy)
    assert result.state is not None
    assert (result.state.run_id, result.state.fence) == ("R1", 1)
    assert result.state.expires_at_ms == now_ms + LEASE_MS
    assert len(tries) == 8
    assert aws.store.read_lease(JOB).run_id == "R1"


# -- an operator's release -----------------------------------------------------------------------

def test_a_force_released_run_is_recorded_under_its_trigger_and_the_trigger_released(aws, clock):
    """GIVEN R1 stuck holding the lease for trigger A WHEN alice force-releases it THEN
    R1's record names trigger A, says ``released_by_operator`` and why; A's own item says
    ``released`` by the operator (a redelivery of A never runs it again); the fence and
    its mark move to 2."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms, trigger="a")
    assert aws.store.force_release(ForceRelease(JOB, holder_run_id="R1", fence=1,
                                                now_ms=now_ms + 5_000, by="alice",
                                                reason="stuck in a loop")) is True
    record = aws.store.get_run(JOB, "R1")
    assert record.trigger_id == f"{JOB}@manual:a"
    assert record.status is RunStatus.RELEASED_BY_OPERATOR
    assert record.detail == "lease force-released by alice: stuck in a loop"
    assert (record.fence, record.ended_at_ms) == (1, now_ms + 5_000)
    trigger = aws.store.read_trigger(JOB, f"{JOB}@manual:a")
    assert (trigger.state, trigger.run_id, trigger.ended_by) == (State.RELEASED, "R1", "operator")
    lease = aws.store.read_lease(JOB)
    assert (lease.fence, lease.run_id, lease.released_by) == (2, None, "operator:alice")
    assert aws.store.high_water(JOB) == 2


def test_a_force_release_never_lowers_a_fence_mark_that_moved_after_it_read_it(
        aws, clock, injected):
    """GIVEN R1 stuck at fence 1 WHEN the operator force-releases it and, between its
    read of the fence mark (1) and its write, the mark moves to 7 THEN the release is
    refused (False): R1 still holds the lease and the mark stays 7 (a fence once issued
    is never issued again). Run again, it frees the lease at fence 8."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms)
    fence_key = {"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "FENCE"}}

    def moved(n: int) -> None:
        if n == 1:
            aws.ddb.update_item(TableName=aws.table, Key=fence_key,
                                UpdateExpression="SET #hw = :hw",
                                ExpressionAttributeNames={"#hw": "hw"},
                                ExpressionAttributeValues={":hw": {"N": "7"}})

    injected("TransactWriteItems", moved)
    assert aws.store.force_release(ForceRelease(JOB, holder_run_id="R1", fence=1,
                                                now_ms=now_ms + 1_000, by="alice")) is False
    assert aws.store.high_water(JOB) == 7
    assert aws.store.read_lease(JOB).run_id == "R1"
    assert aws.store.force_release(ForceRelease(JOB, holder_run_id="R1", fence=1,
                                                now_ms=now_ms + 2_000, by="alice")) is True
    assert aws.store.read_lease(JOB).fence == 8 and aws.store.high_water(JOB) == 8


# -- a queue decision lands only while the lease row allows it -----------------------------------

@pytest.mark.parametrize("meanwhile", ["queue-filled", "holder-released", "paused"])
def test_a_queue_decision_is_refused_when_the_lease_row_moved_and_decided_again(
        aws, clock, meanwhile):
    """GIVEN a QUEUE job (at most 1 queued) whose lease R1 holds WHEN trigger A has read
    the lease row and, before A records its ``queued`` decision, another trigger B is
    queued / R1 releases / the operator pauses the job THEN A's write is refused and A
    decides again from the row as it is: ``dropped`` (the bound holds: one message,
    ``queued_n`` 1), run (nothing to wait for), ``paused``."""
    now_ms = to_ms(clock.now())
    job = guarded(aws, clock, OverlapPolicy.QUEUE, max_queued=1)
    take(aws, "R1", at_ms=now_ms)
    moved: list[str] = []

    def between(**point: Any) -> None:
        if point["trigger_id"] != f"{JOB}@manual:a" or moved:
            return
        moved.append(meanwhile)
        if meanwhile == "queue-filled":
            assert job(manual("b"), None)["decision"] == "queued"
        elif meanwhile == "holder-released":
            release(aws, "R1", 1, at_ms=now_ms)
        else:
            aws.store.pause(JOB, reason="upgrade", now_ms=now_ms)

    with hooks.on("after_lease_read", between):
        result = job(manual("a"), None)
    assert moved == [meanwhile]
    lease = aws.store.read_lease(JOB)
    messages = aws.sqs.receive_message(QueueUrl=aws.queues[JOB], MaxNumberOfMessages=10
                                       ).get("Messages", [])
    if meanwhile == "queue-filled":
        assert result["decision"] == "dropped" and lease.queued_n == 1 and len(messages) == 1
    elif meanwhile == "holder-released":
        assert result == "done" and lease.queued_n == 0 and messages == []
    else:
        assert result["decision"] == "paused" and lease.queued_n == 0 and messages == []


def test_a_coalesced_follow_up_is_kept_as_long_as_its_message_can_be_delivered(aws, clock):
    """GIVEN a COALESCE job whose lease R1 holds WHEN a trigger coalesces THEN the
    follow-up's item is kept 15 days (the queue's 14 days' retention plus a day), as is
    the coalesced trigger's own item."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms)
    assert guarded(aws, clock, OverlapPolicy.COALESCE)(manual("c"), None)["decision"] == \
        "coalesced"
    follow_up = aws.store.read_trigger(JOB, f"{JOB}@follow-up:R1")
    assert follow_up.state is State.QUEUED
    assert follow_up.ttl_epoch_s == now_ms // 1000 + 15 * DAY_S


# -- reads, tokens and request counts of the item store ------------------------------------------

def items_of(aws: Any) -> DynamoItemStore:
    return DynamoItemStore(aws.table, client=aws.ddb)


def test_the_job_row_and_item_lookups_are_read_strongly_consistent(aws, clock, wire):
    """GIVEN a job whose run holds fence 1 WHEN the job row is read, and items are looked
    up and read with the open claim THEN every read asks for a strongly consistent read
    (an eventual one may miss the claim or checkpoint just written)."""
    take(aws, "R1", at_ms=to_ms(clock.now()))
    items = items_of(aws)
    wire.clear()
    row = items.read_row(JOB)
    assert row.fence == 1
    items.lookup(JOB, ["a:x", "b:x"], with_row=True)
    items.get_many(JOB, ["a:x"], with_claim=True)
    gets = [p for op, p in wire if op == "GetItem"]
    batches = [p for op, p in wire if op == "BatchGetItem"]
    assert len(gets) == 1 and gets[0]["ConsistentRead"] is True
    assert len(batches) == 2
    assert all(b["RequestItems"][aws.table]["ConsistentRead"] is True for b in batches)


def test_a_claim_over_the_limit_is_refused_by_commit_before_anything_is_written(
        aws, clock, wire):
    """GIVEN a run holding fence 1 WHEN it commits an open claim one item over the limit
    THEN a StoreError names the ``commit`` operation, the job and the limit, and no write
    was sent (the job row is as it was)."""
    take(aws, "R1", at_ms=to_ms(clock.now()))
    items = items_of(aws)
    row = items.read_row(JOB)
    wire.clear()
    claim = {f"c{i}:x": "" for i in range(MAX_CLAIM + 1)}
    with pytest.raises(StoreError) as refused:
        items.commit(Fence(JOB, "R1", 1), Commit(expected=row, claim=claim,
                                                 claim_expires_at_ms=1),
                     now_ms=to_ms(clock.now()))
    assert (refused.value.operation, refused.value.job) == ("commit", JOB)
    assert str(refused.value).startswith(f"commit for job {JOB!r}: an open claim of "
                                         f"{MAX_CLAIM + 1} items exceeds {MAX_CLAIM}")
    assert wire == []
    assert items.read_row(JOB) == row


@pytest.mark.parametrize("throttled", [0, 1])
def test_a_commit_counts_the_requests_it_sent(aws, clock, wire, injected, throttled):
    """GIVEN a run holding fence 1 WHEN it commits its claim, its first write throttled
    ``throttled`` times THEN ``Committed.requests`` is exactly the number of requests it
    sent (1, then 2 with a retry), the figure cost reports are built from."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms)
    items = items_of(aws)
    row = items.read_row(JOB)

    def fault(n: int) -> None:
        if n <= throttled:
            raise client_error("ThrottlingException", "UpdateItem")

    injected("UpdateItem", fault)
    wire.clear()
    done = items.commit(Fence(JOB, "R1", 1), Commit(expected=row, claim={"a:x": "h"},
                                                    claim_expires_at_ms=now_ms + LEASE_MS),
                        now_ms=now_ms)
    sent = [op for op, _ in wire]
    assert sent == ["UpdateItem"] * (1 + throttled)
    assert done.requests == len(sent)
    assert items.read_row(JOB).claim.items == {"a:x": "h"}


def test_every_transaction_of_unresolved_rows_carries_a_request_token(aws, clock, wire):
    """GIVEN a run holding fence 1 with a claimed item WHEN it commits that item failed
    (a row of its own, in a transaction with the job row), twice THEN each transaction
    carries a client request token (a retry the SDK sends again is applied once), a new
    one each; the row says failed, and ``Committed.requests`` counts one request each."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms)
    items = items_of(aws)
    row = items.read_row(JOB)
    row = items.commit(Fence(JOB, "R1", 1), Commit(expected=row, claim={"a:x": "", "b:x": ""},
                                                   claim_expires_at_ms=now_ms + LEASE_MS),
                       now_ms=now_ms).row
    wire.clear()
    for work_id, claim in (("a:x", {"b:x": ""}), ("b:x", None)):
        done = items.commit(Fence(JOB, "R1", 1),
                            Commit(expected=row, claim=claim,
                                   claim_expires_at_ms=now_ms + LEASE_MS,
                                   rows=(Unresolved(work_id, ItemState.FAILED, error="boom"),)),
                            now_ms=now_ms)
        assert done.requests == 1
        row = done.row
    tokens = [p.get("ClientRequestToken") for op, p in wire if op == "TransactWriteItems"]
    assert len(tokens) == 2 and all(tokens) and tokens[0] != tokens[1]
    assert {w: r.state for w, r in items.get_many(JOB, ["a:x", "b:x"]).items()} == {
        "a:x": ItemState.FAILED, "b:x": ItemState.FAILED}


def test_the_job_stores_transactions_carry_a_request_token(aws, clock, wire):
    """GIVEN a job WHEN a run acquires and releases its lease THEN each transaction
    carries a client request token, a new one each."""
    now_ms = to_ms(clock.now())
    take(aws, "R1", at_ms=now_ms)
    release(aws, "R1", 1, at_ms=now_ms + 1_000)
    tokens = [p.get("ClientRequestToken") for op, p in wire if op == "TransactWriteItems"]
    assert len(tokens) == 2 and all(tokens) and tokens[0] != tokens[1]


def test_a_lookup_retries_a_throttle_but_not_an_error_that_would_fail_again(
        aws, clock, injected):
    """GIVEN a page of items to look up WHEN the first lookup is throttled once, and the
    second is refused for a reason a retry does not change (a validation error) THEN
    the first is retried and answers (2 requests); the second fails at once (1 request)
    with a StoreError naming ``lookup`` and the service's words."""
    take(aws, "R1", at_ms=to_ms(clock.now()))
    items = items_of(aws)
    faults = {1: client_error("ThrottlingException", "BatchGetItem"),
              3: client_error("ValidationException", "BatchGetItem")}
    sent: list[int] = []

    def fault(n: int) -> None:
        sent.append(n)
        if n in faults:
            raise faults[n]

    injected("BatchGetItem", fault)
    found, row = items.lookup(JOB, ["a:x"], with_row=True)
    assert found == {} and row is not None and row.fence == 1
    assert sent == [1, 2]
    with pytest.raises(StoreError) as refused:
        items.lookup(JOB, ["a:x"])
    assert refused.value.operation == "lookup" and "injected ValidationException" in str(
        refused.value)
    assert sent == [1, 2, 3]


def test_a_read_with_the_open_claim_surfaces_a_throttle_to_its_caller(aws, clock, injected):
    """GIVEN an operator's read of items (``get_many``, with the open claim) WHEN
    DynamoDB throttles it THEN the error reaches the caller at once (the CLI, a sweep:
    they retry), one request, never a silent empty answer."""
    take(aws, "R1", at_ms=to_ms(clock.now()))
    sent: list[int] = []

    def fault(n: int) -> None:
        sent.append(n)
        raise client_error("ThrottlingException", "BatchGetItem")

    injected("BatchGetItem", fault)
    with pytest.raises(ClientError) as refused:
        items_of(aws).get_many(JOB, ["a:x"], with_claim=True)
    assert refused.value.response["Error"]["Code"] == "ThrottlingException"
    assert sent == [1]


# -- every request well-formed -----------------------------------------------------------------

def test_every_request_of_a_queue_jobs_busy_hour_defines_exactly_what_it_uses(
        aws, clock, wire):
    """GIVEN a QUEUE job (at most 1 queued) WHEN a worker holds it, a trigger is queued,
    another dropped, one skipped by a SKIP job, the job paused and resumed, the stuck
    worker force-released, the queued message delivered and run, and a run commits a
    claim and a failed item THEN every request's expressions use exactly the names and
    values they define, in their case, and only DynamoDB's functions."""
    now_ms = to_ms(clock.now())
    job = guarded(aws, clock, OverlapPolicy.QUEUE, max_queued=1)
    take(aws, "R1", at_ms=now_ms)
    assert job(manual("b"), None)["decision"] == "queued"
    assert job(manual("c"), None)["decision"] == "dropped"
    skip = GuardedJob(JobConfig(name="other-job", lease=LEASE, table_name=aws.table),
                      lambda event, context: "done", store=aws.store, clock=clock)
    take(aws, "R7", at_ms=now_ms, job="other-job")
    assert skip({"job": "other-job", "manual": True, "trigger_id": "s"}, None)["decision"] == \
        "skipped"
    aws.store.pause(JOB, reason="upgrade", now_ms=now_ms)
    aws.store.resume(JOB)
    assert aws.store.force_release(ForceRelease(JOB, holder_run_id="R1", fence=1, now_ms=now_ms,
                                                by="ops"))
    delivered = aws.deliver(JOB, job)
    assert delivered is not None and delivered[1] is False
    fence = take(aws, "R3", at_ms=now_ms, trigger="r3").fence
    items = items_of(aws)
    row = items.read_row(JOB)
    row = items.commit(Fence(JOB, "R3", fence), Commit(expected=row, claim={"a:x": ""},
                                                       claim_expires_at_ms=now_ms + LEASE_MS),
                       now_ms=now_ms).row
    items.commit(Fence(JOB, "R3", fence),
                 Commit(expected=row, checkpoint=(0, "cursor-1"),
                        rows=(Unresolved("a:x", ItemState.FAILED, error="boom"),)),
                 now_ms=now_ms)
    assert items.unresolved(JOB)[0].work_id == "a:x"
    operations = {op for op, _ in wire}
    assert {"TransactWriteItems", "UpdateItem", "GetItem", "BatchGetItem", "Query"} <= operations
    assert wire_problems(wire) == []
