"""Workers killed mid-batch (SIGKILL, real processes, the emulator server in its own
process), then the next run: the ledger and the destination are checked, not statuses."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from jobguard import ItemState, JobConfig, SystemClock, WorkId, hooks
from jobguard.clock import to_ms
from jobguard.dynamodb import DynamoJobStore
from jobguard.dynamodb_items import DynamoItemStore

from ._items import CrmSync, NotesTable, contacts

pytestmark = pytest.mark.server

JOB = "crm-sync"


class FlakyCrmSync(CrmSync):
    """crm-sync whose destination refuses some contacts (a known failure)."""

    fail_ids: frozenset[str] = frozenset()

    def process(self, record: dict, item: Any) -> str:
        if record["id"] in self.fail_ids:
            raise ValueError(f"CRM refused {record['id']}")
        return super().process(record, item)


def _config(table: str, flush: str) -> JobConfig:
    return JobConfig(name=JOB, table_name=table, batch_size=10, flush=flush,
                     lease=timedelta(seconds=2), heartbeat_every=timedelta(milliseconds=500),
                     skew_margin=timedelta(milliseconds=200))


def _worker(table: str, notes_table: str, flush: str, die_after: str, fail: list[str],
            ready: Any) -> None:
    import boto3

    ddb = boto3.client("dynamodb")
    job = FlakyCrmSync(_config(table, flush), contacts(10), NotesTable(ddb, notes_table))
    job.fail_ids = frozenset(fail)

    def die_here(**ctx: Any) -> None:
        if ctx["work_id"] == die_after:
            ready.set()
            while True:  # the destination accepted; the outcome is never recorded
                time.sleep(0.05)

    with hooks.on("after_process", die_here):
        job.handler()({"job": JOB, "manual": True, "trigger_id": "doomed"}, None)


def _kill_mid_batch(table: str, notes: NotesTable, flush: str, die_after: str,
                    fail: list[str]) -> None:
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    worker = ctx.Process(target=_worker,
                         args=(table, notes.name, flush, die_after, fail, ready))
    worker.start()
    assert ready.wait(30)
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(10)
    # Wait out the dead worker's lease (plus the skew margin): a deadline, not a race.
    store = DynamoJobStore(table, client=notes.ddb)
    held = store.read_lease(JOB)
    wait_s = (held.expires_at_ms + 200 - to_ms(SystemClock().now())) / 1000 + 0.01
    time.sleep(max(0.0, wait_s))


def _rows(table: str, ddb: Any) -> dict[str, Any]:
    ids = [str(WorkId(c["id"], "create-note")) for c in contacts(10)]
    return DynamoItemStore(table, client=ddb).get_many(JOB, ids)


@pytest.mark.parametrize("flush", ["item", "page"])
def test_killed_after_the_destination_accepted_is_reconciled_not_redone(table, flush):
    import boto3

    ddb = boto3.client("dynamodb")
    notes = NotesTable.create(ddb)
    target = "contact-00002:create-note"
    # GIVEN a worker SIGKILLed right after the destination accepted item 3's note
    _kill_mid_batch(table, notes, flush, die_after=target, fail=[])
    assert notes.find(target) is not None
    assert _rows(table, ddb)[target].state is ItemState.CLAIMED

    # WHEN the next run comes
    job = FlakyCrmSync(_config(table, flush), contacts(10), notes)
    report = job.handler()({"job": JOB, "manual": True, "trigger_id": "next"}, None)

    # THEN item 3 was found at the destination and completed without a second call
    assert target not in notes.calls
    assert report["reconciled"] >= 1
    rows = _rows(table, ddb)
    assert {r.state for r in rows.values()} == {ItemState.COMPLETED}
    written = notes.all()
    assert len(written) == 10 and all(written[w] == r.destination_id for w, r in rows.items())
    assert rows[target].destination_id == written[target]


@pytest.mark.parametrize("flush", ["item", "page"])
def test_partial_batch_failure_resumes_from_the_checkpoint(table, flush):
    import boto3

    ddb = boto3.client("dynamodb")
    notes = NotesTable.create(ddb)
    fail = ["contact-00002", "contact-00006"]  # items 3 and 7
    # GIVEN items 3 and 7 fail and the worker dies after item 5
    _kill_mid_batch(table, notes, flush, die_after="contact-00004:create-note", fail=fail)
    items = DynamoItemStore(table, client=ddb)
    assert items.read_checkpoint(JOB).seq == 0  # the page never finished

    # WHEN the retry runs
    job = FlakyCrmSync(_config(table, flush), contacts(10), notes)
    job.fail_ids = frozenset(fail)
    report = job.handler()({"job": JOB, "manual": True, "trigger_id": "retry"}, None)

    # THEN it resumed from the checkpoint, redid nothing that had reached the destination,
    # and reported the two failures
    done_before = {f"contact-0000{i}:create-note" for i in (0, 1, 3, 4)}
    assert not done_before & set(notes.calls)
    assert Counter(notes.calls).most_common(1)[0][1] == 1
    assert report["failed"] == 2 and report["completed"] + report["reconciled"] + report[
        "already_done"] == 8
    rows = _rows(table, ddb)
    failed = {w for w, r in rows.items() if r.state is ItemState.FAILED}
    assert failed == {"contact-00002:create-note", "contact-00006:create-note"}
    assert all("CRM refused" in (rows[w].last_error or "") for w in failed)
    assert sum(r.state is ItemState.COMPLETED for r in rows.values()) == 8
    assert len(notes.all()) == 8
    checkpoint = items.read_checkpoint(JOB)
    assert (checkpoint.cursor, checkpoint.seq) == ("10", 1)
    (retry,) = [r for r in DynamoJobStore(table, client=ddb).list_runs(JOB)
                if r.trigger_id.endswith("retry")]
    assert retry.extra["failed"] == 2 and retry.status.value == "incomplete"
