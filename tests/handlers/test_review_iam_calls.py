"""Review (branch `review`): the IAM a role is given is derived from *declared* call sites;
these tests record the calls a real run *makes* (every botocore call on the jobguard
table and its ``unresolved`` index, in process) and check each against what the
function's role is derived to get: the IAM action (one per action type inside a
transaction) on the table or the index, and the partition key it touches
(``dynamodb:LeadingKeys``, ``ForAllValues:StringLike``; on the index, the index's own
partition key, which the statement also requires present).
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

from handlers.jobs import CRM_SYNC, REPORT_EXPORT
from jobguard import hooks
from jobguard.callsites import Target, required_actions
from jobguard.cdk.guarded_job import job_paths
from jobguard.cdk.table import index_leading_keys, leading_keys
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.lease import Acquired
from jobguard.requests import Take
from jobguard.schema import PARTITION_KEY, UNRESOLVED_PK
from jobguard.triggers import Trigger, TriggerKind
from jobguard.workitems import Commit, Fence, ItemState, Unresolved

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
            out.append(("dynamodb:Query", _queried(params, PARTITION_KEY)))
        elif "Key" in params:
            out.append((f"dynamodb:{operation}", _pk(params["Key"])))
        elif "Item" in params:
            out.append((f"dynamodb:{operation}", _pk(params["Item"])))
        else:
            out.append((f"dynamodb:{operation}", "?"))
    return out


def _queried(params: dict[str, Any], key: str) -> str:
    """The partition key value a Query's key condition names for attribute ``key``."""
    names = params.get("ExpressionAttributeNames", {})
    for clause in params["KeyConditionExpression"].split(" AND "):
        left, _, right = (part.strip() for part in clause.partition("="))
        if names.get(left, left) == key:
            return str(params["ExpressionAttributeValues"][right]["S"])
    raise AssertionError(f"no condition on {key}: {params['KeyConditionExpression']}")


def _index_uses(operation: str, params: dict[str, Any], table: str) -> list[tuple[str, str]]:
    """(IAM action, index partition key) pairs of one call on ``table``'s index."""
    if params.get("TableName") != table or "IndexName" not in params:
        return []
    assert operation == "Query", operation  # a Scan names no key: no role has one
    return [("dynamodb:Query", _queried(params, UNRESOLVED_PK))]


@contextmanager
def recording(table: str, index: list[tuple[str, str]] | None = None
              ) -> Iterator[list[tuple[str, str]]]:
    """The table calls made inside, as (IAM action, partition key); the index's calls
    go to ``index`` when given."""
    calls: list[tuple[str, str]] = []
    original = botocore.client.BaseClient._make_api_call

    def spy(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name == "dynamodb":
            calls.extend(_uses(operation, params, table))
            if index is not None:
                index.extend(_index_uses(operation, params, table))
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


def _index_denied(calls: list[tuple[str, str]], actions: tuple[str, ...], jobs: list[str]
                  ) -> list[tuple[str, str]]:
    """The index calls the role of ``jobs`` refuses: an action it lacks, or a partition
    key that matches none of its index patterns (or no key at all: ``Null`` false)."""
    patterns = index_leading_keys(jobs)
    return sorted({(a, k) for a, k in calls
                   if a not in actions or not k
                   or not any(fnmatch.fnmatchcase(k, p) for p in patterns)})


def test_a_jobs_index_query_of_another_jobs_partition_is_denied_its_own_allowed(aws):
    """Who may write the table: the ``unresolved`` index names every job's failed work
    ids, one partition per job and shard. GIVEN report-export's role (a job that takes
    up its own earlier unfinished periods: the sweep's index query) and failed items of
    report-export, crm-sync and report-export-eu (a name report-export is a prefix of)
    WHEN the sweep's code lists each job's unresolved items THEN report-export's own
    index queries are allowed and every query of another job's partitions is denied."""
    items = DynamoItemStore(aws.table, client=aws.ddb)
    jobs = ("report-export", "crm-sync", "report-export-eu")
    for job in jobs:  # each job's run failed one item (written under its fence)
        held = aws.store.take(Take(Trigger(job, f"{job}@manual:m", TriggerKind.MANUAL),
                                   run_id=f"R-{job}", owner="w", now_ms=1_000, lease_ms=600_000))
        assert isinstance(held, Acquired)
        rows = (Unresolved(f"{job}-secret:export", ItemState.FAILED, error="down"),)
        items.commit(Fence(job, f"R-{job}", held.fence),
                     Commit(expected=items.read_row(job), rows=rows), now_ms=1_000)
    actions = required_actions(job_paths(REPORT_EXPORT), Target.INDEX)
    assert actions == ("dynamodb:Query",)
    queried: dict[str, list[tuple[str, str]]] = {}
    for job in jobs:
        index: list[tuple[str, str]] = []
        with recording(aws.table, index):
            listed = items.unresolved(job, states=[ItemState.FAILED])
        # (no emulator enforces IAM: each listing names the job's failed work id)
        assert [r.work_id for r in listed] == [f"{job}-secret:export"]
        queried[job] = index
    # every shard of the job's failed items, one query each
    assert sorted(k for _, k in queried["report-export"]) == [
        f"UNRESOLVED#report-export#{shard:02d}" for shard in range(16)]
    assert _index_denied(queried["report-export"], actions, ["report-export"]) == []
    for other in ("crm-sync", "report-export-eu"):
        denied = _index_denied(queried[other], actions, ["report-export"])
        assert denied == sorted(set(queried[other])) and len(denied) == 16, other
    # a job without the sweep path may query no index partition, not even its own
    assert required_actions(job_paths(CRM_SYNC), Target.INDEX) == ()


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
