"""What a user controls can never stop a run's own release; what must not be swallowed
is not; conflicts are backed off, never spun.

GIVEN a handler that fails with an enormous message, or fills its figures, or is
interrupted (KeyboardInterrupt, SystemExit) inside an item block, or a table that
answers TransactionConflict; THEN the run log, the item ledger and the lease row say
what happened, and the interruption reaches the caller.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from jobguard import OverlapPolicy, WorkId, current_run

from ._items import NotesTable
from ._support import make_job, tick

JOB = "crm-sync"


def test_an_enormous_error_message_is_bounded_and_the_run_releases(aws, clock):
    def handler(event: Any, context: Any) -> None:
        current_run().stats.update({f"figure_{i}": "x" * 4000 for i in range(200)})
        raise RuntimeError("é" * 600_000)  # 1.2 MB in UTF-8, past DynamoDB's 400 KB item

    job = make_job(aws, clock, handler)
    with pytest.raises(RuntimeError):
        job(tick(JOB, clock.now()), None)
    (record,) = aws.runs(JOB)
    assert record.status.value == "failed"
    assert record.error is not None and len(record.error.encode()) <= 1000
    assert record.error.endswith("[truncated]")
    assert record.extra.get("figures_truncated") is True
    assert aws.store.read_lease(JOB).run_id is None  # released


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_inside_an_item_block_is_recorded_uncertain_and_propagates(
        aws, clock, interrupt):
    notes = NotesTable.create(aws.ddb)

    def handler(event: Any, context: Any) -> None:
        records = [{"id": "contact-1"}]
        for item in current_run().claim(records, work_id=lambda r: WorkId(r["id"], "note"),
                                        batch_size=1):
            with item:
                notes.put(item.key, "hello")  # the call reached the destination
                raise interrupt()

    job = make_job(aws, clock, handler, flush="item")
    with pytest.raises(interrupt):
        job(tick(JOB, clock.now()), None)
    item = job.runtime().items.get(JOB, "contact-1:note")
    assert item is not None and item.state.value == "uncertain"  # reconciled before a redo
    assert notes.calls == ["contact-1:note"]
    (record,) = aws.runs(JOB)
    assert record.status.value == "failed" and interrupt.__name__ in (record.error or "")
    assert aws.store.read_lease(JOB).run_id is None


def test_a_transaction_conflict_is_backed_off_with_jitter_not_spun(aws, clock, monkeypatch):
    sleeps: list[float] = []
    monkeypatch.setattr("jobguard.lease.time.sleep", lambda s: sleeps.append(s))
    conflicts = {"left": 3}

    def conflict(model: Any, **kwargs: Any) -> Any:
        if model.name != "TransactWriteItems" or conflicts["left"] == 0:
            return None
        conflicts["left"] -= 1
        parsed = {"Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                  "CancellationReasons": [{"Code": "TransactionConflict"}, {"Code": "None"},
                                          {"Code": "None"}],
                  "ResponseMetadata": {"HTTPStatusCode": 400}}
        return AWSResponse("https://dynamodb", 400, {}, None), parsed

    aws.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", conflict)
    job = make_job(aws, clock, lambda e, c: "ran", policy=OverlapPolicy.SKIP)
    assert job(tick(JOB, clock.now()), None) == "ran"
    assert len(sleeps) == 3 and all(s >= 0 for s in sleeps)
    (record,) = aws.runs(JOB)
    assert record.status.value == "succeeded"
