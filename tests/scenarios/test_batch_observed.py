"""What a ``BatchJob`` run shows its users: the time margin and the report's ``stopped``,
the hook points' payloads, the checkpoint-lag metric, per-item flush's writes, and the
refusal of a time range for a job that does not map times to cursors.

Every test runs the crm-sync shape (``tests/scenarios/_items.py``) on the in-process
emulator and reads the report, the run record, the ledger, the destination or the EMF
metrics: what an operator or a drill would look at.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from jobguard import ItemState, JobConfig, OutcomeUnknown, WorkId, hooks
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.errors import ConfigError
from jobguard.recovery import recover

from ._items import CrmSync, NotesTable, contacts
from ._support import in_thread

JOB = "crm-sync"


def manual(trigger_id: str, job: str = JOB) -> dict[str, Any]:
    return {"job": job, "manual": True, "trigger_id": trigger_id}


def config(aws: Any, **overrides: Any) -> JobConfig:
    options: dict[str, Any] = {"name": JOB, "table_name": aws.table, "batch_size": 10,
                               "lease": timedelta(seconds=60)}
    options.update(overrides)
    return JobConfig(**options)


def key(i: int) -> str:
    return str(WorkId(f"contact-{i:05d}", "create-note"))


def ledger(aws: Any, n: int) -> dict[str, Any]:
    return DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, [key(i) for i in range(n)])


class Troubled(CrmSync):
    """crm-sync whose destination refuses some contacts, or does not answer for some."""

    refused: frozenset[str] = frozenset()
    unanswered: frozenset[str] = frozenset()
    timed_out: frozenset[str] = frozenset()

    def process(self, record: dict, item: Any) -> str:
        if record["id"] in self.refused:
            raise ValueError(f"CRM refused {record['id']}")
        if record["id"] in self.unanswered:
            raise OutcomeUnknown(f"no answer for {record['id']}")
        if record["id"] in self.timed_out:
            raise TimeoutError(f"the CRM timed out on {record['id']}")
        return super().process(record, item)


class Invocation:
    """A Lambda context: ``remaining_ms`` left, less ``spend_ms`` per destination call."""

    def __init__(self, remaining_ms: int, spend_ms: int = 0) -> None:
        self.remaining_ms = remaining_ms
        self.spend_ms = spend_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms

    def spend(self, _item: Any) -> None:
        self.remaining_ms -= self.spend_ms


# -- the time margin --------------------------------------------------------------------


def test_a_run_with_less_than_its_time_margin_left_takes_nothing_and_says_time(aws, clock):
    # GIVEN an invocation with 5 s left, under the job's 10 s time margin (the default)
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(config(aws), contacts(5), notes, store=aws.store, clock=clock)
    assert job.config.time_margin == timedelta(seconds=10)

    # WHEN the run starts
    report = job.handler()(manual("late"), Invocation(remaining_ms=5_000))

    # THEN it took no item and says it stopped for time (not that the source is exhausted)
    assert report["stopped"] == "time"
    assert (report["pages"], report["selected"], report["completed"]) == (0, 0, 0)
    assert notes.calls == [] and ledger(aws, 5) == {}
    (run,) = aws.runs(JOB)
    assert run.extra["stopped"] == "time"

    # AND the next run, with time enough, does all of it
    again = job.handler()(manual("on-time"), Invocation(remaining_ms=900_000))
    assert (again["stopped"], again["completed"]) == ("exhausted", 5)


def test_the_time_margin_is_kept_to_the_millisecond_before_each_page_and_each_item(
        aws, clock):
    # GIVEN pages of 4, a 2-minute time margin, 6 minutes left, a minute per destination call
    notes = NotesTable.create(aws.ddb)
    invocation = Invocation(remaining_ms=6 * 60_000, spend_ms=60_000)
    job = CrmSync(config(aws, batch_size=4, time_margin=timedelta(minutes=2)), contacts(10),
                  notes, store=aws.store, clock=clock, before_call=invocation.spend)

    # WHEN the run works until less than the margin is left
    report = job.handler()(manual("t"), invocation)

    # THEN exactly the margin left still takes the next page and its first item (5 calls),
    # and the run stops before the 6th with a minute left, giving back the 3 not started
    assert len(notes.calls) == 5
    assert (report["stopped"], report["pages"], report["completed"], report["remaining"]) == (
        "time", 2, 5, 3)
    assert invocation.remaining_ms == 60_000
    rows = ledger(aws, 10)
    assert set(rows) == {key(i) for i in range(5)}  # the 3 given back have no row ...
    assert {r.state for r in rows.values()} == {ItemState.COMPLETED}
    assert DynamoItemStore(aws.table, client=aws.ddb).read_checkpoint(JOB).cursor == "4"

    # ... and the next run does the other 5, each once
    job.before_call = None
    again = job.handler()(manual("next"), Invocation(remaining_ms=900_000))
    assert (again["completed"], again["already_done"]) == (5, 1)
    assert sorted(notes.calls) == [key(i) for i in range(10)]


# -- the hook points' payloads ----------------------------------------------------------


def test_the_hook_points_of_a_batch_name_the_run_and_each_work_item(aws, clock):
    # GIVEN a run of 5 items in pages of 3, the 2nd refused by the CRM, with flush per item
    notes = NotesTable.create(aws.ddb)
    job = Troubled(config(aws, batch_size=3, flush="item"), contacts(5), notes,
                   store=aws.store, clock=clock)
    job.refused = frozenset({"contact-00001"})
    seen: dict[str, list[dict[str, Any]]] = {"after_claim": [], "before_item": [],
                                              "after_process": []}
    at_answer: list[tuple[str | None, Any]] = []

    def record(point: str) -> Callable[..., None]:
        def hook(**ctx: Any) -> None:
            seen[point].append(ctx)
            if point == "after_process":  # the destination answered, nothing recorded yet
                at_answer.append((notes.find(ctx["work_id"]),
                                  ledger(aws, 5).get(ctx["work_id"])))
        return hook

    # WHEN it runs with a hook on each of the batch's points
    with hooks.on("after_claim", record("after_claim")), \
            hooks.on("before_item", record("before_item")), \
            hooks.on("after_process", record("after_process")):
        report = job.handler()(manual("hooks"), None)

    # THEN each point names the job, the run and the work items it is about
    (run,) = aws.runs(JOB)
    every = [ctx for ctxs in seen.values() for ctx in ctxs]
    assert {(c["job"], c["run_id"]) for c in every} == {(JOB, run.run_id)}
    assert [c["work_ids"] for c in seen["after_claim"]] == [[key(0), key(1), key(2)],
                                                            [key(3), key(4)]]
    assert [c["work_id"] for c in seen["before_item"]] == [key(i) for i in range(5)]
    # after_process: each item the destination accepted (not the refused one), with its
    # note already there and the item still only claimed in the ledger (where a drill
    # kills a worker to leave an effect without its outcome)
    assert [c["work_id"] for c in seen["after_process"]] == [key(i) for i in (0, 2, 3, 4)]
    assert all(note is not None and row.state is ItemState.CLAIMED
               for note, row in at_answer), at_answer
    assert (report["completed"], report["failed"]) == (4, 1)


# -- a refused item ---------------------------------------------------------------------


def test_a_refused_item_is_failed_retryable_and_retried_when_its_page_comes_back(aws,
                                                                              clock):
    # GIVEN a page where the CRM refused contact 1 and did not answer for contact 2 (so
    # the checkpoint stays before the page)
    notes = NotesTable.create(aws.ddb)
    job = Troubled(config(aws), contacts(3), notes, store=aws.store, clock=clock)
    job.refused, job.unanswered = frozenset({"contact-00001"}), frozenset({"contact-00002"})
    first = job.handler()(manual("refused"), None)
    assert (first["completed"], first["failed"], first["uncertain"]) == (1, 1, 1)
    row = ledger(aws, 3)[key(1)]
    assert row.state is ItemState.FAILED and row.retryable
    assert "CRM refused contact-00001" in (row.last_error or "")

    # WHEN the CRM is well again and the next run comes back to the page
    job.refused = job.unanswered = frozenset()
    again = job.handler()(manual("accepted"), None)

    # THEN the refusal (a known outcome: nothing happened) was retried, the uncertain
    # item reconciled (found nowhere) and redone, and the page is done
    assert (again["retried"], again["completed"], again["already_done"]) == (1, 2, 1)
    assert Counter(notes.calls) == {key(0): 1, key(1): 1, key(2): 1}
    assert {r.state for r in ledger(aws, 3).values()} == {ItemState.COMPLETED}


def test_a_destination_timeout_leaves_the_item_uncertain_not_failed(aws, clock):
    # GIVEN the CRM times out on contact 1 (the note may or may not have been created)
    notes = NotesTable.create(aws.ddb)
    job = Troubled(config(aws), contacts(3), notes, store=aws.store, clock=clock)
    job.timed_out = frozenset({"contact-00001"})

    # WHEN the run records it
    report = job.handler()(manual("timeout"), None)

    # THEN it is uncertain (reconciled before any redo), never a retryable failure
    assert (report["completed"], report["failed"], report["uncertain"]) == (2, 0, 1)
    row = ledger(aws, 3)[key(1)]
    assert row.state is ItemState.UNCERTAIN and not row.retryable


# -- the checkpoint lag -----------------------------------------------------------------


def test_pages_worked_past_an_unfinished_one_are_counted_as_checkpoint_lag(aws, clock,
                                                                          metrics):
    # GIVEN 8 contacts in pages of 3, and no answer from the CRM for contact 1 (page 1)
    notes = NotesTable.create(aws.ddb)
    job = Troubled(config(aws, batch_size=3), contacts(8), notes, store=aws.store,
                   clock=clock)
    job.unanswered = frozenset({"contact-00001"})
    metrics()  # nothing before the run

    # WHEN the run works through every page
    report = job.handler()(manual("lag"), None)

    # THEN the later pages were still worked on, the checkpoint stayed before page 1, and
    # the metric counts every item selected past it (3 + 3 + 2): the next run selects
    # them again
    assert (report["pages"], report["completed"], report["uncertain"]) == (3, 7, 1)
    assert report["stopped"] == "exhausted" and "cursor_to" not in report
    assert DynamoItemStore(aws.table, client=aws.ddb).read_checkpoint(JOB).cursor is None
    assert metrics()["CheckpointLagItems"] == 8


def test_a_run_that_moves_the_checkpoint_past_every_page_reports_no_lag(aws, clock,
                                                                       metrics):
    # GIVEN 8 contacts in pages of 3, all accepted
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(config(aws, batch_size=3), contacts(8), notes, store=aws.store,
                  clock=clock)
    metrics()
    # WHEN the run works through every page
    report = job.handler()(manual("no-lag"), None)
    # THEN the checkpoint is past all of them, and the metric says nothing lags
    assert (report["completed"], report["cursor_to"]) == (8, "8")
    assert metrics()["CheckpointLagItems"] == 0


# -- per-item flush ---------------------------------------------------------------------


def _job_row_writes(aws: Any, job: CrmSync) -> tuple[dict[str, Any], int]:
    """The run's report, and how many of its requests wrote the job row (JOB# / FENCE)."""
    writes: list[str] = []

    def count(params: dict[str, Any], model: Any, **_: Any) -> None:
        keys = [params.get("Key")] + [
            action.get("Key") or action.get("Item")
            for t in params.get("TransactItems", []) for action in t.values()]
        if any(k and k.get("pk", {}).get("S") == f"JOB#{job.config.name}"
               and k.get("sk", {}).get("S") == "FENCE" for k in keys):
            writes.append(model.name)

    aws.ddb.meta.events.register("provide-client-params.dynamodb.UpdateItem", count)
    aws.ddb.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", count)
    try:
        report = job.handler()(manual("t", job.config.name), None)
    finally:
        aws.ddb.meta.events.unregister("provide-client-params.dynamodb.UpdateItem", count)
        aws.ddb.meta.events.unregister("provide-client-params.dynamodb.TransactWriteItems",
                                       count)
    return report, len(writes)


