"""Adversarial review of issue 33 (items 1-3): each test shows one defect found in the
work that landed ("any string is a work identity", "a run ends with what it owes",
garbage trigger-queue messages). Each fails on the code under review.

Every test reads what a user relies on: the ledger, the run log, the destination.
"""

from __future__ import annotations

import contextlib
import io
from contextlib import redirect_stderr, redirect_stdout
from datetime import timedelta
from typing import Any

import pytest

from jobguard import ItemState, JobConfig, WorkId, current_run
from jobguard.cli import main
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.recovery import resolve

from ._items import CrmSync, NotesTable, contacts
from ._support import make_job

JOB = "crm-sync"
URL_ID = "https://crm.example/contacts/42#notes"
LONG_ID = "tenant-7/" + "x" * 291  # 300 bytes: hashed


def manual(trigger_id: str, job: str = JOB) -> dict[str, Any]:
    return {"job": job, "manual": True, "trigger_id": trigger_id}


def config(aws: Any, **overrides: Any) -> JobConfig:
    options: dict[str, Any] = {"name": JOB, "table_name": aws.table, "batch_size": 4,
                               "lease": timedelta(seconds=60)}
    options.update(overrides)
    return JobConfig(**options)


def items(aws: Any) -> DynamoItemStore:
    return DynamoItemStore(aws.table, client=aws.ddb)


def cli(aws: Any, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--table", aws.table, *argv])
    return code, out.getvalue(), err.getvalue()


class Mailbox:
    """A destination that keeps every mail sent by idempotency key; ``lose`` makes the
    answer of one call get lost after the mail was sent (a timeout)."""

    def __init__(self) -> None:
        self.sent: dict[str, str] = {}
        self.calls: list[str] = []
        self.lose: set[str] = set()

    def send(self, key: str) -> str:
        self.calls.append(key)
        message_id = self.sent.setdefault(key, f"msg-{len(self.sent) + 1}")
        if key in self.lose:
            self.lose.discard(key)
            raise TimeoutError("no answer (the mail was sent)")
        return message_id


def mailer(aws: Any, clock: Any, mailbox: Mailbox, records: list[str]) -> Any:
    """A plain guarded handler claiming without ``reconcile=`` (the operator resolves)."""

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r, "mail")):
            with item:
                item.complete(destination_id=mailbox.send(item.key))
        return run.stats

    return make_job(aws, clock, lambda_handler, name=JOB)


def test_an_operator_can_resolve_an_uncertain_item_whose_source_id_is_hashed(aws, clock):
    """GIVEN a handler without reconcile= whose record has a 300-byte source id (its key
    is '#sha256:...'), and whose mail's answer was lost after it was sent: the item is
    uncertain, and only an operator can settle it (README: `jobguard resolve`)
    WHEN the operator resolves it with the key `jobguard items` shows them
    THEN the resolution is accepted and the item is completed.

    BREAKS: resolve() validates each key with WorkId.parse, which refuses every hashed
    key ("is a hashed key: its source id is kept on its ledger rows"), although
    workitems.check_key (unused) accepts them. An uncertain item with a long source id
    can never be resolved: it stays uncertain (and alarming) for good."""
    mailbox = Mailbox()
    key = str(WorkId(LONG_ID, "mail"))
    assert key.startswith("#sha256:")
    mailbox.lose = {key}
    job = mailer(aws, clock, mailbox, [LONG_ID])
    job(manual("first"), None)
    row = items(aws).get(JOB, key)
    assert row is not None and row.state is ItemState.UNCERTAIN
    code, out, _ = cli(aws, "items", JOB, "--status", "uncertain")
    assert code == 0 and key in out  # what the operator is shown

    answer = resolve(config(aws), [key], found=mailbox.sent[key], reason="seen in outbox",
                     requested_by="alice", guard_options={"store": aws.store, "clock": clock})

    assert answer["result"] == "resolved", answer
    row = items(aws).get(JOB, key)
    assert row is not None and row.state is ItemState.COMPLETED
    assert mailbox.calls == [key]


