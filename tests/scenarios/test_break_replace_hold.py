"""Review attacks on "REPLACE without a second call" (issue 33, item 7).

Each test stages a race with real threads and hook points (no sleeps) on the serialized
in-process emulator and counts the calls that reached the destination per work id: ONCE
at the destination itself, which is what item 7 promises.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from jobguard import (
    ItemState,
    JobConfig,
    OutcomeUnknown,
    OverlapPolicy,
    WorkId,
    current_run,
    hooks,
)
from jobguard.batch import sweep
from jobguard.clock import to_ms
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.requests import ForceRelease
from jobguard.testing import LambdaContext

from ._items import CrmSync, NotesTable, contacts
from ._support import in_thread, make_job

JOB = "crm-sync"
LEASE = timedelta(seconds=60)


def config(aws: Any, batch_size: int = 3) -> JobConfig:
    return JobConfig(name=JOB, table_name=aws.table, batch_size=batch_size, lease=LEASE,
                     policy=OverlapPolicy.REPLACE)


def manual(trigger_id: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": trigger_id}


def key(record: dict[str, Any]) -> str:
    return str(WorkId(record["id"], "create-note"))


def items(aws: Any) -> DynamoItemStore:
    return DynamoItemStore(aws.table, client=aws.ddb)


class Script:
    """What each run's destination call does, by run (trigger suffix) and work id:
    ``fail`` (a known failure: retryable), ``unknown`` (OutcomeUnknown), ``hold`` (the
    run's thread waits right before its call: its lease and claim checks passed)."""

    def __init__(self, plan: dict[str, dict[str, str]]) -> None:
        self.plan = plan
        self.at_call, self.go = threading.Event(), threading.Event()

    def __call__(self, item: Any) -> None:
        run = current_run().trigger.trigger_id.rsplit(":", 1)[-1]
        what = self.plan.get(run, {}).get(item.key)
        if what == "fail":
            raise RuntimeError("CRM answered 500")
        if what == "unknown":
            raise OutcomeUnknown("CRM timed out")
        if what == "hold":
            self.at_call.set()
            assert self.go.wait(20)


def test_a_displaced_run_retrying_an_uncertain_item_loses_its_hold_on_another_page(
        aws, clock):
    """GIVEN a REPLACE BatchJob over 6 contacts (pages of 3). An earlier run R0 left
    contacts 1 and 4 uncertain (timeouts: the checkpoint stays before page 1). Run A
    reconciles contact 1 (not found), retries it (times out again), then on page 2
    reconciles contact 4 (not found), claims it for a retry and is right before its
    destination call (lease and claim checks passed)
    WHEN run B replaces A. B starts at the checkpoint (page 1): A's open claim (contact
    4) is not on B's page, so B's claim of page 1 writes A's other items as held rows
    and drops A's claim; but contact 4 already has an uncertain row (from R0), which
    `_foreign_rows` skips: it gets no `held_until_ms`. On page 2, B finds contact 4
    uncertain with no hold, reconciles it (not found: A has not called yet) and calls
    the destination. Then A, still before its deadline, makes its call.
    THEN (expected) contact 4 reached the destination once: A may call until
    now + lease + skew, so nobody may redo it before. Actual: two calls."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(6)
    k1, k4 = key(source[1]), key(source[4])
    script = Script({"r0": {k1: "unknown", k4: "unknown"},
                     "a": {k1: "unknown", k4: "hold"}})
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock,
                  before_call=script)
    report_r0 = job.handler()(manual("r0"), None)
    assert report_r0["uncertain"] == 2
    assert items(aws).read_checkpoint(JOB).cursor is None

    thread, box = in_thread(lambda: job.handler()(manual("a"), None))
    assert script.at_call.wait(10)  # A is about to call the destination for contact 4
    assert k4 in (items(aws).read_row(JOB).claim.items or {})  # A's open claim

    hold_seen: list[Any] = []

    def after_first_page(job: str, run_id: str, work_ids: list[str]) -> None:
        if not hold_seen:  # B's page 1 is claimed: A's claim is dropped from the row
            hold_seen.append(items(aws).get(JOB, k4))

    with hooks.on("after_claim", after_first_page):
        report_b = job.handler()(manual("b"), None)
    script.go.set()
    thread.join(20)
    assert not thread.is_alive()

    print("B:", report_b, "\nA:", box.get("result"), "\ncalls:", notes.calls)
    print("contact 4 after B's first claim:", hold_seen[0])
    assert box["result"]["jobguard"] == "lease_lost"
    # the defect: the row of the displaced run's in-flight item was left without a hold
    assert hold_seen[0] is not None and hold_seen[0].state is ItemState.UNCERTAIN
    assert Counter(notes.calls)[k4] == 1, (
        f"contact 4 reached the destination {Counter(notes.calls)[k4]} times: B redid it "
        f"while A (displaced, before its deadline) called too; B: {report_b}")


def test_a_sweep_during_the_hold_strips_it_from_an_uncertain_retry_and_the_next_sweep_redoes_it(
        aws, clock):
    """GIVEN contact 0 left uncertain by R0 (a timeout); run A (REPLACE job, batch 1)
    reconciles it (not found), claims it for a retry and is right before its destination
    call
    WHEN a reconciler run B replaces A and sweeps: contact 0 reads as A's claim (held,
    skipped), but the sweep's `_foreign_rows` skips its row (uncertain already) and the
    sweep's job-row write drops A's claim: the row keeps no `held_until_ms`. A second
    sweep C, still before A's deadline, reconciles it (not found) into a retryable
    failure; run D redoes it; then A makes its call
    THEN (expected) one call for contact 0 (C and D are before A's deadline). Actual: two."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(1)
    k0 = key(source[0])
    script = Script({"r0": {k0: "unknown"}, "a": {k0: "hold"}})
    job = CrmSync(config(aws, batch_size=1), source, notes, store=aws.store, clock=clock,
                  before_call=script)
    assert job.handler()(manual("r0"), None)["uncertain"] == 1

    thread, box = in_thread(lambda: job.handler()(manual("a"), None))
    assert script.at_call.wait(10)

    def sweeper(event: Any, context: Any) -> dict[str, Any]:
        return sweep(current_run(), job.reconcile).as_dict()

    reconciler = make_job(aws, clock, sweeper, name=JOB, policy=OverlapPolicy.REPLACE)
    swept_b = reconciler(manual("b"), None)
    after_b = items(aws).get(JOB, k0)
    swept_c = reconciler(manual("c"), None)
    report_d = job.handler()(manual("d"), None)
    script.go.set()
    thread.join(20)
    assert not thread.is_alive()
    print("B:", swept_b, "\nrow after B:", after_b, "\nC:", swept_c, "\nD:", report_d,
          "\ncalls:", notes.calls)
    assert swept_b["held"] == 1
    assert Counter(notes.calls)[k0] == 1, (
        f"contact 0 reached the destination {Counter(notes.calls)[k0]} times: sweep C "
        f"found it not found before A's deadline ({swept_c}), D redid it, A called too")


def test_a_renewal_landing_between_the_replacing_reads_and_its_write_outlives_the_hold(
        aws, clock):
    """GIVEN run A (REPLACE job, 3 contacts) claimed its page and is between two items
    (before its lease and claim checks)
    WHEN run B reads its clock and the lease row, then is held up 11 s before its
    acquisition lands (a transaction retried after a 5 s read timeout, a loaded host:
    the delays issue 33 measured), and A's heartbeat renews meanwhile (the renewal is
    *sent* after B's clock reading and lands before B's write, which REPLACE does not
    condition on the expiry). B's acquisition writes hold_until_ms = B's reading +
    lease + skew, but A's local deadline is its renewal + lease - skew: 11 s - 2 x 5 s
    = 1 s later than the hold. B waits for the hold (its invocation has the time),
    reconciles A's items (not found) and calls the destination for them; A (its next
    renewal unanswered, as a lost renewal allows) wakes before its own deadline and
    calls for its first item
    THEN (expected) one call per work id: the README says the displaced run can no
    longer call once the hold has passed. Actual: the first item is called twice.
    (The bound's premise, 'its last renewal, sent at the latest now', is false: `now`
    is read before the lease row, and a renewal can be sent after it.)"""
    notes = NotesTable.create(aws.ddb)
    source = contacts(3)
    first = key(source[0])
    a_at_item, a_go = threading.Event(), threading.Event()
    a_run: list[Any] = []

    def hold_a(**ctx: Any) -> None:
        if not a_at_item.is_set():
            a_run.append(current_run())
            a_at_item.set()
            assert a_go.wait(20)

    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    with hooks.on("before_item", hold_a):
        thread, box = in_thread(lambda: job.handler()(manual("a"), None))
        assert a_at_item.wait(10)
        renewed: list[bool] = []

        def b_held_up_while_a_renews(job: str, trigger_id: str) -> None:
            if trigger_id.endswith(":b") and not renewed:
                clock.advance(timedelta(seconds=11))  # B, between its read and its write
                renewed.append(a_run[0].heartbeat.renew_once())  # A's renewal lands

        waits: list[int] = []

        def b_waits_for_the_hold(job: str, run_id: str, until_ms: int) -> None:
            waits.append(until_ms)
            renew = current_run().heartbeat.renew_once
            while to_ms(clock.now()) < until_ms:
                clock.advance(timedelta(
                    seconds=min(10, (until_ms - to_ms(clock.now())) / 1000)))
                assert renew() is True

        context = LambdaContext(clock=clock, timeout=timedelta(minutes=15))
        with hooks.on("after_lease_read", b_held_up_while_a_renews), \
                hooks.on("holding", b_waits_for_the_hold):
            report_b = job.handler()(manual("b"), context)
        assert renewed == [True]
        hold = waits[0]
        a_deadline_wall = to_ms(clock.now()) + int(
            (a_run[0].heartbeat.deadline - clock.monotonic()) * 1000)
        a_go.set()
        thread.join(20)
    assert not thread.is_alive()
    print("B:", report_b, "\nA:", box.get("result"), "\ncalls:", notes.calls,
          f"\nhold {hold}, A's deadline (wall) {a_deadline_wall}")
    assert Counter(notes.calls)[first] == 1, (
        f"{first} reached the destination {Counter(notes.calls)[first]} times: the hold "
        f"({hold}) ended {a_deadline_wall - hold} ms before A's local deadline")


def test_a_recovery_over_held_items_accounts_for_them_in_its_summary(aws, clock):
    """GIVEN run A (REPLACE job, 3 contacts) displaced alive by run B, which had no time
    to wait: A's 3 items are uncertain rows held until A's deadline
    WHEN an operator executes a recovery over the range before that moment (B has
    ended; the recovery takes the free lease)
    THEN (expected) the summary accounts for every planned item: the 3 it had to leave
    alone are said (held / deferred / still uncertain / left), as the run record of a
    BatchJob says `deferred`. Actual: the plan says 3 to replay, and the executed
    summary says replayed 0, reconciled 0, still_uncertain 0, left 0, not stopped: the 3
    vanish from the operator's answer while they stay uncertain in the ledger."""
    from jobguard.recovery import recover

    notes = NotesTable.create(aws.ddb)
    source = contacts(3)
    script = Script({"a": {key(source[0]): "hold"}})
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock,
                  before_call=script)
    thread, box = in_thread(lambda: job.handler()(manual("a"), None))
    assert script.at_call.wait(10)
    assert job.handler()(manual("b"), None)["deferred"] == 3
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "3", "mode": "unfinished"}
    plan = recover(request, job=job, threshold=100)
    result = recover({**request, "dry_run": False}, job=job, threshold=100)
    script.go.set()
    thread.join(20)
    summary = result["summary"]
    print("plan:", plan["plan"], "\nsummary:", summary)
    assert plan["plan"]["to_replay"] == 3
    # (a failed item is one of the replayed ones)
    accounted = (summary["already_completed"] + summary["reconciled"] + summary["replayed"]
                 + summary["still_uncertain"] + summary["skipped_by_mode"]
                 + summary["rejected"] + summary.get("left", 0)
                 + summary.get("deferred", 0) + summary.get("held", 0))
    assert accounted == summary["selected"] == 3, (
        f"the recovery's summary accounts for {accounted} of 3 items: {summary}")


