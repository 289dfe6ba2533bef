"""Break-cost review of issue 12: a job-row commit with more than 99 failed or
uncertain rows is split into transactions of 99 (the leading ones with a
``ConditionCheck`` of the job row, the last with its ``Update``): not atomic as a whole.
A run that dies (or loses its lease) between them leaves rows written while the job row
still names every item in its open claim; the next run treats those items as a vanished
run's work, whatever their rows say.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobguard import ItemState, WorkId, current_run
from jobguard.dynamodb_items import DynamoItemStore
from tests.scenarios._items import NotesTable, contacts
from tests.scenarios._support import make_job

JOB = "crm-sync"


class Crash(BaseException):
    """The process dies here."""


@pytest.mark.parametrize("n, chunks", [(100, 1), (250, 2)], ids=["one chunk", "two chunks"])
def test_failures_for_good_stay_failed_after_a_crash_between_chunks(aws, clock, n, chunks):
    """GIVEN a plain handler at batch 100 whose destination rejects all 100 records for
    good (``item.fail(..., retryable=False)``), and the run dies right after the first
    transaction of its commit (99 failed rows written; the job row not yet written);
    or at batch 250, after the second (198 written: the second chunk must drop its own
    items from the claim the first left, not from the claim as it was read)
    WHEN the next run meets the same records (its reconcile finds nothing, as nothing
    was ever applied)
    THEN the 99 items whose failure was recorded stay failed-for-good: reported, not
    sent to the destination again (as for every failure that is not retryable).

    Before the fix: the 99 are in the dead run's open claim, so they are reconciled (not
    found) and redone: 99 destination calls for records rejected for good."""
    notes = NotesTable.create(aws.ddb)
    records = contacts(n)
    calls: list[str] = []

    def rejecting(event: Any, context: Any) -> Any:
        run = current_run()
        for item in run.claim(records, batch_size=n,
                              work_id=lambda r: WorkId(r["id"], "create-note"),
                              reconcile=lambda record, row: notes.find(row.work_id)):
            with item:
                calls.append(item.key)
                item.fail("CRM: invalid contact (400)", retryable=False)
            if len(calls) == len(records):
                state["armed"] = state["first_run"]  # the page's commit comes next
        return run.stats

    state = {"armed": False, "first_run": True, "chunks": chunks}

    def die_after_first_chunk(http_response: Any, **_: Any) -> None:
        if state["armed"] and http_response.status_code < 300:
            state["chunks"] -= 1
            if state["chunks"] == 0:
                state["armed"] = False
                raise Crash()

    job = make_job(aws, clock, rejecting, name=JOB)
    aws.ddb.meta.events.register("after-call.dynamodb.TransactWriteItems",
                                 die_after_first_chunk)
    try:
        with pytest.raises(Crash):
            job({"job": JOB, "manual": True, "trigger_id": "dies"}, None)
    finally:
        aws.ddb.meta.events.unregister("after-call.dynamodb.TransactWriteItems",
                                       die_after_first_chunk)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    ids = [f"{r['id']}:create-note" for r in records]
    rows = items.lookup(JOB, ids)[0]
    failed = {w for w, r in rows.items() if r.state is ItemState.FAILED}
    assert len(failed) == 99 * chunks and len(calls) == n
    row = items.read_row(JOB)
    # each transaction dropped its 99 items from the open claim with their rows:
    # the dead claim names only the item whose row was never written
    assert row.claim is not None and set(row.claim.items) == set(ids) - failed

    # the next run, after the dead run's lease
    from datetime import timedelta
    clock.advance(timedelta(seconds=66))
    calls.clear()
    state["first_run"] = False
    job({"job": JOB, "manual": True, "trigger_id": "next"}, None)
    redone = sorted(set(calls) & failed)
    assert redone == []
    after = items.lookup(JOB, sorted(failed))[0]
    assert {r.state for r in after.values()} == {ItemState.FAILED}
