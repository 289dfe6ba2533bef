"""Environment variables jobguard reads, in one place.

The CDK stack sets every one a function needs; a test reads both this list and the
synthesized template, so a variable cannot be added on one side only.
"""

from __future__ import annotations

__all__ = ["JOB_FUNCTION", "JOB_NAME", "RECONCILER_FUNCTION", "RECOVERY_CONFIRM_ABOVE",
           "RECOVERY_FUNCTION", "RECOVERY_MODULES", "TABLE", "TRIGGER_QUEUE_URL"]

TABLE = "JOBGUARD_TABLE"
"""The DynamoDB table (leases, run records, the item ledger, checkpoints)."""

TRIGGER_QUEUE_URL = "JOBGUARD_TRIGGER_QUEUE_URL"
"""The job's SQS FIFO trigger queue (QUEUE and COALESCE jobs)."""

RECOVERY_MODULES = "JOBGUARD_RECOVERY_MODULES"
"""Comma-separated modules the recovery and reconciler functions import; each registers
its BatchJob(s) with one line (``jobguard.registry.register``)."""

RECOVERY_CONFIRM_ABOVE = "JOBGUARD_RECOVERY_CONFIRM_ABOVE"
"""Optional: recovery plans larger than this many items need the dry run's token
(default 100)."""

JOB_NAME = "JOBGUARD_JOB"
"""The job a reconciler function sweeps."""

JOB_FUNCTION = (TABLE, TRIGGER_QUEUE_URL)
"""Read by a guarded job's function (the queue only for QUEUE/COALESCE jobs)."""

RECOVERY_FUNCTION = (TABLE, RECOVERY_MODULES)
RECONCILER_FUNCTION = (TABLE, RECOVERY_MODULES, JOB_NAME)