def test_an_operators_resolve_of_another_item_strips_the_hold_from_the_displaced_claim(
        aws, clock):
    """GIVEN an item X left uncertain by an earlier run; run A (REPLACE job, 3 contacts)
    is right before its first destination call; run B replaces it and ends without
    claiming anything (a plain handler, or one that crashed at once): A's open claim
    stays on the job row with hold_until_ms ahead
    WHEN an operator resolves X (`jobguard resolve ... --not-found`): the resolve takes
    the free lease and its job-row write turns A's open claim into uncertain rows
    (`_foreign_rows` without `held_until`) and drops the claim; the next run C, still
    before A's deadline, reconciles them (not found) and redoes them; then A calls
    THEN (expected) one call per contact: the hold covers A's items whoever writes the
    job row. Actual: contact 0 is called twice."""
    from jobguard.recovery import resolve

    notes = NotesTable.create(aws.ddb)
    other = [{"id": "other-1", "change": "old"}]
    script = Script({"r0": {key(other[0]): "unknown"}})
    r0 = CrmSync(config(aws), other, notes, store=aws.store, clock=clock, before_call=script)
    assert r0.handler()(manual("r0"), None)["uncertain"] == 1

    source = contacts(3)
    first = key(source[0])
    held = Script({"a": {first: "hold"}})
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock, before_call=held)
    thread, box = in_thread(lambda: job.handler()(manual("a"), None))
    assert held.at_call.wait(10)
    nothing = make_job(aws, clock, lambda event, context: {"ok": True}, name=JOB,
                       policy=OverlapPolicy.REPLACE)
    assert nothing(manual("b"), None) == {"ok": True}
    assert items(aws).read_row(JOB).hold_until_ms is not None

    answer = resolve(config(aws), [key(other[0])], found=None, reason="not in the CRM",
                     requested_by="alice", guard_options={"store": aws.store, "clock": clock})
    assert answer["result"] == "resolved", answer
    after = items(aws).get(JOB, first)
    report_c = job.handler()(manual("c"), None)
    held.go.set()
    thread.join(20)
    assert not thread.is_alive()
    print("resolve:", answer, "\nrow after resolve:", after, "\nC:", report_c,
          "\ncalls:", notes.calls)
    assert Counter(notes.calls)[first] == 1, (
        f"{first} reached the destination {Counter(notes.calls)[first]} times: after an "
        f"unrelated resolve, C redid A's items before A's deadline ({report_c})")