class TimesOut(CrmSync):
    """A crm-sync whose destination call for ``lost`` times out after the note was made."""

    def __init__(self, *args: Any, lost: set[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lost = lost

    def process(self, record: dict, item: Any) -> str:
        note = super().process(record, item)
        if item.key in self.lost:
            self.lost.discard(item.key)
            raise TimeoutError("the answer was lost (the note exists)")
        return note


def test_a_sweep_keeps_the_original_source_id_of_a_hashed_item(aws, clock):
    """GIVEN a crm-sync run whose call for a record with a 300-byte id timed out after
    the note was made: an uncertain row keyed '#sha256:...' that keeps the original id
    (`source_id`, the only way to tell which record it is)
    WHEN a reconciliation sweep finds the note and completes the item
    THEN the completed row still names the original source id (README: "the original
    (up to 1 KB) is kept on its ledger rows").

    BREAKS: WorkClaims.sweep writes the completion fact (an unconditioned put that
    replaces the whole row) without source_id: the hashed item's original id is gone.
    The same holds for the sweep's not-found (failed) and lookup-failed (uncertain) rows,
    resolve()'s rows and the uncertain rows a run writes for a vanished claim's items it
    did not select (_vanished_row / _foreign_rows never carry a source_id)."""
    from jobguard.claims import sweep

    notes = NotesTable.create(aws.ddb)
    source = [{"id": LONG_ID, "change": "long"}, *contacts(2)]
    key = str(WorkId(LONG_ID, "create-note"))
    job = TimesOut(config(aws), source, notes, store=aws.store, clock=clock, lost={key})
    job.handler()(manual("first"), None)
    before = items(aws).get(JOB, key)
    assert before is not None and before.state is ItemState.UNCERTAIN
    assert before.source_id == LONG_ID

    def reconciler(event: Any, context: Any) -> dict[str, Any]:
        return sweep(current_run(), job.reconcile).as_dict()

    report = make_job(aws, clock, reconciler, name=JOB)(manual("sweep"), None)
    assert report["found"] == 1, report

    after = items(aws).get(JOB, key)
    assert after is not None and after.state is ItemState.COMPLETED
    assert after.source_id == LONG_ID, "the hashed item's original source id was dropped"


def test_the_libraries_own_s3_destination_takes_every_key_a_work_id_makes(aws, clock):
    """GIVEN a plain handler writing each record to the library's S3Destination with
    item.key as the object key (README: the key is "what the destination gets as its
    idempotency key"), and a record whose id is a URL with a fragment
    WHEN it runs twice
    THEN the object is written once and the item is completed.

    BREAKS: every escaped or hashed key starts with '#' (and an escaped one holds '%'),
    which S3Destination refuses as "not safe in an S3 key" (ValueError before any call):
    the item fails, retryable, on every run for good. Any source id that is not plain
    can never reach the library's own S3 destination."""
    from jobguard.destinations import S3Destination

    s3 = aws.sandbox.client("s3")
    s3.create_bucket(Bucket="exports")
    s3.put_bucket_versioning(Bucket="exports", VersioningConfiguration={"Status": "Enabled"})
    exports = S3Destination("exports", client=s3, prefix="notes/")
    records = [URL_ID, "contact-1"]

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r, "export"),
                              reconcile=lambda _r, row: exports.reconcile(row.work_id)):
            with item:
                item.complete(destination_id=exports.put(item.key, b"body"))
        return run.figures()

    job = make_job(aws, clock, lambda_handler, name=JOB)
    first = job(manual("first"), None)
    second = job(manual("second"), None)
    key = str(WorkId(URL_ID, "export"))
    row = items(aws).get(JOB, key)
    assert row is not None and row.state is ItemState.COMPLETED, (
        row.state if row else None, row.last_error if row else None, first, second)
    assert (first.get("failed", 0), second.get("failed", 0)) == (0, 0), (first, second)


class JobRowDown:
    """Every write of a job's row (``FENCE``: the claim and checkpoint) is throttled,
    alone or in a transaction; the lease, run records and completion facts still land."""

    def __init__(self) -> None:
        self.on = False
        self.refused = 0

    def update(self, params: dict[str, Any], **_: Any) -> None:
        if self.on and params.get("Key", {}).get("sk", {}).get("S") == "FENCE":
            self.refuse("UpdateItem")

    def transact(self, params: dict[str, Any], **_: Any) -> None:
        if self.on and any(a.get("Update", {}).get("Key", {}).get("sk", {}).get("S")
                           == "FENCE" for a in params.get("TransactItems", [])):
            self.refuse("TransactWriteItems")

    def refuse(self, operation: str) -> None:
        from botocore.exceptions import ClientError

        self.refused += 1
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException",
                                     "Message": "throttled"}}, operation)


