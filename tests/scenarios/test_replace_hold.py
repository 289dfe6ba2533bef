"""REPLACE without a second call (issue 33): a run that takes the lease from a live run
leaves that run's open claim alone until the displaced run can no longer call the
destination, does the rest of its work first, then reconciles those items.

Real threads on the serialized emulator; the races are staged with events at hook
points (``before_call`` in the job, ``holding`` in the library), never with sleeps. Each
test counts the calls that reached the destination per work id (ONCE at the destination
itself, not only at its conditional write) and reads the ledger and the checkpoint.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

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
from jobguard.records import RunStatus
from jobguard.recovery import recover
from jobguard.requests import ForceRelease
from jobguard.testing import LambdaContext

from ._items import CrmSync, NotesTable, contacts
from ._support import in_thread, make_job

JOB = "crm-sync"
LEASE = timedelta(seconds=60)


def config(aws: Any) -> JobConfig:
    return JobConfig(name=JOB, table_name=aws.table, batch_size=3, lease=LEASE,
                     policy=OverlapPolicy.REPLACE)


def manual(trigger_id: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": trigger_id}


def keys(records: list[dict[str, Any]]) -> list[str]:
    return [str(WorkId(r["id"], "create-note")) for r in records]


def items(aws: Any) -> DynamoItemStore:
    return DynamoItemStore(aws.table, client=aws.ddb)


class Held:
    """Run A, started in a thread, held at its first item: right before its destination
    call (``at="call"``: its lease and claim checks passed, the call is as good as in
    flight), or before those checks (``at="item"``: a worker frozen between items)."""

    def __init__(self, aws: Any, clock: Any, notes: NotesTable,
                 source: list[dict[str, Any]], *, at: str = "call") -> None:
        self.at_call, self.go = threading.Event(), threading.Event()

        def hold(*_: Any, **__: Any) -> None:
            if not self.at_call.is_set():
                self.at_call.set()
                assert self.go.wait(20)

        self._hook = hooks.on("before_item", hold) if at == "item" else None
        if self._hook is not None:
            self._hook.__enter__()
        self.job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock,
                           before_call=hold if at == "call" else None)
        self.thread, self.box = in_thread(lambda: self.job.handler()(manual("a"), None))
        assert self.at_call.wait(10)

    def finish(self) -> None:
        self.go.set()
        self.thread.join(20)
        assert not self.thread.is_alive()
        if self._hook is not None:
            self._hook.__exit__(None, None, None)



def test_the_replacing_run_waits_for_the_displaced_runs_calls_then_reconciles_them(
        aws, clock):
    """GIVEN a REPLACE job over 9 contacts (pages of 3): run A claimed the first page and
    is about to call the destination for its first item
    WHEN run B replaces it (its Lambda has 15 minutes): B leaves A's 3 items alone, does
    the 6 others; then, while B waits for A's deadline, A goes on (it learns of B only
    at its next renewal) and calls the destination for its 3 items
    THEN each of the 9 work ids reached the destination exactly once (B, back at A's 3
    items after A's deadline, found them completed by A, and called nothing); the
    ledger says completed with the note the destination holds; B moved the checkpoint
    to the end; A ended lease_lost."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(9)
    a = Held(aws, clock, notes, source)
    waits: list[int] = []

    def a_calls_then_time_passes(job: str, run_id: str, until_ms: int) -> None:
        waits.append(until_ms)
        a.finish()  # A calls for its page, writes its completions; its claim drop refused
        renew = current_run().heartbeat.renew_once  # B's heartbeat goes on while it waits
        while to_ms(clock.now()) < until_ms:
            clock.advance(timedelta(seconds=min(10, (until_ms - to_ms(clock.now())) / 1000)))
            assert renew() is True

    job_b = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    context = LambdaContext(clock=clock, timeout=timedelta(minutes=15))
    with hooks.on("holding", a_calls_then_time_passes):
        report_b = job_b.handler()(manual("b"), context)

    assert Counter(notes.calls) == Counter(keys(source))  # ONCE, at the destination
    ledger = items(aws).get_many(JOB, keys(source))
    assert {w: r.state for w, r in ledger.items()} == {w: ItemState.COMPLETED
                                                       for w in keys(source)}
    assert all(ledger[w].destination_id == notes.find(w) for w in keys(source))
    assert len(waits) == 1
    assert report_b["completed"] == 6 and report_b["already_done"] == 3
    assert report_b.get("deferred", 0) == 0 and report_b.get("retried", 0) == 0
    row = items(aws).read_row(JOB)
    assert row.claim is None and row.checkpoint.cursor == "9" and row.checkpoint.fence == 2
    assert a.box["result"]["jobguard"] == "lease_lost"
    records = {r.trigger_id: r for r in aws.runs(JOB)}
    assert records[f"{JOB}@manual:b"].status is RunStatus.SUCCEEDED
    # A's record says which job and run lost the lease, and why
    a_record = records[f"{JOB}@manual:a"]
    assert a_record.error == (f"LeaseLostError: job {JOB!r}: run {a_record.run_id} (fence 1) "
                              "lost its lease: the job row carries fence 2")


def test_a_replacing_run_without_the_time_leaves_them_for_the_next_run(aws, clock):
    """GIVEN the same takeover, run B invoked without a deadline it can wait within
    WHEN B ends, then A goes on and completes its items; later a run C comes after A's
    deadline
    THEN B leaves A's 3 items as uncertain rows held until A's deadline (counted
    `deferred`, the checkpoint before them), A's completions land over them, and C
    finds them done: still one call per work id, and C moves the checkpoint to the
    end."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(6)
    a = Held(aws, clock, notes, source)
    job_b = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    report_b = job_b.handler()(manual("b"), None)

    first = keys(source)[:3]
    held = items(aws).get_many(JOB, first)
    assert {r.state for r in held.values()} == {ItemState.UNCERTAIN}
    hold = held[first[0]].held_until_ms
    assert hold is not None and hold > to_ms(clock.now())
    assert "displaced while alive" in (held[first[0]].last_error or "")
    assert report_b["deferred"] == 3 and report_b["completed"] == 3
    assert items(aws).read_row(JOB).checkpoint.cursor is None

    a.finish()
    clock.advance(timedelta(milliseconds=hold - to_ms(clock.now()) + 1))
    report_c = job_b.handler()(manual("c"), None)
    assert report_c["already_done"] == 6 and report_c.get("reconciled", 0) == 0
    assert Counter(notes.calls) == Counter(keys(source))
    assert items(aws).read_row(JOB).checkpoint.cursor == "6"


def test_a_displaced_run_that_never_calls_is_redone_once_after_its_deadline(aws, clock):
    """GIVEN run A displaced between two items (its worker froze before its lease and
    claim checks)
    WHEN B leaves A's items; C runs before A's deadline; D runs after it; a reconciler
    sweep runs between
    THEN C leaves them too (their rows are held), the sweep does not touch them, and D
    reconciles them (not found) and does each once: one call per work id."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(3)
    a = Held(aws, clock, notes, source, at="item")
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    assert job.handler()(manual("b"), None)["deferred"] == 3
    first = keys(source)
    hold = items(aws).get(JOB, first[0]).held_until_ms
    assert hold is not None

    report_c = job.handler()(manual("c"), None)
    assert report_c["deferred"] == 3 and report_c.get("reconciled", 0) == 0

    def sweeper(event: Any, context: Any) -> dict[str, Any]:
        from jobguard import current_run

        return sweep(current_run(), job.reconcile).as_dict()

    swept = make_job(aws, clock, sweeper, name=JOB, policy=OverlapPolicy.REPLACE)(
        manual("sweep"), None)
    assert swept["held"] == 3 and swept["not_found"] == 0
    assert notes.calls == []

    clock.advance(timedelta(milliseconds=hold - to_ms(clock.now()) + 1))
    report_d = job.handler()(manual("d"), None)
    assert report_d["retried"] == 3 and report_d["completed"] == 3
    assert Counter(notes.calls) == Counter(first)
    a.finish()  # the frozen worker wakes: past its deadline it calls nothing
    assert Counter(notes.calls) == Counter(first)
    assert a.box["result"]["jobguard"] == "lease_lost"


def displaced_page(aws: Any, clock: Any) -> tuple[NotesTable, list[dict[str, Any]], Held,
                                                 CrmSync, int]:
    """Run A frozen between items of its page of 3; run B replaced it and left the page
    held until A's deadline: the notes, the source, A, the job and that deadline."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(3)
    a = Held(aws, clock, notes, source, at="item")
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    assert job.handler()(manual("b"), None)["deferred"] == 3
    hold = items(aws).get(JOB, keys(source)[0]).held_until_ms
    assert hold is not None
    return notes, source, a, job, hold


def test_a_recovery_that_meets_a_displaced_runs_page_reports_it_deferred(aws, clock):
    """GIVEN a REPLACE takeover that left the displaced run A's page (A frozen between
    items) held until A's deadline
    WHEN an operator recovers the range before that deadline, then again after it
    THEN the first recovery replays nothing of A's page and says so (`deferred` in its
    summary); the second reconciles them (not found) and replays each once."""
    notes, source, a, job, hold = displaced_page(aws, clock)
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "3", "requested_by": "alice",
               "dry_run": False}
    options = {"store": aws.store, "clock": clock}

    early = recover(request, job=job, guard_options=options)
    assert early["summary"]["deferred"] == 3 and early["summary"]["replayed"] == 0
    assert notes.calls == []

    clock.advance(timedelta(milliseconds=hold - to_ms(clock.now()) + 1))
    late = recover(request, job=job, guard_options=options)
    assert late["summary"]["deferred"] == 0 and late["summary"]["replayed"] == 3
    assert Counter(notes.calls) == Counter(keys(source))
    a.finish()
    assert Counter(notes.calls) == Counter(keys(source))


def test_a_recovery_with_the_time_waits_out_a_displaced_runs_hold_then_replays(aws, clock):
    """GIVEN the same takeover: A's page held until A's deadline
    WHEN an operator recovers the range before that deadline, in a Lambda with 15
    minutes (time to wait for the hold)
    THEN the recovery does the rest first, waits until A can no longer call, then
    reconciles A's items (not found) and replays each in the same invocation: its
    summary says replayed 3 and nothing deferred, one call per work id, and A, let go
    afterwards, calls nothing (its lease is gone)."""
    notes, source, a, job, hold = displaced_page(aws, clock)
    waits: list[int] = []

    def time_passes(job: str, run_id: str, until_ms: int) -> None:
        waits.append(until_ms)
        renew = current_run().heartbeat.renew_once  # the recovery's lease, while it waits
        while to_ms(clock.now()) < until_ms:
            clock.advance(timedelta(seconds=min(10, (until_ms - to_ms(clock.now())) / 1000)))
            assert renew() is True

    context = LambdaContext(clock=clock, timeout=timedelta(minutes=15))
    with hooks.on("holding", time_passes):
        done = recover({"job": JOB, "cursor_from": "0", "cursor_to": "3",
                        "requested_by": "alice", "dry_run": False}, job=job,
                       guard_options={"store": aws.store, "clock": clock}, context=context)

    assert waits == [hold]
    assert done["summary"]["deferred"] == 0 and done["summary"]["replayed"] == 3
    assert Counter(notes.calls) == Counter(keys(source))
    ledger = items(aws).get_many(JOB, keys(source))
    assert all(r.state is ItemState.COMPLETED for r in ledger.values())
    a.finish()
    assert Counter(notes.calls) == Counter(keys(source))


def test_a_force_released_run_that_is_alive_gets_the_same_hold(aws, clock):
    """GIVEN a SKIP job whose run A claimed a page and is held before its first
    destination call (its checks passed: the call is as good as sent)
    WHEN an operator force-releases A's lease (`jobguard release --force`) and run B
    comes at once; A then calls; run C comes after A's deadline
    THEN B leaves A's page alone (held rows until now + lease + 10 s); A's calls land
    and their completions with them; C finds them done: one call per work id."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(3)
    skip = JobConfig(name=JOB, table_name=aws.table, batch_size=3, lease=LEASE)
    at_call, go = threading.Event(), threading.Event()

    def hold(item: Any) -> None:
        if not at_call.is_set():
            at_call.set()
            assert go.wait(20)

    job_a = CrmSync(skip, source, notes, before_call=hold, store=aws.store, clock=clock)
    thread, box = in_thread(lambda: job_a.handler()(manual("a"), None))
    assert at_call.wait(10)
    lease = aws.store.read_lease(JOB)
    assert lease.run_id is not None
    released_at = to_ms(clock.now())
    assert aws.store.force_release(ForceRelease(JOB, holder_run_id=lease.run_id, fence=lease.fence,
                                                now_ms=released_at, by="oscar",
                                                reason="looks stuck"))
    job = CrmSync(skip, source, notes, store=aws.store, clock=clock)
    report_b = job.handler()(manual("b"), None)
    assert report_b["deferred"] == 3 and notes.calls == []
    held = items(aws).get(JOB, keys(source)[0])
    assert held is not None and held.held_until_ms == released_at + 60_000 + 10_000

    go.set()
    thread.join(20)
    assert box["result"]["jobguard"] == "lease_lost"
    clock.advance(timedelta(milliseconds=held.held_until_ms - to_ms(clock.now()) + 1))
    report_c = job.handler()(manual("c"), None)
    assert report_c["already_done"] == 3
    assert Counter(notes.calls) == Counter(keys(source))