def test_a_chained_replace_with_a_clock_behind_keeps_the_shorter_hold_on_the_row(
        aws, clock, request):
    """GIVEN run A (REPLACE job, batch 1) displaced alive by run B while calling for X: X
    is an uncertain row held until H1 (A's bound). B waits for H1 (its invocation has
    the time), reconciles X (not found: A never called), claims it for a retry and is
    right before its destination call
    WHEN run C replaces B on a worker whose clock is 3 s behind (inside the 5 s skew
    margin). C's acquisition writes the hold H2 = its now + lease + skew (about a minute
    on), and C finds X both in B's open claim and as a row still held until H1 by its
    own clock: `claim_page` defers X until H2 but leaves the row's `held_until_ms` at H1
    (it writes the held row only when the row is not held already) and C's job-row
    write drops B's claim. One second after H1, run D finds X's hold passed, reconciles
    it (not found: B has not called yet) and calls the destination; then B, a minute
    before its own deadline, calls
    THEN (expected) one call for X: B may call until about H2. Actual: two."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(1)
    x = key(source[0])
    script_b = Script({"b": {x: "hold"}})
    a_at_item, a_go = threading.Event(), threading.Event()

    def hold_a(**ctx: Any) -> None:  # A, between items: before its lease and claim checks
        if not a_at_item.is_set():
            a_at_item.set()
            assert a_go.wait(20)

    gate_a = hooks.on("before_item", hold_a)
    gate_a.__enter__()
    request.addfinalizer(lambda: gate_a.__exit__(None, None, None))
    job_a = CrmSync(config(aws, batch_size=1), source, notes, store=aws.store, clock=clock)
    thread_a, box_a = in_thread(lambda: job_a.handler()(manual("a"), None))
    assert a_at_item.wait(10)

    def b_waits_for_the_hold(job: str, run_id: str, until_ms: int) -> None:
        renew = current_run().heartbeat.renew_once
        while to_ms(clock.now()) < until_ms:
            clock.advance(timedelta(seconds=min(10, (until_ms - to_ms(clock.now())) / 1000)))
            assert renew() is True

    job_b = CrmSync(config(aws, batch_size=1), source, notes, store=aws.store, clock=clock,
                    before_call=script_b)
    context = LambdaContext(clock=clock, timeout=timedelta(minutes=15))
    with hooks.on("holding", b_waits_for_the_hold):
        thread_b, box_b = in_thread(lambda: job_b.handler()(manual("b"), context))
        assert script_b.at_call.wait(10)  # B, after H1, is about to call for X
    h1 = items(aws).lookup(JOB, [x])[0][x].held_until_ms  # its own row, under B's claim
    assert h1 is not None and to_ms(clock.now()) >= h1

    behind = clock.skewed(timedelta(seconds=-3))
    job_c = CrmSync(config(aws, batch_size=1), source, notes, store=aws.store, clock=behind)
    report_c = job_c.handler()(manual("c"), None)
    row_after_c = items(aws).lookup(JOB, [x])[0][x]
    clock.advance(timedelta(seconds=1))
    job_d = CrmSync(config(aws, batch_size=1), source, notes, store=aws.store, clock=clock)
    report_d = job_d.handler()(manual("d"), None)
    script_b.go.set()
    a_go.set()
    thread_b.join(20)
    thread_a.join(20)
    assert box_a["result"]["jobguard"] == "lease_lost"  # past its deadline: no call
    print("C:", report_c, "\nX after C:", row_after_c, "\nD:", report_d,
          "\nB:", box_b.get("result"), "\ncalls:", notes.calls)
    assert report_c["deferred"] == 1
    assert Counter(notes.calls)[x] == 1, (
        f"X reached the destination {Counter(notes.calls)[x]} times: C deferred it to its "
        f"own hold but left the row held until {h1}; D redid it a second later; B called")


# -- second review: resolve during a hold, the release's clock margin, a repair ---------


def damage_the_lease_row(aws: Any) -> None:
    """A hand edit of the lease row in an attribute no run's holder depends on."""
    aws.ddb.update_item(TableName=aws.table, Key={"pk": {"S": f"JOB#{JOB}"},
                                                  "sk": {"S": "LEASE"}},
                        UpdateExpression="SET queued_n = :bad",
                        ExpressionAttributeValues={":bad": {"S": "seven"}})