def test_a_failed_run_whose_row_write_fails_says_which_completions_it_wrote(
        aws, clock, monkeypatch):
    """GIVEN a BatchJob (flush per page, pages of 5) whose source goes down when asked
    for page 2, and whose job-row write is throttled from then on (completion facts
    still land)
    WHEN the run fails and, ending, writes what page 1 earned
    THEN the handler's error is the run's, and its record says what it wrote:
    `written_on_failure` names the 5 completions that are in the ledger.

    BREAKS: WorkClaims.close sets written_on_failure to "nothing: StoreError: ..."
    whenever flush() raises, although _write_facts landed the 5 completions before the
    job-row write failed: the run record tells the operator nothing was written while
    the ledger holds 5 completed items."""
    import jobguard._item_writes as writes_module
    import jobguard.dynamodb_items as store_module
    from jobguard import Page
    from jobguard.records import RunStatus

    monkeypatch.setattr(store_module, "_backoff", lambda attempt: None)
    monkeypatch.setattr(writes_module, "_backoff", lambda attempt: None)
    notes = NotesTable.create(aws.ddb)
    source = contacts(11)
    down = JobRowDown()

    class FailsOnPage2(CrmSync):
        pages = 0

        def select(self, cursor: str | None, limit: int) -> Page[dict]:
            self.pages += 1
            if self.pages == 2:
                down.on = True
                raise ConnectionError("the CRM API is down (503)")
            return super().select(cursor, limit)

    job = FailsOnPage2(config(aws, batch_size=5), source, notes, store=aws.store, clock=clock)
    events = aws.ddb.meta.events
    events.register("provide-client-params.dynamodb.UpdateItem", down.update)
    events.register("provide-client-params.dynamodb.TransactWriteItems", down.transact)
    raised: BaseException | None = None
    try:
        job.handler()(manual("first"), None)
    except BaseException as exc:  # noqa: BLE001 - checked below
        raised = exc
    finally:
        events.unregister("provide-client-params.dynamodb.UpdateItem", down.update)
        events.unregister("provide-client-params.dynamodb.TransactWriteItems", down.transact)
    assert isinstance(raised, ConnectionError), raised  # the handler's error is the run's
    assert down.refused > 0
    first_five = [str(WorkId(c["id"], "create-note")) for c in source[:5]]
    ledger = items(aws).get_many(JOB, first_five)
    completed = [w for w, r in ledger.items() if r.state is ItemState.COMPLETED]
    assert len(completed) == 5  # the facts landed
    (record,) = aws.runs(JOB)
    assert record.status is RunStatus.FAILED
    written = str(record.extra.get("written_on_failure"))
    assert not written.startswith("nothing"), written
    assert "5 completions" in written, written


