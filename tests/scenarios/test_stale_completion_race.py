"""Break-cost review of issue 12: a stale run's unconditioned completion, in a real
race with the run that replaced it (threads, held by events at hook points)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from jobguard import ItemState, JobConfig, OverlapPolicy
from jobguard.dynamodb_items import DynamoItemStore
from tests.scenarios._items import CrmSync, NotesTable, contacts
from tests.scenarios._support import in_thread

JOB = "crm-sync"
X = "contact-00000:create-note"


def test_a_replaced_runs_late_completion_neither_duplicates_nor_corrupts(aws, clock):
    """GIVEN run A (REPLACE job, batch 1) has claimed X and passed its claim check, and
    is held right before its destination call
    WHEN run B replaces it, reconciles X (not found: A has not called yet), claims it,
    creates the note and completes it; then A's call goes through (the destination
    answers with B's note: its idempotency key) and A writes its completion fact,
    unconditioned, over B's
    THEN one note (ONCE); the ledger says completed with the note the destination holds;
    A's job-row write (the claim drop) is refused (FENCE); the checkpoint is B's.
    (The fact may name A's run, fence and attempts: facts are unconditioned, 25 to a
    request; documented in :mod:`jobguard.dynamodb_items`.)"""
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
    go.set()
    thread.join(20)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    row = items.get(JOB, X)
    print("B:", report_b, "\nA:", box, "\nledger:", row)
    assert notes.calls.count(X) == 2 and len(notes.all()) == 1  # two calls, one note
    assert row is not None and row.state is ItemState.COMPLETED
    assert row.destination_id == notes.find(X)
    checkpoint = items.read_checkpoint(JOB)
    assert checkpoint.run_id is not None and checkpoint.fence == 2
    assert items.read_row(JOB).claim is None