def _held_page(aws: Any, clock: Any, notes: NotesTable, policy: OverlapPolicy,
               skew: timedelta = timedelta(seconds=5)) -> tuple[Script, Any, Any, Any]:
    """Run A (3 contacts) held right before its first destination call, in a thread."""
    source = contacts(3)
    held = Script({"a": {key(source[0]): "hold"}})
    cfg = JobConfig(name=JOB, table_name=aws.table, batch_size=3, lease=LEASE,
                    policy=policy, skew_margin=skew)
    job = CrmSync(cfg, source, notes, store=aws.store, clock=clock, before_call=held)
    thread, box = in_thread(lambda: job.handler()(manual("a"), None))
    assert held.at_call.wait(10)
    return held, job, thread, box


def test_an_operators_not_found_for_an_item_a_displaced_run_may_still_call_waits(aws, clock):
    """GIVEN run A replaced right before its first destination call; run B left A's page
    held WHEN an operator resolves one of A's items `--not-found` before A's deadline
    THEN it is not resolved (reported `held`): a retryable failure now would have the
    next run redo an item A may still call for."""
    from jobguard.recovery import resolve

    notes = NotesTable.create(aws.ddb)
    held, job, thread, box = _held_page(aws, clock, notes, OverlapPolicy.REPLACE)
    first = key(contacts(1)[0])
    plain = CrmSync(config(aws), contacts(3), notes, store=aws.store, clock=clock)
    assert plain.handler()(manual("b"), None)["deferred"] == 3
    answer = resolve(config(aws), [first], found=None, reason="not in the CRM",
                     requested_by="alice", guard_options={"store": aws.store, "clock": clock})
    assert answer["held"] == [first] and answer["not_found"] == [], answer
    row = items(aws).get(JOB, first)
    assert row is not None and row.state is ItemState.UNCERTAIN and row.held_until_ms
    held.go.set()
    thread.join(20)
    assert Counter(notes.calls)[first] == 1


