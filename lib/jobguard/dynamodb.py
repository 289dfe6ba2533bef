"""The DynamoDB job store: leases, trigger items and run records.

Every state change is one conditional write or one transaction, conditioned on the
exact value it replaces (the lease row's run id and fence, a trigger item's state and
run id), and every failed condition returns the item it failed against
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so the caller decides again from
what is there without a second read.

Timeline of one job's lease row::

    free ──acquire(fence f→f+1)──► held by R1 ──renew──► held ──release──► free (fence kept)
                                      │                                     ▲
                                      └─ expired > skew ──takeover(f+1→f+2)─┘ (R1's trigger
                                         ``lost`` and its record ``abandoned``, same
                                         transaction)

An acquisition is one transaction: the lease row (``fence = f`` → ``f + 1``), the fence
high-water mark (``hw <= f`` → ``f + 1``: a damaged or deleted lease row can never lower
the next fence), the trigger's own item (the state observed → ``running``) and, on a
takeover, the displaced run's trigger and record. The fence ``f`` is known before the
write (the last fence this process saw, else one consistent read), so the run knows its
fence without reading it back.

The store is composed of one part per record kind, each its own module with its own
reason to change: the lease row taken and kept (:mod:`jobguard._store_lease`) and given
up (:mod:`jobguard._store_release`), the operator's commands on it
(:mod:`jobguard._store_operator`), trigger items (:mod:`jobguard._store_triggers`), run
records (:mod:`jobguard._store_runs`), and what they share: keys, row readers,
conditions, the transaction (:mod:`jobguard._store_table`). This module composes them
into :class:`DynamoJobStore` and keeps every name it had importable.
"""

from __future__ import annotations

from ._store_lease import ACQUIRE, RENEW, SET_WAKE, LeaseRows, _error_text, _follow_up_gate
from ._store_operator import FORCE_RELEASE, PAUSE, REPAIR, RESUME, OperatorCommands
from ._store_release import HAND_OFF, RELEASE, LeaseRelease
from ._store_runs import GET_RUN, LIST_RUNS, PUT_RUN, RUNS_BETWEEN
from ._store_table import (
    _CLOCK_OFFSET_MS,
    _HOLD_ATTRS,
    _HOLDER_ATTRS,
    _LAMBDA_MAX_RUN_MS,
    _RETRYABLE_REASONS,
    READ_LEASE,
    READ_TRIGGER,
    _fences,
    create_table,
    lease_state,
    run_record,
    trigger_record,
)
from ._store_triggers import RECORD_DECISION, UNDO_QUEUED
from .lease import Acquired, Busy, Released
from .trigger_state import Refused

__all__ = ["Acquired", "Busy", "DynamoJobStore", "Refused", "Released", "create_table",
           "lease_state", "trigger_record"]

# Names this module defined before its split, importable from it as before (the call
# sites, the fence cache the explorer clears, the row readers).
_MOVED = (ACQUIRE, READ_LEASE, RENEW, RELEASE, HAND_OFF, SET_WAKE, PAUSE, RESUME,
          FORCE_RELEASE, REPAIR, RECORD_DECISION, UNDO_QUEUED, PUT_RUN, LIST_RUNS,
          RUNS_BETWEEN, GET_RUN, READ_TRIGGER, _fences, _RETRYABLE_REASONS, _HOLDER_ATTRS,
          _HOLD_ATTRS, _LAMBDA_MAX_RUN_MS, _CLOCK_OFFSET_MS, _error_text, _follow_up_gate,
          run_record)


class DynamoJobStore(LeaseRows, LeaseRelease, OperatorCommands):
    """Leases, trigger items and run records for any number of jobs in one table.

    Each record kind's transitions come from its own part: the lease row taken and kept
    (:class:`~jobguard._store_lease.LeaseRows`) and given up
    (:class:`~jobguard._store_release.LeaseRelease`), the operator's commands
    (:class:`~jobguard._store_operator.OperatorCommands`), trigger items
    (:class:`~jobguard._store_triggers.TriggerItems`) and run records
    (:class:`~jobguard._store_runs.RunRecords`), all over the table's keys, reads and
    transactions (:class:`~jobguard._store_table.StoreTable`).

    Example:
        >>> import boto3
        >>> store = DynamoJobStore("jobguard", client=boto3.client("dynamodb"))
        ... # doctest: +SKIP
    """
