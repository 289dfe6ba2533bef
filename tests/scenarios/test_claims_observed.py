"""What the claim engine leaves for users and operators to see, on the in-process emulator.

Each test reads what a user can observe: the item ledger (its states, errors and payload
hashes), the run's report and record, the metrics an operator's dashboard and alarms read
(EMF), and the warnings logged. ``make mutate`` showed that none of these was asserted for
:mod:`jobguard.claims` (an expired claim's error, a 64-character payload hash, a record
with a datetime, a vanished claim's completed items outside the page, an old ledger's
claimed row, a reconciled item's payload hash, the conflict and rejection metrics, the
messages of items left without an outcome, what a sweep could not tell).
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobguard import (
    ItemState,
    JobConfig,
    LeaseLostError,
    OverlapPolicy,
    WorkId,
    current_run,
    hooks,
)
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.schema import ITEM_SK, PARTITION_KEY, SORT_KEY, item_pk

from ._items import CrmSync, NotesTable, contacts
from ._support import in_thread, make_job

JOB = "crm-sync"


def manual(trigger_id: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": trigger_id}


def config(aws: Any, **overrides: Any) -> JobConfig:
    options: dict[str, Any] = {"name": JOB, "table_name": aws.table, "batch_size": 10,
                               "lease": timedelta(seconds=60)}
    options.update(overrides)
    return JobConfig(**options)


def note_id(record: dict[str, Any]) -> WorkId:
    return WorkId(record["id"], "create-note")


def ledger(aws: Any, work_ids: list[str]) -> dict[str, Any]:
    return DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, work_ids)


def logged(log_lines: Any, message: str) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in log_lines.getvalue().splitlines() if line]
    return [e for e in entries if e.get("message") == message]


class Crash(BaseException):
    """The process dies here (not an error any code records)."""


# -- a claim that expired before the destination call ---------------------------------------


def test_a_claim_that_expired_before_the_call_stops_the_run_naming_the_item_and_fence(
        aws, clock):
    """GIVEN a job whose claims last 30 s (skew margin 5 s) and a lease of 60 s
    WHEN the handler gets to its item 26 s after claiming it (the lease still held)
    THEN the run stops before calling the destination: the run ends lease_lost, and its
    record's error names the run, its fence and the item whose claim expired."""
    called: list[str] = []

    def lambda_handler(event: Any, context: Any) -> str:
        run = current_run()
        for item in run.claim(contacts(1), work_id=note_id):
            clock.advance(timedelta(seconds=26))
            with item:
                called.append(item.key)
                item.complete(destination_id="note-1")
        return "done"

    job = make_job(aws, clock, lambda_handler, name=JOB, claim_for=timedelta(seconds=30))
    result = job(manual("slow"), None)

    assert result["jobguard"] == "lease_lost" and called == []
    (record,) = aws.runs(JOB)
    assert record.status.value == "lease_lost"
    assert record.error == (
        f"LeaseLostError: job {JOB!r}: run {record.run_id} (fence 1) lost its lease: "
        "claim on contact-00000:create-note expired")


def test_ensure_claim_raises_lease_lost_with_the_runs_fence_once_the_claim_expired(
        aws, clock):
    """GIVEN a claimed item (claims last 30 s, skew margin 5 s)
    WHEN the handler checks its claim before a slow call, 24 s and then 26 s in
    THEN the first check passes and the second raises LeaseLostError carrying the job,
    the run, its fence and the reason (the claim on that item expired)."""
    seen: dict[str, Any] = {}

    def lambda_handler(event: Any, context: Any) -> str:
        run = current_run()
        for item in run.claim(contacts(1), work_id=note_id):
            clock.advance(timedelta(seconds=24))
            item.ensure_claim()
            clock.advance(timedelta(seconds=2))
            try:
                item.ensure_claim()
            except LeaseLostError as exc:
                seen["error"], seen["run_id"] = exc, run.run_id
                item.release()  # never called: given back
        return "done"

    job = make_job(aws, clock, lambda_handler, name=JOB, claim_for=timedelta(seconds=30))
    assert job(manual("slow"), None) == "done"

    error = seen["error"]
    assert (error.job, error.run_id, error.fence) == (JOB, seen["run_id"], 1)
    assert error.reason == "claim on contact-00000:create-note expired"


