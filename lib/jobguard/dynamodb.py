"""The DynamoDB job store: the only module that talks to DynamoDB.

Every state change is one conditional write (or one transaction), and every failed
condition returns the row it failed against (``ReturnValuesOnConditionCheckFailure=
ALL_OLD``), so a losing worker learns the holder without a second read.

Timeline of one job's lease row::

    free ──acquire(fence+1)──► held by R1 ──renew──► held ──release──► free (fence kept)
                                  │                                     ▲
                                  └─ expired > skew ──acquire(fence+1)──┘ (R1 recorded
                                                                           as abandoned)
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ._dynamo import Expr as _Expr
from ._dynamo import code as _code
from ._dynamo import first_reason as _first_reason
from ._dynamo import item as _item
from ._dynamo import old_item as _old_item
from ._dynamo import plain as _plain
from ._dynamo import transient
from .callsites import RETRY, SURFACE, call_site
from .errors import StoreError
from .lease import Acquired, Busy, LeaseState, Mark, Next, Released, TriggerMark
from .records import Decision, RunRecord, RunStatus
from .schema import (
    LEASE_SK,
    PARTITION_KEY,
    RUN_PREFIX,
    SORT_KEY,
    TRIGGER_ATTR_PREFIX,
    TTL_ATTRIBUTE,
    UNRESOLVED_INDEX,
    UNRESOLVED_PK,
    UNRESOLVED_SK,
    job_pk,
    run_sk,
)
from .triggers import Trigger, TriggerKind

__all__ = ["Acquired", "Busy", "DynamoJobStore", "Released", "create_table"]

def lease_state(job: str, item: dict[str, Any] | None) -> LeaseState:
    """Read a lease row (DynamoDB JSON) as a :class:`LeaseState`."""
    row = _plain(item)
    triggers = {
        name[len(TRIGGER_ATTR_PREFIX):]: TriggerMark.decode(value)
        for name, value in row.items()
        if name.startswith(TRIGGER_ATTR_PREFIX) and isinstance(value, str)
    }
    return LeaseState(
        job=job,
        fence=int(row.get("fence", 0)),
        run_id=row.get("run_id"),
        owner=row.get("holder_owner"),
        trigger_id=row.get("trigger_id"),
        acquired_at_ms=row.get("acquired_at_ms"),
        expires_at_ms=row.get("expires_at_ms"),
        heartbeat_at_ms=row.get("heartbeat_at_ms"),
        released_at_ms=row.get("released_at_ms"),
        last_run_id=row.get("last_run_id"),
        paused_at_ms=row.get("paused_at_ms"),
        paused_reason=row.get("paused_reason"),
        queued_n=int(row.get("queued_n", 0)),
        follow_up=row.get("follow_up"),
        wake_receipt=row.get("wake_receipt"),
        triggers=triggers,
    )


def run_record(item: dict[str, Any]) -> RunRecord:
    row = _plain(item)
    known = {
        "job", "run_id", "trigger_id", "trigger_kind", "policy", "decision", "status",
        "started_at_ms", "ended_at_ms", "fence", "owner", "holder_run_id", "holder_fence",
        "scheduled_at", "requested_by", "error", "detail", "duration_ms",
    }
    return RunRecord(
        job=row["job"],
        run_id=row["run_id"],
        trigger_id=row.get("trigger_id", ""),
        trigger_kind=row.get("trigger_kind", ""),
        policy=row.get("policy", ""),
        decision=Decision(row.get("decision", "ran")),
        status=RunStatus(row["status"]),
        started_at_ms=int(row.get("started_at_ms", 0)),
        ended_at_ms=row.get("ended_at_ms"),
        fence=row.get("fence"),
        owner=row.get("owner"),
        holder_run_id=row.get("holder_run_id"),
        holder_fence=row.get("holder_fence"),
        scheduled_at=row.get("scheduled_at"),
        requested_by=row.get("requested_by"),
        error=row.get("error"),
        detail=row.get("detail"),
        extra={
            k: v for k, v in row.items()
            if k not in known and k not in (PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE)
        },
    )


def _spent_by_own_run(state: LeaseState, trigger_id: str, takeover_before_ms: int) -> bool:
    """The trigger's pending mark was spent by a run of its own that failed, or that
    died and whose lease has expired: a redelivery of its message should run again."""
    mark = state.triggers.get(trigger_id)
    if mark is None:
        return False
    if mark.mark is Mark.FAILED:
        return state.run_id is None or (state.expires_at_ms or 0) < takeover_before_ms
    return mark.mark is Mark.RUNNING and (
        state.run_id is None or (state.expires_at_ms or 0) < takeover_before_ms)


def _trigger_attr(trigger_id: str) -> str:
    return TRIGGER_ATTR_PREFIX + trigger_id


_BACKOFF_S = 0.02


# -- call sites (see jobguard.callsites) --------------------------------------------

ACQUIRE = call_site(
    "dynamodb.acquire", "dynamodb", "UpdateItem", "DynamoJobStore.acquire",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a retry refused by its own write is recognised (run id on the row, fence, "
         "the displaced run kept in `prev_run_id`); an ambiguous failure is resolved by a "
         "consistent read of the row before `StoreError` reaches the trigger's sender",
)
ACQUIRE_RESOLVE = call_site(
    "dynamodb.acquire_resolve", "dynamodb", "GetItem", "DynamoJobStore._acquire_unknown",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="the read that resolves an unanswered acquisition; if it fails too, `StoreError` "
         "(a lease it may have taken expires and is taken over)",
)
RENEW = call_site(
    "dynamodb.renew", "dynamodb", "UpdateItem", "DynamoJobStore.renew",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="the heartbeat resolves a failed renewal with a consistent read and retries "
         "before its local deadline; past it the run stops (`lease_lost`)",
)
RELEASE = call_site(
    "dynamodb.release", "dynamodb", "TransactWriteItems", "DynamoJobStore.release",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="retried with backoff while the lease is still the run's; a retry refused by its "
         "own release (row free, `last_run_id` = run id) counts as released",
)
READ_LEASE = call_site(
    "dynamodb.read_lease", "dynamodb", "GetItem", "DynamoJobStore.read_lease",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read: the SDK retries; the heartbeat treats a failed read as unresolved",
)
SET_WAKE = call_site(
    "dynamodb.set_wake", "dynamodb", "UpdateItem", "DynamoJobStore.set_wake",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="the deferred message is reported failed and comes back after its visibility "
         "timeout; the retry's condition (holder) still holds",
)
PAUSE = call_site(
    "dynamodb.pause", "dynamodb", "UpdateItem", "DynamoJobStore.pause",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command; the update is idempotent",
)
RESUME = call_site(
    "dynamodb.resume", "dynamodb", "UpdateItem", "DynamoJobStore.resume",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command; the update is idempotent",
)
FORCE_RELEASE = call_site(
    "dynamodb.force_release", "dynamodb", "UpdateItem", "DynamoJobStore.force_release",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command; a retry refused by its own write (holder gone, fence + 1, "
         "`last_run_id` = holder) counts as released",
)
RECORD_DECISION = call_site(
    "dynamodb.record_decision", "dynamodb", "TransactWriteItems",
    "DynamoJobStore.record_decision",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="nothing half-written (one transaction); a retry refused by its own mark is "
         "recognised by reading back its run record (same run id), not recorded twice",
)
UNDO_PENDING = call_site(
    "dynamodb.undo_pending", "dynamodb", "UpdateItem", "DynamoJobStore.undo_pending",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="compensation after a failed send; if it fails too, a redelivery of the trigger "
         "finds its `queued` mark and sends the message again",
)
PUT_RUN = call_site(
    "dynamodb.put_run", "dynamodb", "PutItem", "DynamoJobStore.put_run",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="stale/duplicate records surface to the sender; a displaced run's record is best "
         "effort (the new run's record names it); the put is idempotent",
)
LIST_RUNS = call_site(
    "dynamodb.list_runs", "dynamodb", "Query", "DynamoJobStore.list_runs",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (CLI, status)",
)
GET_RUN = call_site(
    "dynamodb.get_run", "dynamodb", "GetItem", "DynamoJobStore.get_run",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (CLI)",
)


class DynamoJobStore:
    """Leases and run records for any number of jobs in one DynamoDB table.

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

    # -- lease ---------------------------------------------------------------------

    def acquire(
        self,
        trigger: Trigger,
        *,
        run_id: str,
        owner: str,
        now_ms: int,
        lease_ms: int,
        skew_ms: int,
        replace: bool = False,
        respect_queue: bool = False,
        absorb_follow_up: bool = False,
        ignore_pause: bool = False,
        _rerun: bool = False,
    ) -> Acquired | Busy:
        """Take the job's lease in one conditional write, or learn why not.

        The condition is assembled from named pieces:

        - ``free``: nobody holds it, or the holder's lease ended more than the skew
          margin ago (``replace`` drops this piece);
        - ``not_paused``;
        - ``trigger_open``: this trigger was not already decided (the dedup ledger);
          queued triggers and follow-ups instead require their pending mark;
        - ``queue_empty`` (``QUEUE`` direct triggers): no pending trigger would be
          overtaken.
        """
        e = _Expr()
        t = e.n(_trigger_attr(trigger.trigger_id))
        takeover_before = e.v(now_ms - skew_ms)
        run_id_a, expires = e.n("run_id"), e.n("expires_at_ms")
        free = f"(attribute_not_exists({run_id_a}) OR {expires} < {takeover_before})"
        not_paused = f"attribute_not_exists({e.n('paused_at_ms')})"
        if _rerun:
            # A queued trigger or follow-up whose own run failed or died: its message came
            # back, and it runs again (its pending mark was spent when it first ran).
            trigger_open = (f"(begins_with({t}, {e.v('failed@')}) OR "
                            f"(begins_with({t}, {e.v('running@')}) AND {free}))")
        elif trigger.kind is TriggerKind.QUEUED:
            trigger_open = f"begins_with({t}, {e.v(Mark.QUEUED.value + '@')})"
        elif trigger.kind is TriggerKind.FOLLOW_UP:
            trigger_open = f"{e.n('follow_up')} = {e.v(trigger.trigger_id)}"
        else:
            # A trigger marked running may run again only once no live run holds the
            # lease (its own run crashed and expired): never by replacing a live run.
            trigger_open = (
                f"(attribute_not_exists({t}) OR begins_with({t}, {e.v('failed@')}) OR "
                f"(begins_with({t}, {e.v('running@')}) AND {free}))"
            )
        pieces = [trigger_open] if ignore_pause else [not_paused, trigger_open]
        if not replace:
            pieces.insert(0, free)
        if respect_queue:
            queued = e.n("queued_n")
            pieces.append(f"(attribute_not_exists({queued}) OR {queued} <= {e.v(0)})")
        sets = [
            f"{e.n('fence')} = if_not_exists({e.n('fence')}, {e.v(0)}) + {e.v(1)}",
            f"{run_id_a} = {e.v(run_id)}",
            f"{e.n('holder_owner')} = {e.v(owner)}",
            f"{e.n('trigger_id')} = {e.v(trigger.trigger_id)}",
            f"{e.n('acquired_at_ms')} = {e.v(now_ms)}",
            f"{e.n('heartbeat_at_ms')} = {e.v(now_ms)}",
            f"{expires} = {e.v(now_ms + lease_ms)}",
            f"{t} = {e.v(TriggerMark(Mark.RUNNING, now_ms).encode())}",
            # Who held it before us (evaluated on the row before this write): what a
            # retry of this write, after a lost response, needs to record the run it
            # displaced.
            f"{e.n('prev_run_id')} = if_not_exists({run_id_a}, {e.v('-')})",
        ]
        removes = [e.n("wake_receipt")]
        if trigger.kind is TriggerKind.FOLLOW_UP or absorb_follow_up:
            removes.append(e.n("follow_up"))
        update = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes)
        if trigger.kind is TriggerKind.QUEUED and not _rerun:
            update += f" ADD {e.n('queued_n')} {e.v(-1)}"
        condition = " AND ".join(pieces)
        try:
            response = self._client.update_item(
                TableName=self.table_name,
                Key=self._lease_key(trigger.job),
                UpdateExpression=update,
                ConditionExpression=condition,
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **e.params(update, condition),
            )
        except (ClientError, BotoCoreError) as exc:
            if not isinstance(exc, ClientError) or _code(exc) != "ConditionalCheckFailedException":
                return self._acquire_unknown(trigger.job, run_id, exc)
            state = lease_state(trigger.job, _old_item(exc))
            if state.run_id == run_id:
                # Our own earlier attempt succeeded and its response was lost; the SDK
                # retried and the retry failed against our own write. The row we
                # displaced is gone; what we know of it is its run id.
                prev = _plain(_old_item(exc)).get("prev_run_id")
                previous = LeaseState(job=trigger.job, fence=state.fence - 1,
                                      run_id=None if prev in (None, "-") else str(prev))
                return Acquired(fence=state.fence, previous=previous)
            if trigger.is_from_queue and not _rerun and _spent_by_own_run(
                    state, trigger.trigger_id, now_ms - skew_ms):
                return self.acquire(
                    trigger, run_id=run_id, owner=owner, now_ms=now_ms, lease_ms=lease_ms,
                    skew_ms=skew_ms, replace=replace, absorb_follow_up=absorb_follow_up,
                    ignore_pause=ignore_pause, _rerun=True)
            return Busy(state)
        previous = lease_state(trigger.job, response.get("Attributes"))
        return Acquired(fence=previous.fence + 1, previous=previous)

    def _acquire_unknown(self, job: str, run_id: str, exc: Exception) -> Acquired:
        """The acquisition failed without an answer (every attempt throttled, a 5xx, a
        timeout): it may have landed. A consistent read tells; ours, the run goes on."""
        try:
            response = self._client.get_item(
                TableName=self.table_name, Key=self._lease_key(job), ConsistentRead=True)
        except (ClientError, BotoCoreError):
            raise StoreError("acquire", job, str(exc)) from exc
        row = response.get("Item")
        state = lease_state(job, row)
        if state.run_id != run_id:
            raise StoreError("acquire", job, str(exc)) from exc
        prev = _plain(row).get("prev_run_id")
        return Acquired(fence=state.fence, previous=LeaseState(
            job=job, fence=state.fence - 1, run_id=None if prev in (None, "-") else str(prev)))

    def renew(self, job: str, *, run_id: str, fence: int, now_ms: int, lease_ms: int) -> bool:
        """Extend the lease; False when it is no longer ours (never re-creates a row)."""
        e = _Expr()
        condition = f"{e.n('run_id')} = {e.v(run_id)} AND {e.n('fence')} = {e.v(fence)}"
        update = (
            f"SET {e.n('expires_at_ms')} = {e.v(now_ms + lease_ms)}, "
            f"{e.n('heartbeat_at_ms')} = {e.v(now_ms)}"
        )
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key=self._lease_key(job),
                UpdateExpression=update,
                ConditionExpression=condition,
                **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise StoreError("renew", job, str(exc)) from exc
        return True

    def release(
        self,
        job: str,
        *,
        run_id: str,
        fence: int,
        trigger_id: str,
        mark: TriggerMark,
        prune: list[str],
        record: RunRecord,
        ttl_epoch_s: int,
    ) -> Released:
        """Free the lease and write the run record in one transaction.

        The row is kept (with its fence) so the fence never resets. If a deferred
        queue message registered a wake-up receipt, the first attempt fails on it and
        the second removes it and returns it, so the caller can make the message
        visible at once. A pending follow-up without such a receipt is returned too
        (:attr:`Released.follow_up`): its message may be missing.
        """
        wake: str | None = None
        follow_up: str | None = None
        looked = False
        for attempt in range(6):
            e = _Expr()
            condition = f"{e.n('run_id')} = {e.v(run_id)} AND {e.n('fence')} = {e.v(fence)}"
            if not looked:
                condition += (f" AND attribute_not_exists({e.n('wake_receipt')})"
                              f" AND attribute_not_exists({e.n('follow_up')})")
            removes = [e.n(n) for n in ("run_id", "holder_owner", "trigger_id", "expires_at_ms",
                                        "wake_receipt")]
            removes += [e.n(_trigger_attr(p)) for p in prune if p != trigger_id]
            update = (
                f"SET {e.n('released_at_ms')} = {e.v(record.ended_at_ms)}, "
                f"{e.n('last_run_id')} = {e.v(run_id)}, "
                f"{e.n(_trigger_attr(trigger_id))} = {e.v(mark.encode())} "
                f"REMOVE {', '.join(removes)}"
            )
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        {"Update": {
                            "TableName": self.table_name,
                            "Key": self._lease_key(job),
                            "UpdateExpression": update,
                            "ConditionExpression": condition,
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                            **e.params(update, condition),
                        }},
                        {"Put": {"TableName": self.table_name,
                                 "Item": self._run_item(record, ttl_epoch_s)}},
                    ],
                    ClientRequestToken=str(uuid.uuid4()),
                )
                return Released(released=True, wake_receipt=wake, follow_up=follow_up)
            except (ClientError, BotoCoreError) as exc:
                if not isinstance(exc, ClientError) or _code(exc) != "TransactionCanceledException":
                    if transient(exc) and attempt < 5:
                        # Unanswered: the next attempt either lands or is refused by
                        # this one's effect, which the checks below recognise.
                        time.sleep(_BACKOFF_S * 2**attempt)
                        continue
                    raise StoreError("release", job, str(exc)) from exc
                reason = _first_reason(exc)
                if reason.get("Code") != "ConditionalCheckFailed":
                    continue  # conflict with a concurrent decision write: retry
                state = lease_state(job, reason.get("Item"))
                if state.run_id == run_id and state.fence == fence and not looked and (
                        state.wake_receipt or state.follow_up):
                    looked = True
                    wake = state.wake_receipt
                    follow_up = None if wake else state.follow_up
                    continue
                if state.run_id is None and state.last_run_id == run_id:
                    return Released(released=True)  # our own earlier attempt landed
                return Released(released=False, state=state)
        raise StoreError("release", job, "transaction kept conflicting")

    def read_lease(self, job: str) -> LeaseState:
        """A strongly consistent read of the lease row."""
        try:
            response = self._client.get_item(
                TableName=self.table_name, Key=self._lease_key(job), ConsistentRead=True
            )
        except ClientError as exc:
            raise StoreError("read_lease", job, str(exc)) from exc
        return lease_state(job, response.get("Item"))

    def set_wake(self, job: str, *, holder_run_id: str, receipt: str) -> bool:
        """Leave a deferred message's receipt for the holder to wake at release."""
        e = _Expr()
        update = f"SET {e.n('wake_receipt')} = {e.v(receipt)}"
        condition = f"{e.n('run_id')} = {e.v(holder_run_id)}"
        try:
            self._client.update_item(
                TableName=self.table_name,
                Key=self._lease_key(job),
                UpdateExpression=update,
                ConditionExpression=condition,
                **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise StoreError("set_wake", job, str(exc)) from exc
        return True

    def pause(self, job: str, *, reason: str, now_ms: int) -> None:
        """Pause a job: triggers are recorded as ``paused`` until :meth:`resume`."""
        e = _Expr()
        update = (
            f"SET {e.n('paused_at_ms')} = {e.v(now_ms)}, "
            f"{e.n('paused_reason')} = {e.v(reason)}"
        )
        self._client.update_item(
            TableName=self.table_name, Key=self._lease_key(job), UpdateExpression=update,
            **e.params(update),
        )

    def force_release(self, job: str, *, holder_run_id: str, fence: int, now_ms: int) -> bool:
        """Free a stuck lease and bump the fence, so the old holder can write nothing
        more. Conditioned on the holder the operator saw: never frees a newer one."""
        e = _Expr()
        condition = f"{e.n('run_id')} = {e.v(holder_run_id)} AND {e.n('fence')} = {e.v(fence)}"
        removes = ", ".join(e.n(n) for n in ("run_id", "holder_owner", "trigger_id",
                                              "expires_at_ms", "wake_receipt"))
        update = (f"SET {e.n('fence')} = {e.n('fence')} + {e.v(1)}, "
                  f"{e.n('released_at_ms')} = {e.v(now_ms)}, "
                  f"{e.n('last_run_id')} = {e.v(holder_run_id)} REMOVE {removes}")
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job), UpdateExpression=update,
                ConditionExpression=condition, ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                # A retry refused by our own earlier write (response lost): released.
                state = lease_state(job, _old_item(exc))
                return (state.run_id is None and state.last_run_id == holder_run_id
                        and state.fence == fence + 1 and state.released_at_ms == now_ms)
            raise StoreError("force_release", job, str(exc)) from exc
        return True

    def resume(self, job: str) -> None:
        e = _Expr()
        update = f"REMOVE {e.n('paused_at_ms')}, {e.n('paused_reason')}"
        self._client.update_item(
            TableName=self.table_name, Key=self._lease_key(job), UpdateExpression=update,
            **e.params(update),
        )

    # -- decisions and run records -----------------------------------------------------

    def record_decision(
        self,
        record: RunRecord,
        *,
        next_step: Next,
        observed: LeaseState,
        now_ms: int,
        skew_ms: int,
        max_queued: int,
        prune: list[str],
        ttl_epoch_s: int,
        follow_up_id: str | None = None,
    ) -> LeaseState | None:
        """Write a non-run decision and its mark on the lease row, atomically.

        The lease-row condition re-checks what the decision was based on (the holder is
        still the one observed, the trigger is still undecided, the queue bound). Returns
        None when written, or the current row when the condition no longer holds, for
        the caller to classify again.
        """
        job = record.job
        if next_step in (Next.DUPLICATE, Next.ABSORBED):
            self.put_run(record, ttl_epoch_s)
            return None
        e = _Expr()
        t = e.n(_trigger_attr(record.trigger_id))
        mark_value = {
            Next.SKIP: Mark.SKIPPED, Next.QUEUE: Mark.QUEUED, Next.DROP: Mark.DROPPED,
            Next.COALESCE: Mark.COALESCED, Next.PAUSED: Mark.PAUSED,
        }[next_step]
        sets = [f"{t} = {e.v(TriggerMark(mark_value, now_ms).encode())}"]
        removes = [e.n(_trigger_attr(p)) for p in prune if p != record.trigger_id]
        adds: list[str] = []
        undecided = f"attribute_not_exists({t})"
        retryable = (
            f"({undecided} OR begins_with({t}, {e.v('failed@')}) OR "
            f"begins_with({t}, {e.v('running@')}))"
        )
        run_id_a, expires = e.n("run_id"), e.n("expires_at_ms")
        holder, alive_after = e.v(observed.run_id or "-"), e.v(now_ms - skew_ms)
        held = f"({run_id_a} = {holder} AND {expires} >= {alive_after})"
        queued_n = e.n("queued_n")
        kind = TriggerKind(record.trigger_kind)
        if next_step is Next.SKIP:
            condition = f"{retryable} AND {held}"
        elif next_step is Next.QUEUE:
            condition = (
                f"{retryable} AND (attribute_not_exists({queued_n}) OR {queued_n} < "
                f"{e.v(max_queued)}) AND ({held} OR {queued_n} > {e.v(0)})"
            )
            adds.append(f"{queued_n} {e.v(1)}")
        elif next_step is Next.DROP:
            condition = f"{retryable} AND {queued_n} >= {e.v(max_queued)}"
        elif next_step is Next.COALESCE:
            follow_up = e.n("follow_up")
            if follow_up_id is not None:
                condition = f"{retryable} AND {held} AND attribute_not_exists({follow_up})"
                sets.append(f"{follow_up} = {e.v(follow_up_id)}")
            else:
                condition = f"{retryable} AND {held} AND attribute_exists({follow_up})"
        elif next_step is Next.PAUSED:
            paused = f"attribute_exists({e.n('paused_at_ms')})"
            if kind is TriggerKind.QUEUED:
                condition = f"{paused} AND begins_with({t}, {e.v('queued@')})"
                adds.append(f"{queued_n} {e.v(-1)}")
            elif kind is TriggerKind.FOLLOW_UP:
                condition = f"{paused} AND {e.n('follow_up')} = {e.v(record.trigger_id)}"
                removes.append(e.n("follow_up"))
            else:
                condition = f"{paused} AND {retryable}"
        else:  # pragma: no cover - classify() produces nothing else here
            raise ValueError(f"no decision record for {next_step}")
        update = "SET " + ", ".join(sets)
        if removes:
            update += " REMOVE " + ", ".join(removes)
        if adds:
            update += " ADD " + ", ".join(adds)
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {"Update": {
                        "TableName": self.table_name,
                        "Key": self._lease_key(job),
                        "UpdateExpression": update,
                        "ConditionExpression": condition,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        **e.params(update, condition),
                    }},
                    {"Put": {"TableName": self.table_name,
                             "Item": self._run_item(record, ttl_epoch_s)}},
                ],
                ClientRequestToken=str(uuid.uuid4()),
            )
        except ClientError as exc:
            if _code(exc) != "TransactionCanceledException":
                raise StoreError("record_decision", job, str(exc)) from exc
            reason = _first_reason(exc)
            if reason.get("Code") == "ConditionalCheckFailed":
                state = lease_state(job, reason.get("Item"))
                if (state.mark_of(record.trigger_id) == TriggerMark(mark_value, now_ms)
                        and self.get_run(job, record.run_id) is not None):
                    # Our own earlier attempt landed (its response was lost and the SDK
                    # sent it again): the mark is ours and so is the run record, which
                    # only this attempt writes under this run id.
                    return None
                return state
            return self.read_lease(job)  # conflict: look again
        return None

    def undo_pending(self, job: str, *, trigger_id: str, follow_up_id: str | None) -> None:
        """Compensate a queued/coalesced mark whose SQS message could not be sent."""
        e = _Expr()
        t = e.n(_trigger_attr(trigger_id))
        if follow_up_id is not None:
            # The trigger's mark goes back to retryable too: its redelivery decides again.
            update = (f"SET {t} = {e.v(TriggerMark(Mark.FAILED, 0).encode())} "
                      f"REMOVE {e.n('follow_up')}")
            condition = f"{e.n('follow_up')} = {e.v(follow_up_id)}"
        else:
            update = (
                f"SET {t} = {e.v(TriggerMark(Mark.FAILED, 0).encode())} "
                f"ADD {e.n('queued_n')} {e.v(-1)}"
            )
            condition = f"begins_with({t}, {e.v('queued@')})"
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job),
                UpdateExpression=update, ConditionExpression=condition,
                **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise StoreError("undo_pending", job, str(exc)) from exc

    def put_run(self, record: RunRecord, ttl_epoch_s: int, *, only_if_absent: bool = False) -> bool:
        """Write a run record. With ``only_if_absent``, never overwrite an existing one."""
        params: dict[str, Any] = {}
        if only_if_absent:
            params["ConditionExpression"] = "attribute_not_exists(#sk)"
            params["ExpressionAttributeNames"] = {"#sk": SORT_KEY}
        try:
            self._client.put_item(
                TableName=self.table_name, Item=self._run_item(record, ttl_epoch_s), **params
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise StoreError("put_run", record.job, str(exc)) from exc
        return True

    def list_runs(self, job: str, *, limit: int = 50) -> list[RunRecord]:
        """A job's run records, newest first. The active run is shown as ``running``."""
        response = self._client.query(
            TableName=self.table_name,
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :run)",
            ExpressionAttributeNames={"#pk": PARTITION_KEY, "#sk": SORT_KEY},
            ExpressionAttributeValues={":pk": {"S": job_pk(job)}, ":run": {"S": RUN_PREFIX}},
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        )
        records = [run_record(item) for item in response.get("Items", [])]
        lease = self.read_lease(job)
        if lease.run_id and not any(r.run_id == lease.run_id for r in records):
            active = RunRecord(
                job=job, run_id=lease.run_id, trigger_id=lease.trigger_id or "",
                trigger_kind="", policy="", decision=Decision.RAN, status=RunStatus.RUNNING,
                started_at_ms=lease.acquired_at_ms or 0, fence=lease.fence, owner=lease.owner,
            )
            records.insert(0, active)
        return records[:limit]

    def get_run(self, job: str, run_id: str) -> RunRecord | None:
        response = self._client.get_item(
            TableName=self.table_name,
            Key={PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": run_sk(run_id)}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return run_record(item) if item else None

    # -- helpers ---------------------------------------------------------------------

    @staticmethod
    def _lease_key(job: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": LEASE_SK}}

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
