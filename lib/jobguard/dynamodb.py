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
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ._dynamo import Expr as _Expr
from ._dynamo import code as _code
from ._dynamo import item as _item
from ._dynamo import old_item as _old_item
from ._dynamo import plain as _plain
from ._dynamo import reasons as _reasons
from ._dynamo import transient
from ._run_rows import read_run_row
from .callsites import RETRY, SURFACE, Path, call_site
from .errors import DamagedRowError, StoreError
from .ids import run_id_bounds
from .lease import Acquired, Busy, HandOff, LeaseState, Released, backoff, parse_lease
from .records import DamagedRun, Decision, RunLog, RunOrigin, RunRecord, RunStatus
from .requests import Acquisition, DecisionWrite, ForceRelease, Release, Take
from .schema import (
    FENCE_SK,
    LEASE_SK,
    PARTITION_KEY,
    RUN_PREFIX,
    SORT_KEY,
    TRIGGER_PREFIX,
    TTL_ATTRIBUTE,
    UNRESOLVED_INDEX,
    UNRESOLVED_PK,
    UNRESOLVED_SK,
    job_pk,
    run_sk,
    trigger_sk,
)
from .trigger_state import TERMINAL, Next, Refused, Route, State, TriggerRecord

__all__ = ["Acquired", "Busy", "DynamoJobStore", "Refused", "Released", "create_table",
           "lease_state", "trigger_record"]


def lease_state(job: str, item: dict[str, Any] | None) -> LeaseState:
    """Read a lease row (DynamoDB JSON) as a :class:`LeaseState` (damage refused)."""
    return parse_lease(job, _plain(item) if item else None)