# -- items left without an outcome -------------------------------------------------------


def test_items_left_without_an_outcome_are_uncertain_and_say_how(aws, clock):
    """GIVEN a plain handler claiming four contacts in one page
    WHEN it leaves the first item's ``with`` block without an outcome, takes the next
    item after the second without one, and stops (break) holding the third
    THEN the three items are uncertain, each saying how it was left (reconciled before
    anything is redone), and the fourth, never handed out, is given back: no ledger
    row, not claimed, counted as remaining."""

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(contacts(4), work_id=note_id):
            n = int(item.record["id"].rsplit("-", 1)[1])
            if n == 0:
                with item:
                    pass
            elif n == 1:
                continue
            else:
                break
        return run.figures()

    result = make_job(aws, clock, lambda_handler, name=JOB)(manual("first"), None)

    ids = [f"contact-0000{i}:create-note" for i in range(4)]
    rows = ledger(aws, ids)
    assert {k: (r.state, r.last_error) for k, r in rows.items()} == {
        ids[0]: (ItemState.UNCERTAIN, "the block ended without recording an outcome"),
        ids[1]: (ItemState.UNCERTAIN, "no outcome was recorded for this item"),
        ids[2]: (ItemState.UNCERTAIN, "the caller stopped before recording an outcome"),
    }
    assert DynamoItemStore(aws.table, client=aws.ddb).read_row(JOB).claim is None
    assert (result["uncertain"], result["remaining"]) == (3, 1)


# -- payload hashes ----------------------------------------------------------------------


def test_a_payload_given_as_a_sha256_hex_digest_is_stored_as_given(aws, clock):
    """GIVEN a job whose ``payload`` returns the SHA-256 hex digest of the note it
    would write (64 characters: the longest a payload hash is kept as given)
    WHEN it runs THEN the ledger keeps each item's digest unchanged, and the same
    content later is already done, not a conflict."""
    notes = NotesTable.create(aws.ddb)

    def digest(record: dict[str, Any]) -> str:
        return hashlib.sha256(record["change"].encode()).hexdigest()

    job = CrmSync(config(aws), contacts(2), notes, store=aws.store, clock=clock)
    job.payload = digest  # type: ignore[method-assign]
    job.handler()(manual("first"), None)

    rows = ledger(aws, [str(note_id(c)) for c in contacts(2)])
    assert {k: r.payload_hash for k, r in rows.items()} == {
        str(note_id(c)): digest(c) for c in contacts(2)}
    job.source.append(dict(contacts(1)[0]))
    again = job.handler()(manual("again"), None)
    assert again["already_done"] == 1 and again.get("conflicts", 0) == 0


def test_a_record_with_a_datetime_is_fingerprinted_so_a_reused_work_id_is_caught(
        aws, clock):
    """GIVEN a plain handler whose records carry a datetime (not JSON by itself), with
    the default payload (the record's fingerprint)
    WHEN a contact is done, then the source yields it again changed at another time
    THEN its completion keeps a payload hash, and the changed record is reported as a
    conflict, not sent again."""
    notes = NotesTable.create(aws.ddb)
    at = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    records: list[dict[str, Any]] = [{"id": "contact-00000", "change": "email changed",
                                      "changed_at": at}]

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(list(records), work_id=note_id):
            with item:
                item.complete(destination_id=notes.put(item.key, item.record["change"]))
        return run.figures()

    job = make_job(aws, clock, lambda_handler, name=JOB)
    assert job(manual("first"), None)["completed"] == 1
    (row,) = ledger(aws, ["contact-00000:create-note"]).values()
    assert row.state is ItemState.COMPLETED and row.payload_hash

    records[0] = {**records[0], "changed_at": at + timedelta(hours=1)}
    second = job(manual("second"), None)
    assert second["conflicts"] == 1
    assert second.get("completed", 0) == 0 and notes.calls == ["contact-00000:create-note"]