def test_a_force_release_allows_twice_the_jobs_own_skew_margin(aws, clock):
    """GIVEN a job whose skew margin is 20 s (its acquisitions write it on the job row)
    and its run held before its first call WHEN an operator force-releases it THEN the
    hold on the job row is the run's expiry + 40 s (twice the margin: clocks may differ
    that much), not the 10 s a release allows when no margin is known."""
    notes = NotesTable.create(aws.ddb)
    held, job, thread, box = _held_page(aws, clock, notes, OverlapPolicy.SKIP,
                                        skew=timedelta(seconds=20))
    lease = aws.store.read_lease(JOB)
    assert aws.store.force_release(ForceRelease(JOB, holder_run_id=lease.run_id, fence=lease.fence,
                                                now_ms=to_ms(clock.now()), by="oscar"))
    assert items(aws).read_row(JOB).hold_until_ms == lease.expires_at_ms + 40_000
    held.go.set()
    thread.join(20)


def test_a_repair_of_a_damaged_row_holds_the_claim_of_a_holder_that_may_be_alive(aws, clock):
    """GIVEN a run held before its first call, and its lease row damaged by hand in an
    attribute unrelated to its expiry WHEN an operator repairs the row (`release
    --force` on a damaged row repairs it) THEN the job row holds the run's open claim
    until its expiry + twice the skew margin: the next run does not redo its page while
    it may still call."""
    notes = NotesTable.create(aws.ddb)
    held, job, thread, box = _held_page(aws, clock, notes, OverlapPolicy.SKIP)
    lease = aws.store.read_lease(JOB)
    damage_the_lease_row(aws)
    aws.store.repair(JOB, now_ms=to_ms(clock.now()))
    assert items(aws).read_row(JOB).hold_until_ms == lease.expires_at_ms + 10_000
    plain = CrmSync(JobConfig(name=JOB, table_name=aws.table, batch_size=3, lease=LEASE),
                    contacts(3), notes, store=aws.store, clock=clock)
    assert plain.handler()(manual("next"), None)["deferred"] == 3
    held.go.set()
    thread.join(20)
    assert Counter(notes.calls)[key(contacts(1)[0])] == 1


