"""``current_run().claim(...)``: the one call a plain handler makes to get its work items.

GIVEN a guarded handler that claims its records on the in-process emulator, WHEN it runs
twice, the second time after an answer was lost, THEN every argument it passed reaches the
claim engine: its records and work ids are the items on the ledger, its batch size sets
the pages, and its ``reconcile`` settles the uncertain item instead of redoing it. The
fast suites had no test of this call (``make mutate``: every mutant of ``Run.claim`` had
no test; tests/scenarios/test_work_items.py covers it with the scenario suites).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobguard import GuardedJob, ItemState, JobConfig, WorkId, current_run
from jobguard.dynamodb_items import DynamoItemStore

JOB = "claiming-job"


def manual(name: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": name}


def test_claim_pages_by_its_batch_size_and_reconciles_with_its_reconcile(aws, clock):
    """GIVEN a job configured with pages of 10 whose handler claims 5 contacts in pages of
    2, with a ``reconcile`` that looks the note up, and whose destination loses the answer
    for contact c2 once WHEN it runs, then runs again THEN the first run claims the 5 work
    ids in 3 pages, completes 4 and leaves c2 uncertain; the second finds the 4 done and
    reconciles c2 from its note, so every item is completed with its note's id and each
    note was written once."""
    notes: dict[str, str] = {}  # the destination: note id by idempotency key
    writes: list[str] = []
    lost = {"c2"}
    records = [{"id": f"c{i}"} for i in range(5)]

    def handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r["id"], "note"),
                              reconcile=lambda record, row: notes.get(row.work_id),
                              batch_size=2):
            with item:
                writes.append(item.key)
                notes[item.key] = f"note-{len(writes)}"
                if item.record["id"] in lost:
                    lost.discard(item.record["id"])
                    raise TimeoutError("the note was written, its answer lost")
                item.complete(destination_id=notes[item.key])
        return run.figures()

    config = JobConfig(name=JOB, lease=timedelta(seconds=60), table_name=aws.table,
                       batch_size=10)
    job = GuardedJob(config, handler, store=aws.store, clock=clock)

    first = job(manual("first"), None)
    second = job(manual("second"), None)

    assert (first["pages"], first["selected"], first["completed"], first["uncertain"]) == (
        3, 5, 4, 1)
    assert (second["already_done"], second["reconciled"], second["completed"]) == (4, 1, 0)
    ids = [f"c{i}:note" for i in range(5)]
    rows = DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, ids)
    assert sorted(rows) == ids
    assert {k: (r.state, r.destination_id) for k, r in rows.items()} == {
        k: (ItemState.COMPLETED, notes[k]) for k in ids}
    assert sorted(writes) == sorted(ids)  # c2's note was found, not written again
