"""Review (branch `review`): the IAM a role is given is derived from *declared* call sites;
these tests record the calls a real run *makes* (every botocore call on the jobguard
table, in process) and check each against what the function's role is derived to get:
the IAM action (one per action type inside a transaction) and the partition key it
touches (``dynamodb:LeadingKeys``, ``ForAllValues:StringLike``).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import botocore.client
import pytest

from handlers.jobs import CRM_SYNC
from jobguard import hooks
from jobguard.callsites import Target, required_actions
from jobguard.cdk.guarded_job import job_paths
from jobguard.cdk.table import leading_keys

EVENTS = Path(__file__).resolve().parents[2] / "events"
_PARTS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
          "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}


def _pk(key: dict[str, Any]) -> str:
    return str(key["pk"]["S"])


def _uses(operation: str, params: dict[str, Any], table: str) -> list[tuple[str, str]]:
    """(IAM action, partition key) pairs of one call on ``table``."""
    out: list[tuple[str, str]] = []
    if operation in ("TransactWriteItems", "TransactGetItems"):
        for action in params["TransactItems"]:
            [(kind, body)] = action.items()
            if body["TableName"] == table:
                key = body.get("Key") or {"pk": body["Item"]["pk"]}
                out.append((f"dynamodb:{_PARTS[kind]}", _pk(key)))
    elif operation == "BatchGetItem":
        for name, request in params["RequestItems"].items():
            if name == table:
                out += [("dynamodb:BatchGetItem", _pk(k)) for k in request["Keys"]]
    elif params.get("TableName") == table and "IndexName" not in params:
        if operation == "Query":
            values = params["ExpressionAttributeValues"]
            out.append(("dynamodb:Query", str(next(iter(values.values()))["S"])))
        elif "Key" in params:
            out.append((f"dynamodb:{operation}", _pk(params["Key"])))
        elif "Item" in params:
            out.append((f"dynamodb:{operation}", _pk(params["Item"])))
        else:
            out.append((f"dynamodb:{operation}", "?"))
    return out


@contextmanager
def recording(table: str) -> Iterator[list[tuple[str, str]]]:
    calls: list[tuple[str, str]] = []
    original = botocore.client.BaseClient._make_api_call

    def spy(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name == "dynamodb":
            calls.extend(_uses(operation, params, table))
        return original(self, operation, params)

    botocore.client.BaseClient._make_api_call = spy  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]


def _denied(calls: list[tuple[str, str]], actions: tuple[str, ...], jobs: list[str]
            ) -> list[tuple[str, str]]:
    patterns = leading_keys(jobs)
    return sorted({(a, k) for a, k in calls
                   if a not in actions or not any(fnmatch.fnmatchcase(k, p) for p in patterns)})


def test_a_crm_sync_run_makes_only_calls_its_role_allows(aws, crm_sync, monkeypatch):
    """Holds: a production run (no drills) stays within its derived role."""
    tick = json.loads((EVENTS / "scheduler-tick.json").read_text())
    with recording(aws.table) as calls:
        crm_sync(tick, None)
    assert calls
    assert _denied(calls, required_actions(job_paths(CRM_SYNC), Target.TABLE),
                   ["crm-sync"]) == []


def test_a_drill_deployments_run_makes_only_calls_its_role_allows(aws, crm_sync, monkeypatch):
    """DEFECT: in a drills deployment (JOBGUARD_DRILLS=1, the drill switches in the asset)
    every hook point queries the job's partition for switch rows (`switches._rows`:
    dynamodb:Query on the table). The drills stack's roles are the production roles:
    no dynamodb:Query on the table. On AWS (a drills account, `jobguard drill --profile
    ...`) the first hook (`after_acquire`) raises AccessDenied and every run fails;
    neither emulator enforces IAM, so `make demo` cannot see it."""
    from jobguard.drill import switches

    monkeypatch.setenv("JOBGUARD_TABLE", aws.table)
    monkeypatch.setenv("JOBGUARD_DRILLS", "1")
    saved = {k: list(v) for k, v in hooks._hooks.items()}  # noqa: SLF001
    try:
        switches.install("crm-sync")
        tick = json.loads((EVENTS / "scheduler-tick.json").read_text())
        with recording(aws.table) as calls:
            crm_sync(tick, None)
    finally:
        hooks._hooks.clear()  # noqa: SLF001
        hooks._hooks.update(saved)  # noqa: SLF001
        switches._installed.discard("crm-sync")  # noqa: SLF001
    # a drills deployment adds exactly the switch rows' Query on the job's own keys
    # (jobguard.cdk.table.JobTable.grant_drill_switches; tests/infra/test_drills.py)
    denied = _denied(calls, required_actions(job_paths(CRM_SYNC), Target.TABLE),
                     ["crm-sync"])
    assert set(denied) <= {("dynamodb:Query", "JOB#crm-sync")}, denied
    assert ("dynamodb:Query", "JOB#crm-sync") in denied  # the switches were read


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
