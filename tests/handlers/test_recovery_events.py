"""The recovery Lambda, fed the samples in events/recovery/ (a plan, an execution, and
a refused request), against the crm-sync job registered by its own module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobguard import ItemState
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.recovery import EXECUTE_ALIAS

from .conftest import LambdaContext

SAMPLES = Path(__file__).resolve().parents[2] / "events" / "recovery"


@pytest.fixture
def recovery(aws, crm, monkeypatch):
    from jobguard.functions import recovery

    monkeypatch.setenv("JOBGUARD_TABLE", aws.table)
    monkeypatch.setenv("JOBGUARD_RECOVERY_MODULES", "handlers.crm_sync")
    crm.crm_sync._guard_options = {"store": aws.store}  # noqa: SLF001 - this emulator
    return recovery


def sample(name: str) -> dict:
    return json.loads((SAMPLES / name).read_text())


def test_every_recovery_sample_is_exercised():
    assert {p.name for p in SAMPLES.glob("*.json")} == {
        "dry-run.json", "execute.json", "unbounded.json"}


def test_plan_then_execute_through_the_handler(aws, crm, recovery):
    plan = recovery.lambda_handler(sample("dry-run.json"), LambdaContext())
    assert plan["result"] == "planned" and plan["plan"]["never_attempted"] == 3
    assert aws.runs("crm-sync") == []  # a plan writes nothing

    # an execution comes through the function's execute alias
    done = recovery.lambda_handler(sample("execute.json"),
                                   LambdaContext(qualifier=EXECUTE_ALIAS))
    assert done["result"] == "executed" and done["summary"]["replayed"] == 3
    (run,) = aws.runs("crm-sync")
    assert run.trigger_kind == "recovery" and run.requested_by == "alice@example.com"
    ids = [f"contact-{i}@{i:06d}:create-note" for i in range(1, 4)]
    rows = DynamoItemStore(aws.table, client=aws.ddb).get_many("crm-sync", ids)
    assert {r.state for r in rows.values()} == {ItemState.COMPLETED}
    # the recovery never moved the scheduled checkpoint
    assert DynamoItemStore(aws.table, client=aws.ddb).read_checkpoint("crm-sync").seq == 0


def test_an_unbounded_request_is_refused_naming_the_field(aws, crm, recovery):
    answer = recovery.lambda_handler(sample("unbounded.json"), None)
    assert answer["result"] == "refused" and answer["field"] == "cursor_to"
    assert aws.item_count() == 0
