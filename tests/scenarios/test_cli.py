"""The `jobguard` command end to end: subprocesses against the emulator server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobguard.dynamodb import DynamoJobStore
from jobguard.requests import Take
from jobguard.triggers import Trigger, TriggerKind

pytestmark = pytest.mark.server
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cli(server, table):
    import boto3

    ddb = boto3.client("dynamodb")
    suffix = table.rsplit("-", 1)[1]
    contacts, notes = f"crm-contacts-{suffix}", f"crm-notes-{suffix}"
    for name, keys in ((contacts, [("pk", "HASH"), ("seq", "RANGE")]),
                       (notes, [("work_id", "HASH")])):
        ddb.create_table(
            TableName=name, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": k, "KeyType": t} for k, t in keys],
            AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k, _ in keys])
    for seq in range(1, 6):
        ddb.put_item(TableName=contacts, Item={
            "pk": {"S": "changes"}, "seq": {"S": f"{seq:06d}"},
            "contact_id": {"S": f"contact-{seq}"}, "change": {"S": f"change {seq}"}})
    env = {**os.environ, **server, "JOBGUARD_TABLE": table, "CRM_CONTACTS_TABLE": contacts,
           "CRM_NOTES_TABLE": notes, "JOBGUARD_RECOVERY_MODULES": "handlers.crm_sync",
           "JOBGUARD_JOBS_MODULE": "handlers.jobs"}  # runbook: the example definitions

    def run(*args: str, expect: int = 0) -> Any:
        proc = subprocess.run([sys.executable, "-m", "jobguard.cli", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert proc.returncode == expect, proc.stderr
        if expect:
            return proc.stderr
        return json.loads(proc.stdout) if "--json" in args else proc.stdout

    run.ddb = ddb  # type: ignore[attr-defined]
    run.notes = notes  # type: ignore[attr-defined]
    return run


def test_operate_a_job_from_the_command_line(cli, table):
    store = DynamoJobStore(table, client=cli.ddb)
    # plan, then execute, a recovery of the whole feed
    plan = cli("--json", "recover", "crm-sync", "--from", "000000", "--to", "000005", "--direct")
    assert plan["result"] == "planned" and plan["plan"]["never_attempted"] == 5
    done = cli("--json", "recover", "crm-sync", "--from", "000000", "--to", "000005",
               "--direct", "--execute", "--confirm", plan["plan"]["token"])
    assert done["summary"]["replayed"] == 5
    assert cli.ddb.scan(TableName=cli.notes, Select="COUNT")["Count"] == 5

    runs = cli("--json", "runs", "crm-sync")
    assert [r["trigger_kind"] for r in runs] == ["recovery"]
    one = cli("--json", "run", runs[0]["run_id"])
    assert one["recovery_replayed"] == 5 and one["status"] == "succeeded"
    assert "recovery" in cli("runs", "crm-sync")  # the human table

    status = cli("--json", "status", "crm-sync")
    assert status["held"] is False and status["fence"] == 1
    assert cli("--json", "items", "crm-sync") == []

    assert cli("--json", "pause", "crm-sync", "--reason", "CRM maintenance")["paused"]
    assert cli("--json", "status", "crm-sync")["paused"] == "CRM maintenance"
    cli("--json", "resume", "crm-sync")
    assert cli("--json", "status", "crm-sync")["paused"] is None

    # a stuck holder: released by hand, and fenced out
    stuck = store.take(Take(Trigger("crm-sync", "crm-sync@manual:stuck", TriggerKind.MANUAL),
                            run_id="STUCK", owner="gone", now_ms=10**13, lease_ms=10**9, skew_ms=0))
    assert stuck.fence == 2
    released = cli("--json", "release", "crm-sync", "--force", "--yes")
    assert released == {"job": "crm-sync", "released": True, "old_run_id": "STUCK", "fence": 3}
    assert store.renew("crm-sync", run_id="STUCK", fence=2, now_ms=1, lease_ms=1) is False

    text = cli("runbook", "crm-sync")
    assert "policy: **COALESCE**" in text and "jobguard recover crm-sync" in text
    assert cli("--json", "runbook", "crm-sync")["job"] == "crm-sync"


# The full table of bad arguments is in tests/unit/test_bad_input.py (in process); here a
# few go through the real command, its exit status and its stderr.
@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("runs", "crm#sync"), "JOB"),
        (("recover", "crm-sync", "--from", "5", "--to", "1", "--direct"), "--to"),
        (("recover", "crm-sync", "--from", "0", "--to", "9", "--mode", "all"), "--mode"),
        (("run", "NO-SUCH-RUN"), "RUN_ID"),
    ],
)
def test_bad_arguments_name_the_field_and_write_nothing(cli, table, args, field):
    before = cli.ddb.scan(TableName=table, Select="COUNT")["Count"]
    stderr = cli(*args, expect=2)
    assert stderr.startswith(f"error: {field}:"), stderr
    assert cli.ddb.scan(TableName=table, Select="COUNT")["Count"] == before