def test_a_run_replaced_before_its_first_page_learns_it_from_the_job_row(aws, clock):
    """GIVEN a REPLACE job over 6 contacts: run A took the lease and has claimed nothing
    WHEN run B replaces it and does all 6 items, then A goes on to its first page
    THEN A reads the job row B wrote (fence 2), stops before claiming or calling anything,
    and its run record names the job, the run, the fence it held and the one it met;
    each work id reached the destination once, from B."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(6)
    acquired, go = threading.Event(), threading.Event()

    def hold(job: str, run_id: str, fence: int) -> None:
        if fence == 1:
            acquired.set()
            assert go.wait(20)

    with hooks.on("after_acquire", hold):
        job_a = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
        thread, box = in_thread(lambda: job_a.handler()(manual("a"), None))
        assert acquired.wait(10)
        job_b = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
        report_b = job_b.handler()(manual("b"), None)
        go.set()
        thread.join(20)

    assert report_b["completed"] == 6
    assert Counter(notes.calls) == Counter(keys(source))  # ONCE: A called nothing
    assert box["result"]["jobguard"] == "lease_lost"
    row = items(aws).read_row(JOB)
    assert row.fence == 2 and row.claim is None and row.checkpoint.cursor == "6"
    a_record = {r.trigger_id: r for r in aws.runs(JOB)}[f"{JOB}@manual:a"]
    assert a_record.error == (f"LeaseLostError: job {JOB!r}: run {a_record.run_id} (fence 1) "
                              "lost its lease: the job row carries fence 2")


def waiting_out(clock: Any) -> Any:
    """A ``holding`` hook's wait: the replacing run's clock to the hold's end, its
    heartbeat renewing the lease on the way (as its thread does while it waits)."""

    def wait_out(until_ms: int) -> None:
        renew = current_run().heartbeat.renew_once
        while to_ms(clock.now()) < until_ms:
            clock.advance(timedelta(seconds=min(10, (until_ms - to_ms(clock.now())) / 1000)))
            assert renew() is True

    return wait_out


class Edge:
    """A Lambda context whose remaining time a test sets (``ms``), exactly."""

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def get_remaining_time_in_millis(self) -> float:
        return self.ms


def test_a_displaced_item_that_fails_after_the_hold_keeps_the_checkpoint_before_it(
        aws, clock):
    """GIVEN run A frozen between items of its first page (of 6 contacts, pages of 3)
    WHEN run B replaces it, does the second page, waits out A's hold, and its call for
    A's first item fails (the CRM answers 500)
    THEN B leaves the checkpoint before page 1: the failed item is behind no checkpoint,
    and the next run does it, once, then moves the checkpoint to the end."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(6)
    first = keys(source)[:3]
    a = Held(aws, clock, notes, source, at="item")
    wait_out = waiting_out(clock)

    def fail_first(item: Any) -> None:
        if item.key == first[0]:
            raise OutcomeUnknown("CRM timed out")

    def time_passes(job: str, run_id: str, until_ms: int) -> None:
        wait_out(until_ms)

    job_b = CrmSync(config(aws), source, notes, store=aws.store, clock=clock,
                    before_call=fail_first)
    with hooks.on("holding", time_passes):
        report_b = job_b.handler()(manual("b"), LambdaContext(
            clock=clock, timeout=timedelta(minutes=15)))

    assert report_b["completed"] == 5 and report_b.get("deferred", 0) == 0
    assert Counter(notes.calls) == Counter(keys(source)[1:])
    assert items(aws).get(JOB, first[0]).state is not ItemState.COMPLETED
    assert items(aws).read_row(JOB).checkpoint.cursor is None  # CKPT: not past it
    a.finish()
    assert a.box["result"]["jobguard"] == "lease_lost"

    job_c = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    job_c.handler()(manual("c"), None)
    assert Counter(notes.calls) == Counter(keys(source))  # ONCE
    assert items(aws).read_row(JOB).checkpoint.cursor == "6"


def test_a_displaced_page_is_done_with_exactly_the_time_margin_left(aws, clock):
    """GIVEN run A frozen between items of its page; run B replaced it and waits out
    its hold
    WHEN B's invocation has exactly its time margin (10 s) left after the wait
    THEN B does A's items (it stops only with less than the margin left, as for its
    own pages): each once, the checkpoint at the end."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(3)
    a = Held(aws, clock, notes, source, at="item")
    context = Edge(timedelta(minutes=15).total_seconds() * 1000)
    wait_out = waiting_out(clock)

    def time_passes(job: str, run_id: str, until_ms: int) -> None:
        wait_out(until_ms)
        context.ms = 10_000  # exactly the job's time_margin

    job_b = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    with hooks.on("holding", time_passes):
        report_b = job_b.handler()(manual("b"), context)

    assert report_b["completed"] == 3 and report_b.get("stopped") != "time"
    assert report_b["selected"] == 3  # A's page counted once, though claimed twice
    assert Counter(notes.calls) == Counter(keys(source))
    assert items(aws).read_row(JOB).checkpoint.cursor == "3"
    a.finish()
