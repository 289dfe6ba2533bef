"""The single-table layout, shared by the store, the local emulator setup and the CDK
stack so that they cannot drift.

| item | pk | sk |
|---|---|---|
| lease row (one per job) | ``JOB#<job>`` | ``LEASE`` |
| run record | ``JOB#<job>`` | ``RUN#<run id>`` (run ids sort by start time) |
| checkpoint (one per job) | ``JOB#<job>`` | ``CHECKPOINT`` |
| work item | ``ITEM#<job>#<work id>`` | ``ITEM`` (one partition per item: no hot key) |

The sparse index ``unresolved`` (keys only) holds claimed, failed and uncertain items:
``UNRESOLVED#<job>#<shard 00-15>`` / ``<state>#<work id>``; completed items leave it.

The lease row also remembers recently decided triggers as ``t:<trigger id>``
attributes (the dedup ledger), so that acquisition and dedup are one conditional write.
"""

from __future__ import annotations

__all__ = [
    "CHECKPOINT_SK",
    "ITEM_SK",
    "LEASE_SK",
    "PARTITION_KEY",
    "RUN_PREFIX",
    "SORT_KEY",
    "TRIGGER_ATTR_PREFIX",
    "TTL_ATTRIBUTE",
    "UNRESOLVED_INDEX",
    "UNRESOLVED_PK",
    "UNRESOLVED_SHARDS",
    "UNRESOLVED_SK",
    "item_pk",
    "job_pk",
    "run_sk",
]

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "ttl_epoch_s"
LEASE_SK = "LEASE"
RUN_PREFIX = "RUN#"
TRIGGER_ATTR_PREFIX = "t:"
CHECKPOINT_SK = "CHECKPOINT"
ITEM_SK = "ITEM"
UNRESOLVED_INDEX = "unresolved"
UNRESOLVED_PK = "unresolved_pk"
UNRESOLVED_SK = "unresolved_sk"
UNRESOLVED_SHARDS = 16


def job_pk(job: str) -> str:
    return f"JOB#{job}"


def item_pk(job: str, work_id: str) -> str:
    return f"ITEM#{job}#{work_id}"


def run_sk(run_id: str) -> str:
    return f"{RUN_PREFIX}{run_id}"
