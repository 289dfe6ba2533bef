"""A stranger's data never stops a job (issue 33): source ids of any shape, records no
work id can be made for, a run that fails after finishing pages, completions the store
will not take.

Each test types the user's shape of the case (a URL with a fragment, a 300-byte id, a
lone surrogate from a broken JSON escape, a source that goes down on page 2) and reads
what a user relies on: the destination (one effect per work id), the item ledger, the
checkpoint, the run log and the metrics.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from jobguard import ItemState, JobConfig, Page, WorkId, current_run
from jobguard.clock import to_ms
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.records import RunStatus
from jobguard.recovery import recover

from ._items import CrmSync, NotesTable, contacts
from ._support import make_job

JOB = "crm-sync"
URL_ID = "https://crm.example/contacts/42#notes"
LONG_ID = "tenant-7/" + "x" * 291  # 300 bytes
SURROGATE_ID = json.loads('"contact-\\ud83d-broken"')  # a lone surrogate: a bad escape


def manual(trigger_id: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": trigger_id}


def config(aws: Any, **overrides: Any) -> JobConfig:
    options: dict[str, Any] = {"name": JOB, "table_name": aws.table, "batch_size": 4,
                               "lease": timedelta(seconds=60)}
    options.update(overrides)
    return JobConfig(**options)


def items(aws: Any) -> DynamoItemStore:
    return DynamoItemStore(aws.table, client=aws.ddb)


def source_with(*odd: dict[str, Any], n: int = 11) -> list[dict[str, Any]]:
    """``n`` good contacts with the odd records put among them (positions 2, 5, 8...)."""
    records = contacts(n)
    for index, record in enumerate(odd):
        records.insert(2 + 3 * index, record)
    return records


def test_any_source_id_is_a_work_identity_and_one_bad_record_never_stops_the_job(
        aws, clock, metrics):
    """GIVEN a BatchJob (pages of 4) over 11 good contacts and four strangers: an id that
    is a URL with a fragment ('#', the key delimiter), a 300-byte id, an id holding a
    lone surrogate (a broken JSON escape), and a record without an id (work_id() raises
    KeyError)
    WHEN it runs, then runs again
    THEN the first run succeeds with 2 records rejected (their own alarm), every record
    that has an identity is done once at the destination under its documented key (the
    URL's escaped behind '#', the long one hashed, each original kept on its ledger
    row); the two rejected ones are `rejected` rows saying why, counted on the run
    record and by the ItemsRejected metric; the checkpoint went past them to the end of
    the source. The second run selects nothing and calls nothing."""
    notes = NotesTable.create(aws.ddb)
    odd = [{"id": URL_ID, "change": "url"}, {"id": LONG_ID, "change": "long"},
           {"id": SURROGATE_ID, "change": "surrogate"}, {"change": "no id at all"}]
    source = source_with(*odd)
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    metrics()

    first = job.handler()(manual("first"), None)
    emitted = metrics()

    url_key = "#https://crm.example/contacts/42%23notes:create-note"
    assert str(WorkId(URL_ID, "create-note")) == url_key
    long_key = str(WorkId(LONG_ID, "create-note"))
    assert long_key.startswith("#sha256:") and len(long_key) == 8 + 64 + len(":create-note")
    good = [str(WorkId(c["id"], "create-note")) for c in contacts(11)] + [url_key, long_key]
    assert sorted(notes.all()) == sorted(good)  # each identity done, once
    assert sorted(notes.calls) == sorted(good)
    ledger = items(aws).get_many(JOB, good)
    assert {w: r.state for w, r in ledger.items()} == {w: ItemState.COMPLETED for w in good}
    assert ledger[url_key].source_id == URL_ID and ledger[long_key].source_id == LONG_ID
    assert ledger[str(WorkId("contact-00000", "create-note"))].source_id is None
    row = items(aws).read_row(JOB)
    assert row.checkpoint.cursor == str(len(source)) and row.claim is None

    rejected = items(aws).unresolved(JOB, states=[ItemState.REJECTED], now_ms=to_ms(clock.now()))
    reasons = sorted(r.last_error or "" for r in rejected)
    assert len(rejected) == 2 and all(r.state is ItemState.REJECTED for r in rejected)
    assert reasons[0].startswith("InvalidWorkIdError: source_id: 'contact-\\ud83d-broken' "
                                 "holds a lone UTF-16 surrogate"), reasons
    assert reasons[1] == "KeyError: 'id' (its page was selected after cursor '8')", reasons
    excerpts = sorted(r.excerpt or "" for r in rejected)
    assert excerpts == ['{"change":"no id at all"}',
                        '{"change":"surrogate","id":"contact-\\ud83d-broken"}'], excerpts
    assert all(r.work_id.startswith("#rejected:") for r in rejected)
    # not among what sweeps and recovery treat as unfinished work
    assert not [r for r in items(aws).unresolved(JOB) if r.state is ItemState.REJECTED]

    assert (first["selected"], first["completed"], first["rejected"]) == (15, 13, 2)
    (record,) = aws.runs(JOB)
    assert record.status is RunStatus.SUCCEEDED
    assert record.extra["rejected"] == 2
    assert record.extra["rejected_first"].startswith("#rejected:")
    assert emitted["ItemsRejected"] == 2

    second = job.handler()(manual("second"), None)
    assert second["selected"] == 0 and second["stopped"] == "exhausted"
    assert sorted(notes.calls) == sorted(good)  # ONCE: nothing called again


def test_recovery_over_a_range_with_a_rejected_record_reports_it_and_replays_the_rest(
        aws, clock):
    """GIVEN a crm-sync job whose source holds, among 6 good records, one with a lone
    surrogate in its id, and nothing done yet
    WHEN an operator plans and executes a recovery over the whole range
    THEN the plan counts the record as rejected, with why, and neither the plan nor the
    execution stops on it; the execution replays every other record once and its
    summary (and run record) reports the rejection."""
    notes = NotesTable.create(aws.ddb)
    source = source_with({"id": SURROGATE_ID, "change": "surrogate"}, n=6)
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    request = {"job": JOB, "cursor_from": "0", "cursor_to": str(len(source)),
               "requested_by": "alice"}
    options = {"store": aws.store, "clock": clock}

    plan = recover(request, job=job, guard_options=options)
    assert plan["result"] == "planned"
    assert plan["plan"]["rejected"] == 1 and plan["plan"]["to_replay"] == 6
    assert "lone UTF-16 surrogate" in plan["plan"]["rejected_sample"][0]

    done = recover({**request, "dry_run": False}, job=job, guard_options=options)
    assert done["result"] == "executed", done
    assert done["summary"]["rejected"] == 1 and done["summary"]["replayed"] == 6
    good = [str(WorkId(c["id"], "create-note")) for c in contacts(6)]
    assert sorted(notes.calls) == sorted(good)
    (record,) = aws.runs(JOB)
    assert record.trigger_kind == "recovery" and record.extra["recovery_rejected"] == 1


def test_a_plain_handler_claims_a_url_id_and_skips_a_record_with_no_identity(aws, clock):
    """GIVEN a plain @guarded handler using run.claim over a URL-with-fragment id, a
    good id and a record whose work_id() raises
    WHEN it runs twice
    THEN both identities are done once (the URL under its escaped key), the bad record
    is rejected (the handler never sees it, the run still succeeds), and the second run
    finds both done."""
    notes = NotesTable.create(aws.ddb)
    records = [{"id": URL_ID}, {"id": "contact-1"}, {"oops": True}]

    def handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r["id"], "create-note")):
            with item:
                item.complete(destination_id=notes.put(item.key, "x"))
        return run.figures()

    job = make_job(aws, clock, handler, name=JOB)
    first = job(manual("first"), None)
    second = job(manual("second"), None)
    keys = sorted([str(WorkId(URL_ID, "create-note")), "contact-1:create-note"])
    assert sorted(notes.calls) == keys
    assert (first["completed"], first["rejected"]) == (2, 1)
    assert (second["already_done"], second["rejected"]) == (2, 1)
    # rejected records page through their own alarm; the job did its work
    assert [r.status for r in aws.runs(JOB)] == [RunStatus.SUCCEEDED] * 2


class FailsOnPage(CrmSync):
    """The source API goes down when asked for page ``down_at`` (1-based)."""

    def __init__(self, *args: Any, down_at: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.down_at = down_at
        self.pages = 0
        self.reconciled: list[str] = []

    def select(self, cursor: str | None, limit: int) -> Page[dict]:
        self.pages += 1
        if self.pages == self.down_at:
            raise ConnectionError("the CRM API is down (503)")
        return super().select(cursor, limit)

    def reconcile(self, record: dict | None, item: Any) -> str | None:
        self.reconciled.append(item.work_id)
        return super().reconcile(record, item)


def test_a_run_that_fails_on_page_two_writes_what_page_one_earned(aws, clock):
    """GIVEN a BatchJob (flush per page, pages of 5) whose source goes down when asked
    for page 2, the lease still held
    WHEN the run fails
    THEN before it ends it writes page 1's 5 completions and the checkpoint past them,
    and its failed record says so; no item is left claimed; the next run (source back)
    does the other 6 without reconciling anything, and each note exists once."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(11)
    job = FailsOnPage(config(aws, batch_size=5), source, notes, store=aws.store, clock=clock,
                      down_at=2)
    with pytest.raises(ConnectionError, match="CRM API is down"):
        job.handler()(manual("first"), None)

    (record,) = aws.runs(JOB)
    assert record.status is RunStatus.FAILED and "CRM API is down" in (record.error or "")
    assert record.extra["completed"] == 5
    assert record.extra["written_on_failure"] == "5 completions, the checkpoint ('5')"
    row = items(aws).read_row(JOB)
    assert row.claim is None and row.checkpoint.cursor == "5"
    first_five = [str(WorkId(c["id"], "create-note")) for c in source[:5]]
    ledger = items(aws).get_many(JOB, first_five)
    assert {r.state for r in ledger.values()} == {ItemState.COMPLETED} and len(ledger) == 5

    job.down_at = 0
    report = job.handler()(manual("second"), None)
    assert (report["selected"], report["completed"], report["reconciled"]) == (6, 6, 0)
    assert job.reconciled == []
    assert sorted(notes.calls) == sorted(str(WorkId(c["id"], "create-note")) for c in source)
    assert items(aws).read_row(JOB).checkpoint.cursor == "11"