def test_with_flush_per_item_a_pages_last_failure_rides_on_the_next_pages_claim(aws, clock):
    """README: a page's failed items and the checkpoint past it ride on the write of the
    job row that claims the next page. Per item, a page's last outcome waits for that
    write: its failure costs no job-row write of its own."""
    def run(name: str, refused: frozenset[str]) -> tuple[dict[str, Any], int]:
        notes = NotesTable.create(aws.ddb)
        job = Troubled(config(aws, name=name, batch_size=3, flush="item"), contacts(6),
                       notes, store=aws.store, clock=clock)
        job.refused = refused
        return _job_row_writes(aws, job)

    # GIVEN two runs of 2 pages of 3, the same but for the first page's last item
    ok, ok_writes = run("all-accepted", frozenset())
    # WHEN the CRM refuses that item (contact 2)
    failing, failing_writes = run("last-refused", frozenset({"contact-00002"}))

    # THEN the failure is recorded, and the run wrote its job row as often as the other
    assert (ok["completed"], ok["failed"]) == (6, 0)
    assert (failing["completed"], failing["failed"]) == (5, 1)
    assert failing_writes == ok_writes, (failing_writes, ok_writes)


def test_with_flush_per_item_a_crash_mid_item_leaves_only_that_item_to_reconcile(aws,
                                                                                clock):
    """README, ``flush="item"``: each completion is written when it is recorded, so a
    crash leaves only the item in flight (and those not started) to reconcile."""
    notes = NotesTable.create(aws.ddb)
    source = contacts(3)
    paused, never = threading.Event(), threading.Event()

    def die_on_the_last(**ctx: Any) -> None:
        if ctx["work_id"] == key(2):  # the destination accepted the page's last item
            paused.set()
            never.wait(30)

    # GIVEN a run (flush per item) frozen right after the CRM accepted item 3 of a page of 3
    job_a = CrmSync(config(aws, flush="item"), source, notes, store=aws.store, clock=clock)
    with hooks.on("after_process", die_on_the_last):
        thread, _ = in_thread(lambda: job_a.handler()(manual("doomed"), None))
        assert paused.wait(10)
        clock.advance(timedelta(seconds=66))  # its lease is long gone

        # WHEN the next run comes
        job_b = CrmSync(config(aws, flush="item"), source, notes, store=aws.store,
                        clock=clock)
        report = job_b.handler()(manual("next"), None)
    never.set()
    thread.join(10)

    # THEN the two items recorded before the crash were found completed in the ledger,
    # and only the one in flight was reconciled at the destination; nothing was redone
    assert (report["already_done"], report["reconciled"], report["completed"]) == (2, 1, 0)
    assert Counter(notes.calls) == {key(0): 1, key(1): 1, key(2): 1}
    assert {r.state for r in ledger(aws, 3).values()} == {ItemState.COMPLETED}


