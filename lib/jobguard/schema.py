"""The single-table layout, shared by the store, the local emulator setup and the CDK
stack so that they cannot drift.

| item | pk | sk |
|---|---|---|
| lease row (one per job) | ``JOB#<job>`` | ``LEASE`` |
| run record | ``JOB#<job>`` | ``RUN#<run id>`` (run ids sort by start time) |

The lease row also remembers recently decided triggers as ``t:<trigger id>``
attributes (the dedup ledger), so that acquisition and dedup are one conditional write.
"""

from __future__ import annotations

__all__ = [
    "LEASE_SK",
    "PARTITION_KEY",
    "RUN_PREFIX",
    "SORT_KEY",
    "TRIGGER_ATTR_PREFIX",
    "TTL_ATTRIBUTE",
    "job_pk",
    "run_sk",
]

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "ttl_epoch_s"
LEASE_SK = "LEASE"
RUN_PREFIX = "RUN#"
TRIGGER_ATTR_PREFIX = "t:"


def job_pk(job: str) -> str:
    return f"JOB#{job}"


def run_sk(run_id: str) -> str:
    return f"{RUN_PREFIX}{run_id}"
