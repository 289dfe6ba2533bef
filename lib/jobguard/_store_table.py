"""The job store's table: how its rows are addressed, read and conditioned, and how one
transaction runs and answers (its refusals read back as the values they were).

Changes when the table's layout or the way a write is conditioned changes: the keys, the
row readers (lease row, trigger item, run record), the building blocks every transition
puts in its transaction (the conditions on a lease row or trigger item as observed, a
trigger item's write, a run record's put) and :meth:`StoreTable._transact`, which reads a
cancelled transaction's reasons back. Each record kind's transitions are in their own
module (:mod:`jobguard._store_lease`, :mod:`jobguard._store_release`,
:mod:`jobguard._store_operator`, :mod:`jobguard._store_triggers`,
:mod:`jobguard._store_runs`); :class:`jobguard.dynamodb.DynamoJobStore` composes them.
"""

from __future__ import annotations

import uuid
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ._dynamo import THROTTLE_REASONS
from ._dynamo import Expr as _Expr
from ._dynamo import code as _code
from ._dynamo import item as _item
from ._dynamo import plain as _plain
from ._dynamo import reasons as _reasons
from ._run_rows import read_run_row
from .callsites import RETRY, SURFACE, Path, call_site
from .errors import DamagedRowError, StoreError
from .lease import LeaseState, parse_lease
from .records import DamagedRun, RunOrigin, RunRecord
from .schema import (
    FENCE_SK,
    LEASE_SK,
    PARTITION_KEY,
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
from .trigger_state import Refused, Route, State, TriggerRecord


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

_RETRYABLE_REASONS = frozenset({"TransactionConflict"}) | THROTTLE_REASONS
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

READ_LEASE = call_site(
    "dynamodb.read_lease", "dynamodb", "GetItem", "StoreTable.read_lease",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (every trigger's decision, before any write; status, the heartbeat's "
         "resolution): an error surfaces, nothing written, the sender retries",
    paths=(Path.RUN, Path.OPERATOR),
)

READ_TRIGGER = call_site(
    "dynamodb.read_trigger", "dynamodb", "GetItem", "StoreTable.read_trigger",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (CLI, tests, a queued job's late tick, a release read back): an error "
         "surfaces, or the release tries again",
    paths=(Path.RUN, Path.OPERATOR),
)


class StoreTable:
    """What every record kind's transitions share: the table, its keys, the reads of a
    lease row and a trigger item, the conditions and actions a transaction is built of,
    and the transaction itself."""

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

    def _put(self, item: dict[str, Any], e: _Expr, condition: str) -> dict[str, Any]:
        """A conditional Put of a whole item (the row as it was comes back if refused)."""
        return {"Put": {"TableName": self.table_name, "Item": item,
                        "ConditionExpression": condition,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        **e.params(condition)}}

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
        condition = self._trigger_condition(e, observed, now_ms)
        if gate is None and (observed is None or not observed.live(now_ms)):
            # Nothing live to keep (absent, or past its TTL and not yet deleted): the
            # item is written whole, so nothing of an earlier trigger of the same id
            # survives into this one, and the request carries no update expression.
            values: dict[str, Any] = {
                "state": state.value, "route": route.value, "run_id": run_id,
                "at_ms": now_ms, TTL_ATTRIBUTE: ttl_epoch_s, "job": job,
                "fence": fence, "gate_fence": gate_fence, "into": into, "kind": kind}
            if origin is not None:
                values.update(policy=origin.policy, requested_by=origin.requested_by,
                              scheduled_at=origin.scheduled_at,
                              delivery_id=origin.delivery_id)
            return self._put({**self._trigger_key(job, trigger_id), **_item(values)}, e,
                             condition)  # (_item drops the Nones)
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
            conflict = throttled = False
            lease_as_seen = True
            for kind, reason in zip(kinds, _reasons(exc), strict=False):
                code = reason.get("Code")
                if code in (None, "None"):
                    continue
                if kind == "lease":
                    lease_as_seen = False
                if code != "ConditionalCheckFailed":
                    throttled = throttled or code in THROTTLE_REASONS
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
                           and not follow_up_failed, throttled=throttled)
        return None


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