# -- recovery by time ------------------------------------------------------------------


def test_recovery_by_time_of_a_job_without_cursor_at_names_the_field_and_the_way_out(
        aws, clock):
    # GIVEN crm-sync, which does not map times to cursors (no cursor_at)
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(config(aws), contacts(3), notes, store=aws.store, clock=clock)

    # WHEN an operator plans a recovery by time range
    with pytest.raises(ConfigError) as info:
        recover({"job": JOB, "time_from": "2026-11-29T01:00:00Z",
                 "time_to": "2026-11-29T02:00:00Z"}, job=job)

    # THEN the refusal names time_from and says how to recover instead (the CLI rewrites
    # this text's field names into its options)
    assert info.value.field == "time_from"
    assert str(info.value) == (
        "time_from: job 'crm-sync' does not map times to cursors (implement cursor_at); "
        "recover by cursor_from/cursor_to")
    assert notes.calls == []


class FrozenSource(CrmSync):
    """crm-sync whose source freezes when asked for the page at ``freeze_at``."""

    freeze_at = "3"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frozen, self.never = threading.Event(), threading.Event()

    def select(self, cursor: str | None, limit: int) -> Any:
        if cursor == self.freeze_at and not self.frozen.is_set():
            self.frozen.set()
            self.never.wait(30)  # the Lambda is killed here (its timeout, a crash)
        return super().select(cursor, limit)


