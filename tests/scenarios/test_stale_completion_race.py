"""Break-cost review of issue 12: a stale run's unconditioned completion, in a real
race with the run that replaced it (threads, held by events at hook points)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from jobguard import ItemState, JobConfig, OverlapPolicy
from jobguard.clock import to_ms
from jobguard.dynamodb_items import DynamoItemStore
from tests.scenarios._items import CrmSync, NotesTable, contacts
from tests.scenarios._support import in_thread

JOB = "crm-sync"
X = "contact-00000:create-note"


def test_a_replaced_runs_late_completion_neither_duplicates_nor_corrupts(aws, clock):
    """GIVEN run A (REPLACE job, batch 1) has claimed X and passed its claim check, and
    is held right before its destination call
    WHEN run B replaces it: B leaves X alone (A may still call for it until its
    deadline), an uncertain row held until then; then A's call goes through and A
    writes its completion fact, unconditioned, over that row; later, after A's
    deadline, run C comes
    THEN one call, one note (ONCE at the destination itself: before issue 33, B
    reconciled X before A called, found nothing and called too); the ledger says
    completed with the note the destination holds; A's job-row write (the claim drop)
    is refused (FENCE); B left the checkpoint before X, and C moves it past."""
    notes = NotesTable.create(aws.ddb)
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=1,
                       policy=OverlapPolicy.REPLACE, lease=timedelta(seconds=60))
    at_call, go = threading.Event(), threading.Event()

    def hold_a(item: Any) -> None:
        at_call.set()
        assert go.wait(20)

    job_a = CrmSync(config, contacts(1), notes, before_call=hold_a, store=aws.store,
                    clock=clock)
    job_b = CrmSync(config, contacts(1), notes, store=aws.store, clock=clock)
    thread, box = in_thread(lambda: job_a.handler()(
        {"job": JOB, "manual": True, "trigger_id": "a"}, None))
    assert at_call.wait(10)
    report_b = job_b.handler()({"job": JOB, "manual": True, "trigger_id": "b"}, None)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    held = items.get(JOB, X)
    assert held is not None and held.state is ItemState.UNCERTAIN and held.held_until_ms
    go.set()
    thread.join(20)
    row = items.get(JOB, X)
    print("B:", report_b, "\nA:", box, "\nledger:", row)
    assert notes.calls == [X] and len(notes.all()) == 1  # one call, one note
    assert row is not None and row.state is ItemState.COMPLETED
    assert row.destination_id == notes.find(X)
    assert box["result"]["jobguard"] == "lease_lost"
    assert report_b["deferred"] == 1 and items.read_checkpoint(JOB).cursor is None
    clock.advance(timedelta(milliseconds=held.held_until_ms - to_ms(clock.now()) + 1))
    report_c = job_b.handler()({"job": JOB, "manual": True, "trigger_id": "c"}, None)
    assert report_c["already_done"] == 1 and notes.calls == [X]
    checkpoint = items.read_checkpoint(JOB)
    assert checkpoint.cursor == "1" and checkpoint.fence == 3
    assert items.read_row(JOB).claim is None
