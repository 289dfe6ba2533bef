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

# isort: off
# First, before anything else is imported (the standard library's `typing` included):
# `python -m jobguard.cli` drops the working folder from sys.path here.
from . import _launch  # noqa: F401
# isort: on

from typing import TYPE_CHECKING, Any

from ._clients import client as aws_client
from .clock import Clock, SystemClock
from .config import JobConfig, OverlapPolicy
from .errors import ConfigError, InvalidTriggerError, JobGuardError, LeaseLostError, StoreError
from .guard import GuardedJob, guarded
from .hooks import provide_run as _provide_run
from .lease import LeaseState
from .records import Decision, Outcome, RunRecord, RunStatus
from .run import Run, current_run
from .run import active_run as _active_run
from .triggers import Trigger, TriggerKind

# The composition root: code below the runtime (a destination helper's hook point) asks
# jobguard.hooks for the run it is called in, and the runtime's lookup answers.
_provide_run(_active_run)

if TYPE_CHECKING:
    from .batch import BatchJob, BatchReport, ClaimedItem, Page
    from .workitems import ItemRecord, ItemState, OutcomeUnknown, WorkId

_LAZY = {
    "BatchJob": "batch", "BatchReport": "batch", "ClaimedItem": "batch", "Page": "batch",
    "ItemRecord": "workitems", "ItemState": "workitems", "OutcomeUnknown": "workitems",
    "WorkId": "workitems",
}
"""Names imported when first asked for: a guarded handler that claims no work items
never loads the ledger's modules on its cold start (``tests/unit/test_cold_path.py``)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

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