def test_a_force_release_of_a_run_that_ended_never_repairs_away_the_next_holder(aws, clock):
    """GIVEN run A, which the operator saw holding the lease and asked to force-release,
    already ended; run B holds the lease now (held before its first call), and the lease
    row is damaged in an attribute the operator did not touch
    WHEN the operator's `release --force` of A reaches the damaged row (it repairs a
    damaged row instead of releasing it)
    THEN nothing is repaired or released: the row names B, not the holder the operator
    saw (explorer seed 426274: the repair freed the new holder and the release was
    reported done)."""
    notes = NotesTable.create(aws.ddb)
    first = make_job(aws, clock, lambda event, context: "done", name=JOB)
    first(manual("before"), None)
    a = aws.store.read_lease(JOB)
    assert a.run_id is None and a.last_run_id is not None
    held, job, thread, box = _held_page(aws, clock, notes, OverlapPolicy.SKIP)
    b = aws.store.read_lease(JOB)
    damage_the_lease_row(aws)
    released = aws.store.force_release(ForceRelease(JOB, holder_run_id=a.last_run_id, fence=a.fence,
                                                    now_ms=to_ms(clock.now()), by="oscar"))
    assert released is False
    raw = aws.lease_item(JOB)
    assert raw is not None and raw["run_id"]["S"] == b.run_id
    held.go.set()
    thread.join(20)
    assert box["result"]["completed"] == 3


