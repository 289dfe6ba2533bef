"""Break-cost review of issue 12: the checkpoint's cursor lives on the job row, which
every write of the claim and every acquisition pays for by its whole size, and which may
not pass 400 KB with the open claim beside it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobguard import JobConfig, JobGuardError, Page
from jobguard.dynamodb_items import DynamoItemStore
from tests.scenarios._items import CrmSync, NotesTable, contacts

JOB = "crm-sync"


class LongCursor(CrmSync):
    """A source whose next-page token is ``size`` bytes (page tokens of some APIs are
    opaque blobs of several KB)."""

    size = 0

    def select(self, cursor: str | None, limit: int) -> Page[dict]:
        start = 0 if cursor is None else int(cursor.split("|", 1)[0])
        rows = self.source[start:start + limit]
        return Page(rows, f"{start + len(rows)}|" + "t" * self.size)


def test_a_cursor_that_cannot_fit_the_job_row_is_refused_naming_it(aws, clock):
    """GIVEN a BatchJob (batch 100) whose source hands out 400 KB page tokens (contrived
    to be over DynamoDB's item limit on its own; a 64 KB token beside a 1,000-item claim
    of long work ids is over it too)
    WHEN it runs: page 1's checkpoint rides on the write that claims page 2
    THEN a clear error names the cursor (next_cursor) before the job row is written,
    and the destination is called once per item at most.

    Before the fix: no bound on the cursor; DynamoDB refuses the job-row write as a
    ValidationException (item size) surfacing as a StoreError about the commit, after
    the page's destination calls; the run fails, and every later run fails the same
    way (the job is stuck)."""
    notes = NotesTable.create(aws.ddb)
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=100,
                       lease=timedelta(seconds=60))
    job = LongCursor(config, contacts(300), notes, store=aws.store, clock=clock)
    job.size = 400 * 1024
    try:
        report: Any = job.handler()({"job": JOB, "manual": True, "trigger_id": "t"}, None)
    except JobGuardError as exc:
        print("raised:", exc)
        assert "cursor" in str(exc), str(exc)[:300]
    else:
        print(report)
        checkpoint = DynamoItemStore(aws.table, client=aws.ddb).read_checkpoint(JOB)
        assert checkpoint.cursor is not None and checkpoint.cursor.startswith("300|")
    assert len(notes.calls) == len(set(notes.calls))
