"""Work items under overlap: every test checks the ledger and the destination.

ONCE: no note is created twice. END: every selected item ends completed, failed or
uncertain. FENCE: a stale worker's writes are refused. CKPT: the checkpoint never moves
backwards nor past an unfinished item.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from jobguard import ItemState, JobConfig, WorkId, current_run, hooks
from jobguard.dynamodb_items import DynamoItemStore

from ._items import CrmSync, NotesTable, contacts
from ._support import in_thread

JOB = "crm-sync"


def manual(trigger_id: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": trigger_id}


def config(aws, **overrides: Any) -> JobConfig:
    options: dict[str, Any] = {"name": JOB, "table_name": aws.table, "batch_size": 10,
                               "lease": timedelta(seconds=60)}
    options.update(overrides)
    return JobConfig(**options)


def ledger(aws) -> dict[str, Any]:
    items = DynamoItemStore(aws.table, client=aws.ddb)
    ids = [str(WorkId(c["id"], "create-note")) for c in contacts(1000)]
    return items.get_many(JOB, ids)


def assert_once_and_end(aws, notes: NotesTable, selected: int) -> dict[str, Any]:
    rows = ledger(aws)
    assert len(rows) == selected  # END: every selected item has a ledger row ...
    states = Counter(r.state for r in rows.values())
    assert states[ItemState.CLAIMED] == 0  # ... and none is left claimed by nobody
    written = notes.all()
    assert len(written) == len(set(written))  # ONCE at the destination
    for work_id, row in rows.items():
        if row.state is ItemState.COMPLETED:
            assert written[work_id] == row.destination_id  # proof matches the effect
    return rows


def test_a_run_pages_claims_completes_and_checkpoints(aws, clock):
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(config(aws), contacts(35), notes, store=aws.store, clock=clock)
    report = job.handler()(manual("first"), None)
    assert (report["selected"], report["completed"], report["pages"]) == (35, 35, 4)
    rows = assert_once_and_end(aws, notes, 35)
    assert {r.state for r in rows.values()} == {ItemState.COMPLETED}
    assert all(r.ttl_epoch_s and r.run_id for r in rows.values())
    items = DynamoItemStore(aws.table, client=aws.ddb)
    assert items.read_checkpoint(JOB).cursor == "35"
    assert items.unresolved(JOB) == []  # completed items leave the sparse index
    (run,) = aws.runs(JOB)
    assert run.extra["completed"] == 35 and run.extra["cursor_to"] == "35"

    # a second run resumes from the checkpoint and finds nothing to do
    job.source += contacts(40)[35:]
    again = job.handler()(manual("second"), None)
    assert (again["cursor_from"], again["selected"], again["completed"]) == ("35", 5, 5)
    assert len(notes.calls) == 40


def test_a_second_worker_while_the_first_processes_the_same_batch(aws, clock):
    # GIVEN worker A paused mid-page: 2 notes created, outcomes not yet written
    notes = NotesTable.create(aws.ddb)
    source = contacts(20)
    paused, resume = threading.Event(), threading.Event()
    a_seen: list[str] = []

    def pause_a(**ctx):
        if ctx["run_id"] == a_run["id"] and len(a_seen) == 2:
            paused.set()
            assert resume.wait(20)
        if ctx["run_id"] == a_run["id"]:
            a_seen.append(ctx["work_id"])

    a_run: dict[str, str] = {}
    job_a = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    with hooks.on("after_acquire", lambda **ctx: a_run.setdefault("id", ctx["run_id"])), \
            hooks.on("before_item", pause_a):
        thread, box = in_thread(lambda: job_a.handler()(manual("a"), None))
        assert paused.wait(10)

        # WHEN A's lease expires under it and worker B runs the same job
        clock.advance(timedelta(seconds=66))
        job_b = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
        report_b = job_b.handler()(manual("b"), None)
        resume.set()
        thread.join(10)

    # THEN B reconciled what A had done (found at the destination, no second call),
    # redid the rest, and A committed nothing more
    assert report_b["reconciled"] == 2 and report_b["completed"] == 18
    assert box["result"]["jobguard"] == "lease_lost"
    assert Counter(notes.calls).most_common(1)[0][1] == 1  # no item called twice
    rows = assert_once_and_end(aws, notes, 20)
    assert all(r.state is ItemState.COMPLETED for r in rows.values())
    assert {r.fence for r in rows.values()} == {2}  # every completion carries B's fence
    a_record = next(r for r in aws.runs(JOB) if r.run_id == a_run["id"])
    assert a_record.status.value == "lease_lost"


def test_paused_after_claiming_until_the_lease_expires_then_recovered_without_duplicates(
        aws, clock):
    # GIVEN A paused right after claiming its first page, before any destination call
    notes = NotesTable.create(aws.ddb)
    source = contacts(15)
    paused, resume = threading.Event(), threading.Event()

    def pause(**ctx):
        if not paused.is_set():
            paused.set()
            assert resume.wait(20)

    job_a = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    with hooks.on("after_claim", pause):
        thread, box = in_thread(lambda: job_a.handler()(manual("a"), None))
        assert paused.wait(10)
    clock.advance(timedelta(seconds=66))

    # WHEN the next run takes over
    job_b = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    report_b = job_b.handler()(manual("b"), None)
    resume.set()
    thread.join(10)

    # THEN A's claims were recognised as vanished, found nowhere, and done once by B
    assert report_b["completed"] == 15 and report_b["retried"] == 10
    assert job_a.processed == []
    assert sorted(notes.calls) == sorted(set(notes.calls)) and len(notes.calls) == 15
    assert_once_and_end(aws, notes, 15)
    assert DynamoItemStore(aws.table, client=aws.ddb).read_checkpoint(JOB).cursor == "15"


def test_a_stale_workers_claim_outcomes_and_checkpoint_are_rejected_by_the_fence(aws, clock):
    # GIVEN run A holds a claim, then loses the lease to B (fence 2)
    from jobguard import LeaseLostError
    from jobguard.workitems import Commit, Completion, Fence, ItemState, Unresolved

    items = DynamoItemStore(aws.table, client=aws.ddb)
    notes = NotesTable.create(aws.ddb)
    release_a = threading.Event()
    claimed = threading.Event()
    box_a: dict[str, Any] = {}

    def handler_a(event, context):
        run = current_run()
        box_a["fence"] = Fence(JOB, run.run_id, run.fence)
        row = items.read_row(JOB)
        box_a["row"] = items.commit(box_a["fence"], Commit(
            expected=row, claim={"contact-1:create-note": ""}, claim_expires_at_ms=60_000),
            now_ms=0).row
        claimed.set()
        release_a.wait(20)
        return "done"

    from ._support import make_job

    job_a = make_job(aws, clock, handler_a, name=JOB)
    thread, _ = in_thread(lambda: job_a(manual("a"), None))
    assert claimed.wait(10)
    clock.advance(timedelta(seconds=66))
    job_b = make_job(aws, clock, lambda e, c: "b ran", name=JOB)
    assert job_b(manual("b"), None) == "b ran"

    # WHEN A tries to claim another item, record its item failed, or move the checkpoint
    stale, row = box_a["fence"], box_a["row"]
    attempts = [
        Commit(expected=row, claim={"contact-1:create-note": "", "contact-2:create-note": ""}),
        Commit(expected=row, rows=(Unresolved("contact-1:create-note", ItemState.FAILED,
                                              error="x", retryable=True),)),
        Commit(expected=row, claim={"contact-1:create-note": ""}, checkpoint=(0, "1")),
    ]
    for attempt in attempts:
        with pytest.raises(LeaseLostError):
            items.commit(stale, attempt, now_ms=1)
    release_a.set()
    thread.join(10)

    # THEN nothing of that was written: the claim is still A's, fence 1, nothing else
    rows = items.get_many(JOB, ["contact-1:create-note", "contact-2:create-note"])
    assert list(rows) == ["contact-1:create-note"]
    assert rows["contact-1:create-note"].state is ItemState.CLAIMED
    assert (rows["contact-1:create-note"].run_id, rows["contact-1:create-note"].fence) == (
        stale.run_id, 1)
    assert items.read_checkpoint(JOB).seq == 0
    assert items.unresolved(JOB, states=[ItemState.FAILED]) == []

    # A completion is not fenced: it states what the destination holds, whoever saw it
    note = notes.put("contact-1:create-note", "created by A before it lost the lease")
    items.write_facts(JOB, [Completion("contact-1:create-note", note, stale.run_id, 1)],
                      now_ms=1, ttl_s=86_400)
    done = items.get(JOB, "contact-1:create-note")
    assert done is not None and done.state is ItemState.COMPLETED
    assert done.destination_id == notes.find("contact-1:create-note")


def test_the_same_work_id_with_a_different_payload_is_reported_not_completed(aws, clock):
    notes = NotesTable.create(aws.ddb)
    source = contacts(3)
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    job.handler()(manual("first"), None)
    before = notes.all()

    # WHEN the source later yields contact 1 again with other content (a reused id)
    source.append({"id": "contact-00001", "change": "a different change"})
    report = job.handler()(manual("second"), None)

    # THEN it is reported as a conflict, nothing is sent, and the ledger keeps the original
    assert report["conflicts"] == 1 and report["completed"] == 0
    assert report["conflict_ids"] == ["contact-00001:create-note"]
    assert notes.all() == before and len(notes.calls) == 3
    row = ledger(aws)["contact-00001:create-note"]
    assert row.state is ItemState.COMPLETED and row.destination_id == before[row.work_id]
    (second,) = [r for r in aws.runs(JOB) if r.extra.get("conflicts")]
    assert second.extra["conflicts"] == 1


def test_claim_in_a_plain_handler_skips_completed_and_reconciles_uncertain(aws, clock):
    notes = NotesTable.create(aws.ddb)
    records = contacts(6)
    timeouts = {"contact-00002"}

    def lambda_handler(event, context):
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r["id"], "create-note"),
                              reconcile=lambda record, row: notes.find(row.work_id)):
            with item:
                note_id = notes.put(item.key, item.record["change"])
                if item.record["id"] in timeouts:
                    timeouts.discard(item.record["id"])
                    raise TimeoutError("response lost after the note was created")
                item.complete(destination_id=note_id)
        return run.stats

    from ._support import make_job

    job = make_job(aws, clock, lambda_handler, name=JOB)
    job(manual("first"), None)
    first = ledger(aws)
    assert first["contact-00002:create-note"].state is ItemState.UNCERTAIN
    assert DynamoItemStore(aws.table, client=aws.ddb).unresolved(JOB)[0].work_id == (
        "contact-00002:create-note")

    job(manual("second"), None)
    rows = assert_once_and_end(aws, notes, 6)
    assert {r.state for r in rows.values()} == {ItemState.COMPLETED}
    assert notes.calls.count("contact-00002:create-note") == 1  # found, not redone
    second = [r for r in aws.runs(JOB) if r.trigger_id.endswith("second")][0]
    assert second.extra["reconciled"] == 1 and second.extra["already_done"] == 5


def test_a_sweep_resolves_uncertain_items_without_redoing_any(aws, clock):
    # GIVEN three uncertain items: one whose note exists, one whose note does not, and one
    # whose lookup fails
    from jobguard.batch import sweep

    notes = NotesTable.create(aws.ddb)
    records = contacts(3)

    def lambda_handler(event, context):
        for item in current_run().claim(records, work_id=lambda r: WorkId(r["id"], "x")):
            with item:
                if item.record["id"] == "contact-00000":
                    notes.put(item.key, "created, response lost")
                raise TimeoutError("no answer")
        return "done"

    from ._support import make_job

    make_job(aws, clock, lambda_handler, name=JOB)(manual("first"), None)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    assert {r.state for r in items.unresolved(JOB)} == {ItemState.UNCERTAIN}

    def reconcile(record, row):
        if row.work_id.startswith("contact-00002"):
            raise ConnectionError("destination down")
        return notes.find(row.work_id)

    # WHEN a reconciler run sweeps the job's unresolved items
    report = make_job(aws, clock, lambda e, c: sweep(current_run(), reconcile).as_dict(),
                      name=JOB)(manual("sweep"), None)

    # THEN found -> completed, not found -> retryable failure, error -> still uncertain
    assert report == {"examined": 3, "found": 1, "not_found": 1, "still_uncertain": 1,
                      "failed": 0, "held": 0, "damaged": 0}
    rows = {r.work_id: r for r in (items.get(JOB, f"contact-0000{i}:x") for i in range(3))}
    assert rows["contact-00000:x"].state is ItemState.COMPLETED
    assert rows["contact-00000:x"].destination_id == notes.find("contact-00000:x")
    assert rows["contact-00001:x"].state is ItemState.FAILED and rows["contact-00001:x"].retryable
    assert rows["contact-00002:x"].state is ItemState.UNCERTAIN
    assert notes.calls == ["contact-00000:x"]  # the sweep itself calls nothing
    sweep_run = [r for r in aws.runs(JOB) if r.trigger_id.endswith("sweep")][0]
    assert sweep_run.extra["sweep_found"] == 1


# -- bad answers from the job's own code (found reviewing the ledger redesign) -----------


def test_a_reconcile_answer_that_is_not_a_destination_id_leaves_the_item_uncertain(aws, clock):
    # GIVEN an uncertain item (its note was created, the answer lost)
    notes = NotesTable.create(aws.ddb)
    records = contacts(1)
    lost = {"contact-00000"}

    def lambda_handler(event, context):
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r["id"], "create-note"),
                              reconcile=lambda record, row: {"note": notes.find(row.work_id)}):
            with item:
                note_id = notes.put(item.key, item.record["change"])
                if item.record["id"] in lost:
                    lost.clear()
                    raise TimeoutError("response lost after the note was created")
                item.complete(destination_id=note_id)
        return run.stats

    from ._support import make_job

    job = make_job(aws, clock, lambda_handler, name=JOB)
    job(manual("first"), None)

    # WHEN a later run's reconcile answers with something that is neither a destination
    # id nor None (here a dict: truthy, and not a proof)
    second = job(manual("second"), None)

    # THEN the item is not redone on the strength of it (ONCE): it stays uncertain
    assert second["uncertain"] == 1 and second.get("retried", 0) == 0
    assert notes.calls == ["contact-00000:create-note"]
    assert ledger(aws)["contact-00000:create-note"].state is ItemState.UNCERTAIN


def test_a_destination_id_too_long_to_keep_is_refused_and_the_item_left_uncertain(aws, clock):
    from jobguard import JobGuardError

    notes = NotesTable.create(aws.ddb)

    def lambda_handler(event, context):
        run = current_run()
        for item in run.claim(contacts(1), work_id=lambda r: WorkId(r["id"], "create-note")):
            with item:
                notes.put(item.key, item.record["change"])
                item.complete(destination_id="x" * 1025)  # a bug in the job's code
        return run.stats

    from ._support import make_job

    with pytest.raises(JobGuardError, match="destination_id must be at most 1024 bytes"):
        make_job(aws, clock, lambda_handler, name=JOB)(manual("first"), None)
    row = ledger(aws)["contact-00000:create-note"]
    assert row.state is ItemState.UNCERTAIN  # the call happened: reconciled, not redone
    assert "destination_id" in (row.last_error or "")
    (run,) = aws.runs(JOB)
    assert run.status.value == "failed" and "destination_id" in (run.error or "")


def test_a_payload_that_is_not_a_short_hash_is_kept_as_its_hash(aws, clock):
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(config(aws, batch_size=5), contacts(2), notes, store=aws.store, clock=clock)
    job.payload = lambda record: "content:" + record["change"] * 40  # type: ignore[method-assign]
    job.handler()(manual("first"), None)
    rows = ledger(aws)
    assert {r.state for r in rows.values()} == {ItemState.COMPLETED}
    assert all(len(r.payload_hash or "") == 32 for r in rows.values())
    # the same content later: already done, not a conflict (the same hash of it)
    job.source.append(dict(contacts(1)[0]))
    again = job.handler()(manual("again"), None)
    assert again.get("conflicts", 0) == 0

    # a payload() that returns no string: that record is rejected (it cannot be told
    # apart from other content), saying why; the job goes on past it
    job.payload = lambda record: 42  # type: ignore[method-assign]
    job.source.append({"id": "contact-00099", "change": "x"})
    third = job.handler()(manual("third"), None)
    assert third["rejected"] == 1 and third["completed"] == 0
    assert "payload() must return a string or None, got int" in third["rejected_first"]
    assert "contact-00099:create-note" not in notes.all()


def test_items_settled_from_several_threads_of_one_run_do_not_collide(aws, clock):
    # GIVEN a run whose items are processed by two threads, flushed per item (a failure
    # writes the job row at once), one thread held inside its job-row write until the
    # other has recorded its outcome
    from concurrent.futures import ThreadPoolExecutor

    records = contacts(2)
    in_commit, other_settling = threading.Event(), threading.Event()

    def hold_first_commit(**kwargs: Any) -> None:
        if threading.current_thread().name.endswith("_0") and not in_commit.is_set():
            in_commit.set()
            other_settling.wait(2)  # the other thread tries to write meanwhile

    def lambda_handler(event, context):
        run = current_run()
        claims = run.work_claims()
        items = claims.claim_page(records, lambda r: WorkId(r["id"], "create-note"))

        def work(item):
            if item.record["id"] == "contact-00000":
                item.fail("refused")  # a failure: written at once, with the job row
            else:
                assert in_commit.wait(10)
                other_settling.set()
                item.fail("refused too")

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(work, items))
        claims.flush()
        return claims.report.as_dict()

    from ._support import make_job

    job = make_job(aws, clock, lambda_handler, name=JOB, flush="item")
    aws.ddb.meta.events.register("before-send.dynamodb.TransactWriteItems", hold_first_commit)
    try:
        report = job(manual("threads"), None)
    finally:
        aws.ddb.meta.events.unregister("before-send.dynamodb.TransactWriteItems",
                                       hold_first_commit)

    # THEN both outcomes are written, the run is not failed by its own second write
    assert report["failed"] == 2, report
    rows = ledger(aws)
    assert {rows[f"contact-0000{i}:create-note"].state for i in range(2)} == {ItemState.FAILED}
    assert DynamoItemStore(aws.table, client=aws.ddb).read_row(JOB).claim is None


class Crash(BaseException):
    """The process dies here (not an error any code records)."""


def test_a_crash_between_a_pages_completions_and_its_job_row_write(aws, clock):
    # GIVEN a run that wrote page 1's completions and died before the job-row write that
    # drops page 1 from its claim and moves the checkpoint past it
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(config(aws, batch_size=5), contacts(10), notes, store=aws.store, clock=clock)
    state = {"armed": True}

    def die_after_the_facts(http_response: Any, **kwargs: Any) -> None:
        if state["armed"] and http_response.status_code < 300:
            state["armed"] = False
            raise Crash()

    aws.ddb.meta.events.register("after-call.dynamodb.BatchWriteItem", die_after_the_facts)
    try:
        with pytest.raises(Crash):
            job.handler()(manual("dies"), None)
    finally:
        aws.ddb.meta.events.unregister("after-call.dynamodb.BatchWriteItem",
                                       die_after_the_facts)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    first_page = [f"contact-0000{i}:create-note" for i in range(5)]
    assert items.read_checkpoint(JOB).seq == 0  # CKPT: not past the page
    row = items.read_row(JOB)
    assert row.claim is not None and set(row.claim.items) == set(first_page)
    assert {r.state for r in items.get_many(JOB, first_page).values()} == {
        ItemState.COMPLETED}  # the completions landed: final, whatever the claim says

    # WHEN the next run takes over
    clock.advance(timedelta(seconds=66))
    report = job.handler()(manual("next"), None)

    # THEN it finds page 1 completed (no reconciliation, no second call), does page 2
    # once, and moves the checkpoint to the end (END, ONCE, CKPT)
    assert (report["already_done"], report.get("reconciled", 0), report["completed"]) == (
        5, 0, 5)
    assert sorted(notes.calls) == sorted(set(notes.calls)) and len(notes.calls) == 10
    assert_once_and_end(aws, notes, 10)
    assert items.read_checkpoint(JOB).cursor == "10" and items.read_row(JOB).claim is None


def test_a_completion_past_its_ttl_counts_as_absent(aws, clock):
    # GIVEN an item completed longer ago than item_ttl (DynamoDB has not deleted it yet)
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(config(aws, batch_size=5), contacts(1), notes, store=aws.store, clock=clock)
    job.handler()(manual("first"), None)
    before = ledger(aws)["contact-00000:create-note"]
    clock.advance(timedelta(days=16))

    # WHEN the source yields it again
    job.source.append(dict(contacts(1)[0]))
    report = job.handler()(manual("later"), None)

    # THEN it is claimed and done again (the destination's idempotency key answers with
    # the note it holds), and its completion is written afresh with a new TTL
    assert report["completed"] == 1 and report.get("already_done", 0) == 0
    after = ledger(aws)["contact-00000:create-note"]
    assert after.state is ItemState.COMPLETED and after.destination_id == before.destination_id
    assert (after.ttl_epoch_s or 0) > (before.ttl_epoch_s or 0)
    assert len(notes.all()) == 1  # one note at the destination