def test_a_run_freed_by_a_repair_keeps_its_own_record_though_its_trigger_ran_before(
        aws, clock):
    """GIVEN a manual trigger whose first run lost its lease (its release ended the item
    `lost`, by `release`), delivered again and run by run B, held in its handler
    WHEN an operator repairs a damaged lease row (freeing B) and B then ends
    THEN B's refused release is not taken for its own (the item's `ended_by` was the
    first run's): B writes its record, `lease_lost` (explorer seed 428219: the run
    ended with no record)."""
    gate = threading.Event()
    entered = threading.Event()
    calls = {"n": 0}

    def handler(event: Any, context: Any) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            clock.advance(timedelta(seconds=61))  # past its deadline: lease lost
            return "first"
        entered.set()
        assert gate.wait(20)
        return "second"

    job = make_job(aws, clock, handler, name=JOB)
    first = job(manual("t"), None)
    assert first["jobguard"] == "lease_lost"
    thread, box = in_thread(lambda: job(manual("t"), None))
    assert entered.wait(10)
    b = aws.store.read_lease(JOB)
    damage_the_lease_row(aws)
    assert aws.store.repair(JOB, now_ms=to_ms(clock.now())) > 0
    gate.set()
    thread.join(20)
    records = {r.run_id: r for r in aws.runs(JOB)}
    assert b.run_id in records, "the run freed by the repair wrote no record"
    assert records[b.run_id].status.value == "lease_lost"


def test_a_row_that_lost_only_its_run_id_is_damaged_not_free(aws, clock):
    """GIVEN a run held before its first call, and its lease row edited by hand to lose
    only ``run_id`` (its owner and expiry still there) WHEN the next trigger arrives THEN
    it does not take the row for free and run beside the holder: the row is damaged
    (named, with the repair); AND WHEN the operator repairs it THEN the job row holds the
    holder's open claim until its expiry + the margin, so the next run leaves its page."""
    from jobguard.errors import DamagedRowError

    notes = NotesTable.create(aws.ddb)
    held, job, thread, box = _held_page(aws, clock, notes, OverlapPolicy.SKIP)
    lease = aws.store.read_lease(JOB)
    aws.ddb.update_item(TableName=aws.table, Key={"pk": {"S": f"JOB#{JOB}"},
                                                  "sk": {"S": "LEASE"}},
                        UpdateExpression="REMOVE run_id")
    plain = CrmSync(JobConfig(name=JOB, table_name=aws.table, batch_size=3, lease=LEASE),
                    contacts(3), notes, store=aws.store, clock=clock)
    with pytest.raises(DamagedRowError) as caught:
        plain.handler()(manual("next"), None)
    assert caught.value.attribute == "run_id"
    assert aws.store.high_water(JOB) == lease.fence  # no fence was issued to it

    aws.store.repair(JOB, now_ms=to_ms(clock.now()))
    assert items(aws).read_row(JOB).hold_until_ms == lease.expires_at_ms + 10_000
    assert plain.handler()(manual("after"), None)["deferred"] == 3
    held.go.set()
    thread.join(20)
    assert Counter(notes.calls)[key(contacts(1)[0])] == 1
