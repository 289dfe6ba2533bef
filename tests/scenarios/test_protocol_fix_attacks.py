"""An adversarial review of four protocol fixes (a REPLACE takeover from a stale read,
a recovery's follow-up after a refusal, resolve() after a lost lease, per-item flush):
each test an attack, asserting what a user relies on. Two broke the first versions of
the fixes (a gate refusal beside a TransactionConflict; resolve --found answering
lease_lost with its item completed) and were fixed. Races are staged with hook points
and botocore events, never sleeps; the clock is a ``ManualClock`` moved by hand.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest

from jobguard import BatchJob, JobConfig, OverlapPolicy, Page, WorkId, hooks
from jobguard.clock import to_ms
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.recovery import resolve
from jobguard.triggers import Trigger, TriggerKind
from jobguard.workitems import ItemState

from ._support import Gate, Recorder, holding, in_thread, make_job, tick
from ._trigger_support import (
    Script,
    call,
    drain,
    force_release,
    outcomes_of,
    start,
    tick_id,
)
from .test_recovery_observed import Mailbox, mailer, mails, take_over_once

JOB = "crm-sync"
LEASE = timedelta(seconds=60)
PAST_THE_LEASE = LEASE + timedelta(seconds=15)  # lease + skew margin (5 s) + a bit


# -- 1. REPLACE takeover from a stale read (080d940) -----------------------------------


def test_replace_takeover_is_not_starved_by_a_holder_renewing_before_every_try(aws, clock):
    """GIVEN a REPLACE job whose run H is in its handler, its lease past expiry
    WHEN a new tick T reads the lease (expired) and H renews before each of T's tries
    THEN T still takes the lease (its refusal brings the renewed row, which it replaces
    without an expiry condition), H's trigger ends `replaced`, and H's retry is a
    duplicate: the expiry condition cannot starve a REPLACE takeover."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.REPLACE, lease=LEASE)
    t0 = clock.now()
    held = script.hold(tick_id(JOB, t0))
    holder, _ = start(lambda: job(tick(JOB, t0), None))
    assert held.entered.wait(10)
    row = aws.lease_item(JOB)
    run_id, fence = row["run_id"]["S"], int(row["fence"]["N"])
    clock.advance(PAST_THE_LEASE)
    t1 = clock.now()
    renewals: list[bool] = []

    def renew_first(**ctx: Any) -> None:
        if ctx["trigger_id"] == tick_id(JOB, t1) and len(renewals) < 3:
            clock.advance(timedelta(seconds=1))
            renewals.append(aws.store.renew(JOB, run_id=run_id, fence=fence,
                                            now_ms=to_ms(clock.now()),
                                            lease_ms=int(LEASE.total_seconds() * 1000)))

    with hooks.on("after_lease_read", renew_first):
        taken = call(job, tick(JOB, t1))
    assert renewals and all(renewals), renewals
    assert script.ran(tick_id(JOB, t1)) == 1, taken
    held.release.set()
    holder.join(10)
    call(job, tick(JOB, t0))  # Lambda retries H's invocation
    assert script.ran(tick_id(JOB, t0)) == 1
    assert outcomes_of(aws, JOB, tick_id(JOB, t0)) == [("ran", "lease_lost"),
                                                       ("duplicate", "duplicate")]


