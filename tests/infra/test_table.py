"""The table: the layout jobguard's store creates locally, plus what only AWS has."""

from __future__ import annotations

from typing import Any

from jobguard.dynamodb import create_table
from jobguard.schema import TTL_ATTRIBUTE, UNRESOLVED_INDEX

from .conftest import Synth


class _RecordingClient:
    """Records the calls ``create_table()`` makes (the local emulators' table)."""

    def __init__(self) -> None:
        self.calls: dict[str, dict[str, Any]] = {}

    def create_table(self, **kwargs: Any) -> None:
        self.calls["create_table"] = kwargs

    def update_time_to_live(self, **kwargs: Any) -> None:
        self.calls["update_time_to_live"] = kwargs

    def get_waiter(self, name: str) -> Any:
        return type("Waiter", (), {"wait": lambda self, **kwargs: None})()


def _local_layout() -> dict[str, dict[str, Any]]:
    client = _RecordingClient()
    create_table(client, "jobguard")
    return client.calls


def _table(synth: Synth) -> dict[str, Any]:
    return synth.properties(synth.stack.table.table)


def test_keys_index_and_billing_are_what_the_store_creates_locally(synth: Synth) -> None:
    # GIVEN the table create_table() makes for the emulators, and the deployed one
    local = _local_layout()["create_table"]
    deployed = _table(synth)
    # THEN keys, attribute types, the sparse index and billing are the same
    assert deployed["KeySchema"] == local["KeySchema"]
    assert sorted(deployed["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
        local["AttributeDefinitions"], key=lambda a: a["AttributeName"])
    assert deployed["BillingMode"] == local["BillingMode"] == "PAY_PER_REQUEST"
    [index] = deployed["GlobalSecondaryIndexes"]
    [local_index] = local["GlobalSecondaryIndexes"]
    assert index["IndexName"] == local_index["IndexName"] == UNRESOLVED_INDEX
    assert index["KeySchema"] == local_index["KeySchema"]
    assert index["Projection"] == {"ProjectionType": "KEYS_ONLY"}


def test_ttl_is_the_attribute_the_store_writes(synth: Synth) -> None:
    local = _local_layout()["update_time_to_live"]["TimeToLiveSpecification"]
    assert _table(synth)["TimeToLiveSpecification"] == local == {
        "AttributeName": TTL_ATTRIBUTE, "Enabled": True}


def test_point_in_time_recovery_and_encryption_are_on(synth: Synth) -> None:
    table = _table(synth)
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["SSESpecification"] == {"SSEEnabled": True}  # AWS managed KMS key


def test_the_table_is_retained_when_the_stack_is_deleted(synth: Synth) -> None:
    resource = synth.resource(synth.stack.table.table)
    assert resource["DeletionPolicy"] == "Retain"
    assert resource["UpdateReplacePolicy"] == "Retain"


def test_one_table_serves_every_job(synth: Synth) -> None:
    table = {"Ref": synth.logical_id(synth.stack.table.table)}
    functions = synth.of_type("AWS::Lambda::Function").values()
    assert [f["Properties"]["Environment"]["Variables"]["JOBGUARD_TABLE"] for f in functions] == [
        table] * len(functions)


def test_every_queue_is_kept_when_the_stack_is_deleted(synth: Synth, drill) -> None:
    """Like the table: a trigger queue holds triggers whose marks are on the lease rows,
    a dead-letter or failed-ticks queue the only copy of a tick waiting to be replayed.
    Every queue of every deployment (production, and the local drill one) is retained."""
    _, drill_template, _ = drill
    for resources in (synth.resources, drill_template["Resources"]):
        queues = {k: v for k, v in resources.items() if v["Type"] == "AWS::SQS::Queue"}
        # per job: schedule DLQ, failed ticks (+ trigger queue and its DLQ when it has
        # one); per reconciler: its schedule DLQ and failed sweeps
        assert len(queues) >= 10
        for logical_id, queue in queues.items():
            assert (queue.get("DeletionPolicy"), queue.get("UpdateReplacePolicy")) == (
                "Retain", "Retain"), logical_id
