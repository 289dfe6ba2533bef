"""The crm-sync handler wired to the in-process emulator: its change feed, its notes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from jobguard import GuardedJob
from jobguard.testing import ManualClock
from jobguard.triggerqueue import TriggerQueue


def _table(ddb: Any, name: str, keys: list[tuple[str, str]]) -> str:
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": k, "KeyType": t} for k, t in keys],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k, _ in keys],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


@pytest.fixture
def crm(aws, monkeypatch):
    """Creates the CRM change feed (3 changes) and the notes table, and returns the
    crm-sync job module with its handler wired to this test's emulator and clock."""
    from handlers import crm_sync

    contacts = _table(aws.ddb, "crm-contacts", [("pk", "HASH"), ("seq", "RANGE")])
    notes = _table(aws.ddb, "crm-notes", [("work_id", "HASH")])
    monkeypatch.setenv(crm_sync.CONTACTS_TABLE, contacts)
    monkeypatch.setenv(crm_sync.NOTES_TABLE, notes)
    for seq in range(1, 4):
        aws.ddb.put_item(TableName=contacts, Item={
            "pk": {"S": "changes"}, "seq": {"S": f"{seq:06d}"},
            "contact_id": {"S": f"contact-{seq}"}, "change": {"S": f"email changed #{seq}"}})
    crm_sync.crm_sync._clients["ddb"] = aws.ddb  # noqa: SLF001 - the test's emulator
    return crm_sync


@pytest.fixture
def crm_sync(aws, crm):
    # The handler module's own job definition, wired to this test's emulator, at a
    # time shortly after the samples' scheduled times.
    original: GuardedJob = crm.lambda_handler
    return GuardedJob(
        original.config, original.handler, store=aws.store,
        queue=TriggerQueue(aws.fifo_queue("crm-sync"), client=aws.sqs),
        clock=ManualClock(datetime.fromisoformat("2026-11-29T07:40:30+00:00")),
    )


RECOVERY_ARN = "arn:aws:lambda:eu-west-1:123456789012:function:JobGuard-RecoveryFunction"
"""The deployed recovery function's ARN, as Lambda hands it to the handler."""


class LambdaContext:
    """What the recovery handler reads of Lambda's context: the ARN it was invoked by
    (the function itself, or ``FUNCTION:QUALIFIER``) and the time left."""

    def __init__(self, *, qualifier: str | None = None, remaining_s: float = 900.0) -> None:
        self.invoked_function_arn = RECOVERY_ARN + (f":{qualifier}" if qualifier else "")
        self.remaining_ms = int(remaining_s * 1000)

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms
