"""The single-table layout, shared by the store, the local emulator setup and the CDK
stack so that they cannot drift.

| item | pk | sk |
|---|---|---|
| lease row (one per job) | ``JOB#<job>`` | ``LEASE`` |
| run record | ``JOB#<job>`` | ``RUN#<run id>`` (run ids sort by start time) |
| trigger (one per trigger, TTL'd) | ``JOB#<job>`` | ``TRIGGER#<trigger id>`` |
| job row: fence mark, checkpoint, open claim (one per job) | ``JOB#<job>`` | ``FENCE`` |
| work item: a completion, or a failed / uncertain row | ``ITEM#<job>#<work id>`` | ``ITEM`` |

(One partition per work item: no hot key.)

The sparse index ``unresolved`` (keys only) holds failed and uncertain items:
``UNRESOLVED#<job>#<shard 00-15>`` / ``<state>#<work id>``; a completion replaces the row
and leaves it. Claimed items are the open claim on the job row (at most one per job).

The lease row holds a fixed set of attributes (its size never grows with the trigger
history); each trigger's state is an item of its own, written in the same transaction
as the lease when they change together (:mod:`jobguard.trigger_state`). The fence
high-water mark moves with every fence the lease row issues, in the same transaction,
so a damaged or deleted lease row can never lower the next fence; the checkpoint and
the open claim live beside it, so a write of them conditioned on the run's fence is
refused from the moment a higher fence is issued (:mod:`jobguard.dynamodb_items`).
"""

from __future__ import annotations

__all__ = [
    "ITEM_SK",
    "LEASE_SK",
    "PARTITION_KEY",
    "RUN_PREFIX",
    "SORT_KEY",
    "FENCE_SK",
    "TRIGGER_PREFIX",
    "TTL_ATTRIBUTE",
    "UNRESOLVED_INDEX",
    "UNRESOLVED_PK",
    "UNRESOLVED_SHARDS",
    "UNRESOLVED_SK",
    "item_pk",
    "job_pk",
    "unresolved_pk",
    "run_sk",
    "trigger_sk",
]

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "ttl_epoch_s"
LEASE_SK = "LEASE"
RUN_PREFIX = "RUN#"
TRIGGER_PREFIX = "TRIGGER#"
FENCE_SK = "FENCE"
ITEM_SK = "ITEM"
UNRESOLVED_INDEX = "unresolved"
UNRESOLVED_PK = "unresolved_pk"
UNRESOLVED_SK = "unresolved_sk"
UNRESOLVED_SHARDS = 16


def job_pk(job: str) -> str:
    return f"JOB#{job}"


def item_pk(job: str, work_id: str) -> str:
    return f"ITEM#{job}#{work_id}"


def unresolved_pk(job: str, shard: str) -> str:
    """The ``unresolved`` index's partition of ``job``'s shard ``shard`` (``00``-``15``;
    ``*`` in an IAM key pattern: every shard of the job)."""
    return f"UNRESOLVED#{job}#{shard}"


def run_sk(run_id: str) -> str:
    return f"{RUN_PREFIX}{run_id}"


def trigger_sk(trigger_id: str) -> str:
    return f"{TRIGGER_PREFIX}{trigger_id}"