def test_replace_from_a_stale_read_after_a_force_release_decides_again(aws, clock):
    """GIVEN a REPLACE job whose run H hangs past its lease
    WHEN a tick T reads the lease (H, expired), then an operator force-releases H, then
    T's takeover lands
    THEN T's takeover is refused (the row moved on) and T decides again from the row:
    it runs once at the next fence, and H's trigger stays `released` (not rewritten
    `lost` or `replaced` from T's old read), so H's retry never runs."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.REPLACE, lease=LEASE)
    t0 = clock.now()
    held = script.hold(tick_id(JOB, t0))
    holder, _ = start(lambda: job(tick(JOB, t0), None))
    assert held.entered.wait(10)
    row = aws.lease_item(JOB)
    run_id, fence = row["run_id"]["S"], int(row["fence"]["N"])
    clock.advance(PAST_THE_LEASE)
    t1 = clock.now()
    released: list[Any] = []

    def operator(**ctx: Any) -> None:
        if ctx["trigger_id"] == tick_id(JOB, t1) and not released:
            released.append(force_release(aws.store, JOB, holder_run_id=run_id, fence=fence,
                                          now_ms=to_ms(clock.now()), by="ana",
                                          reason="hung"))

    with hooks.on("after_lease_read", operator):
        taken = call(job, tick(JOB, t1))
    assert released
    assert taken == {"ran": tick_id(JOB, t1), "fence": fence + 2}, taken
    held.release.set()
    holder.join(10)
    call(job, tick(JOB, t0))
    assert script.ran(tick_id(JOB, t0)) == 1
    states = dict(outcomes_of(aws, JOB, tick_id(JOB, t0)))
    assert "replaced" not in json.dumps(states), outcomes_of(aws, JOB, tick_id(JOB, t0))


# -- 2. keep_follow_up on a refusal (9cb809d) ------------------------------------------


def test_a_recovery_whose_row_was_in_another_transaction_still_keeps_the_follow_up(aws,
                                                                                   clock):
    """GIVEN a COALESCE job whose run 1 hangs past its lease with tick 2 coalesced into
    its follow-up, and two recoveries: r2 read the row (run 1 expired, the follow-up's
    gate at fence 1) and is about to take the lease
    WHEN r1 takes it first (moving the gate to fence 2) and r2's write lands while r1's
    release transaction is in flight: DynamoDB cancels r2 with TransactionConflict on
    the lease row (no ALL_OLD) and ConditionalCheckFailed on the follow-up's gate
    THEN r2, deciding again once r1 has released, still carries the follow-up, which
    runs once after it (as when r2's refusal comes with the row: seed 228127)."""
    gate, rec = Gate(), Recorder()
    t1 = tick(JOB, clock.now())
    job = make_job(aws, clock, rec.handler(holding(gate, t1)), policy=OverlapPolicy.COALESCE)
    holder, _ = in_thread(lambda: job(t1, None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=1))
    assert job(tick(JOB, clock.now()), None)["decision"] == "coalesced"
    clock.advance(PAST_THE_LEASE)

    r2_thread: list[int] = []
    go, answered, r1_done = threading.Event(), threading.Event(), threading.Event()
    paused = threading.Event()
    rewritten: list[Any] = []

    def hold_r2(params: dict[str, Any], **_: Any) -> None:
        if threading.get_ident() in r2_thread and not go.is_set() \
                and "gate_fence" in json.dumps(params):
            paused.set()
            assert go.wait(10)

    def conflict_on_lease(parsed: dict[str, Any], **_: Any) -> None:
        # only the answer to the write held above (an earlier try, refused on a
        # cached view without the follow-up, is left as it is)
        if threading.get_ident() in r2_thread and go.is_set() and not rewritten \
                and parsed.get("CancellationReasons"):
            reasons = parsed["CancellationReasons"]
            rewritten.append([r.get("Code") for r in reasons])
            # the lease row was part of r1's ongoing release transaction
            reasons[0] = {"Code": "TransactionConflict",
                          "Message": "Transaction is ongoing for the item"}
            answered.set()
            assert r1_done.wait(10)

    def r1_releasing(**_: Any) -> None:
        if threading.get_ident() not in r2_thread and not go.is_set():
            go.set()
            assert answered.wait(10)

    events = aws.store.client.meta.events
    events.register("provide-client-params.dynamodb.TransactWriteItems", hold_r2)
    events.register("after-call.dynamodb.TransactWriteItems", conflict_on_lease)
    try:
        def r2() -> Any:
            r2_thread.append(threading.get_ident())
            return job.run_exclusive(Trigger(JOB, f"{JOB}@recovery:r2", TriggerKind.RECOVERY),
                                     wait=0)

        second, box = in_thread(r2)
        assert paused.wait(10), box
        with hooks.on("before_release", r1_releasing):
            first = job.run_exclusive(Trigger(JOB, f"{JOB}@recovery:r1", TriggerKind.RECOVERY),
                                      wait=0)
        r1_done.set()
        assert first["fence"] == 2
        second.join(10)
    finally:
        events.unregister("provide-client-params.dynamodb.TransactWriteItems", hold_r2)
        events.unregister("after-call.dynamodb.TransactWriteItems", conflict_on_lease)
    assert rewritten and rewritten[0][0] == "ConditionalCheckFailed", rewritten
    assert "ConditionalCheckFailed" in rewritten[0][1:], rewritten  # the gate, too
    assert box.get("result", {}).get("fence") == 3, box
    drain(aws, JOB, job)
    gate.release.set()
    holder.join(10)
    follow_ups = [r for r in aws.runs(JOB) if r.trigger_kind == "follow_up"
                  and r.decision.value == "ran"]
    assert [(r.status.value, r.fence) for r in follow_ups] == [("succeeded", 4)], \
        [(r.trigger_id, r.decision.value, r.status.value) for r in aws.runs(JOB)]


# -- 3. resolve() and lease_lost (a1a48a6) ---------------------------------------------


def test_a_resolution_that_answers_lease_lost_says_what_the_ledger_now_holds(aws, clock):
    """GIVEN a mail whose answer was lost (uncertain)
    WHEN an operator resolves it as found, and a REPLACE trigger takes the job's lease
    after the resolution wrote the completion but before its job-row write
    THEN the answer is `lease_lost` and says the item is now completed (the completion
    is written first, unfenced), so the operator is not told it is still to do."""
    mailbox = Mailbox()
    mailbox.lose = {"mail-1:mail"}
    mailer(aws, clock, mailbox)(mails("mail-1"), None)
    config = JobConfig(name="mailer", table_name=aws.table, lease=timedelta(seconds=60))
    hook, replaced = take_over_once(aws, clock, "mailer")
    armed: list[bool] = []

    def after_facts(**_: Any) -> None:
        if armed and not replaced:
            hook()

    events = aws.store.client.meta.events
    events.register("after-call.dynamodb.BatchWriteItem", after_facts)
    try:
        with hooks.on("after_acquire", lambda **ctx: armed.append(True)):
            answer = resolve(config, ["mail-1:mail"], found="msg-1", reason="seen",
                             requested_by="alice",
                             guard_options={"store": aws.store, "clock": clock})
    finally:
        events.unregister("after-call.dynamodb.BatchWriteItem", after_facts)
    assert replaced, "the completion was never written with BatchWriteItem"
    (row,) = DynamoItemStore(aws.table, client=aws.ddb).get_many(
        "mailer", ["mail-1:mail"]).values()
    assert row.state is ItemState.COMPLETED
    assert answer["result"] == "lease_lost", answer
    assert answer["items"] == {"mail-1:mail": "completed"}, answer


def test_a_not_found_resolution_taken_over_before_its_write_changes_nothing(aws, clock):
    """GIVEN a mail whose answer was lost (uncertain)
    WHEN an operator resolves it as not found and a REPLACE trigger takes the lease just
    after the resolution acquired it
    THEN the answer is `lease_lost` and the item is still uncertain (the failed row is
    fenced)."""
    mailbox = Mailbox()
    mailbox.lose = {"mail-1:mail"}
    mailer(aws, clock, mailbox)(mails("mail-1"), None)
    config = JobConfig(name="mailer", table_name=aws.table, lease=timedelta(seconds=60))
    hook, replaced = take_over_once(aws, clock, "mailer")
    with hooks.on("after_acquire", hook):
        answer = resolve(config, ["mail-1:mail"], found=None, reason="not there",
                         requested_by="alice",
                         guard_options={"store": aws.store, "clock": clock})
    assert replaced
    (row,) = DynamoItemStore(aws.table, client=aws.ddb).get_many(
        "mailer", ["mail-1:mail"]).values()
    assert (answer["result"], row.state) == ("lease_lost", ItemState.UNCERTAIN), answer


# -- 4. flush="item" (764aeb2) ---------------------------------------------------------


class Killed(BaseException):
    """The worker dies (no release, no flush)."""


class Sync(BatchJob[dict]):
    """Two records a page; the destination counts its calls; `bad-*` fail (retryable)."""

    def __init__(self, config: Any, records: list[str], **options: Any) -> None:
        super().__init__(config, **options)
        self.records = records
        self.calls: list[str] = []
        self.reconciled: list[str] = []
        self.kill_at: str | None = None
        self.fail_once: set[str] = set()
        self.done: dict[str, str] = {}

    def select(self, cursor: str | None, limit: int) -> Page[dict]:
        start_at = 0 if cursor is None else self.records.index(cursor) + 1
        rows = [{"id": r} for r in self.records[start_at:start_at + limit]]
        if rows and rows[0]["id"] == self.kill_at:
            self.kill_at = None
            raise Killed()
        return Page(rows, rows[-1]["id"] if rows else cursor)

    def work_id(self, record: dict) -> WorkId:
        return WorkId(record["id"], "push")

    def process(self, record: dict, item: Any) -> str:
        self.calls.append(record["id"])
        if record["id"] in self.fail_once:
            self.fail_once.discard(record["id"])
            raise ValueError("refused")
        self.done[record["id"]] = f"d-{record['id']}"
        return self.done[record["id"]]

    def reconcile(self, record: dict, item: Any) -> str | None:
        self.reconciled.append(record["id"])
        return self.done.get(record["id"])


def _sync(aws: Any, clock: Any, records: list[str]) -> tuple[Sync, Any]:
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=2, flush="item",
                       lease=LEASE)
    sync = Sync(config, records, store=aws.store, clock=clock)
    return sync, sync.handler()


