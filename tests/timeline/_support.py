"""Run records written into the timeline tests' table (``conftest.env``) as a run
would write them."""

from __future__ import annotations

from typing import Any

from jobguard.dynamodb import DynamoJobStore
from jobguard.ids import new_run_id
from jobguard.records import Decision, RunRecord, RunStatus


def put_run(store: DynamoJobStore, at_ms: int, **fields: Any) -> RunRecord:
    """A crm-sync run record starting at ``at_ms`` (5 s long, succeeded, fence 1 unless
    ``fields`` say otherwise), written to the run log."""
    record = RunRecord(**{
        "job": "crm-sync", "run_id": new_run_id(at_ms), "trigger_id": "crm-sync@t",
        "trigger_kind": "tick", "policy": "COALESCE", "decision": Decision.RAN,
        "status": RunStatus.SUCCEEDED, "started_at_ms": at_ms, "ended_at_ms": at_ms + 5_000,
        "fence": 1, **fields})
    store.put_run(record, ttl_epoch_s=at_ms // 1000 + 86_400)
    return record
