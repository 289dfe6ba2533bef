"""Break-cost review of issue 12: bad input to the new entry points is refused
naming the field, before anything is written."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobguard import JobConfig, JobGuardError, WorkId, current_run
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.errors import InvalidRequestError
from jobguard.recovery import resolve
from tests.scenarios._items import NotesTable, contacts
from tests.scenarios._support import make_job

JOB = "crm-sync"


@pytest.mark.parametrize("size", [-1, 5000, "10"])
def test_run_claim_refuses_a_batch_size_outside_1_to_1000(aws, clock, size):
    """GIVEN a plain @guarded handler that passes ``batch_size`` to ``run.claim``
    WHEN it is -1, 5,000 or "10" (JobConfig refuses each for its own batch_size)
    THEN a clear error names batch_size before any claim, lookup or destination call.

    Before the fix: -1 and "10" never equal a page's length, so all the records become one
    page (fewer than 1,001: silently one claim of them all); here 1,001 records: each
    case reads all 1,001 items, then the run fails with "an open claim of 1001 items
    exceeds 1000", which does not name batch_size."""
    notes = NotesTable.create(aws.ddb)
    records = contacts(1001)

    def handler(event, context):
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r["id"], "create-note"),
                              batch_size=size):
            with item:
                item.complete(destination_id=notes.put(item.key, item.record["change"]))
        return run.stats

    job = make_job(aws, clock, handler, name=JOB)
    with pytest.raises(JobGuardError) as info:
        job({"job": JOB, "manual": True, "trigger_id": f"size-{size}"}, None)
    assert "batch_size" in str(info.value), str(info.value)
    assert notes.calls == []


@pytest.mark.parametrize("found", ["n" * 2000, "   "], ids=["2000-bytes", "blank"])
def test_resolve_refuses_a_destination_id_no_run_could_record(aws, clock, found):
    """GIVEN an uncertain item of a plain handler
    WHEN an operator resolves it as found with a 2,000-byte destination id (a run's
    ``item.complete`` refuses anything over 1,024 bytes: it is kept with every
    completion, and every later read pays for it), or one of only spaces
    THEN resolve refuses it naming ``found``, before taking the lease.

    Before the fix: only emptiness is checked; the 2,000 bytes are written as the
    completion's proof."""
    notes = NotesTable.create(aws.ddb)

    def handler(event, context):
        run = current_run()
        for item in run.claim(contacts(1), work_id=lambda r: WorkId(r["id"], "create-note")):
            with item:
                raise TimeoutError("the response was lost")
        return run.stats

    job = make_job(aws, clock, handler, name=JOB)
    job({"job": JOB, "manual": True, "trigger_id": "first"}, None)
    config = JobConfig(name=JOB, table_name=aws.table, lease=timedelta(seconds=60))
    with pytest.raises(InvalidRequestError) as info:
        resolve(config, ["contact-00000:create-note"], found=found, reason="seen",
                requested_by="alice", guard_options={"store": aws.store, "clock": clock})
    assert info.value.field == "found"
    row = DynamoItemStore(aws.table, client=aws.ddb).get(JOB, "contact-00000:create-note")
    assert row is not None and row.destination_id is None
    assert notes.calls == []
