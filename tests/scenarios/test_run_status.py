"""A run's status tells the truth about its items (issue 16, item 7).

GIVEN a crm-sync-shaped job on the in-process emulator WHEN a run ends with every item
completed, with a failed item, or with an item whose outcome is unknown THEN the record
says ``succeeded``, ``incomplete``, ``incomplete``, with the counts; the CLI filters on
it; the trigger is not run again (its items are the recovery's).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from jobguard import JobConfig, OutcomeUnknown

from ._items import CrmSync, NotesTable, contacts

JOB = "crm-sync"


class Troubled(CrmSync):
    failing: set[str] = set()
    unknown: set[str] = set()

    def process(self, record: dict, item: Any) -> str:
        if record["id"] in self.failing:
            raise ValueError(f"CRM refused {record['id']}")
        if record["id"] in self.unknown:
            raise OutcomeUnknown(f"no answer for {record['id']}")
        return super().process(record, item)

    def reconcile(self, record: dict | None, item: Any) -> str | None:
        raise ConnectionError("the CRM cannot be asked")  # stays uncertain


def _job(aws, clock, notes, **kw: Any) -> Troubled:
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=10,
                       lease=timedelta(seconds=60))
    job = Troubled(config, contacts(6), notes, store=aws.store, clock=clock)
    job.failing, job.unknown = kw.get("failing", set()), kw.get("unknown", set())
    return job


@pytest.mark.parametrize(("failing", "unknown", "status", "counts"), [
    (set(), set(), "succeeded", {"failed": 0, "uncertain": 0}),
    ({"contact-00002"}, set(), "incomplete", {"failed": 1, "uncertain": 0}),
    (set(), {"contact-00004"}, "incomplete", {"failed": 0, "uncertain": 1}),
])
def test_the_run_status_says_whether_every_item_finished(aws, clock, capsys, monkeypatch,
                                                         failing, unknown, status, counts):
    notes = NotesTable.create(aws.ddb)
    job = _job(aws, clock, notes, failing=failing, unknown=unknown)
    job.handler()({"job": JOB, "manual": True, "trigger_id": "t1"}, None)
    (run,) = aws.runs(JOB)
    assert run.status.value == status
    assert {k: run.extra.get(k, 0) for k in counts} == counts
    assert len(notes.all()) == 6 - len(failing) - len(unknown)
    # the same trigger again is a duplicate: its items are the recovery's, not a rerun's
    again = job.handler()({"job": JOB, "manual": True, "trigger_id": "t1"}, None)
    assert again["decision"] == "duplicate"

    from jobguard.cli import main

    monkeypatch.setenv("JOBGUARD_TABLE", aws.table)
    capsys.readouterr()  # the runs' own logs
    assert main(["runs", JOB, "--status", "incomplete", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in listed] == ([run.run_id] if status == "incomplete" else [])
