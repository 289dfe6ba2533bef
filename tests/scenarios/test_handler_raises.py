"""Break-cost review of issue 12: a plain @guarded handler that raises in the middle of
``run.claim``'s page.

``WorkClaims.iterate`` is a generator: the items of the page it never handed out are
given back in its ``finally``, which runs only when the generator is closed. When the
handler's exception leaves the loop, the generator stays suspended (the traceback holds
the handler's frame, which holds it) while the guard ends the run, flushes and releases
the lease; it is closed later, whenever the traceback is dropped (in Lambda: by the
runtime, after the invocation answered, or never if the sandbox is frozen first).
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from jobguard import ItemState, WorkId, current_run
from jobguard.dynamodb_items import DynamoItemStore
from tests.scenarios._items import NotesTable, contacts
from tests.scenarios._support import make_job

JOB = "crm-sync"


def test_items_never_handed_out_are_given_back_when_the_handler_raises(aws, clock):
    """GIVEN a plain handler claiming a page of 10 that completes 2 items, then raises
    (a bug in its own code) holding the 3rd, before any destination call for it
    WHEN the run ends (the exception surfaces to the caller, who keeps it, as the Lambda
    runtime does while it reports it)
    THEN the run's record is failed, and the job row holds no open claim of the 7 items
    never handed out (nor of the 2 completed): nothing is left for the next run to
    treat as a vanished run's work.

    Holds: the claim is dropped by the time the run ends (item 3, handed out without an
    outcome, is uncertain; the 7 others are done by the next run)."""
    notes = NotesTable.create(aws.ddb)
    records = contacts(10)

    def handler(event: Any, context: Any) -> Any:
        run = current_run()
        for n, item in enumerate(run.claim(records, batch_size=10,
                                           work_id=lambda r: WorkId(r["id"], "create-note"))):
            if n == 2:
                raise KeyError("the handler's own bug")
            with item:
                item.complete(destination_id=notes.put(item.key, item.record["change"]))
        return "done"

    job = make_job(aws, clock, handler, name=JOB)
    with pytest.raises(KeyError) as kept:
        job({"job": JOB, "manual": True, "trigger_id": "first"}, None)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    row = items.read_row(JOB)
    lease = aws.store.read_lease(JOB)
    print("after the run:", lease.run_id, row.claim and sorted(row.claim.items))
    claim_after_run = set(row.claim.items) if row.claim else set()

    del kept
    gc.collect()
    row = items.read_row(JOB)
    print("after the traceback is dropped:", row.claim and sorted(row.claim.items))

    def plain(event: Any, context: Any) -> Any:
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r["id"], "create-note")):
            with item:
                item.complete(destination_id=notes.put(item.key, item.record["change"]))
        return run.stats

    job_next = make_job(aws, clock, plain, name=JOB)
    claimed_before_next = claim_after_run
    job_next({"job": JOB, "manual": True, "trigger_id": "second"}, None)
    ledger = items.get_many(JOB, [f"{r['id']}:create-note" for r in records])
    states = {w: r.state.value for w, r in ledger.items()}
    print("after the next run:", states)
    assert claimed_before_next == set(), sorted(claimed_before_next)
    never = [f"contact-0000{i}:create-note" for i in range(3, 10)]
    assert all(ledger[w].state is ItemState.COMPLETED for w in never), states
