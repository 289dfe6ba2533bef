"""jobguard: make scheduled AWS Lambda jobs safe when two runs meet.

Example:
    >>> from datetime import timedelta
    >>> from jobguard import OverlapPolicy, current_run, guarded
    >>> @guarded("crm-sync", policy=OverlapPolicy.COALESCE, lease=timedelta(minutes=5))
    ... def lambda_handler(event, context):
    ...     run = current_run()
    ...     run.ensure_lease()
    ...     return {"synced": 0}
"""

from . import _launch  # noqa: F401 - first: `python -m jobguard.cli` drops the cwd here
from ._clients import client as aws_client
from .batch import BatchJob, BatchReport, ClaimedItem, Page
from .clock import Clock, SystemClock
from .config import JobConfig, OverlapPolicy
from .errors import ConfigError, InvalidTriggerError, JobGuardError, LeaseLostError, StoreError
from .guard import GuardedJob, guarded
from .lease import LeaseState
from .records import Decision, Outcome, RunRecord, RunStatus
from .run import Run, current_run
from .triggers import Trigger, TriggerKind
from .workitems import ItemRecord, ItemState, OutcomeUnknown, WorkId

__all__ = [
    "BatchJob",
    "BatchReport",
    "ClaimedItem",
    "Clock",
    "ConfigError",
    "Decision",
    "GuardedJob",
    "InvalidTriggerError",
    "ItemRecord",
    "ItemState",
    "JobConfig",
    "JobGuardError",
    "LeaseLostError",
    "LeaseState",
    "OutcomeUnknown",
    "OverlapPolicy",
    "Outcome",
    "Page",
    "Run",
    "RunRecord",
    "RunStatus",
    "StoreError",
    "SystemClock",
    "Trigger",
    "TriggerKind",
    "WorkId",
    "aws_client",
    "current_run",
    "guarded",
]

__version__ = "0.1.0"