def test_with_flush_per_item_a_crash_while_selecting_the_next_page_leaves_nothing_to_reconcile(
        aws, clock):
    # GIVEN a run (flush per item) that finished page 1 (3 notes created and recorded)
    # and is killed while its source looks up page 2
    notes = NotesTable.create(aws.ddb)
    job_a = FrozenSource(config(aws, batch_size=3, flush="item"), contacts(6), notes,
                         store=aws.store, clock=clock)
    thread, _ = in_thread(lambda: job_a.handler()(manual("doomed"), None))
    assert job_a.frozen.wait(10)
    assert len(notes.calls) == 3
    clock.advance(timedelta(seconds=66))  # its lease is long gone

    # WHEN the next run comes
    job_b = CrmSync(config(aws, batch_size=3, flush="item"), contacts(6), notes,
                    store=aws.store, clock=clock)
    report = job_b.handler()(manual("next"), None)
    job_a.never.set()
    thread.join(10)

    # THEN page 1's three completions were in the ledger: nothing to reconcile
    assert (report["already_done"], report["reconciled"], report["completed"]) == (3, 0, 3)
    assert Counter(notes.calls) == {key(i): 1 for i in range(6)}


def test_a_cursor_too_large_to_keep_stops_the_run_before_its_page_is_claimed(aws, clock):
    """GIVEN a source whose second page's cursor is 9,000 bytes (a cursor is kept on the
    job row, at most 8,192 bytes)
    WHEN the job runs
    THEN the first page is done and checkpointed; the run stops on the second page
    before claiming it, naming the job and the cursor's size: no destination call for
    it, no claim left open, the checkpoint where the first page left it."""
    from jobguard.errors import CursorTooLargeError
    from jobguard.records import RunStatus

    class HugeCursor(CrmSync):
        def select(self, cursor: str | None, limit: int) -> Any:
            page = super().select(cursor, limit)
            if cursor is not None:  # the second page's cursor would not fit the row
                return type(page)(page.records, "x" * 9000)
            return page

    notes = NotesTable.create(aws.ddb)
    job = HugeCursor(config(aws, batch_size=2), contacts(4), notes, store=aws.store,
                     clock=clock)
    with pytest.raises(CursorTooLargeError) as refused:
        job.handler()(manual("huge"), None)

    assert refused.value.job == JOB and "is 9,000 bytes, over the bound of 8,192" in str(
        refused.value)
    assert sorted(notes.calls) == [str(WorkId(c["id"], "create-note")) for c in contacts(2)]
    row = DynamoItemStore(aws.table, client=aws.ddb).read_row(JOB)
    assert row.claim is None and row.checkpoint.cursor == "2"
    [record] = aws.runs(JOB)
    assert record.status is RunStatus.FAILED and "CursorTooLargeError" in (record.error or "")