def test_a_reconciled_item_keeps_its_payload_so_a_reused_work_id_is_still_caught(
        aws, clock):
    """GIVEN an item left uncertain (its note was created, the answer lost)
    WHEN the next run reconciles it (found: completed with the note's id), and a later
    run finds its work id reused for other content
    THEN the reconciled completion keeps the item's payload hash, and the reuse is
    reported as a conflict (nothing sent again)."""
    notes = NotesTable.create(aws.ddb)
    records = contacts(1)
    lost = {"contact-00000"}

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(list(records), work_id=note_id,
                              reconcile=lambda record, row: notes.find(row.work_id)):
            with item:
                note = notes.put(item.key, item.record["change"])
                if item.record["id"] in lost:
                    lost.clear()
                    raise TimeoutError("response lost after the note was created")
                item.complete(destination_id=note)
        return run.figures()

    job = make_job(aws, clock, lambda_handler, name=JOB)
    job(manual("first"), None)
    (uncertain,) = ledger(aws, ["contact-00000:create-note"]).values()
    assert uncertain.state is ItemState.UNCERTAIN and uncertain.payload_hash

    second = job(manual("second"), None)
    assert second["reconciled"] == 1
    (found,) = ledger(aws, ["contact-00000:create-note"]).values()
    assert found.state is ItemState.COMPLETED
    assert found.destination_id == notes.find("contact-00000:create-note")
    assert found.payload_hash == uncertain.payload_hash

    records[0] = {**records[0], "change": "a different change"}
    third = job(manual("third"), None)
    assert third["conflicts"] == 1 and third.get("already_done", 0) == 0
    assert notes.calls == ["contact-00000:create-note"]


# -- conflicts: metric and warning -------------------------------------------------------