def test_completions_that_landed_are_counted_completed_when_a_later_chunk_is_refused(
        aws, clock, monkeypatch):
    """GIVEN a BatchJob with one page of 30 items (flush per page: completions go 25 to a
    BatchWriteItem) whose second BatchWriteItem is throttled on every retry
    WHEN the run writes the page's completions
    THEN the first 25 land and the last 5 become uncertain rows; the run record counts
    what the ledger holds: completed 25, uncertain 5 (and the UncertainOutcomes metric
    5, the figure its alarm and the runbook's decision rest on).

    BREAKS: write_facts raises after its first chunk landed and WorkClaims._unrecorded
    turns *every* fact of the call into an uncertain outcome: the record says completed
    0, uncertain 30 (the 25 that landed only reappear as 'superseded') and 30
    UncertainOutcomes are emitted for 5 unknown outcomes."""
    from botocore.exceptions import ClientError

    import jobguard._item_writes as writes_module
    import jobguard.dynamodb_items as store_module

    monkeypatch.setattr(store_module, "_backoff", lambda attempt: None)
    monkeypatch.setattr(writes_module, "_backoff", lambda attempt: None)
    notes = NotesTable.create(aws.ddb)
    source = contacts(30)
    job = CrmSync(config(aws, batch_size=30), source, notes, store=aws.store, clock=clock)
    calls = {"n": 0}

    def throttle_after_first(params: dict[str, Any], **_: Any) -> None:
        calls["n"] += 1
        if calls["n"] > 1:
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException",
                                         "Message": "throttled"}}, "BatchWriteItem")

    events = aws.ddb.meta.events
    events.register("provide-client-params.dynamodb.BatchWriteItem", throttle_after_first)
    try:
        job.handler()(manual("first"), None)
    except Exception:  # noqa: BLE001 - the store's error fails the run; checked below
        pass
    finally:
        events.unregister("provide-client-params.dynamodb.BatchWriteItem",
                          throttle_after_first)
    keys = [str(WorkId(c["id"], "create-note")) for c in source]
    ledger = items(aws).get_many(JOB, keys)
    states = [ledger[k].state for k in keys]
    assert states.count(ItemState.COMPLETED) == 25
    assert states.count(ItemState.UNCERTAIN) == 5
    (record,) = aws.runs(JOB)
    assert (record.extra.get("completed"), record.extra.get("uncertain")) == (25, 5), \
        {k: record.extra.get(k) for k in ("completed", "uncertain", "superseded")}


def test_a_work_id_bug_that_rejects_every_record_does_not_skip_the_whole_source(aws, clock):
    """GIVEN a BatchJob over 40 records (pages of 4) after the source renamed its id field
    (`id` -> `contactId`): work_id() raises KeyError for *every* record (a code/schema
    bug, not one stranger's record)
    WHEN one run happens
    THEN the checkpoint does not sail past the source: at most the first page's records
    are passed (a page made entirely of rejected records is not "one bad record": the
    job should stop there, as it did before, and wait for the fix).

    BREAKS (design): rejected records never hold the checkpoint back, so one run pages
    through the whole source, rejects all 40 records and moves the checkpoint to the
    end; the status is only `incomplete`. Once the bug is fixed the next run starts at
    the end: every record is skipped until someone recovers the whole range, and the
    rejected rows that name them expire after item_ttl (15 days)."""
    from jobguard.claims import RejectedPageError
    from jobguard.records import RunStatus

    notes = NotesTable.create(aws.ddb)
    source = [{"contactId": f"contact-{i:05d}", "change": "x"} for i in range(40)]
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    # FIXED: a page whose every record is rejected for one reason stops the run (a bug,
    # not data): it fails naming the error, and nothing of the page is passed
    with pytest.raises(RejectedPageError, match="KeyError: 'id'"):
        job.handler()(manual("first"), None)
    row = items(aws).read_row(JOB)
    assert notes.calls == []
    assert row.checkpoint.cursor is None and row.claim is None
    (record,) = aws.runs(JOB)
    assert record.status is RunStatus.FAILED and "work_id()" in (record.error or "")


class Detached:
    """A field whose text cannot be read (an ORM object detached from its session:
    its __str__/__repr__ load an attribute and raise)."""

    def __str__(self) -> str:
        raise LookupError("instance is not bound to a session; attribute refresh failed")

    __repr__ = __str__