def test_item_flush_a_kill_after_a_pages_held_failure_redoes_only_that_item(aws, clock):
    """GIVEN flush='item', pages of 2: a page whose first item completes and whose last
    item fails (its row held for the next page's claim)
    WHEN the worker is killed inside the next page's select(), then the lease expires and
    the next run comes
    THEN the completed item is neither redone nor looked up at the destination, the
    failed one (its row lost with the worker, its claim vanished) is reconciled, then
    redone once, and every item ends completed, each applied once."""
    sync, handler = _sync(aws, clock, ["a", "bad-b", "c"])
    sync.fail_once = {"bad-b"}
    sync.kill_at = "c"

    def kill(**_: Any) -> None:
        raise Killed()

    with pytest.raises(Killed), hooks.on("before_release", kill):
        handler({"job": JOB, "manual": True, "trigger_id": "one"}, None)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    assert items.get_many(JOB, ["a:push"])["a:push"].state is ItemState.COMPLETED
    clock.advance(PAST_THE_LEASE)
    handler({"job": JOB, "manual": True, "trigger_id": "two"}, None)
    assert sorted(sync.done) == ["a", "bad-b", "c"]
    assert sync.calls.count("a") == 1 and sync.calls.count("c") == 1, sync.calls
    assert sync.calls.count("bad-b") == 2, sync.calls  # failed once, redone once
    assert "a" not in sync.reconciled, sync.reconciled
    states = {k: r.state for k, r in items.get_many(
        JOB, ["a:push", "bad-b:push", "c:push"]).items()}
    assert set(states.values()) == {ItemState.COMPLETED}, states


