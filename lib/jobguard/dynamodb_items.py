"""The DynamoDB item ledger and checkpoint: the only module that writes work items.

Every write carries the run's fence: it goes in a transaction whose first action is a
``ConditionCheck`` on the job's lease row (``run_id`` and ``fence`` still ours). A run
that lost its lease can therefore claim, complete or checkpoint nothing, whatever the
item rows say. Up to 99 item actions share one transaction with that check.

A cancelled transaction is split by its ``CancellationReasons``, never retried whole:
an item whose condition failed is someone else's (its row comes back, ``ALL_OLD``) and
is dropped from the retry; items cancelled only because of another (reason ``None``) or
a conflict are retried. A failed lease check ends the run (:class:`LeaseLostError`).

Layout (same table as leases and runs)::

    item row     pk = ITEM#<job>#<work id>   sk = ITEM      (one partition per item)
    checkpoint   pk = JOB#<job>              sk = CHECKPOINT
    index "unresolved" (sparse, keys only): unresolved_pk = UNRESOLVED#<job>#<shard 00-15>,
        unresolved_sk = <state>#<work id>; present on claimed/failed/uncertain rows only.
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ._dynamo import Expr, code, from_attr, plain, reasons, transient
from .callsites import RETRY, STOP, SURFACE, Path, Target, call_site
from .errors import LeaseLostError, StoreError
from .schema import (
    CHECKPOINT_SK,
    ITEM_SK,
    LEASE_SK,
    PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
    UNRESOLVED_INDEX,
    UNRESOLVED_PK,
    UNRESOLVED_SHARDS,
    UNRESOLVED_SK,
    item_pk,
    job_pk,
)
from .workitems import Checkpoint, ClaimRequest, Fence, ItemRecord, ItemState, Result, Settle

__all__ = ["DynamoItemStore", "item_record"]

_PER_TRANSACTION = 99  # + the lease check = DynamoDB's 100 actions
_MAX_ERROR = 1000
_RETRIES = 6


# -- call sites (see jobguard.callsites) --------------------------------------------

CLAIM = call_site(
    "items.claim", "dynamodb", "TransactWriteItems", "DynamoItemStore.claim",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="retried with backoff (6 tries, the lease check in every try); a claim refused "
         "by its own earlier claim (run id + fence) is ours",
    paths=(Path.RUN,), parts=("ConditionCheck", "Update"),
)
SETTLE = call_site(
    "items.settle", "dynamodb", "TransactWriteItems", "DynamoItemStore.settle",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="outcomes and the checkpoint: retried like claims; an outcome already in place, "
         "or a checkpoint read back with this run id and cursor, is ours",
    paths=(Path.RUN,), parts=("ConditionCheck", "Delete", "Update"),
)
READ_CHECKPOINT = call_site(
    "items.read_checkpoint", "dynamodb", "GetItem", "DynamoItemStore.read_checkpoint",
    throttle=STOP, server_error=STOP, timeout=STOP, lost=RETRY,
    note="before any claim: the run ends `failed`, releases, nothing claimed",
    paths=(Path.RUN,),
)
GET_MANY = call_site(
    "items.get_many", "dynamodb", "BatchGetItem", "DynamoItemStore.get_many",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (recovery plan, sweeps, CLI); unprocessed keys are asked again",
    paths=(Path.SWEEP, Path.OPERATOR),
)
GET = call_site(
    "items.get", "dynamodb", "GetItem", "DynamoItemStore.get",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read",
    paths=(Path.OPERATOR,),
)
UNRESOLVED = call_site(
    "items.unresolved", "dynamodb", "Query", "DynamoItemStore.unresolved",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read of the sparse index (sweeps, CLI `items`)",
    paths=(Path.SWEEP, Path.OPERATOR), target=Target.INDEX,
)


def item_record(job: str, raw: dict[str, Any] | None) -> ItemRecord | None:
    row = plain(raw)
    if not row or "state" not in row:
        return None
    return ItemRecord(
        job=job,
        work_id=str(row.get("work_id", "")),
        state=ItemState(row["state"]),
        run_id=row.get("run_id"),
        fence=row.get("fence"),
        claim_expires_at_ms=row.get("claim_expires_at_ms"),
        attempts=int(row.get("attempts", 0)),
        retryable=bool(row.get("retryable", False)),
        last_error=row.get("last_error"),
        destination_id=row.get("destination_id"),
        payload_hash=row.get("payload_hash"),
        created_at_ms=row.get("created_at_ms"),
        updated_at_ms=row.get("updated_at_ms"),
        completed_at_ms=row.get("completed_at_ms"),
        ttl_epoch_s=row.get(TTL_ATTRIBUTE),
    )


def shard_of(work_id: str) -> int:
    return zlib.crc32(work_id.encode()) % UNRESOLVED_SHARDS


class DynamoItemStore:
    """Work items and the checkpoint of any number of jobs, in the jobguard table.

    Example:
        >>> items = DynamoItemStore("jobguard", client=ddb)  # doctest: +SKIP
        >>> result = items.claim(fence, [ClaimRequest("contact-42:create-note")],
        ...                      now_ms=now, claim_ms=300_000)  # doctest: +SKIP
    """

    def __init__(self, table_name: str, *, client: Any) -> None:
        self.table_name = table_name
        self._client = client

    # -- writes --------------------------------------------------------------------

    def claim(
        self, lease: Fence, requests: Sequence[ClaimRequest], *, now_ms: int, claim_ms: int
    ) -> Result:
        """Claim items for ``lease``'s run. Refused items come back with their row."""
        actions = []
        for request in requests:
            e = Expr()
            state = e.n("state")
            if request.after_uncertain:
                condition = f"{state} = {e.v(ItemState.UNCERTAIN.value)}"
            elif request.after_failure:
                condition = f"{state} = {e.v(ItemState.FAILED.value)}"
            else:
                # Absent; failed and retryable; or completed but past its TTL (expired
                # records count as absent, whenever DynamoDB gets round to deleting them).
                condition = (
                    f"attribute_not_exists({e.n(PARTITION_KEY)}) OR "
                    f"({state} = {e.v(ItemState.FAILED.value)} AND "
                    f"{e.n('retryable')} = {e.v(True)}) OR "
                    f"({state} = {e.v(ItemState.COMPLETED.value)} AND "
                    f"{e.n(TTL_ATTRIBUTE)} < {e.v(now_ms // 1000)})"
                )
            sets = [
                f"{state} = {e.v(ItemState.CLAIMED.value)}",
                f"{e.n('job')} = {e.v(lease.job)}",
                f"{e.n('work_id')} = {e.v(request.work_id)}",
                f"{e.n('run_id')} = {e.v(lease.run_id)}",
                f"{e.n('fence')} = {e.v(lease.fence)}",
                f"{e.n('claim_expires_at_ms')} = {e.v(now_ms + claim_ms)}",
                f"{e.n('updated_at_ms')} = {e.v(now_ms)}",
                f"{e.n('created_at_ms')} = if_not_exists({e.n('created_at_ms')}, {e.v(now_ms)})",
                f"{e.n(UNRESOLVED_PK)} = {e.v(_unresolved_pk(lease.job, request.work_id))}",
                f"{e.n(UNRESOLVED_SK)} = {e.v(_unresolved_sk(ItemState.CLAIMED, request.work_id))}",
            ]
            if request.payload_hash is not None:
                sets.append(f"{e.n('payload_hash')} = {e.v(request.payload_hash)}")
            update = (
                "SET " + ", ".join(sets)
                + f" REMOVE {e.n(TTL_ATTRIBUTE)}, {e.n('completed_at_ms')}, {e.n('retryable')}"
                + f" ADD {e.n('attempts')} {e.v(1)}"
            )
            actions.append((request.work_id, self._update(lease.job, request.work_id, update,
                                                           condition, e)))
        result = self._transact(lease, actions)
        # A lost response: the SDK retried a transaction that had committed, and the retry
        # was refused by our own claim. It is ours.
        for work_id, row in list(result.refused.items()):
            if (row is not None and row.state is ItemState.CLAIMED
                    and row.run_id == lease.run_id and row.fence == lease.fence):
                del result.refused[work_id]
                result.done.append(work_id)
        return result

    def settle(
        self,
        lease: Fence,
        outcomes: Sequence[Settle],
        *,
        now_ms: int,
        ttl_s: int,
        checkpoint: tuple[int, str | None] | None = None,
    ) -> Result:
        """Record outcomes (and advance the checkpoint in the same last transaction).

        ``checkpoint`` is ``(expected_seq, new_cursor)``: applied only if the stored
        sequence is still ``expected_seq``, so it never moves backwards; it rides in the
        transaction of the page's last outcomes, so it never passes an unfinished item
        of that page.
        """
        actions = [(o.work_id, self._release_action(lease, o) if o.kind == "release"
                    else self._settle_action(lease, o, now_ms, ttl_s)) for o in outcomes]
        if checkpoint is not None:
            expected_seq, cursor = checkpoint
            actions.append((_CHECKPOINT, self._checkpoint_action(lease, expected_seq, cursor,
                                                                 now_ms)))
        result = self._transact(lease, actions)
        for work_id, row in list(result.refused.items()):
            if work_id == _CHECKPOINT:
                continue
            wanted = next(o for o in outcomes if o.work_id == work_id)
            if row is not None and _already_settled(row, wanted, lease):
                del result.refused[work_id]
                result.done.append(work_id)
        if _CHECKPOINT in result.refused:
            current = self.read_checkpoint(lease.job)
            assert checkpoint is not None
            if not (current.run_id == lease.run_id and current.cursor == checkpoint[1]):
                raise StoreError(
                    "checkpoint", lease.job,
                    f"checkpoint moved under run {lease.run_id} (expected seq {checkpoint[0]}, "
                    f"found {current.seq} by {current.run_id})",
                )
            del result.refused[_CHECKPOINT]
            result.done.append(_CHECKPOINT)
        return result

    # -- reads ---------------------------------------------------------------------

    def get_many(self, job: str, work_ids: Sequence[str]) -> dict[str, ItemRecord]:
        """Consistent reads of many items (BatchGetItem, 100 keys a call)."""
        found: dict[str, ItemRecord] = {}
        unique = list(dict.fromkeys(work_ids))
        for start in range(0, len(unique), 100):
            keys = [self._key(job, w) for w in unique[start:start + 100]]
            request: dict[str, Any] = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
            for _ in range(_RETRIES * 2):
                response = self._client.batch_get_item(RequestItems=request)
                for raw in response.get("Responses", {}).get(self.table_name, []):
                    record = item_record(job, raw)
                    if record is not None:
                        found[record.work_id] = record
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                time.sleep(0.05)
        return found

    def get(self, job: str, work_id: str) -> ItemRecord | None:
        response = self._client.get_item(
            TableName=self.table_name, Key=self._key(job, work_id), ConsistentRead=True
        )
        return item_record(job, response.get("Item"))

    def unresolved(self, job: str, *, states: Sequence[ItemState] | None = None,
                   limit: int = 1000) -> list[ItemRecord]:
        """A job's claimed / failed / uncertain items, from the sparse index, each
        confirmed by a consistent read (an index is eventually consistent)."""
        work_ids: list[str] = []
        for shard in range(UNRESOLVED_SHARDS):
            kwargs: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": UNRESOLVED_INDEX,
                "KeyConditionExpression": "#p = :p",
                "ExpressionAttributeNames": {"#p": UNRESOLVED_PK},
                "ExpressionAttributeValues": {":p": {"S": f"UNRESOLVED#{job}#{shard:02d}"}},
            }
            while len(work_ids) < limit:
                response = self._client.query(**kwargs)
                for raw in response.get("Items", []):
                    sk = str(from_attr(raw[UNRESOLVED_SK]))
                    work_ids.append(sk.split("#", 1)[1])
                if "LastEvaluatedKey" not in response:
                    break
                kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        confirmed = self.get_many(job, work_ids[:limit])
        wanted = set(states) if states else {ItemState.CLAIMED, ItemState.FAILED,
                                             ItemState.UNCERTAIN}
        return [r for r in confirmed.values() if r.state in wanted]

    def read_checkpoint(self, job: str) -> Checkpoint:
        response = self._client.get_item(
            TableName=self.table_name,
            Key={PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": CHECKPOINT_SK}},
            ConsistentRead=True,
        )
        row = plain(response.get("Item"))
        return Checkpoint(cursor=row.get("cursor"), seq=int(row.get("seq", 0)),
                          run_id=row.get("run_id"), fence=row.get("fence"),
                          updated_at_ms=row.get("updated_at_ms"))

    # -- building blocks -----------------------------------------------------------------

    def _settle_action(self, lease: Fence, o: Settle, now_ms: int, ttl_s: int) -> dict[str, Any]:
        e = Expr()
        state = e.n("state")
        holds_claim = (
            f"{state} = {e.v(ItemState.CLAIMED.value)} AND {e.n('run_id')} = "
            f"{e.v(lease.run_id)} AND {e.n('fence')} = {e.v(lease.fence)}"
        )
        unresolved = (f"{e.n(UNRESOLVED_PK)}, {e.n(UNRESOLVED_SK)}, "
                      f"{e.n('claim_expires_at_ms')}")
        stamp = f"{e.n('updated_at_ms')} = {e.v(now_ms)}"
        if o.kind in ("found", "expire", "not_found"):
            # Written by the run resolving someone else's item: it carries this run's
            # fence from now on.
            stamp += (f", {e.n('run_id')} = {e.v(lease.run_id)}, "
                      f"{e.n('fence')} = {e.v(lease.fence)}")
        if o.kind in ("complete", "found"):
            condition = holds_claim if o.kind == "complete" else (
                f"{state} = {e.v(ItemState.UNCERTAIN.value)}")
            update = (
                f"SET {state} = {e.v(ItemState.COMPLETED.value)}, "
                f"{e.n('destination_id')} = {e.v(o.destination_id or '')}, "
                f"{e.n('completed_at_ms')} = {e.v(now_ms)}, {stamp}, "
                f"{e.n('completed_by')} = {e.v(lease.run_id)}, "
                f"{e.n(TTL_ATTRIBUTE)} = {e.v(now_ms // 1000 + ttl_s)} "
                f"REMOVE {unresolved}, {e.n('last_error')}"
            )
        elif o.kind == "not_found":
            # Reconciliation did not find it at the destination: safe to redo, so it
            # becomes a retryable failure that the next claim may take.
            condition = f"{state} = {e.v(ItemState.UNCERTAIN.value)}"
            why = (o.error or "not found at the destination")[:_MAX_ERROR]
            update = (
                f"SET {state} = {e.v(ItemState.FAILED.value)}, {stamp}, "
                f"{e.n('retryable')} = {e.v(True)}, "
                f"{e.n(UNRESOLVED_SK)} = {e.v(_unresolved_sk(ItemState.FAILED, o.work_id))}, "
                f"{e.n('last_error')} = {e.v(why)}"
            )
        elif o.kind in ("fail", "uncertain", "expire"):
            new_state = ItemState.FAILED if o.kind == "fail" else ItemState.UNCERTAIN
            if o.kind == "expire":
                condition = (f"{state} = {e.v(ItemState.CLAIMED.value)} AND "
                             f"{e.n('run_id')} = {e.v(o.observed_run_id or '-')}")
            else:
                condition = holds_claim
            sets = [
                f"{state} = {e.v(new_state.value)}", stamp,
                f"{e.n(UNRESOLVED_SK)} = {e.v(_unresolved_sk(new_state, o.work_id))}",
                f"{e.n('retryable')} = {e.v(bool(o.retryable and o.kind == 'fail'))}",
            ]
            if o.error is not None:
                sets.append(f"{e.n('last_error')} = {e.v(o.error[:_MAX_ERROR])}")
            update = "SET " + ", ".join(sets)
        else:
            raise ValueError(f"unknown outcome kind {o.kind!r}")
        return self._update(lease.job, o.work_id, update, condition, e)

    def _release_action(self, lease: Fence, o: Settle) -> dict[str, Any]:
        """Give back a claim whose destination call never started: the item is absent
        again (never attempted), for the next run to claim."""
        e = Expr()
        condition = (f"{e.n('state')} = {e.v(ItemState.CLAIMED.value)} AND "
                     f"{e.n('run_id')} = {e.v(lease.run_id)} AND "
                     f"{e.n('fence')} = {e.v(lease.fence)}")
        return {"Delete": {
            "TableName": self.table_name,
            "Key": self._key(lease.job, o.work_id),
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(condition),
        }}

    def _checkpoint_action(self, lease: Fence, expected_seq: int, cursor: str | None,
                           now_ms: int) -> dict[str, Any]:
        e = Expr()
        seq = e.n("seq")
        condition = (f"attribute_not_exists({seq})" if expected_seq == 0
                     else f"{seq} = {e.v(expected_seq)}")
        sets = [f"{seq} = {e.v(expected_seq + 1)}", f"{e.n('run_id')} = {e.v(lease.run_id)}",
                f"{e.n('fence')} = {e.v(lease.fence)}", f"{e.n('updated_at_ms')} = {e.v(now_ms)}"]
        if cursor is not None:
            sets.append(f"{e.n('cursor')} = {e.v(cursor)}")
        update = "SET " + ", ".join(sets)
        return {"Update": {
            "TableName": self.table_name,
            "Key": {PARTITION_KEY: {"S": job_pk(lease.job)}, SORT_KEY: {"S": CHECKPOINT_SK}},
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(update, condition),
        }}

    def _update(self, job: str, work_id: str, update: str, condition: str,
                e: Expr) -> dict[str, Any]:
        return {"Update": {
            "TableName": self.table_name,
            "Key": self._key(job, work_id),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(update, condition),
        }}

    def _lease_check(self, lease: Fence) -> dict[str, Any]:
        return {"ConditionCheck": {
            "TableName": self.table_name,
            "Key": {PARTITION_KEY: {"S": job_pk(lease.job)}, SORT_KEY: {"S": LEASE_SK}},
            "ConditionExpression": "#r = :r AND #f = :f",
            "ExpressionAttributeNames": {"#r": "run_id", "#f": "fence"},
            "ExpressionAttributeValues": {":r": {"S": lease.run_id},
                                          ":f": {"N": str(lease.fence)}},
        }}

    def _transact(self, lease: Fence, actions: list[tuple[str, dict[str, Any]]]) -> Result:
        result = Result()
        for start in range(0, len(actions), _PER_TRANSACTION):
            pending = actions[start:start + _PER_TRANSACTION]
            for attempt in range(_RETRIES):
                if not pending:
                    break
                result.requests += 1
                try:
                    self._client.transact_write_items(
                        TransactItems=[self._lease_check(lease)] + [a for _, a in pending],
                        ClientRequestToken=uuid.uuid4().hex,
                    )
                except (ClientError, BotoCoreError) as exc:
                    if not isinstance(exc, ClientError) or (
                            code(exc) != "TransactionCanceledException"):
                        if transient(exc) and attempt < _RETRIES - 1:
                            # Nothing applied (throttled), or unknown (5xx, timeout): the
                            # same actions again are safe, each recognises its own effect.
                            time.sleep(0.02 * 2**attempt)
                            continue
                        raise StoreError("transact", lease.job, str(exc)) from exc
                    why = reasons(exc)
                    if len(why) != len(pending) + 1:
                        # Without a reason per action nothing can be split safely.
                        raise StoreError("transact", lease.job,
                                         f"cancelled with {len(why)} reasons for "
                                         f"{len(pending) + 1} actions: {exc}") from exc
                    if why[0].get("Code") == "ConditionalCheckFailed":
                        raise LeaseLostError(lease.job, lease.run_id, lease.fence,
                                             "the lease row no longer carries this fence") from None
                    retry: list[tuple[str, dict[str, Any]]] = []
                    conflict = False
                    for (key, action), reason in zip(pending, why[1:], strict=False):
                        if reason.get("Code") == "ConditionalCheckFailed":
                            result.refused[key] = item_record(lease.job, reason.get("Item"))
                        else:
                            conflict = conflict or reason.get("Code") not in (None, "None")
                            retry.append((key, action))
                    pending = retry
                    if conflict:
                        time.sleep(0.02 * 2**attempt)
                    continue
                result.done.extend(key for key, _ in pending)
                pending = []
            if pending:
                raise StoreError("transact", lease.job,
                                 f"{len(pending)} actions still conflicting after {_RETRIES} tries")
        return result

    def _key(self, job: str, work_id: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": item_pk(job, work_id)}, SORT_KEY: {"S": ITEM_SK}}


_CHECKPOINT = "\x00checkpoint"


def _unresolved_pk(job: str, work_id: str) -> str:
    return f"UNRESOLVED#{job}#{shard_of(work_id):02d}"


def _unresolved_sk(state: ItemState, work_id: str) -> str:
    return f"{state.value}#{work_id}"


def _already_settled(row: ItemRecord, wanted: Settle, lease: Fence) -> bool:
    """A refused settle whose effect is already there: our own write, response lost."""
    if wanted.kind in ("complete", "found"):
        return row.state is ItemState.COMPLETED and row.destination_id == wanted.destination_id
    if wanted.kind == "release":
        return False
    if wanted.kind in ("fail", "not_found"):
        return row.state is ItemState.FAILED and row.run_id == lease.run_id
    return row.state is ItemState.UNCERTAIN and (
        wanted.kind == "expire" or row.run_id == lease.run_id)