def test_a_record_whose_content_cannot_be_read_is_rejected_not_a_stopped_job(aws, clock):
    """GIVEN a BatchJob over 6 contacts, one of which carries a field whose text cannot be
    read (str() raises: an ORM object detached from its session)
    WHEN it runs twice
    THEN the record is rejected (nothing claimed for it), the 5 others are done once, and
    the checkpoint reaches the end: one record never stops a job.

    BREAKS: the default payload() (claims.fingerprint) lets the LookupError out of
    json.dumps(default=str) (it only catches TypeError/ValueError); claim_page catches it
    and calls rejection(), which calls fingerprint() again, then repr() - both raise -
    so the error escapes claim_page for the whole page: every run fails at that page,
    the checkpoint never moves, nothing of the page is done (issue 33's item 1 again)."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(6)
    source[2] = {**source[2], "owner": Detached()}
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    outcomes = []
    for name in ("first", "second"):
        try:
            outcomes.append(job.handler()(manual(name), None))
        except Exception as exc:  # noqa: BLE001 - the defect: checked below
            outcomes.append(f"{type(exc).__name__}: {exc}")
    assert all(isinstance(o, dict) for o in outcomes), outcomes
    # FIXED: its content hash is made from what can be read (its type for the field),
    # so it is not even rejected: all 6 are done once
    good = [str(WorkId(c["id"], "create-note")) for c in source]
    assert sorted(notes.calls) == sorted(good)
    assert items(aws).read_row(JOB).checkpoint.cursor == "6"


class Contact:
    """A record as an SDK or ORM hands it over: an object, not JSON (no __repr__ of its
    own, so its text names its address)."""

    def __init__(self, contact_id: str | None) -> None:
        self.contact_id = contact_id


def test_the_same_bad_object_record_is_one_rejected_row_however_often_it_is_selected(
        aws, clock):
    """GIVEN a plain handler that selects the same source records each run, built fresh
    by each invocation as objects (as a Lambda container does), one without an id
    WHEN it runs three times
    THEN the ledger holds one rejected row for it (README: "a ledger row keyed by the
    record's content"; claims.rejection: "the same bad record is one row however often
    it is selected").

    BREAKS: rejection() keys the row by fingerprint(), json.dumps(default=str) of the
    record, and str() of a plain object is '<...Contact object at 0x7f...>': the key
    changes with the object's address, so every run writes another rejected row for the
    same record (`jobguard items --status rejected` lists it three times)."""
    from jobguard.clock import to_ms

    keep: list[Any] = []  # keep old objects alive so that no address is reused

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        records = [Contact("contact-1"), Contact(None)]
        keep.extend(records)
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r.contact_id, "sync")):
            with item:
                item.complete(destination_id="dest-1")
        return run.figures()

    job = make_job(aws, clock, lambda_handler, name=JOB)
    for name in ("first", "second", "third"):
        job(manual(name), None)
    rejected = items(aws).unresolved(JOB, states=[ItemState.REJECTED],
                                     now_ms=to_ms(clock.now()))
    assert len(rejected) == 1, [r.work_id for r in rejected]


def test_a_recovery_over_a_rejected_object_record_can_be_confirmed(aws, clock):
    """GIVEN a BatchJob whose source hands over objects (built fresh by every select, as
    a Lambda invocation does), 5 contacts and one without an id
    WHEN an operator plans a recovery over the range (dry run) and executes it with the
    plan's token, as the README's recovery asks above the confirmation threshold
    THEN the execution is accepted (the range did not change) and replays the 5.

    BREAKS: the plan's token hashes '<rejected key>=rejected', and the rejected key is
    fingerprint() of the object: its address, different in every invocation. The
    execution's plan never has the dry run's token: "confirm: does not match this
    plan", for any range holding such a record, for good."""
    from jobguard import Page
    from jobguard.recovery import recover

    notes = NotesTable.create(aws.ddb)

    class ObjectSource(CrmSync):
        def select(self, cursor: str | None, limit: int) -> Page[Any]:
            start = 0 if cursor is None else int(cursor)
            ids = [f"contact-{i}" for i in range(5)] + [None]
            rows = [Contact(i) for i in ids[start:start + limit]]
            return Page(rows, str(start + len(rows)))

        def work_id(self, record: Any) -> WorkId:
            return WorkId(record.contact_id, "create-note")

        def payload(self, record: Any) -> str | None:
            return record.contact_id

        def process(self, record: Any, item: Any) -> str:
            return self.notes.put(item.key, "x")

    job = ObjectSource(config(aws), [], notes, store=aws.store, clock=clock)
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "6", "requested_by": "alice"}
    options = {"store": aws.store, "clock": clock}
    plan = recover(request, job=job, guard_options=options, threshold=2)
    assert plan["plan"]["rejected"] == 1 and plan["needs_confirmation"]
    done = recover({**request, "dry_run": False, "confirm": plan["plan"]["token"]}, job=job,
                   guard_options=options, threshold=2)
    assert done["result"] == "executed" and done["summary"]["replayed"] == 5, done