def trigger_record(job: str, item: dict[str, Any] | None) -> TriggerRecord | None:
    """Read a trigger item (DynamoDB JSON); None when absent."""
    if not item:
        return None
    row = _plain(item)
    sk = str(row.get(SORT_KEY, ""))
    trigger_id = sk[len(TRIGGER_PREFIX):]
    policy = row.get("policy")
    try:
        return TriggerRecord(
            trigger_id=trigger_id, state=State(row["state"]), route=Route(row["route"]),
            run_id=row.get("run_id"), fence=row.get("fence"), at_ms=int(row.get("at_ms", 0)),
            ttl_epoch_s=int(row.get(TTL_ATTRIBUTE, 0)), gate_fence=row.get("gate_fence"),
            into=row.get("into"), ended_by=row.get("ended_by"), kind=row.get("kind"),
            origin=RunOrigin(policy=policy, requested_by=row.get("requested_by"),
                             scheduled_at=row.get("scheduled_at"),
                             delivery_id=row.get("delivery_id"))
            if isinstance(policy, str) else None,
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise DamagedRowError(job, sk, str(exc).strip("'\""), "is missing or invalid",
                              f"jobguard triggers {job} --forget {trigger_id}") from None


def run_record(item: dict[str, Any]) -> RunRecord:
    """A run-log row (DynamoDB JSON) as a run record.

    Raises:
        ValueError: the row is not a readable run record (the message names its key and
            each problem); readers that must go on use :func:`read_run_row`.
    """
    read = read_run_row(item)
    if isinstance(read, DamagedRun):
        raise ValueError(str(read))
    return read


#: Fences seen by this process, per (table, job): the expected fence of the next
#: acquisition (a wrong guess is refused by its condition, which returns the truth).
_fences: dict[tuple[str, str], int] = {}

_RETRYABLE_REASONS = frozenset({"TransactionConflict", "ThrottlingError",
                                "ProvisionedThroughputExceeded", "RequestLimitExceeded"})
"""Cancellation reasons that say "try again", not "this item is wrong"."""

_HOLDER_ATTRS = ("run_id", "holder_owner", "trigger_id", "expires_at_ms", "acquired_at_ms",
                 "heartbeat_at_ms", "wake_receipt", "follow_up", "handed_from")
_HOLD_ATTRS = ("run_id", "holder_owner", "trigger_id", "expires_at_ms", "acquired_at_ms",
               "heartbeat_at_ms", "handed_from")
"""What a hand-off freed by a pause removes: the holder, not what waits behind it."""

_LAMBDA_MAX_RUN_MS = 15 * 60 * 1000
"""No invocation runs longer (Lambda's timeout at most): a bound on any holder's life."""

_CLOCK_OFFSET_MS = 10_000
"""What an operator's release allows for two workers' clocks when the job row names no
skew margin (no acquisition wrote one yet): twice the default skew margin."""


# -- call sites (see jobguard.callsites) --------------------------------------------

ACQUIRE = call_site(
    "dynamodb.acquire", "dynamodb", "TransactWriteItems", "DynamoJobStore.acquire",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="a retry refused by its own write is recognised (the lease row names this run; "
         "not a continuation's, whose run id its deliveries share: a duplicate, the "
         "lease expires unrun); an unanswered attempt is resolved by the next attempt's "
         "refusal or a read",
    paths=(Path.RUN,), parts=("Put", "Update"),
)
READ_LEASE = call_site(
    "dynamodb.read_lease", "dynamodb", "GetItem", "DynamoJobStore.read_lease",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (every trigger's decision, before any write; status, the heartbeat's "
         "resolution): an error surfaces, nothing written, the sender retries",
    paths=(Path.RUN, Path.OPERATOR),
)
RENEW = call_site(
    "dynamodb.renew", "dynamodb", "UpdateItem", "DynamoJobStore.renew",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="the heartbeat resolves a failed renewal with a consistent read and retries "
         "before its local deadline; past it the run stops (`lease_lost`); an expiry "
         "never moves backwards",
    paths=(Path.RUN,),
)
RELEASE = call_site(
    "dynamodb.release", "dynamodb", "TransactWriteItems", "DynamoJobStore.release",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="retried with backoff while the lease is still the run's; an error answer is read "
         "back (consistent reads of the row, then of the trigger's item): a release that "
         "landed unanswered, or a retry refused by it (`last_run_id` = run id, released by "
         "`run`), counts as released and keeps the wake receipt and follow-up it found",
    paths=(Path.RUN,), parts=("Put", "Update"),
)
HAND_OFF = call_site(
    "dynamodb.hand_off", "dynamodb", "TransactWriteItems", "DynamoJobStore.hand_off",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="a link's release naming its continuation; an error answer is read back (the row "
         "naming the hand-off: landed); refused while paused, it releases instead (the "
         "chain ends)",
    paths=(Path.RUN,), parts=("Put", "Update"),
)
SET_WAKE = call_site(
    "dynamodb.set_wake", "dynamodb", "UpdateItem", "DynamoJobStore.set_wake",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="the deferred message is reported failed and comes back after its visibility "
         "timeout; the retry's condition (holder) still holds",
    paths=(Path.QUEUE,),
)
PAUSE = call_site(
    "dynamodb.pause", "dynamodb", "UpdateItem", "DynamoJobStore.pause",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command; the update is idempotent",
    paths=(Path.OPERATOR,),
)
RESUME = call_site(
    "dynamodb.resume", "dynamodb", "UpdateItem", "DynamoJobStore.resume",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command; the update is idempotent",
    paths=(Path.OPERATOR,),
)
FORCE_RELEASE = call_site(
    "dynamodb.force_release", "dynamodb", "TransactWriteItems",
    "DynamoJobStore._operator_release",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command, one transaction (lease, fence mark, the run's trigger and "
         "record); a retry refused by its own write (released by this operator) counts; "
         "also a link withdrawing a hand-off whose invoke was refused (an error: it expires)",
    paths=(Path.OPERATOR, Path.CONTINUE), parts=("Put", "Update"),
)
REPAIR = call_site(
    "dynamodb.repair", "dynamodb", "TransactWriteItems", "DynamoJobStore.repair",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command on a damaged lease row; conditioned on the row as read",
    paths=(Path.OPERATOR,), parts=("Update",),
)
RECORD_DECISION = call_site(
    "dynamodb.record_decision", "dynamodb", "TransactWriteItems",
    "DynamoJobStore.record_decision",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="nothing half-written (one transaction); a retry refused by its own write is "
         "recognised (the trigger item names this decision's run id)",
    paths=(Path.RUN,), parts=("ConditionCheck", "Put", "Update"),
)
UNDO_QUEUED = call_site(
    "dynamodb.undo_queued", "dynamodb", "TransactWriteItems", "DynamoJobStore.undo_queued",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="compensation after a failed send: the trigger back to what it was, queued_n - 1, "
         "its record deleted; if it fails too, the trigger's redelivery finds it `queued` "
         "and sends its message again",
    paths=(Path.QUEUED,), parts=("Delete", "Update"),
)
PUT_RUN = call_site(
    "dynamodb.put_run", "dynamodb", "PutItem", "DynamoJobStore.put_run",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note=("stale/duplicate records surface to the sender; so does a rejected trigger "
          "message's (SQS delivers it again); never written over another record of the "
          "run (a repeat of a landed put is refused by it)"),
    paths=(Path.RUN,),
)
LIST_RUNS = call_site(
    "dynamodb.list_runs", "dynamodb", "Query", "DynamoJobStore.list_runs",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (CLI, status)",
    paths=(Path.OPERATOR,),
)
RUNS_BETWEEN = call_site(
    "dynamodb.runs_between", "dynamodb", "Query", "DynamoJobStore.runs_between",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read, paged (CLI `timeline`, the drills page)",
    paths=(Path.OPERATOR,),
)
GET_RUN = call_site(
    "dynamodb.get_run", "dynamodb", "GetItem", "DynamoJobStore.get_run",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (CLI)",
    paths=(Path.OPERATOR,),
)
READ_TRIGGER = call_site(
    "dynamodb.read_trigger", "dynamodb", "GetItem", "DynamoJobStore.read_trigger",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (CLI, tests, a queued job's late tick, a release read back): an error "
         "surfaces, or the release tries again",
    paths=(Path.RUN, Path.OPERATOR),
)


def _error_text(exc: BaseException) -> str:
    """What an unresolved call answered (the service's own words, bounded)."""
    cause = exc.__cause__ if isinstance(exc, StoreError) and exc.__cause__ else exc
    return str(cause)[:300]


def _follow_up_gate(lease: LeaseState, item: TriggerRecord | None) -> int:
    """The gate a follow-up's acquisition checks on its own item: the gate as read (the
    decision has judged it against the row's ``served_fence``), or, before the item was
    read, the lease fence it was seen at."""
    if item is not None and item.gate_fence is not None:
        return item.gate_fence  # as read: the decision judged it against served_fence
    return lease.fence


class DynamoJobStore:
    """Leases, trigger items and run records for any number of jobs in one table.

    Example:
        >>> import boto3
        >>> store = DynamoJobStore("jobguard", client=boto3.client("dynamodb"))
        ... # doctest: +SKIP
    """

    def __init__(self, table_name: str, *, client: Any) -> None:
        self.table_name = table_name
        self._client = client

    @property
    def client(self) -> Any:
        """The DynamoDB client this store writes through."""
        return self._client

    # -- keys and rows -------------------------------------------------------------

    def _lease_key(self, job: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": LEASE_SK}}

    def _fence_key(self, job: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": FENCE_SK}}

    def _trigger_key(self, job: str, trigger_id: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": trigger_sk(trigger_id)}}

    def _seen(self, state: LeaseState) -> LeaseState:
        if state.exists:
            _fences[(self.table_name, state.job)] = state.fence
        return state

    def expected_lease(self, job: str) -> LeaseState:
        """What the next acquisition expects: a free row with the last fence this
        process saw, or (first time) the row itself, read consistently."""
        fence = _fences.get((self.table_name, job))
        if fence is not None:
            return LeaseState(job=job, fence=fence)
        return self.read_lease(job)

    def read_lease(self, job: str) -> LeaseState:
        """A strongly consistent read of the lease row.

        Raises:
            DamagedRowError: the row holds an attribute of the wrong type or lacks one.
        """
        try:
            response = self._client.get_item(
                TableName=self.table_name, Key=self._lease_key(job), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("read_lease", job, str(exc)) from exc
        return self._seen(lease_state(job, response.get("Item")))

    def read_lease_raw(self, job: str) -> dict[str, Any] | None:
        """The lease row as stored (plain values), damaged or not (status, repair)."""
        response = self._client.get_item(
            TableName=self.table_name, Key=self._lease_key(job), ConsistentRead=True)
        item = response.get("Item")
        return _plain(item) if item else None

    def read_trigger(self, job: str, trigger_id: str) -> TriggerRecord | None:
        """A strongly consistent read of one trigger's item (None when absent)."""
        response = self._client.get_item(
            TableName=self.table_name, Key=self._trigger_key(job, trigger_id),
            ConsistentRead=True)
        return trigger_record(job, response.get("Item"))

    def high_water(self, job: str) -> int:
        """The highest fence ever issued for ``job`` (0 for a new job)."""
        return self._fence_state(job)[0]

    def _fence_state(self, job: str) -> tuple[int, int]:
        """The job row's fence mark, and how far two workers' clocks may differ (twice
        the skew margin its last acquisition wrote; :data:`_CLOCK_OFFSET_MS` if none)."""
        response = self._client.get_item(
            TableName=self.table_name, Key=self._fence_key(job), ConsistentRead=True)
        row = _plain(response.get("Item"))
        value, skew = row.get("hw", 0), row.get("skew_ms")
        offset = 2 * skew if isinstance(skew, int) and skew > 0 else _CLOCK_OFFSET_MS
        return (int(value) if isinstance(value, int) else 0), offset

    # -- building blocks of transactions ---------------------------------------------

    def _lease_condition(self, e: _Expr, lease: LeaseState) -> str:
        """The lease row is exactly as observed: its fence, and its holder (or none)."""
        if not lease.exists:
            # absent, or a row never held (a pause written on a new job): never a row that
            # was held once and lost its fence (parse_lease refuses it as damaged)
            return " AND ".join(f"attribute_not_exists({e.n(n)})" for n in (
                "fence", "run_id", "acquired_at_ms", "released_at_ms", "last_run_id"))
        cond = f"{e.n('fence')} = {e.v(lease.fence)}"
        if lease.run_id is None:
            return f"{cond} AND attribute_not_exists({e.n('run_id')})"
        return f"{cond} AND {e.n('run_id')} = {e.v(lease.run_id)}"

    def _trigger_condition(self, e: _Expr, item: TriggerRecord | None, now_ms: int) -> str:
        """The trigger's item is exactly as observed (absent: none, or past its TTL)."""
        if item is None or not item.live(now_ms):
            ttl = e.n(TTL_ATTRIBUTE)
            return (f"(attribute_not_exists({e.n('state')}) OR "
                    f"{ttl} < {e.v(now_ms // 1000)})")
        condition = f"{e.n('state')} = {e.v(item.state.value)}"
        if item.run_id is not None:
            condition += f" AND {e.n('run_id')} = {e.v(item.run_id)}"
        return condition

    def _update(self, key: dict[str, Any], e: _Expr, update: str,
                condition: str | None = None) -> dict[str, Any]:
        action: dict[str, Any] = {"TableName": self.table_name, "Key": key,
                                  "UpdateExpression": update,
                                  **e.params(update, condition or "")}
        if condition:
            action["ConditionExpression"] = condition
            action["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return {"Update": action}

    def _check(self, key: dict[str, Any], e: _Expr, condition: str) -> dict[str, Any]:
        return {"ConditionCheck": {"TableName": self.table_name, "Key": key,
                                   "ConditionExpression": condition,
                                   "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                                   **e.params(condition)}}

    def _trigger_write(self, job: str, trigger_id: str, observed: TriggerRecord | None,
                       *, state: State, route: Route, run_id: str, now_ms: int,
                       ttl_epoch_s: int, fence: int | None = None,
                       gate_fence: int | None = None, into: str | None = None,
                       kind: str | None = None, gate: int | None = None,
                       origin: RunOrigin | None = None) -> dict[str, Any]:
        e = _Expr()
        sets = [f"{e.n('state')} = {e.v(state.value)}", f"{e.n('route')} = {e.v(route.value)}",
                f"{e.n('run_id')} = {e.v(run_id)}", f"{e.n('at_ms')} = {e.v(now_ms)}",
                f"{e.n(TTL_ATTRIBUTE)} = {e.v(ttl_epoch_s)}", f"{e.n('job')} = {e.v(job)}"]
        # who ended an earlier run of the trigger says nothing of this one (a release
        # reading it back would take that end for its own: explorer seed 428219)
        removes: list[str] = [e.n("ended_by")]
        for name, value in (("fence", fence), ("gate_fence", gate_fence), ("into", into),
                            ("kind", kind)):
            if value is not None:
                sets.append(f"{e.n(name)} = {e.v(value)}")
        if origin is not None:
            # the run's origin, exactly (nothing left from an earlier run of the trigger)
            for name, value in (("policy", origin.policy),
                                ("requested_by", origin.requested_by),
                                ("scheduled_at", origin.scheduled_at),
                                ("delivery_id", origin.delivery_id)):
                if value is None:
                    removes.append(e.n(name))
                else:
                    sets.append(f"{e.n(name)} = {e.v(value)}")
        condition = self._trigger_condition(e, observed, now_ms)
        if gate is not None:
            # a follow-up runs only while no run started since the one it follows
            condition = f"({condition}) AND {e.n('gate_fence')} = {e.v(gate)}"
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        return self._update(self._trigger_key(job, trigger_id), e, update, condition)

    def _run_put(self, record: RunRecord, ttl_epoch_s: int) -> dict[str, Any]:
        return {"Put": {"TableName": self.table_name, "Item": self._run_item(record, ttl_epoch_s)}}

    def _end_trigger(self, job: str, trigger_id: str, run_id: str, target: State,
                     now_ms: int, ttl_epoch_s: int, by: str = "takeover") -> dict[str, Any]:
        """Move a run's trigger out of ``running`` (taken over, replaced, released by an
        operator): only while the item is still that run's (or gone: TTL deleted it),
        never a trigger decided since. An item recreated here gets a route and a TTL."""
        t = _Expr()
        state = t.n("state")
        update = (f"SET {state} = {t.v(target.value)}, {t.n('at_ms')} = {t.v(now_ms)}, "
                  f"{t.n('run_id')} = {t.v(run_id)}, {t.n('ended_by')} = {t.v(by)}, "
                  f"{t.n('route')} = if_not_exists({t.n('route')}, {t.v(Route.DIRECT.value)}), "
                  f"{t.n(TTL_ATTRIBUTE)} = if_not_exists({t.n(TTL_ATTRIBUTE)}, "
                  f"{t.v(ttl_epoch_s)})")
        # (a continuation the row names, not started yet, ends the same way: ``handed``)
        condition = (f"attribute_not_exists({state}) OR (({state} = {t.v(State.RUNNING.value)}"
                     f" OR {state} = {t.v(State.HANDED.value)}) "
                     f"AND {t.n('run_id')} = {t.v(run_id)})")
        return self._update(self._trigger_key(job, trigger_id), t, update, condition)

    def _transact(self, operation: str, job: str, actions: list[dict[str, Any]],
                  kinds: list[str]) -> Refused | None:
        """Run one transaction. None when it was applied; else what refused it.

        ``kinds`` names each action (``lease``, ``fence``, ``trigger``, anything else)
        so that refusals come back as the values they were.
        """
        try:
            self._client.transact_write_items(
                TransactItems=actions, ClientRequestToken=str(uuid.uuid4()))
        except ClientError as exc:
            error = _code(exc)
            if error == "ValidationException":
                # A damaged row makes an update expression invalid (a fence that is not a
                # number): name the row and attribute instead of the service's words.
                self.read_lease(job)
                raise StoreError(operation, job, str(exc)) from exc
            if error != "TransactionCanceledException":
                raise StoreError(operation, job, str(exc)) from exc
            lease: LeaseState | None = None
            trigger: TriggerRecord | None = None
            trigger_failed = False
            high_water: int | None = None
            displaced_failed = False
            follow_up_failed = False
            conflict = False
            lease_as_seen = True
            for kind, reason in zip(kinds, _reasons(exc), strict=False):
                code = reason.get("Code")
                if code in (None, "None"):
                    continue
                if kind == "lease":
                    lease_as_seen = False
                if code != "ConditionalCheckFailed":
                    if kind == "lease" and code not in _RETRYABLE_REASONS:
                        # the row itself refused the expression (a ValidationError: an
                        # attribute of the wrong type): a consistent read names it
                        lease = self.read_lease(job)
                    conflict = True
                    continue
                found = reason.get("Item")
                if kind == "lease":
                    # the row as it was; when the answer carries no item (an emulator's
                    # ConditionCheck), a consistent read (which names a damaged row)
                    lease = (self._seen(lease_state(job, found)) if found is not None
                             else self.read_lease(job))
                elif kind == "trigger":
                    trigger, trigger_failed = trigger_record(job, found), True
                elif kind == "fence":
                    value = _plain(found).get("hw", 0)
                    high_water = int(value) if isinstance(value, int) else 0
                elif kind == "displaced_trigger":
                    displaced_failed = True
                elif kind == "follow_up_gate":
                    follow_up_failed = True
            if not lease_as_seen:
                # the gate was read with a row that has changed (or was in another
                # transaction): its refusal says nothing of the follow-up; look again
                follow_up_failed = False
            return Refused(lease=lease, trigger=trigger, trigger_failed=trigger_failed,
                           high_water=high_water, displaced_failed=displaced_failed,
                           follow_up_failed=follow_up_failed,
                           conflict=conflict and lease is None and not trigger_failed
                           and high_water is None and not displaced_failed
                           and not follow_up_failed)
        return None

    # -- lease ---------------------------------------------------------------------

    def acquire(self, request: Acquisition) -> Acquired | Refused:
        """Take the job's lease from the row as observed, in one transaction.

        The conditions, each on the value this write replaces:

        - the lease row: exactly ``request.lease`` (its fence, and no holder; or the
          holder named, expired by more than the skew margin unless ``replace``), not
          paused (unless ``ignore_pause``), and (``queue_gate``, a direct ``QUEUE``
          trigger) no pending queued trigger;
        - the fence high-water mark: no higher than the fence observed;
        - the trigger's item: exactly ``request.item`` (absent, or its state and run id);
        - on a takeover, the displaced run's trigger becomes ``lost`` (``replaced``
          under REPLACE; left alone unless ``mark_displaced``) and its record is written
          (``displaced``);
        - ``keep_follow_up`` (a recovery): a recovery replays a range, it does not do
          the job's regular work, so it never absorbs the pending follow-up: the
          follow-up stays named on the row (its release sends it) and its gate moves
          with the fence;
        - ``origin``: kept on the trigger's item while the run holds the lease, for the
          record an operator's force release writes of it.

        Returns :class:`Acquired` with the new fence, or :class:`Refused` with what
        was there instead.
        """
        r = request
        job, trigger_id, run_id, now_ms, skew_ms = (r.job, r.trigger_id, r.run_id, r.now_ms,
                                                    r.skew_ms)
        lease, item, route, trigger_kind = r.lease, r.item, r.route, r.trigger_kind
        replace, keep_follow_up, record_ttl_s = r.replace, r.keep_follow_up, r.record_ttl_s
        fence = max(lease.fence, r.high_water) + 1
        e = _Expr()
        pieces = [self._lease_condition(e, lease)]
        held = lease.is_held(now_ms, skew_ms)
        # A continuation takes the lease only from the hand-off the row names (its run
        # id, pre-assigned, is the row's): the chain holds the job like one run, so it
        # carries what waits behind it (wake-up, follow-up) as a recovery does.
        carry = trigger_kind == "continuation"
        if carry:
            pieces.append(f"{e.n('handed_from')} = {e.v(lease.handed_from or '-')}")
        if replace and held and lease.expires_at_ms is not None:
            # the live holder's expiry as read: a renewal since refuses this write (we
            # decide again), so the hold written below bounds its deadline exactly
            pieces.append(f"{e.n('expires_at_ms')} = {e.v(lease.expires_at_ms)}")
        if lease.run_id is not None and not (replace and held) and not carry:
            # A takeover of a lease seen expired holds only while it still is: a holder
            # that renewed since our read is alive, so (under REPLACE) its trigger ends
            # `replaced`, not `lost` for its retry to run again; refused, we decide again.
            pieces.append(f"{e.n('expires_at_ms')} < {e.v(now_ms - skew_ms)}")
        if not r.ignore_pause:
            pieces.append(f"attribute_not_exists({e.n('paused_at_ms')})")
        queued = e.n("queued_n")
        if r.queue_gate:
            pieces.append(f"(attribute_not_exists({queued}) OR {queued} <= {e.v(0)})")
        sets = [
            f"{e.n('fence')} = {e.v(fence)}",
            f"{e.n('run_id')} = {e.v(run_id)}",
            f"{e.n('holder_owner')} = {e.v(r.owner)}",
            f"{e.n('trigger_id')} = {e.v(trigger_id)}",
            f"{e.n('acquired_at_ms')} = {e.v(now_ms)}",
            f"{e.n('heartbeat_at_ms')} = {e.v(now_ms)}",
            f"{e.n('expires_at_ms')} = {e.v(now_ms + r.lease_ms)}",
            f"{e.n('prev_run_id')} = "
            f"{e.v((lease.handed_from if carry else lease.run_id) or lease.last_run_id or '-')}",
        ]
        if not keep_follow_up:
            sets.append(f"{e.n('served_fence')} = {e.v(fence)}")  # a run that serves
        if keep_follow_up:
            # a service run (recovery, reconciler): the follow-up stays named, exactly as
            # seen (a follow-up the row names but we did not see refuses this write)
            fu = e.n("follow_up")
            pieces.append(f"attribute_not_exists({fu})" if lease.follow_up is None
                          else f"{fu} = {e.v(lease.follow_up)}")
            removes = [e.n("handed_from")] if carry else [e.n("wake_receipt"),
                                                          e.n("handed_from")]
        else:
            removes = [e.n("wake_receipt"), e.n("follow_up"), e.n("handed_from")]
        update = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes)
        if route is Route.QUEUE and item is not None and item.state is State.QUEUED \
                and trigger_kind == "queued":
            # count it off, never below 0: a row deleted and made again since it was
            # queued no longer counts it (compare-and-set on the count as observed)
            if lease.queued_n > 0:
                update += f" ADD {queued} {e.v(-1)}"
                pieces.append(f"{queued} > {e.v(0)}")
            else:
                pieces.append(f"(attribute_not_exists({queued}) OR {queued} <= {e.v(0)})")
        actions = [self._update(self._lease_key(job), e, update, " AND ".join(pieces))]
        kinds = ["lease"]
        f = _Expr()
        hw = f.n("hw")
        # the job's skew margin beside the fence: an operator's release, which knows no
        # job's configuration, bounds a freed run's deadline with it
        set_hw = f"SET {hw} = {f.v(fence)}, {f.n('skew_ms')} = {f.v(skew_ms)}"
        if replace and held and lease.expires_at_ms is not None:
            # REPLACE takes the lease from a live run, which learns it only at its next
            # renewal: until its local deadline (its last renewal + the lease - the
            # skew margin, on its own clock: at most its expiry, pinned above, + the
            # margin on ours) it may still call the destination for its open claim.
            # Every run leaves that claim alone until then (jobguard.claims).
            set_hw += (f", {f.n('hold_until_ms')} = "
                       f"{f.v(lease.expires_at_ms + skew_ms)}")
        actions.append(self._update(
            self._fence_key(job), f, set_hw,
            f"attribute_not_exists({hw}) OR {hw} < {f.v(fence)}"))
        kinds.append("fence")
        actions.append(self._trigger_write(
            job, trigger_id, item, state=State.RUNNING, route=route, run_id=run_id,
            now_ms=now_ms, ttl_epoch_s=r.trigger_ttl_s, fence=fence,
            gate_fence=fence if trigger_kind == "follow_up" else None, kind=trigger_kind,
            gate=_follow_up_gate(lease, item) if trigger_kind == "follow_up" else None,
            origin=r.origin))
        kinds.append("trigger")
        if lease.run_id is not None and lease.trigger_id and lease.trigger_id != trigger_id \
                and r.mark_displaced:
            target = State.REPLACED if replace and held else State.LOST
            actions.append(self._end_trigger(job, lease.trigger_id, lease.run_id, target,
                                             now_ms, record_ttl_s or r.trigger_ttl_s))
            kinds.append("displaced_trigger")
        if r.displaced is not None:
            actions.append(self._run_put(r.displaced, record_ttl_s))
            kinds.append("displaced_record")
        if keep_follow_up and lease.follow_up:
            # still pending: queued, and not absorbable (no run that serves started
            # after its gate: decide's ABSORB test, on the row's served_fence as read,
            # which the lease condition pins with the fence). Never `gate = fence`: an
            # operator's repair moves the fence on without the gate.
            g = _Expr()
            actions.append(self._update(
                self._trigger_key(job, lease.follow_up), g,
                f"SET {g.n('gate_fence')} = {g.v(fence)}",
                f"{g.n('state')} = {g.v(State.QUEUED.value)} AND "
                f"{g.n('gate_fence')} >= {g.v(lease.served_fence)}"))
            kinds.append("follow_up_gate")
        try:
            refused = self._transact("acquire", job, actions, kinds)
        except BotoCoreError as exc:
            return self._acquire_unknown(job, run_id, exc, shared_run_id=carry)
        except StoreError as exc:
            if exc.__cause__ is not None and transient(exc.__cause__):
                return self._acquire_unknown(job, run_id, exc, shared_run_id=carry)
            raise
        if refused is None:
            _fences[(self.table_name, job)] = fence
            return Acquired(fence=fence, displaced_run_id=None if carry else lease.run_id)
        if refused.lease is not None and refused.lease.run_id == run_id and not carry:
            # Our own earlier attempt landed; its response was lost. (Never for a
            # continuation: its run id is the hand-off's, shared by every delivery of it,
            # so a row naming it may be another delivery's run: decided again, it is a
            # duplicate. An attempt of ours that landed unanswered holds the lease
            # unrun until it expires, like a lost invoke: the next tick takes over.)
            return Acquired(fence=refused.lease.fence,
                            expires_at_ms=refused.lease.expires_at_ms,
                            displaced_run_id=refused.lease.prev_run_id
                            if refused.lease.prev_run_id not in (None, "-") else None)
        return refused

    def take(self, request: Take) -> Acquired | Busy:
        """Take the lease for a direct trigger if it is free (or expired, or ``replace``),
        deciding again from each refusal; :class:`Busy` when a live run holds it or the
        trigger was already decided. For tools and tests; handlers go through the guard.
        """
        trigger, now_ms, skew_ms, replace = (request.trigger, request.now_ms,
                                             request.skew_ms, request.replace)
        job = trigger.job
        lease = self.expected_lease(job)
        item: TriggerRecord | None = None
        high_water = 0
        for _ in range(8):
            if item is not None and item.live(now_ms) and item.state not in (
                    State.FAILED, State.LOST, State.RUNNING):
                return Busy(lease)
            if lease.is_held(now_ms, skew_ms) and not replace:
                return Busy(lease)
            result = self.acquire(Acquisition(
                job=job, trigger_id=trigger.trigger_id, trigger_kind=trigger.kind.value,
                route=Route.DIRECT, run_id=request.run_id, owner=request.owner,
                now_ms=now_ms, lease_ms=request.lease_ms, skew_ms=skew_ms, lease=lease,
                item=item, trigger_ttl_s=now_ms // 1000 + 86_400, high_water=high_water,
                replace=replace, ignore_pause=True))
            if isinstance(result, Acquired):
                return result
            lease = result.lease or lease
            if result.trigger_failed:
                item = result.trigger
            if result.high_water is not None:
                high_water = result.high_water
        return Busy(lease)

    def _acquire_unknown(self, job: str, run_id: str, exc: Exception, *,
                         shared_run_id: bool = False) -> Acquired | Refused:
        """The acquisition's answer was an error: no answer, or one after which an
        earlier attempt of the SDK's may have landed (its answer lost, the retries
        throttled). Only a consistent read tells; the run starts only if the row names it
        (never for a continuation, whose run id every delivery of it shares).
        """
        state = self.read_lease(job)
        if state.run_id == run_id and not shared_run_id:
            return Acquired(fence=state.fence, displaced_run_id=None,
                            expires_at_ms=state.expires_at_ms)
        return Refused(lease=state, unanswered=_error_text(exc))

    def renew(self, job: str, *, run_id: str, fence: int, now_ms: int, lease_ms: int) -> bool:
        """Extend the lease; False when it is no longer ours (never re-creates a row).

        An expiry never moves backwards: a worker whose wall clock stepped back asks
        for an earlier expiry than the row has, its condition fails, and the lease (still
        ours, with the later expiry) counts as renewed.
        """
        e = _Expr()
        new_expiry = e.v(now_ms + lease_ms)
        condition = (f"{e.n('run_id')} = {e.v(run_id)} AND {e.n('fence')} = {e.v(fence)} "
                     f"AND {e.n('expires_at_ms')} < {new_expiry}")
        update = (f"SET {e.n('expires_at_ms')} = {new_expiry}, "
                  f"{e.n('heartbeat_at_ms')} = {e.v(now_ms)}")
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job),
                UpdateExpression=update, ConditionExpression=condition,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                row = _plain(_old_item(exc))
                return row.get("run_id") == run_id and row.get("fence") == fence
            raise StoreError("renew", job, str(exc)) from exc
        return True

    def release(self, request: Release) -> Released:
        """Free the lease, end the trigger and write the run record, in one transaction.

        The row is kept (with its fence) so the fence never resets. A deferred message's
        wake-up receipt and the holder's pending follow-up are removed by the write that
        saw them (a first attempt conditioned on their absence returns them) and
        returned, also when a retry finds that an earlier attempt landed. An attempt
        answered with an error (throttled, a 5xx, no answer: an earlier attempt of the
        SDK's may have landed unanswered) is read back, as an acquisition is.
        ``keep_follow_up`` (a service run: recovery, reconciler) leaves the follow-up
        named on the row but still returns it, so the releaser can send its message
        again when it has the queue (the coalescing sender's send may have failed).
        """
        job, run_id, fence, trigger_id = (request.job, request.run_id, request.fence,
                                          request.trigger_id)
        outcome, record, record_ttl_s, trigger_ttl_s, keep_follow_up = (
            request.outcome, request.record, request.record_ttl_s, request.trigger_ttl_s,
            request.keep_follow_up)
        wake: str | None = None
        follow_up: str | None = None
        end_trigger = True
        for attempt in range(8):
            e = _Expr()
            condition = f"{e.n('run_id')} = {e.v(run_id)} AND {e.n('fence')} = {e.v(fence)}"
            # a service run leaves the follow-up named for the next run, but learns it
            # (so it can send its message again: the coalescing sender may have failed)
            watched = (("wake_receipt", wake), ("follow_up", follow_up))
            for name, value in watched:
                condition += (f" AND attribute_not_exists({e.n(name)})" if value is None
                              else f" AND {e.n(name)} = {e.v(value)}")
            # a service run without the queue leaves the follow-up named for the next run
            removed = [n for n in _HOLDER_ATTRS if not (keep_follow_up and n == "follow_up")]
            update = (
                f"SET {e.n('released_at_ms')} = {e.v(record.ended_at_ms)}, "
                f"{e.n('last_run_id')} = {e.v(run_id)}, {e.n('released_by')} = {e.v('run')} "
                f"REMOVE {', '.join(e.n(n) for n in removed)}"
            )
            actions = [self._update(self._lease_key(job), e, update, condition)]
            kinds = ["lease"]
            if end_trigger:
                t = _Expr()
                st = t.n("state")
                actions.append(self._update(
                    self._trigger_key(job, trigger_id), t,
                    f"SET {st} = {t.v(outcome.value)}, {t.n('at_ms')} = "
                    f"{t.v(record.ended_at_ms)}, {t.n(TTL_ATTRIBUTE)} = {t.v(trigger_ttl_s)}, "
                    f"{t.n('run_id')} = {t.v(run_id)}, {t.n('ended_by')} = {t.v('release')}, "
                    f"{t.n('route')} = if_not_exists({t.n('route')}, {t.v(Route.DIRECT.value)})",
                    f"attribute_not_exists({st}) OR ({st} = "
                    f"{t.v(State.RUNNING.value)} AND {t.n('run_id')} = {t.v(run_id)})"))
                kinds.append("trigger")
            actions.append(self._run_put(record, record_ttl_s))
            kinds.append("record")
            try:
                refused = self._transact("release", job, actions, kinds)
            except (StoreError, BotoCoreError) as exc:
                cause = exc.__cause__ if isinstance(exc, StoreError) else exc
                if cause is None or not transient(cause):
                    raise
                # Its answer was an error: no answer, or one after which an earlier
                # attempt of the SDK's may have landed (its answer lost, the retries
                # throttled). A consistent read tells, as for the acquisition: a landed
                # release is recognised below, a row still ours tells what to remove.
                unknown = _error_text(exc)
                refused = self._release_unknown(job, run_id, trigger_id)
                if refused is None or (refused.lease is not None
                                       and refused.lease.run_id == run_id):
                    if attempt == 7:
                        ended = record.status.value + (f": {record.error}" if record.error
                                                       else "")
                        raise StoreError(
                            "release", job, f"run {run_id} (fence {fence}) ended {ended}, and "
                            f"could not release its lease or write its record: no attempt "
                            f"landed in 8 tries (last: {unknown}); the lease stays its own "
                            "until it expires, then the next trigger takes it over") from exc
                    backoff(attempt)
                    if refused is None:
                        continue
            if refused is None:
                return Released(released=True, wake_receipt=wake, follow_up=follow_up)
            mine = refused.trigger
            if refused.trigger_failed and mine is not None and mine.run_id == run_id \
                    and mine.ended_by == "release":
                # Our own earlier attempt landed (its response was lost): the trigger item
                # says so even if another run has taken and released the lease since.
                return Released(released=True, wake_receipt=wake, follow_up=follow_up)
            if refused.trigger_failed and refused.lease is None:
                # The lease is still ours but the trigger moved on (decided after its item
                # outlived its TTL): release without touching it.
                end_trigger = False
                continue
            state = refused.lease
            if state is None:
                backoff(attempt)  # a conflict: look again
                continue
            if state.run_id == run_id and state.fence == fence:
                wake = state.wake_receipt
                follow_up = state.follow_up
                continue
            if state.last_run_id == run_id and state.released_by == "run":
                return Released(released=True, wake_receipt=wake, follow_up=follow_up)
            return Released(released=False, state=state)
        raise StoreError("release", job, "transaction kept conflicting")

    def hand_off(self, request: HandOff) -> Released | None:
        """Release the lease to a continuation instead of freeing it (:class:`HandOff`).

        Returns ``Released(released=True)`` when handed (also when an earlier attempt
        landed unanswered), ``Released(released=False, state=...)`` when the lease is no
        longer this run's, and None when it is but may not be handed (the job paused,
        the run's trigger decided since, the next link's trigger already there): the
        caller then releases as usual, and the chain ends.
        """
        r = request
        for attempt in range(8):
            e = _Expr()
            condition = (f"{e.n('run_id')} = {e.v(r.run_id)} AND {e.n('fence')} = "
                         f"{e.v(r.fence)} AND attribute_not_exists({e.n('paused_at_ms')})")
            update = (
                f"SET {e.n('run_id')} = {e.v(r.next_run_id)}, "
                f"{e.n('trigger_id')} = {e.v(r.next_trigger_id)}, "
                f"{e.n('handed_from')} = {e.v(r.run_id)}, "
                f"{e.n('acquired_at_ms')} = {e.v(r.now_ms)}, "
                f"{e.n('heartbeat_at_ms')} = {e.v(r.now_ms)}, "
                f"{e.n('expires_at_ms')} = {e.v(r.now_ms + r.lease_ms)}, "
                f"{e.n('released_at_ms')} = {e.v(r.now_ms)}, "
                f"{e.n('last_run_id')} = {e.v(r.run_id)}, {e.n('released_by')} = {e.v('run')}")
            t = _Expr()
            st = t.n("state")
            done = self._update(
                self._trigger_key(r.job, r.trigger_id), t,
                f"SET {st} = {t.v(State.DONE.value)}, {t.n('at_ms')} = {t.v(r.now_ms)}, "
                f"{t.n(TTL_ATTRIBUTE)} = {t.v(r.trigger_ttl_s)}, "
                f"{t.n('run_id')} = {t.v(r.run_id)}, {t.n('ended_by')} = {t.v('release')}, "
                f"{t.n('route')} = if_not_exists({t.n('route')}, {t.v(Route.DIRECT.value)})",
                f"attribute_not_exists({st}) OR ({st} = {t.v(State.RUNNING.value)} AND "
                f"{t.n('run_id')} = {t.v(r.run_id)})")
            handed = self._trigger_write(
                r.job, r.next_trigger_id, None, state=State.HANDED, route=Route.DIRECT,
                run_id=r.next_run_id, now_ms=r.now_ms, ttl_epoch_s=r.next_ttl_s,
                fence=r.fence, kind="continuation")
            actions = [self._update(self._lease_key(r.job), e, update, condition), done,
                       handed, self._run_put(r.record, r.record_ttl_s)]
            try:
                refused = self._transact("hand_off", r.job, actions,
                                         ["lease", "trigger", "next", "record"])
            except (StoreError, BotoCoreError) as exc:
                cause = exc.__cause__ if isinstance(exc, StoreError) else exc
                if cause is None or not transient(cause):
                    raise
                try:
                    refused = Refused(lease=self.read_lease(r.job))
                except (StoreError, ClientError, BotoCoreError):
                    refused = Refused(conflict=True)
                if refused.lease is not None and refused.lease.run_id == r.run_id:
                    refused = Refused(conflict=True)  # not landed: try again
            if refused is None:
                return Released(released=True)
            state = refused.lease
            if state is None:
                if not refused.conflict:
                    return None  # a trigger moved on: release as usual
                backoff(attempt)
                continue
            if state.handed_from == r.run_id and state.run_id == r.next_run_id:
                return Released(released=True)  # our earlier attempt landed unanswered
            if state.run_id == r.run_id and state.fence == r.fence:
                return None  # still ours, but paused: release as usual (the chain ends)
            return Released(released=False, state=state)
        raise StoreError("hand_off", r.job, "transaction kept conflicting")

    def _release_unknown(self, job: str, run_id: str, trigger_id: str) -> Refused | None:
        """What a release whose answer was an error left: the lease row (still the run's,
        or released by it), and, when the row has moved on since, the trigger's item (a
        release by the run says so there). None when the reads fail too."""
        try:
            state = self.read_lease(job)
            if state.run_id == run_id or state.last_run_id == run_id:
                return Refused(lease=state)
            return Refused(lease=state, trigger=self.read_trigger(job, trigger_id),
                           trigger_failed=True)
        except (StoreError, ClientError, BotoCoreError):
            return None

    def set_wake(self, job: str, *, holder_run_id: str, receipt: str) -> bool:
        """Leave a deferred message's receipt for the holder to wake at release."""
        e = _Expr()
        update = f"SET {e.n('wake_receipt')} = {e.v(receipt)}"
        condition = f"{e.n('run_id')} = {e.v(holder_run_id)}"
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job),
                UpdateExpression=update, ConditionExpression=condition,
                **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise StoreError("set_wake", job, str(exc)) from exc
        return True

    # -- operator commands -----------------------------------------------------------

    def pause(self, job: str, *, reason: str, now_ms: int, by: str | None = None,
              replace: bool = False) -> bool:
        """Pause a job: triggers are recorded as ``paused`` until :meth:`resume`. The
        reason is cut at 1,000 UTF-8 bytes, as every text jobguard writes: the lease row
        is read and rewritten by every decision of the job.

        Only a job not paused is paused (False, nothing written, when it already is: its
        pause, reason and time are kept). With ``replace``, only a paused job's reason
        (and who) is replaced, its time kept (False when it is not paused)."""
        from ._bounds import bounded_text

        e = _Expr()
        sets = [f"{e.n('paused_reason')} = {e.v(bounded_text(reason))}"]
        if not replace:
            sets.append(f"{e.n('paused_at_ms')} = {e.v(now_ms)}")
        removes = []
        if by:
            sets.append(f"{e.n('paused_by')} = {e.v(bounded_text(by))}")
        else:
            removes.append(e.n("paused_by"))
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes
                                             else "")
        condition = (f"attribute_exists({e.n('paused_at_ms')})" if replace
                     else f"attribute_not_exists({e.n('paused_at_ms')})")
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job), UpdateExpression=update,
                ConditionExpression=condition, **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def resume(self, job: str) -> bool:
        """Undo :meth:`pause`: True when the job was paused; False, nothing written (no
        row made for a job that never ran), when it was not."""
        e = _Expr()
        update = f"REMOVE {e.n('paused_at_ms')}, {e.n('paused_reason')}, {e.n('paused_by')}"
        condition = f"attribute_exists({e.n('paused_at_ms')})"
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job), UpdateExpression=update,
                ConditionExpression=condition, **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def count_queued(self, job: str, now_ms: int) -> int:
        """The job's queued triggers, counted from their items (what :meth:`repair`
        writes as the lease row's ``queued_n``)."""
        return self._count_queued(job, now_ms)

    def force_release(self, request: ForceRelease) -> bool:
        """Free a stuck lease and move the fence on, so the old holder can write nothing
        more: one transaction with the fence mark, the run's trigger (``released``: a
        redelivery never runs it again) and its record (``released_by_operator``).
        Conditioned on the holder the operator saw: never frees a newer one. On a
        damaged lease row it repairs the row instead (:meth:`repair`)."""
        job, holder_run_id, fence, now_ms, by = (request.job, request.holder_run_id,
                                                 request.fence, request.now_ms, request.by)
        reason, record_ttl_s = request.reason, request.record_ttl_s
        for _ in range(3):  # again only if the holder renewed between our read and write
            try:
                lease = self.read_lease(job)
            except DamagedRowError:
                # repaired only while the row still names the holder the operator saw
                # (or none it can read): never frees a run that took the lease since
                return self.repair(job, now_ms=now_ms, by=by, holder_run_id=holder_run_id) > 0
            released = self._force_release_seen(job, lease, holder_run_id=holder_run_id,
                                                fence=fence, now_ms=now_ms, by=by,
                                                reason=reason, record_ttl_s=record_ttl_s)
            if released is not None:
                return released
        return False

    def withdraw_hand_off(self, job: str, *, next_run_id: str, fence: int, now_ms: int,
                          reason: str) -> bool:
        """A link whose invoke of the next link was refused frees its hand-off at once:
        the force release's transaction (fence moved on, the pending link's trigger
        ``released``, its record naming the chain), only while the row still names that
        hand-off, never a link that started (its fence is one more) or a newer holder.
        A late delivery of the link then finds it ``superseded``."""
        for _ in range(3):
            lease = self.read_lease(job)
            if lease.handed_from is None:
                return False
            released = self._force_release_seen(job, lease, holder_run_id=next_run_id,
                                                fence=fence, now_ms=now_ms, by="jobguard",
                                                reason=reason, record_ttl_s=None,
                                                withdrawn=True)
            if released is not None:
                return released
        return False

    def _force_release_seen(self, job: str, lease: LeaseState, *, holder_run_id: str,
                           fence: int, now_ms: int, by: str, reason: str | None,
                           record_ttl_s: int | None, withdrawn: bool = False) -> bool | None:
        """One force release from ``lease`` as read: True released, False not (another
        holder, or none), None: the holder renewed since the read (read again).
        ``withdrawn``: the link before frees its own hand-off (its invoke refused), so the
        never-started link is recorded ``superseded`` (nothing ran, no operator did it)."""
        if lease.run_id != holder_run_id or lease.fence != fence:
            # True only when our own earlier attempt landed (its response was lost)
            return lease.released_by == f"operator:{by}" and lease.last_run_id == holder_run_id
        high_water, offset_ms = self._fence_state(job)
        new_fence = max(fence, high_water) + 1
        # The run's story, as its acquisition left it on its trigger's item (the item as
        # read is the run's own: the transaction ends it only while it still is).
        item = self.read_trigger(job, lease.trigger_id) if lease.trigger_id else None
        # (a hand-off not started yet: its item ``handed``, the link before on the row)
        own = item if item is not None and item.state in (State.RUNNING, State.HANDED) \
            and item.run_id == holder_run_id else None
        origin = own.origin if own is not None else None
        record = RunRecord(
            job=job, run_id=holder_run_id, trigger_id=lease.trigger_id or "",
            trigger_kind=(own.kind if own is not None else None) or "",
            policy=origin.policy if origin is not None else "",
            decision=Decision.RAN, status=RunStatus.RELEASED_BY_OPERATOR,
            started_at_ms=lease.acquired_at_ms or now_ms, ended_at_ms=now_ms, fence=fence,
            owner=lease.owner, scheduled_at=origin.scheduled_at if origin else None,
            requested_by=origin.requested_by if origin else None,
            delivery_id=origin.delivery_id if origin else None,
            detail=f"lease force-released by {by}" + (f": {reason}" if reason else ""),
            extra={"continues": lease.handed_from} if lease.handed_from else {},
        )
        if withdrawn:
            record = dataclasses.replace(
                record, decision=Decision.SUPERSEDED, status=RunStatus.SUPERSEDED,
                started_at_ms=now_ms, owner=None,
                detail=f"withdrawn by run {lease.handed_from} before it started: {reason}")
        ttl = record_ttl_s if record_ttl_s is not None else now_ms // 1000 + 30 * 86_400
        if self._operator_release(job, lease, new_fence, now_ms, by, record, ttl,
                                  offset_ms=offset_ms):
            return True
        again = self.read_lease(job)
        renewed = (again.run_id == holder_run_id and again.fence == fence
                   and again.expires_at_ms != lease.expires_at_ms)
        return None if renewed else False

    def _operator_release(self, job: str, lease: LeaseState, new_fence: int, now_ms: int,
                          by: str, record: RunRecord | None, ttl: int, *,
                          mark_trigger: bool = True, offset_ms: int = 0) -> bool:
        e = _Expr()
        condition = self._lease_condition(e, lease)
        update = (f"SET {e.n('fence')} = {e.v(new_fence)}, "
                  f"{e.n('released_at_ms')} = {e.v(now_ms)}, "
                  f"{e.n('released_by')} = {e.v('operator:' + by)}")
        if lease.run_id is not None:
            update += f", {e.n('last_run_id')} = {e.v(lease.run_id)}"
        update += f" REMOVE {', '.join(e.n(n) for n in _HOLDER_ATTRS)}"
        f = _Expr()
        hw = f.n("hw")
        set_hw = f"SET {hw} = {f.v(new_fence)}"
        if lease.run_id is not None and lease.expires_at_ms is not None:
            # As for a REPLACE: the holder, if it is alive, learns of this only at its next
            # renewal and may call the destination for its open claim until its local
            # deadline (at most its expiry, pinned here: a renewal since refuses this
            # write, + the clock offset between two workers); nobody reconciles that
            # claim before then (jobguard.claims).
            condition += f" AND {e.n('expires_at_ms')} = {e.v(lease.expires_at_ms)}"
            set_hw += (f", {f.n('hold_until_ms')} = "
                       f"{f.v(lease.expires_at_ms + (offset_ms or _CLOCK_OFFSET_MS))}")
        actions = [self._update(self._lease_key(job), e, update, condition),
                   self._update(self._fence_key(job), f, set_hw,
                                f"attribute_not_exists({hw}) OR {hw} < {f.v(new_fence)}")]
        kinds = ["lease", "fence"]
        if lease.run_id is not None and lease.trigger_id and mark_trigger:
            actions.append(self._end_trigger(job, lease.trigger_id, lease.run_id,
                                             State.RELEASED, now_ms, ttl, by="operator"))
            kinds.append("displaced_trigger")
        follow_up = self.read_trigger(job, lease.follow_up) if lease.follow_up else None
        if follow_up is not None and follow_up.state is State.QUEUED \
                and follow_up.gate_fence == lease.fence:
            # The holder's pending follow-up: no run started, so it still runs (its gate
            # moves with the fence the operator moved).
            g = _Expr()
            actions.append(self._update(
                self._trigger_key(job, follow_up.trigger_id), g,
                f"SET {g.n('gate_fence')} = {g.v(new_fence)}",
                f"{g.n('state')} = {g.v(State.QUEUED.value)} AND "
                f"{g.n('gate_fence')} = {g.v(lease.fence)}"))
            kinds.append("follow_up")
        if record is not None:
            actions.append(self._run_put(record, ttl))
            kinds.append("record")
        refused = self._transact("force_release", job, actions, kinds)
        if refused is not None and refused.displaced_failed and mark_trigger:
            # the stuck run's trigger was decided since (a delivery while paused): leave it
            return self._operator_release(job, lease, new_fence, now_ms, by, record, ttl,
                                          mark_trigger=False, offset_ms=offset_ms)
        if refused is None or (refused.lease is not None
                               and refused.lease.released_by == f"operator:{by}"
                               and refused.lease.last_run_id == lease.run_id
                               and refused.lease.fence == new_fence):
            # applied (or applied by our own earlier attempt whose response was lost)
            _fences[(self.table_name, job)] = new_fence
            return True
        return False

    def repair(self, job: str, *, now_ms: int, by: str = "operator",
               holder_run_id: str | None = None) -> int:
        """Rewrite a damaged lease row: holder cleared, fence past every fence issued,
        pause kept, the queued count recounted from the trigger items. Returns the new
        fence. Conditioned on the row's holder as read (never clobbers a new holder);
        with ``holder_run_id``, only while the row names that holder (or none it can
        read): 0, nothing written, when it names another."""
        raw = self.read_lease_raw(job) or {}
        if holder_run_id is not None and isinstance(raw.get("run_id"), str) \
                and raw["run_id"] != holder_run_id:
            return 0
        fence = raw.get("fence")
        known = fence if isinstance(fence, int) and not isinstance(fence, bool) else 0
        high_water, offset_ms = self._fence_state(job)
        new_fence = max(known, high_water) + 1
        queued = self._count_queued(job, now_ms)
        e = _Expr()
        run = raw.get("run_id")
        condition = (f"{e.n('run_id')} = {e.v(run)}" if isinstance(run, str)
                     else f"attribute_not_exists({e.n('run_id')})")
        # the count is rewritten from a query: only if no decision moved it meanwhile
        seen_n = raw.get("queued_n")
        condition += (f" AND attribute_not_exists({e.n('queued_n')})" if seen_n is None
                      else f" AND {e.n('queued_n')} = {e.v(seen_n)}")
        paused_at, paused_reason = raw.get("paused_at_ms"), raw.get("paused_reason")
        sets = [f"{e.n('fence')} = {e.v(new_fence)}", f"{e.n('queued_n')} = {e.v(queued)}",
                f"{e.n('released_at_ms')} = {e.v(now_ms)}",
                f"{e.n('released_by')} = {e.v('operator:' + by)}"]
        # the holder goes; a pending follow-up stays named (its coalesced triggers are
        # still owed a run: the next run absorbs it, or its message runs it)
        removes = [n for n in _HOLDER_ATTRS if n != "follow_up"] + ["prev_run_id"]
        # the pause as read: an operator's pause (or resume) since is not undone
        condition += (f" AND {e.n('paused_at_ms')} = {e.v(paused_at)}"
                      if paused_at is not None else
                      f" AND attribute_not_exists({e.n('paused_at_ms')})")
        if isinstance(paused_at, int) and not isinstance(paused_at, bool):
            sets.append(f"{e.n('paused_reason')} = {e.v(str(paused_reason or 'paused'))}")
            if not isinstance(raw.get("paused_by"), str):
                removes.append("paused_by")
        else:
            removes += ["paused_at_ms", "paused_reason", "paused_by"]
        if isinstance(run, str):
            sets.append(f"{e.n('last_run_id')} = {e.v(run)}")
        else:
            removes.append("last_run_id")
        update = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(e.n(n) for n in removes)
        f = _Expr()
        hw = f.n("hw")
        set_hw = f"SET {hw} = {f.v(new_fence)}"
        if isinstance(run, str):
            # the holder may be alive (the damage may be elsewhere on the row): as for a
            # force release, nobody reconciles its open claim before its deadline: its
            # expiry if the row still says it, else the longest a Lambda can run
            expires = raw.get("expires_at_ms")
            until = (expires if isinstance(expires, int) and not isinstance(expires, bool)
                     else now_ms + _LAMBDA_MAX_RUN_MS)
            set_hw += f", {f.n('hold_until_ms')} = {f.v(until + offset_ms)}"
        actions = [self._update(self._lease_key(job), e, update, condition),
                   self._update(self._fence_key(job), f, set_hw,
                                f"attribute_not_exists({hw}) OR {hw} < {f.v(new_fence)}")]
        trigger = raw.get("trigger_id")
        if isinstance(run, str) and isinstance(trigger, str):
            t = _Expr()
            actions.append(self._update(
                self._trigger_key(job, trigger), t,
                f"SET {t.n('state')} = {t.v(State.RELEASED.value)}, "
                f"{t.n('ended_by')} = {t.v('operator')}",
                f"attribute_not_exists({t.n('state')}) OR {t.n('run_id')} = {t.v(run)}"))
        try:
            self._client.transact_write_items(TransactItems=actions,
                                              ClientRequestToken=str(uuid.uuid4()))
        except ClientError as exc:
            raise StoreError("repair", job, f"the lease row changed while it was being "
                             f"repaired; run the command again ({exc})") from exc
        _fences[(self.table_name, job)] = new_fence
        return new_fence

    def _count_queued(self, job: str, now_ms: int) -> int:
        count = 0
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :t)",
            "FilterExpression": "#s = :q AND #k = :kind AND #ttl >= :now",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY, "#s": "state",
                                         "#k": "kind", "#ttl": TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":pk": {"S": job_pk(job)}, ":t": {"S": TRIGGER_PREFIX},
                                          ":q": {"S": "queued"}, ":kind": {"S": "queued"},
                                          ":now": {"N": str(now_ms // 1000)}},
            "ConsistentRead": True, "Select": "COUNT",
        }
        while True:
            response = self._client.query(**kwargs)
            count += int(response.get("Count", 0))
            if "LastEvaluatedKey" not in response:
                return count
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # -- decisions and run records -----------------------------------------------------

    def record_decision(self, request: DecisionWrite) -> Refused | None:
        """Write a non-run decision, the trigger's new state and its record, atomically.

        The lease row is checked for what the decision was based on (the holder still
        the one observed, the queue bound, pause) and the trigger item for the state it
        replaces. ``follow_up`` (COALESCE): the follow-up's id, its gate fence (the
        holder's) and its item's TTL. Returns None when written, or what refused it.
        """
        r = request
        record, step, lease, item, route, now_ms = (r.record, r.step, r.lease, r.item, r.route,
                                                    r.now_ms)
        skew_ms, max_queued, trigger_ttl_s, record_ttl_s, follow_up = (
            r.skew_ms, r.max_queued, r.trigger_ttl_s, r.record_ttl_s, r.follow_up)
        job = record.job
        if step is Next.DUPLICATE or (step is Next.SUPERSEDE and item is not None
                                      and item.state in TERMINAL):
            # Never over another record: one under this delivery's run id means its own
            # acquisition (or decision) landed unseen, and what ended it wrote the record
            # that says so (an operator's release naming who and why, a takeover, a
            # replacement); "duplicate" would erase it.
            self.put_run(record, record_ttl_s, only_if_absent=True)
            return None
        target = {Next.SKIP: State.SKIPPED, Next.QUEUE: State.QUEUED, Next.DROP: State.DROPPED,
                  Next.COALESCE: State.COALESCED, Next.PAUSED: State.PAUSED,
                  Next.ABSORB: State.ABSORBED, Next.SUPERSEDE: State.SUPERSEDED}[step]
        e = _Expr()
        run_id_a, expires = e.n("run_id"), e.n("expires_at_ms")
        held = (f"({run_id_a} = {e.v(lease.run_id or '-')} AND "
                f"{expires} >= {e.v(now_ms - skew_ms)})")
        not_paused = f"attribute_not_exists({e.n('paused_at_ms')})"
        queued_n = e.n("queued_n")
        lease_key = self._lease_key(job)
        # A trigger still `running` under a run the row (as read) does not name has its
        # item moved by this decision (below): only while the row still does not name
        # that run. A read older than a retake of the trigger (a delivery of the same
        # trigger took the lease since) would otherwise end a live run's trigger: DROP,
        # PAUSED and QUEUE do not otherwise pin the holder.
        unnamed = (item.run_id if item is not None and item.state is State.RUNNING
                   and item.run_id and lease.run_id != item.run_id else None)
        if unnamed is not None:
            not_named = (f" AND (attribute_not_exists({run_id_a}) OR "
                         f"{run_id_a} <> {e.v(unnamed)})")
            not_paused += not_named
        else:
            not_named = ""
        handed = (record.trigger_kind == "continuation" and lease.handed_from is not None
                  and lease.trigger_id == record.trigger_id)
        if step is Next.SKIP:
            lease_action = self._check(lease_key, e, f"{held} AND {not_paused}")
        elif step is Next.SUPERSEDE:
            # the row does not name the continuation (its hand-off is gone)
            tid = e.n("trigger_id")
            lease_action = self._check(
                lease_key, e, f"attribute_not_exists({tid}) OR {tid} <> {e.v(record.trigger_id)}")
        elif step is Next.PAUSED and handed:
            # a paused job ends the chain: the hand-off is freed with the decision (what
            # waits behind the chain stays on the row for the run after the pause)
            lease_action = self._update(
                lease_key, e,
                f"SET {e.n('released_at_ms')} = {e.v(now_ms)}, {e.n('last_run_id')} = "
                f"{e.v(lease.handed_from)}, {e.n('released_by')} = {e.v('run')} "
                f"REMOVE {', '.join(e.n(n) for n in _HOLD_ATTRS)}",
                f"attribute_exists({e.n('paused_at_ms')}) AND {self._lease_condition(e, lease)}"
                f" AND {e.n('handed_from')} = {e.v(lease.handed_from)}")
        elif step is Next.QUEUE:
            condition = (f"(attribute_not_exists({queued_n}) OR {queued_n} < {e.v(max_queued)})"
                         f" AND ({held} OR {queued_n} > {e.v(0)}) AND {not_paused}")
            lease_action = self._update(lease_key, e, f"ADD {queued_n} {e.v(1)}", condition)
        elif step is Next.DROP:
            lease_action = self._check(lease_key, e,
                                       f"{queued_n} >= {e.v(max_queued)}{not_named}")
        elif step is Next.COALESCE:
            assert follow_up is not None
            fu = e.n("follow_up")
            condition = (f"{held} AND {not_paused} AND (attribute_not_exists({fu}) OR "
                         f"{fu} = {e.v(follow_up[0])})")
            lease_action = self._update(lease_key, e, f"SET {fu} = {e.v(follow_up[0])}",
                                        condition)
        elif step is Next.PAUSED:
            paused = f"attribute_exists({e.n('paused_at_ms')}){not_named}"
            if record.trigger_kind == "follow_up":
                # never while a live holder's row names it (it waits for that release)
                fu = e.n("follow_up")
                paused += (f" AND (attribute_not_exists({fu}) OR {fu} <> "
                           f"{e.v(record.trigger_id)} OR attribute_not_exists({run_id_a}) OR "
                           f"{expires} < {e.v(now_ms - skew_ms)})")
            if item is not None and item.state is State.QUEUED and \
                    record.trigger_kind == "queued" and lease.queued_n > 0:
                lease_action = self._update(lease_key, e, f"ADD {queued_n} {e.v(-1)}",
                                            f"{paused} AND {queued_n} > {e.v(0)}")
            elif item is not None and item.state is State.QUEUED and \
                    record.trigger_kind == "queued":
                # not counted on this row (deleted and made again since): nothing to take
                lease_action = self._check(
                    lease_key, e, f"{paused} AND (attribute_not_exists({queued_n}) OR "
                    f"{queued_n} <= {e.v(0)})")
            else:
                lease_action = self._check(lease_key, e, paused)
        else:  # ABSORB: a run started after the one the follow-up follows
            gate = item.gate_fence if item is not None and item.gate_fence is not None else 0
            lease_action = self._check(lease_key, e,
                                       f"{e.n('served_fence')} > {e.v(gate)}{not_named}")
        trigger_action = self._trigger_write(
            job, record.trigger_id, item, state=target,
            route=Route.QUEUE if step is Next.QUEUE else route, run_id=record.run_id,
            now_ms=now_ms, ttl_epoch_s=trigger_ttl_s,
            into=follow_up[0] if follow_up is not None else None,
            kind="queued" if step is Next.QUEUE else record.trigger_kind or None)
        actions = [lease_action, trigger_action, self._run_put(record, record_ttl_s)]
        kinds = ["lease", "trigger", "record"]
        if item is not None and item.state is State.RUNNING and step is not Next.QUEUE \
                and lease.run_id == item.run_id:
            # A dead run's trigger whose run still holds the row (the job paused before
            # anyone took the lease over): the delivery is recorded, the trigger is left
            # to the takeover, which names it. A run the row no longer names (the row
            # deleted and made again) is never named by a takeover: its trigger takes
            # the decision (conditioned on that run), so the next delivery is a
            # duplicate. Queued, it becomes queued: its message runs it, and counts it
            # off the row.
            actions, kinds = [lease_action, actions[2]], ["lease", "record"]
        if follow_up is not None:
            follow_up_id, gate_fence, follow_up_ttl = follow_up
            f = _Expr()
            state = f.n("state")
            actions.append(self._update(
                self._trigger_key(job, follow_up_id), f,
                f"SET {state} = {f.v(State.QUEUED.value)}, {f.n('route')} = "
                f"{f.v(Route.QUEUE.value)}, {f.n('gate_fence')} = {f.v(gate_fence)}, "
                f"{f.n('run_id')} = if_not_exists({f.n('run_id')}, {f.v(record.run_id)}), "
                f"{f.n('kind')} = {f.v('follow_up')}, {f.n('job')} = {f.v(job)}, "
                f"{f.n('at_ms')} = if_not_exists({f.n('at_ms')}, {f.v(now_ms)}), "
                f"{f.n(TTL_ATTRIBUTE)} = {f.v(follow_up_ttl)}",
                f"attribute_not_exists({state}) OR {state} = {f.v(State.QUEUED.value)}"))
            kinds.append("follow_up")
        try:
            refused = self._transact("record_decision", job, actions, kinds)
        except BotoCoreError as exc:
            raise StoreError("record_decision", job, str(exc)) from exc
        if refused is not None and refused.trigger_failed and refused.trigger is not None \
                and refused.trigger.run_id == record.run_id \
                and (record.trigger_kind != "continuation" or refused.trigger.state is target):
            return None  # our own earlier attempt landed (its response was lost)
        return refused

    def undo_queued(self, record: RunRecord, *, prior: TriggerRecord | None,
                    now_ms: int) -> bool:
        """Take back a ``queued`` decision whose message could not be sent: the trigger
        back to ``prior``, ``queued_n - 1``, the decision's record deleted. One
        transaction, conditioned on the trigger still being queued by that decision."""
        job = record.job
        key = self._trigger_key(job, record.trigger_id)
        t = _Expr()
        condition = (f"{t.n('state')} = {t.v(State.QUEUED.value)} AND "
                     f"{t.n('run_id')} = {t.v(record.run_id)}")
        if prior is None:
            trigger_action: dict[str, Any] = {"Delete": {
                "TableName": self.table_name, "Key": key, "ConditionExpression": condition,
                **t.params(condition)}}
        else:
            update = (f"SET {t.n('state')} = {t.v(prior.state.value)}, "
                      f"{t.n('route')} = {t.v(prior.route.value)}, "
                      f"{t.n('run_id')} = {t.v(prior.run_id or '-')}")
            trigger_action = self._update(key, t, update, condition)
        e = _Expr()
        queued_n = e.n("queued_n")
        actions = [
            trigger_action,
            self._update(self._lease_key(job), e, f"ADD {queued_n} {e.v(-1)}",
                         f"{queued_n} > {e.v(0)}"),
            {"Delete": {"TableName": self.table_name,
                        "Key": {PARTITION_KEY: {"S": job_pk(job)},
                                SORT_KEY: {"S": run_sk(record.run_id)}}}},
        ]
        try:
            return self._transact("undo_queued", job, actions,
                                  ["trigger", "lease", "record"]) is None
        except BotoCoreError as exc:
            raise StoreError("undo_queued", job, str(exc)) from exc

    def put_run(self, record: RunRecord, ttl_epoch_s: int, *, only_if_absent: bool = False,
                keep_operator_record: bool = False) -> bool:
        """Write a run record. With ``only_if_absent``, never overwrite an existing one;
        with ``keep_operator_record``, never overwrite one an operator's release wrote."""
        params: dict[str, Any] = {}
        if only_if_absent:
            params["ConditionExpression"] = "attribute_not_exists(#sk)"
            params["ExpressionAttributeNames"] = {"#sk": SORT_KEY}
        elif keep_operator_record:
            params["ConditionExpression"] = "attribute_not_exists(#sk) OR #st <> :op"
            params["ExpressionAttributeNames"] = {"#sk": SORT_KEY, "#st": "status"}
            params["ExpressionAttributeValues"] = {
                ":op": {"S": RunStatus.RELEASED_BY_OPERATOR.value}}
        try:
            self._client.put_item(
                TableName=self.table_name, Item=self._run_item(record, ttl_epoch_s), **params
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise StoreError("put_run", record.job, str(exc)) from exc
        return True

    def list_runs(self, job: str, *, limit: int = 50) -> list[RunRecord | DamagedRun]:
        """A job's run log, newest first, at most ``limit`` rows. The active run is shown
        as ``running``. A row that is not a readable run record is a :class:`DamagedRun`
        in its place (its key and what is wrong), never raised: one damaged row hides
        nothing else.

        Reads page after page until ``limit`` rows (a page ends at 1 MB: a few large
        records, a long error each, fill one before ``limit`` is reached).
        """
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :run)",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
            "ExpressionAttributeValues": {":pk": {"S": job_pk(job)},
                                          ":run": {"S": RUN_PREFIX}},
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        rows: list[RunRecord | DamagedRun] = []
        while len(rows) < limit:
            response = self._client.query(**kwargs, Limit=limit - len(rows))
            rows += [read_run_row(item) for item in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        try:
            lease = self.read_lease(job)
        except DamagedRowError:  # named by `jobguard status`; the run log is still read
            return rows[:limit]
        if lease.run_id and not any(r.run_id == lease.run_id for r in rows):
            handed = lease.handed_from is not None  # the next link, not started yet
            active = RunRecord(
                job=job, run_id=lease.run_id, trigger_id=lease.trigger_id or "",
                trigger_kind="continuation" if handed else "", policy="",
                decision=Decision.RAN, status=RunStatus.RUNNING,
                started_at_ms=lease.acquired_at_ms or 0, fence=lease.fence,
                owner=None if handed else lease.owner,
                detail="handed: the continuation has not started yet" if handed else None,
                extra={"continues": lease.handed_from} if handed else {},
            )
            rows.insert(0, active)
        return rows[:limit]

    def runs_between(self, job: str, *, from_ms: int, to_ms: int,
                     lookback_ms: int = 3_600_000, max_records: int = 200_000) -> RunLog:
        """The run records of runs started between ``from_ms - lookback_ms`` and
        ``to_ms`` (run ids sort by start time), oldest first, every page read.

        The lookback finds runs that started before the range and were still going in
        it (a Lambda runs at most 15 minutes); the caller keeps those that overlap. A
        row that is not a readable run record is named in ``unreadable``, not raised,
        so one damaged record never hides the rest. Reads the run log only: the item
        ledger's layout is not assumed (a run's item counts are on its record).

        Example:
            >>> log = store.runs_between("crm-sync", from_ms=t0, to_ms=t1)  # doctest: +SKIP
            >>> [r.status.value for r in log.records]  # doctest: +SKIP
            ['succeeded', 'coalesced', 'succeeded']
        """
        if to_ms < from_ms:
            raise ValueError(f"to_ms ({to_ms}) is before from_ms ({from_ms})")
        low, high = run_id_bounds(from_ms - max(0, lookback_ms), to_ms)
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
            "ExpressionAttributeValues": {":pk": {"S": job_pk(job)},
                                          ":low": {"S": run_sk(low)},
                                          ":high": {"S": run_sk(high)}},
            "ConsistentRead": True,
        }
        records: list[RunRecord] = []
        damaged: list[DamagedRun] = []
        while True:
            response = self._client.query(**kwargs)
            for item in response.get("Items", []):
                read = read_run_row(item)
                if isinstance(read, DamagedRun):
                    damaged.append(read)
                else:
                    records.append(read)
            if len(records) >= max_records:
                return RunLog(tuple(records[:max_records]), tuple(damaged), truncated=True)
            if "LastEvaluatedKey" not in response:
                return RunLog(tuple(records), tuple(damaged))
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def get_run(self, job: str, run_id: str) -> RunRecord | DamagedRun | None:
        """The run record of ``run_id``; a :class:`DamagedRun` when its row is not a
        readable one; None when there is no row."""
        response = self._client.get_item(
            TableName=self.table_name,
            Key={PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": run_sk(run_id)}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return read_run_row(item) if item else None

    @staticmethod
    def _run_item(record: RunRecord, ttl_epoch_s: int) -> dict[str, Any]:
        values = record.as_dict()
        values.pop("duration_ms", None)
        if record.duration_ms is not None:
            values["duration_ms"] = record.duration_ms
        values[PARTITION_KEY] = job_pk(record.job)
        values[SORT_KEY] = run_sk(record.run_id)
        values[TTL_ATTRIBUTE] = ttl_epoch_s
        return _item(values)


def create_table(client: Any, table_name: str) -> None:
    """Create the jobguard table (local emulators and tests; the CDK stack in AWS)."""
    client.create_table(
        TableName=table_name,
        KeySchema=[
            {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": SORT_KEY, "AttributeType": "S"},
            {"AttributeName": UNRESOLVED_PK, "AttributeType": "S"},
            {"AttributeName": UNRESOLVED_SK, "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[{
            "IndexName": UNRESOLVED_INDEX,
            "KeySchema": [
                {"AttributeName": UNRESOLVED_PK, "KeyType": "HASH"},
                {"AttributeName": UNRESOLVED_SK, "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName=table_name)
    client.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    )