def test_item_flush_a_held_row_of_a_run_taken_over_is_never_written(aws, clock):
    """GIVEN flush='item', a page whose last item fails (its row held for the next
    page's claim)
    WHEN the run's lease is taken over (REPLACE) before that claim; the new run leaves
    the old run's open page alone (it may still call until its deadline); after that
    deadline a third run comes
    THEN the old run's held failed row is refused (fenced): the item is the new run's
    held uncertain row, never the old run's failure, and the old run ends lease_lost;
    the third run retries it (its one earlier call failed) and completes it."""
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=2, flush="item",
                       lease=LEASE, policy=OverlapPolicy.REPLACE)
    sync = Sync(config, ["a", "bad-b", "c"], store=aws.store, clock=clock)
    sync.fail_once = {"bad-b"}
    handler = sync.handler()
    # the takeover must land between the held failure and the next claim: at the
    # next page's select
    real_select = sync.select
    state: dict[str, Any] = {}

    def select(cursor: str | None, limit: int) -> Page[dict]:
        if cursor == "bad-b" and "thief" not in state:
            state["thief"] = True
            sync.select = real_select  # type: ignore[method-assign]
            thief = handler({"job": JOB, "manual": True, "trigger_id": "thief"}, None)
            state["thief_result"] = thief
            sync.select = select  # type: ignore[method-assign]
        return real_select(cursor, limit)

    sync.select = select  # type: ignore[method-assign]
    first = handler({"job": JOB, "manual": True, "trigger_id": "one"}, None)
    assert state.get("thief"), "the takeover never happened"
    assert first.get("jobguard") == "lease_lost", first
    store = DynamoItemStore(aws.table, client=aws.ddb)
    held = store.get(JOB, "bad-b:push")
    assert held is not None and held.state is ItemState.UNCERTAIN, held
    assert held.held_until_ms is not None and held.run_id != first["run_id"]
    assert sync.calls.count("bad-b") == 1 and sync.calls.count("a") == 1, sync.calls
    clock.advance(timedelta(milliseconds=held.held_until_ms - to_ms(clock.now()) + 1))
    handler({"job": JOB, "manual": True, "trigger_id": "third"}, None)
    row = store.get(JOB, "bad-b:push")
    assert row is not None and row.state is ItemState.COMPLETED, row
    assert sync.calls.count("bad-b") == 2 and sync.calls.count("a") == 1, sync.calls