def test_a_rejected_row_lets_the_operator_find_its_record(aws, clock):
    """GIVEN a BatchJob over 40 contacts where one record (position 29) has no id
    WHEN the run rejects it and the operator, paged by ItemsRejected, runs `jobguard
    items crm-sync --status rejected` to "fix the record at its source, then recover
    its range" (README)
    THEN the rejected row says which record it is or where it was selected (an
    escaped, bounded excerpt of the record, or the cursor of its page).

    BREAKS (design gap): the row holds only '#rejected:<content hash>' and
    "KeyError: 'id'"; the run record's cursor range is the whole run (0-40). Nothing
    the operator is shown locates the record or its range."""
    from jobguard.clock import to_ms

    notes = NotesTable.create(aws.ddb)
    source = contacts(40)
    source[29] = {"change": "email changed for the Wayne account"}
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    job.handler()(manual("first"), None)
    (row,) = items(aws).unresolved(JOB, states=[ItemState.REJECTED], now_ms=to_ms(clock.now()))
    shown = " ".join(str(v) for v in row.__dict__.values() if v is not None)
    assert "Wayne account" in shown or "'28'" in shown or "cursor" in shown, shown


def test_a_job_that_does_its_work_around_one_bad_record_keeps_its_dead_man_heartbeat(
        aws, clock, metrics):
    """GIVEN the README's plain handler shape (run.claim over what the source returns each
    run) whose source keeps returning one record without an id among good ones
    WHEN it runs three times, doing all its other work each time
    THEN the dead-man alarm's heartbeat (RunSucceeded, whose absence pages "the job has
    stopped doing its work") is emitted for each run: the rejected record pages through
    its own alarm (ItemsRejected), and one record never stops a job.

    BREAKS: a rejected record makes every run `incomplete`, and only `succeeded` emits
    RunSucceeded: the NoSuccess alarm (missing data breaches) pages the operator that the
    job stopped, with a runbook about disabled schedules and failing functions, while
    it works through every other record."""
    done: list[str] = []

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        records = [{"id": f"contact-{len(done)}"}, {"oops": True}]
        for item in run.claim(records, work_id=lambda r: WorkId(r["id"], "sync")):
            with item:
                done.append(item.key)
                item.complete(destination_id=f"dest-{len(done)}")
        return run.figures()

    job = make_job(aws, clock, lambda_handler, name=JOB)
    metrics()
    for name in ("first", "second", "third"):
        job(manual(name), None)
    emitted = metrics()
    assert len(done) == 3 and emitted.get("ItemsRejected") == 3
    assert emitted.get("RunSucceeded", 0) == 3, {k: v for k, v in emitted.items()
                                                 if k in ("RunSucceeded", "RunsIncomplete")}


def test_a_run_ended_by_a_base_exception_writes_what_it_earned_or_says_it_did_not(
        aws, clock):
    """GIVEN issue 33's own case (a BatchJob, flush per page, pages of 5, the source
    failing when asked for page 2 with the lease held) where the failure is a
    BaseException: asyncio.CancelledError from an async client, or SystemExit from a
    library that calls sys.exit()
    WHEN the run fails
    THEN either page 1's 5 completions and checkpoint are written (as for an
    Exception), or the run record does not claim them: its figures match the ledger.

    BREAKS: guard._run closes the claims only for an Exception; for a BaseException
    nothing is written and the record still says completed 5 (no written_on_failure),
    while the ledger holds the 5 items claimed by a run that ended and the checkpoint
    before them: the next run must reconcile all 5 (issue 33's item 2, unchanged)."""
    import asyncio

    from jobguard import Page

    notes = NotesTable.create(aws.ddb)
    source = contacts(11)

    class CancelledOnPage2(CrmSync):
        pages = 0

        def select(self, cursor: str | None, limit: int) -> Page[dict]:
            self.pages += 1
            if self.pages == 2:
                raise asyncio.CancelledError("the source client's task was cancelled")
            return super().select(cursor, limit)

    job = CancelledOnPage2(config(aws, batch_size=5), source, notes, store=aws.store,
                           clock=clock)
    with contextlib.suppress(asyncio.CancelledError):
        job.handler()(manual("first"), None)
    (record,) = aws.runs(JOB)
    first_five = [str(WorkId(c["id"], "create-note")) for c in source[:5]]
    ledger = items(aws).get_many(JOB, first_five)
    completed = sum(r.state is ItemState.COMPLETED for r in ledger.values())
    assert record.extra.get("completed") == completed, (
        record.extra.get("completed"), completed, items(aws).read_row(JOB).checkpoint.cursor)