def test_a_reused_work_id_is_counted_for_the_operator_and_logged_with_its_detail(
        aws, clock, metrics, log_lines):
    """GIVEN contact 1 done earlier
    WHEN a run's page holds contact 1 with other content, and contact 2 twice with two
    different contents
    THEN the PayloadConflicts metric counts both, and each is logged as a warning naming
    the work id and how it was reused."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(2)
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    job.handler()(manual("first"), None)
    metrics()

    source += [{"id": "contact-00001", "change": "a different change"},
               {"id": "contact-00002", "change": "first version"},
               {"id": "contact-00002", "change": "second version"}]
    report = job.handler()(manual("second"), None)

    assert report["conflicts"] == 2
    assert metrics()["PayloadConflicts"] == 2
    warnings = {(e["work_id"], e["detail"]) for e in logged(
        log_lines, "work id reused with a different payload")}
    assert warnings == {
        ("contact-00001:create-note", "completed earlier with a different payload"),
        ("contact-00002:create-note", "the same work id twice in a page, other payload"),
    }


# -- the metrics of a run's items ----------------------------------------------------------


def test_a_runs_items_feed_the_operators_metrics(aws, clock, metrics):
    """GIVEN a plain handler over four contacts: c0 is created, c1 fails (the CRM says
    no), c2's note is created but its answer lost, c3 times out before reaching it
    WHEN it runs, and then runs again with a ``reconcile`` that looks the note up
    THEN the first run emits BatchSize 4, ItemsCompleted 1, ItemsFailed 1 and
    UncertainOutcomes 2; the second finds c2's note (ReconciliationFindings 1) and redoes
    c3, not found (ItemsRetried 1), creating each note once."""
    notes = NotesTable.create(aws.ddb)
    fault = {"contact-00001": ValueError("the CRM refused the note"),
             "contact-00002": TimeoutError("answer lost"),
             "contact-00003": TimeoutError("no answer")}

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(contacts(4), work_id=note_id,
                              reconcile=lambda record, row: notes.find(row.work_id)):
            with item:
                error = fault.pop(item.record["id"], None)
                if not isinstance(error, TimeoutError) or "lost" in str(error):
                    note = notes.put(item.key, item.record["change"])
                if error is not None:
                    raise error
                item.complete(destination_id=note)
        return run.figures()

    job = make_job(aws, clock, lambda_handler, name=JOB)
    metrics()
    first = job(manual("first"), None)
    emitted = metrics()
    assert (first["completed"], first["failed"], first["uncertain"]) == (1, 1, 2)
    assert {k: emitted.get(k) for k in ("BatchSize", "ItemsCompleted", "ItemsFailed",
                                        "UncertainOutcomes")} == {
        "BatchSize": 4, "ItemsCompleted": 1, "ItemsFailed": 1, "UncertainOutcomes": 2}

    second = job(manual("second"), None)
    emitted = metrics()
    assert (second["reconciled"], second["retried"]) == (1, 1)
    assert emitted["ReconciliationFindings"] == 1 and emitted["ItemsRetried"] == 1
    assert "ItemsFailed" not in emitted
    assert sorted(notes.all()) == [str(note_id(c)) for c in contacts(4)]
    assert notes.calls.count("contact-00002:create-note") == 1  # found, not redone


# -- a vanished run's claim ---------------------------------------------------------------


def _die_mid_page(aws: Any, clock: Any, notes: NotesTable, n: int,
                  **overrides: Any) -> str:
    """A run of a page of ``n`` contacts that creates every note, then dies before it
    writes anything of the page (its claim stays open). Returns its run id."""
    def die(item: Any) -> None:
        if len(notes.calls) == n:
            raise Crash()

    dying = CrmSync(config(aws, **overrides), contacts(n), notes, before_call=die,
                    store=aws.store, clock=clock)
    # the call after the last note: the process dies before the page's outcomes
    dying.source.append({"id": "contact-99999", "change": "never reached"})
    with pytest.raises(Crash):
        dying.handler()(manual("dies"), None)
    row = DynamoItemStore(aws.table, client=aws.ddb).read_row(JOB)
    assert row.claim is not None and len(row.claim.items) == n + 1
    (record,) = aws.runs(JOB)
    return record.run_id


def test_a_vanished_claims_items_that_cannot_be_reconciled_name_the_run_that_held_them(
        aws, clock, log_lines):
    """GIVEN a run that created three notes and died before writing its page's outcomes
    WHEN the next run's ``reconcile`` fails (the destination is down)
    THEN nothing is redone: each of the dead run's items is uncertain, saying which run
    (and fence) held the claim that vanished without an outcome; each failed lookup is
    logged with its work id and error."""
    notes = NotesTable.create(aws.ddb)
    dead_run = _die_mid_page(aws, clock, notes, 3, batch_size=4)
    clock.advance(timedelta(seconds=66))

    def down(record: Any, item: Any) -> str | None:
        raise ConnectionError("destination down")

    job = CrmSync(config(aws, batch_size=4), contacts(3), notes, store=aws.store,
                  clock=clock)
    job.reconcile = down  # type: ignore[method-assign]
    report = job.handler()(manual("next"), None)

    ids = [str(note_id(c)) for c in contacts(3)]
    assert report["uncertain"] == 3 and report.get("retried", 0) == 0
    assert len(notes.calls) == 3  # no call redone
    rows = ledger(aws, ids)
    message = f"claim of run {dead_run} (fence 1) vanished without an outcome"
    assert {k: (r.state, r.last_error) for k, r in rows.items()} == {
        k: (ItemState.UNCERTAIN, message) for k in ids}
    failures = {(e["work_id"], e["error"]) for e in logged(log_lines, "reconcile failed")}
    assert failures == {(k, "ConnectionError: destination down") for k in ids}


def test_a_vanished_retry_of_an_uncertain_item_outside_the_page_keeps_its_row(aws, clock):
    """GIVEN contact 4's call timed out (its row uncertain, the checkpoint before it);
    then contact 4 was touched again (the same content, a later updated-at), so the
    source now lists it after contacts 5 and 6; a run (pages of 3) claimed the three,
    contact 4 for a retry, and died before any call (its claim names all three; contact
    4's row still says uncertain)
    WHEN the next run, deployed with pages of 1, takes over: its first page is contact 5
    THEN the dead claim's items beyond that page are kept findable: contact 6 gets its
    vanished row, contact 4's uncertain row is left as it was (the dead run may have
    been retrying it); the run reconciles each in its turn, and every contact reached
    the destination once."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(6)
    ids = [str(note_id(c)) for c in source]
    timed_out = ids[3]

    def time_out(item: Any) -> None:
        if item.key == timed_out and not state["answered"]:
            state["answered"] = True
            raise TimeoutError("CRM: read timed out")

    state = {"answered": False}
    first = CrmSync(config(aws, batch_size=4), source[:4], notes, before_call=time_out,
                    store=aws.store, clock=clock)
    assert first.handler()(manual("first"), None)["uncertain"] == 1
    before = ledger(aws, [timed_out])[timed_out]
    assert before.state is ItemState.UNCERTAIN and "read timed out" in before.last_error

    def die(item: Any) -> None:
        raise Crash()

    moved = source[:3] + source[4:] + [source[3]]  # the same record: the same payload
    dying = CrmSync(config(aws, batch_size=3), moved, notes, before_call=die,
                    store=aws.store, clock=clock)
    with pytest.raises(Crash):
        dying.handler()(manual("dies"), None)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    row = items.read_row(JOB)
    assert row.claim is not None and set(row.claim.items) == {ids[4], ids[5], timed_out}
    clock.advance(timedelta(seconds=66))

    seen: dict[str, Any] = {}

    def first_page_written(job: str, run_id: str, **_: Any) -> None:
        if not seen:
            seen.update(ledger(aws, [ids[5], timed_out]))

    one = CrmSync(config(aws, batch_size=1), moved, notes, store=aws.store,
                  clock=clock)
    with hooks.on("after_claim", first_page_written):
        report = one.handler()(manual("next"), None)

    assert seen[ids[5]].state is ItemState.UNCERTAIN
    assert "vanished without an outcome" in (seen[ids[5]].last_error or "")
    assert seen[ids[5]].attempts == 1  # the vanished run's try is counted
    kept = seen[timed_out]
    assert (kept.state, kept.last_error, kept.attempts) == (
        ItemState.UNCERTAIN, before.last_error, before.attempts)
    assert report["completed"] == 3 and report["retried"] == 3  # each reconciled: absent
    assert sorted(notes.calls) == sorted(ids)  # ONCE: each contact one note, in all
    final = ledger(aws, ids)
    assert all(r.state is ItemState.COMPLETED for r in final.values())
    assert items.read_row(JOB).checkpoint.cursor == "6"