def test_a_run_that_lost_its_lease_before_failing_writes_nothing_more(aws, clock):
    """GIVEN a BatchJob whose lease is taken over (expired, another run) after page 1's
    items were done, and whose source then fails
    WHEN the run fails
    THEN it writes nothing fenced: the job row's checkpoint and claim are the new
    holder's business (FENCE)."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(8)
    job = FailsOnPage(config(aws, batch_size=4), source, notes, store=aws.store,
                      clock=clock, down_at=2)
    original = job.select

    def select(cursor: str | None, limit: int) -> Page[dict]:
        if job.pages == 1:
            clock.advance(timedelta(seconds=61))  # past the local lease deadline
        return original(cursor, limit)

    job.select = select  # type: ignore[method-assign]
    with pytest.raises(ConnectionError, match="CRM API is down"):
        job.handler()(manual("first"), None)
    row = items(aws).read_row(JOB)
    assert row.checkpoint.cursor is None  # nothing written past the deadline
    assert row.claim is not None and len(row.claim.items) == 4  # left for the next holder
    (record,) = aws.runs(JOB)
    assert record.status is RunStatus.FAILED and "written_on_failure" not in record.extra


class Unprocessed:
    """Every BatchWriteItem answers all its puts unprocessed (a partition throttled for
    longer than every retry)."""

    def __init__(self) -> None:
        self.calls = 0
        self.held: Any = None

    def params(self, params: dict[str, Any], **_: Any) -> None:
        self.calls += 1
        (table, requests), = params["RequestItems"].items()
        self.held = (table, requests)
        params["RequestItems"] = {table: requests[:0] or [requests[0]]}
        # one put must be sent (an empty request is refused): it is answered unprocessed
        # too, and taken out of the table again below

    def after(self, parsed: dict[str, Any], **_: Any) -> None:
        table, requests = self.held
        parsed["UnprocessedItems"] = {table: requests}


def test_completions_the_store_never_takes_end_uncertain_never_silently_claimed(
        aws, clock, monkeypatch):
    """GIVEN a BatchJob (pages of 5) whose completion writes come back unprocessed on
    every retry
    WHEN the run does its first page
    THEN its 5 items end as `uncertain` rows saying the completion was not recorded (not
    left claimed by a run that ended), the checkpoint stays before them, the run fails
    saying why; the next run (store healthy) reconciles them (found at the destination:
    completed, not called again) and does the rest: each note exists once."""
    import jobguard._item_writes as writes_module
    import jobguard.dynamodb_items as store_module

    monkeypatch.setattr(store_module, "_backoff", lambda attempt: None)
    monkeypatch.setattr(writes_module, "_backoff", lambda attempt: None)
    notes = NotesTable.create(aws.ddb)
    source = contacts(7)
    job = CrmSync(config(aws, batch_size=5), source, notes, store=aws.store, clock=clock)
    hook = Unprocessed()
    events = aws.ddb.meta.events
    events.register("provide-client-params.dynamodb.BatchWriteItem", hook.params)
    events.register("after-call.dynamodb.BatchWriteItem", hook.after)
    try:
        job.handler()(manual("first"), None)
    except Exception as exc:  # noqa: BLE001 - the run's own error, checked below
        error = exc
    finally:
        events.unregister("provide-client-params.dynamodb.BatchWriteItem", hook.params)
        events.unregister("after-call.dynamodb.BatchWriteItem", hook.after)
    assert "still unprocessed" in str(error)
    first_five = [str(WorkId(c["id"], "create-note")) for c in source[:5]]
    # the one put each request carried did land: a fact written is a fact
    ledger = items(aws).get_many(JOB, first_five)
    uncertain = [w for w, r in ledger.items() if r.state is ItemState.UNCERTAIN]
    assert len(ledger) == 5 and len(uncertain) == 4
    assert all("completion not recorded" in (ledger[w].last_error or "") for w in uncertain)
    row = items(aws).read_row(JOB)
    assert row.claim is None and row.checkpoint.cursor is None
    (record,) = aws.runs(JOB)
    assert record.status is RunStatus.FAILED and record.extra["uncertain"] == 5
    assert record.extra["superseded"] == 1  # its fact landed after all: it stays completed

    report = job.handler()(manual("second"), None)
    assert report["reconciled"] == len(uncertain)
    assert sorted(notes.calls) == sorted(str(WorkId(c["id"], "create-note")) for c in source)
    final = items(aws).get_many(JOB, [str(WorkId(c["id"], "create-note")) for c in source])
    assert {r.state for r in final.values()} == {ItemState.COMPLETED}
    assert items(aws).read_row(JOB).checkpoint.cursor == "7"
