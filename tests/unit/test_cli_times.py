"""Issue 16 item 8: no raw epoch milliseconds (or seconds) and no Python dicts in any
output of the operator commands, and every time with its timezone; here on a job with
a coalesced trigger, a follow-up run and a failed item, in every output format."""

from __future__ import annotations

import contextlib
import io
import json
import re
from datetime import timedelta
from typing import Any

import pytest

from jobguard import OverlapPolicy, WorkId, aws_client, current_run, guarded
from jobguard.cli import main
from jobguard.destinations import DynamoDBDestination
from jobguard.errors import LeaseBusyError

RAW = re.compile(r"\b1[0-9]{12}\b|\b1[0-9]{9}\b|\{'|datetime\.")
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?P<zone>Z|[+-]\d{2}:?\d{2})?")


@pytest.fixture
def job(jobguard_sandbox, monkeypatch) -> Any:
    monkeypatch.delenv("JOBGUARD_JOBS_MODULE", raising=False)
    DynamoDBDestination.create_table(jobguard_sandbox.client("dynamodb"), "cli-notes")

    @guarded("crm-sync", policy=OverlapPolicy.COALESCE, lease=timedelta(minutes=2))
    def handler(event: Any, context: Any) -> Any:
        run = current_run()
        notes = DynamoDBDestination("cli-notes", client=aws_client("dynamodb"))
        for item in run.claim(["a", "b"], work_id=lambda r: WorkId(r, "note"),
                              reconcile=lambda r, row: notes.reconcile(row.work_id)):
            with item:
                if item.record == "b":
                    raise RuntimeError("refused by the destination")
                item.complete(destination_id=notes.put(item.key, {"n": 1}))
        return run.stats

    wired = jobguard_sandbox.wire(handler)
    with wired.holding(jobguard_sandbox.minute() - timedelta(minutes=1)):
        wired.tick()  # the next minute's tick, during the run
    assert wired.deliver_queued() == 1
    return wired


def _cli(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main([*argv, "--jobs-module", "handlers.jobs"]) == 0, err.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("output", ["table", "json", "text"])
def test_no_raw_epoch_time_or_dict_and_every_time_has_its_zone(job, output) -> None:
    run_id = job.runs()[0].run_id
    for argv in (["status", "crm-sync"], ["runs", "crm-sync"], ["run", run_id],
                 ["items", "crm-sync"], ["runbook", "crm-sync"]):
        text = _cli(*argv, "--output", output)
        assert text.strip(), argv
        assert not RAW.findall(text), (argv, RAW.findall(text), text[:2000])
        for found in ISO.finditer(text):
            assert found.group("zone"), (argv, found.group(0))
    # the item ledger and the runs in status carry their times as *_at, in ISO
    items = json.loads(_cli("items", "crm-sync", "--output", "json"))
    assert items and items[0]["state"] == "failed" and items[0]["updated_at"].endswith("Z")
    status = json.loads(_cli("status", "crm-sync", "--output", "json"))
    assert all(r["started_at"].endswith("Z") for r in status["last_runs"])


def test_a_busy_lease_is_named_with_its_time_in_iso() -> None:
    message = str(LeaseBusyError("crm-sync", "01M8", 1_796_163_923_456))
    assert "until 2026-12-01T" in message and message.count("Z") == 1
    assert not RAW.findall(message)