def test_a_vanished_claims_completed_items_outside_the_page_are_not_reported_superseded(
        aws, clock, metrics):
    """GIVEN a run (pages of 5) that wrote its page's completions and died before the
    job-row write that drops the page from its claim
    WHEN the next run, deployed with pages of 2, takes over
    THEN it sees the whole vanished claim: the completions beyond its first page are
    final, none is reported superseded (no CompletionsRejected metric), nothing is sent
    again, and the checkpoint reaches the end."""
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(config(aws, batch_size=5), contacts(5), notes, store=aws.store,
                  clock=clock)
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
    row = items.read_row(JOB)
    assert row.claim is not None and len(row.claim.items) == 5
    clock.advance(timedelta(seconds=66))
    metrics()

    smaller = CrmSync(config(aws, batch_size=2), contacts(5), notes, store=aws.store,
                      clock=clock)
    report = smaller.handler()(manual("next"), None)

    assert report["already_done"] == 5 and report.get("superseded", 0) == 0
    assert "CompletionsRejected" not in metrics()
    assert len(notes.calls) == 5
    ids = [str(note_id(c)) for c in contacts(5)]
    assert {r.state for r in ledger(aws, ids).values()} == {ItemState.COMPLETED}
    assert items.read_checkpoint(JOB).cursor == "5" and items.read_row(JOB).claim is None