# -- second review: content hashes, unprintable errors, the rejected-page threshold ------


@pytest.mark.process
def test_a_record_holding_a_set_hashes_the_same_in_every_process():
    """GIVEN a record holding a set (boto3 hands DynamoDB string and number sets over
    as Python sets) WHEN it is hashed in processes with different hash seeds THEN the
    hash is the same: one rejected row, one payload, however many Lambdas see it."""
    import subprocess
    import sys

    code = ("from jobguard.claims import fingerprint; "
            "print(fingerprint({'id': 'c-1', 'tags': {'alpha', 'beta', 'gamma', 'delta'}}))")
    hashes = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env={**__import__("os").environ,
                                              "PYTHONHASHSEED": str(seed)}).stdout
              for seed in (1, 2, 3, 4)}
    assert len(hashes) == 1, hashes


def test_records_json_cannot_write_still_hash_by_their_content():
    """Objects with __slots__, dicts keyed by tuples or by mixed types, a record that
    holds itself: each hashes by its content (two different ones never share a hash,
    the same one always gets the same), and a record JSON can write hashes as before."""
    import hashlib
    import json

    from jobguard.claims import fingerprint

    class Slotted:
        __slots__ = ("contact",)

        def __init__(self, contact: int) -> None:
            self.contact = contact

    class Loop:
        def __init__(self) -> None:
            self.me = self

    assert fingerprint(Slotted(1)) != fingerprint(Slotted(2))
    assert fingerprint({(1, 2): "a"}) != fingerprint({(1, 3): "a"})
    assert fingerprint({1: "a", "b": 2}) == fingerprint({1: "a", "b": 2}) is not None
    assert fingerprint({1: "a", "b": 2}) != fingerprint({1: "b", "b": 2})  # values count
    assert fingerprint(Loop()) is not None

    class Contact:  # no repr of its own: hashed by its fields
        def __init__(self, **fields: int) -> None:
            self.__dict__.update(fields)

        def __hash__(self) -> int:
            return hash(tuple(sorted(self.__dict__.items())))

    # a set of such objects: the same content whatever order their fields were set in
    assert fingerprint({"c": {Contact(y=1, x=2), Contact(x=3, y=0)}}) == fingerprint(
        {"c": {Contact(x=2, y=1), Contact(y=0, x=3)}})
    plain = {"id": "c-1", "n": 1}
    assert fingerprint(plain) == hashlib.sha256(json.dumps(
        plain, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_a_work_id_error_whose_text_cannot_be_read_still_rejects_only_its_record(aws, clock):
    """GIVEN a work_id() that raises, for one record, an error whose text cannot be read
    WHEN the job runs THEN that record is rejected (its reason says the message could
    not be read) and the others are done."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(4)

    class Job(CrmSync):
        def work_id(self, record: dict) -> WorkId:
            if record["id"] == "contact-00002":
                raise Unprintable()
            return super().work_id(record)

    report = Job(config(aws), source, notes, store=aws.store, clock=clock).handler()(
        manual("first"), None)
    assert report["rejected"] == 1 and report["completed"] == 3
    assert "cannot be read" in report["rejected_first"]


def test_a_short_tail_page_of_records_without_ids_is_data_not_a_bug(aws, clock):
    """GIVEN a BatchJob (pages of 4) whose source ends with 2 records that both lack
    their id WHEN it runs THEN both are rejected and the checkpoint reaches the end: a
    page smaller than a full one (or than 10 records) is not taken for a code bug."""
    notes = NotesTable.create(aws.ddb)
    source = [*contacts(6), {"change": "no id 1"}, {"change": "no id 2"}]
    job = CrmSync(config(aws), source, notes, store=aws.store, clock=clock)
    report = job.handler()(manual("first"), None)
    assert report["rejected"] == 2 and report["completed"] == 6
    assert items(aws).read_row(JOB).checkpoint.cursor == "8"