def test_an_item_claimed_on_a_ledger_of_an_earlier_version_is_left_uncertain_if_unknown(
        aws, clock):
    """GIVEN a ledger written by jobguard before the open claim moved to the job row:
    the item's own row says ``claimed`` (by a run of that version)
    WHEN a run claims that item and its ``reconcile`` cannot tell (the destination is
    down)
    THEN the item is not handed out; it is recorded uncertain, saying that the outcome
    is unknown and reconciliation did not tell."""
    key = "contact-00000:create-note"
    aws.ddb.put_item(TableName=aws.table, Item={
        PARTITION_KEY: {"S": item_pk(JOB, key)}, SORT_KEY: {"S": ITEM_SK},
        "job": {"S": JOB}, "work_id": {"S": key}, "state": {"S": "claimed"},
        "run_id": {"S": "run-of-the-earlier-version"}, "fence": {"N": "1"},
        "claim_expires_at_ms": {"N": "1000"}, "attempts": {"N": "1"}})
    handed: list[str] = []

    def down(record: Any, row: Any) -> str | None:
        raise ConnectionError("destination down")

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(contacts(1), work_id=note_id, reconcile=down):
            handed.append(item.key)
            item.release()
        return run.figures()

    result = make_job(aws, clock, lambda_handler, name=JOB)(manual("after-upgrade"), None)

    assert handed == [] and result["uncertain"] == 1
    (row,) = ledger(aws, [key]).values()
    assert row.state is ItemState.UNCERTAIN
    assert row.last_error == "outcome unknown; reconciliation did not tell"


# -- a completion that lands meanwhile -------------------------------------------------------


def test_an_uncertain_outcome_refused_by_a_late_completion_is_counted_superseded(
        aws, clock, metrics):
    """GIVEN run A (REPLACE job, batch 1) has called the destination for X, and its
    completion fact is on its way (its BatchWriteItem sent, not yet answered)
    WHEN run B replaces it and leaves X alone (A may still call for it: an uncertain row
    held until A's deadline), and A's completion lands between B's lookup and B's write
    of that row
    THEN B's uncertain row is refused (the completion is final and stands): B reports
    one superseded outcome and emits CompletionsRejected 1; the ledger says completed
    with the note the destination holds; one call, one note."""
    notes = NotesTable.create(aws.ddb)
    replace = config(aws, batch_size=1, policy=OverlapPolicy.REPLACE)
    key = "contact-00000:create-note"
    a_sending, a_go, a_wrote, b_once = (threading.Event(), threading.Event(),
                                        threading.Event(), threading.Event())

    def is_a() -> bool:  # A runs in a thread of its own, B in the test's
        return threading.current_thread() is not threading.main_thread()

    def a_fact_in_flight(**kwargs: Any) -> None:
        if is_a() and not a_go.is_set():
            a_sending.set()
            assert a_go.wait(20)

    def a_fact_landed(**kwargs: Any) -> None:
        if is_a():
            a_wrote.set()

    def b_row_after_it(params: dict[str, Any], **kwargs: Any) -> None:
        rows = [a for a in params["TransactItems"]
                if a.get("Put", {}).get("Item", {}).get("pk", {}).get("S", "").startswith(
                    "ITEM#")]
        if rows and not is_a() and not b_once.is_set():  # B's uncertain row, not its lease
            b_once.set()
            a_go.set()
            assert a_wrote.wait(20)

    events = aws.ddb.meta.events
    hooks_ = [("before-call.dynamodb.BatchWriteItem", a_fact_in_flight),
              ("after-call.dynamodb.BatchWriteItem", a_fact_landed),
              ("before-parameter-build.dynamodb.TransactWriteItems", b_row_after_it)]
    for name, hook in hooks_:
        events.register(name, hook)
    try:
        job_a = CrmSync(replace, contacts(2), notes, store=aws.store, clock=clock)
        thread, box = in_thread(lambda: job_a.handler()(manual("a"), None))
        assert a_sending.wait(10)
        job_b = CrmSync(replace, contacts(1), notes, store=aws.store, clock=clock)
        metrics()
        report_b = job_b.handler()(manual("b"), None)
        emitted = metrics()
        thread.join(20)
    finally:
        for name, hook in hooks_:
            events.unregister(name, hook)

    assert box["result"]["jobguard"] == "lease_lost"  # A's next job-row write was refused
    assert report_b["deferred"] == 1 and report_b["superseded"] == 1
    assert emitted["CompletionsRejected"] == 1
    (row,) = ledger(aws, [key]).values()
    assert row.state is ItemState.COMPLETED and row.destination_id == notes.find(key)
    assert notes.calls == [key] and len(notes.all()) == 1


def test_a_sweep_over_a_vanished_claim_says_what_it_found_and_what_it_could_not_tell(
        aws, clock, log_lines):
    """GIVEN a run that claimed contacts 0, 1 and 99999, created the notes of 0 and 1,
    and died before writing anything of its page
    WHEN a reconciler sweeps the job: contact 0's note is found, contact 1's lookup fails
    (the destination is down), contact 99999 has no note
    THEN 0 is completed with its note; 1 stays uncertain, naming the run whose claim
    vanished, and its failed lookup is logged; 99999 becomes a retryable failure that
    says it was not found at the destination; nothing is called."""
    from jobguard.claims import sweep

    notes = NotesTable.create(aws.ddb)
    dead_run = _die_mid_page(aws, clock, notes, 2, batch_size=3)
    clock.advance(timedelta(seconds=66))

    def reconcile(record: Any, row: Any) -> str | None:
        if row.work_id == "contact-00001:create-note":
            raise ConnectionError("destination down")
        return notes.find(row.work_id)

    report = make_job(aws, clock, lambda e, c: sweep(current_run(), reconcile).as_dict(),
                      name=JOB)(manual("sweep"), None)

    assert (report["found"], report["still_uncertain"], report["not_found"]) == (1, 1, 1)
    rows = ledger(aws, ["contact-00000:create-note", "contact-00001:create-note",
                        "contact-99999:create-note"])
    done, unknown, absent = (rows["contact-00000:create-note"],
                             rows["contact-00001:create-note"],
                             rows["contact-99999:create-note"])
    assert done.state is ItemState.COMPLETED
    assert done.destination_id == notes.find("contact-00000:create-note")
    assert (unknown.state, unknown.last_error) == (
        ItemState.UNCERTAIN, f"claim of run {dead_run} (fence 1) vanished without an outcome")
    assert (absent.state, absent.retryable, absent.last_error) == (
        ItemState.FAILED, True, "not found at the destination")
    assert {(e["work_id"], e["error"]) for e in logged(log_lines, "reconcile failed")} == {
        ("contact-00001:create-note", "ConnectionError: destination down")}
    assert len(notes.calls) == 2



def test_items_completed_counts_every_item_of_a_page(aws, clock, metrics):
    """GIVEN a BatchJob whose page of four contacts completes in one job-row write WHEN it
    runs THEN ItemsCompleted is 4 (the items written, not one per write)."""
    job = CrmSync(config(aws, batch_size=4), contacts(4), NotesTable.create(aws.ddb),
                  store=aws.store, clock=clock)
    metrics()
    assert job.handler()(manual("four"), None)["completed"] == 4
    assert metrics().get("ItemsCompleted") == 4
