"""The item ledger's writes (:class:`jobguard.dynamodb_items.DynamoItemStore` inherits
them): completion facts, and the job row's fenced write with the unresolved rows beside
it (private; ``jobguard.dynamodb_items`` exports what others use).

What is written, and why each write is safe (DESIGN: ONCE, END, FENCE, CKPT):

- **The job row** (``JOB#<job>`` / ``FENCE``) holds the fence high-water mark ``hw``,
  which every lease acquisition and force release moves in its own transaction, and
  beside it the job's checkpoint and the run's open claim (the work ids of its page,
  each with a payload hash prefix). A run writes it with one conditional ``UpdateItem``
  on ``hw = <its fence>`` and on the token of the row's last write: no transaction, no
  ``ConditionCheck``. From the moment a higher fence is issued, a stale holder's next
  write of its claim or the checkpoint is refused (FENCE), and a write that is not the
  next one of this run's own sequence is refused too. The row is bounded: one open
  claim (a page), never anything per trigger or per past run.
- **Completion facts** (``ITEM#<job>#<work id>`` / ``ITEM``): state ``completed``, the
  destination id, the payload hash, a TTL. A fact says what the destination holds, which
  is true whoever observed it, so it is written without a fence, unconditioned, 25 to a
  ``BatchWriteItem``; a run writes a page's facts before the job-row write that drops the
  page from its claim and moves the checkpoint (END, CKPT: a crash in between leaves
  the page claimed; the next holder finds the facts, and reconciles the rest). As a
  fact is unconditioned (``BatchWriteItem`` takes no condition; a conditional put per
  fact would be 25 times the requests), a replaced run's late fact may land over the
  new run's: the destination id is the same (the work id is the destination's
  idempotency key), but the fact's run id, fence and attempts are the late run's. The
  run log, not the fact, says which runs held the item.
- **Unresolved rows** (the same key): ``failed`` or ``uncertain``, with the sparse
  ``unresolved`` index entry. Rare, so they may cost more: they go in a transaction
  with the job-row write (or a ``ConditionCheck`` of it), so only the fence holder writes
  them, and each is conditioned on the item not being completed (a completion fact is
  final). A cancelled transaction is split by its ``CancellationReasons``, never retried
  whole.

Its one reason to change is how a claim, an outcome or the checkpoint is written (the
conditions of each write); the reads and queries are ``jobguard.dynamodb_items``'.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from ._bounds import MAX_BATCH_SIZE, check_cursor
from ._dynamo import (
    THROTTLE_REASONS,
    Expr,
    code,
    from_attr,
    old_item,
    reasons,
    to_attr,
    transient,
)
from ._item_rows import job_row
from .callsites import RETRY, Path, call_site
from .errors import LeaseLostError, StoreError
from .lease import backoff
from .schema import (
    FENCE_SK,
    ITEM_SK,
    PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
    UNRESOLVED_PK,
    UNRESOLVED_SHARDS,
    UNRESOLVED_SK,
    item_pk,
    job_pk,
    unresolved_pk,
)
from .workitems import (
    Checkpoint,
    Commit,
    Committed,
    Completion,
    Fence,
    ItemState,
    JobRow,
    OpenClaim,
    Unresolved,
)

__all__ = ["MAX_CLAIM", "FactsNotWrittenError", "ItemWrites", "shard_of"]

PUT_BATCH = 25  # BatchWriteItem's limit
ROWS_PER_TRANSACTION = 99  # + the job row's write (or check) = DynamoDB's 100 actions
MAX_CLAIM = MAX_BATCH_SIZE  # the job row stays far below 400 KB
_MAX_ERROR = 1000
_RETRIES = 6
_CLAIM_ATTRS = ("claim", "claim_run_id", "claim_fence", "claim_expires_at_ms")


# -- call sites (see jobguard.callsites) --------------------------------------------

WRITE_FACTS = call_site(
    "items.write_facts", "dynamodb", "BatchWriteItem", "ItemWrites.write_facts",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="completion facts, 25 a call, unconditioned (a fact written twice is the same "
         "fact): retried with backoff, unprocessed items sent again; never the last "
         "write of a page (its claim stays open until they land)",
    paths=(Path.RUN,),
)
COMMIT = call_site(
    "items.commit", "dynamodb", "UpdateItem", "ItemWrites._update_row",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="the job row's claim and checkpoint, conditioned on the run's fence and the "
         "row's last token: retried with backoff; a retry refused by its own write (the "
         "row carries this write's token) is ours",
    paths=(Path.RUN,),
)
COMMIT_ROWS = call_site(
    "items.commit_rows", "dynamodb", "TransactWriteItems", "ItemWrites._transact",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="failed / uncertain rows with the job row's write (past 99 rows, each leading "
         "transaction drops its rows' items from the claim): retried like the commit; a "
         "row refused because the item was completed meanwhile is dropped (the "
         "completion is final)",
    paths=(Path.RUN,), parts=("Put", "Update"),
)


# -- the unresolved index's keys ---------------------------------------------------------


def shard_of(work_id: str) -> int:
    return zlib.crc32(work_id.encode()) % UNRESOLVED_SHARDS


def _unresolved_pk(job: str, work_id: str) -> str:
    return unresolved_pk(job, f"{shard_of(work_id):02d}")


def _unresolved_sk(state: ItemState, work_id: str) -> str:
    return f"{state.value}#{work_id}"


class ItemWrites:
    """The writes of :class:`~jobguard.dynamodb_items.DynamoItemStore` (its base): it
    holds ``table_name`` and ``_client``, and reads the job row back when a write is
    refused."""

    table_name: str
    _client: Any

    if TYPE_CHECKING:
        def read_row(self, job: str) -> JobRow: ...  # DynamoItemStore's (a read)

    # -- writes ----------------------------------------------------------------------

    def write_facts(self, job: str, facts: Sequence[Completion], *, now_ms: int,
                    ttl_s: int) -> int:
        """Write completion facts, 25 to a ``BatchWriteItem``, unconditioned. Returns the
        requests made."""
        unique = {f.work_id: f for f in facts}  # one call may not name a key twice
        requests = 0
        items = [self._fact_item(job, f, now_ms, ttl_s) for f in unique.values()]
        ids = list(unique)
        for start in range(0, len(items), PUT_BATCH):
            pending: list[dict[str, Any]] = [{"PutRequest": {"Item": i}}
                                             for i in items[start:start + PUT_BATCH]]
            later = ids[start + PUT_BATCH:]
            for attempt in range(_RETRIES * 2):
                requests += 1
                try:
                    response = self._client.batch_write_item(
                        RequestItems={self.table_name: pending})
                except (ClientError, BotoCoreError) as exc:
                    if transient(exc) and attempt < _RETRIES * 2 - 1:
                        _backoff(attempt)
                        continue  # the same puts again: a fact written twice is one fact
                    raise FactsNotWrittenError(
                        job, [_fact_id(p) for p in pending] + later, str(exc)) from exc
                pending = (response.get("UnprocessedItems") or {}).get(self.table_name) or []
                if not pending:
                    break
                _backoff(attempt)
            if pending:
                raise FactsNotWrittenError(job, [_fact_id(p) for p in pending] + later,
                                           f"{len(pending)} completion facts still "
                                           "unprocessed")
        return requests

    def commit(self, lease: Fence, change: Commit, *, now_ms: int) -> Committed:
        """Write the job row's claim and checkpoint under ``lease``'s fence, with the
        unresolved rows of ``change`` (in transactions with the row's write or a check of
        it). Refused with :class:`LeaseLostError` once the fence moved on; with
        :class:`StoreError` when the row was written by anything but this sequence.
        """
        if change.claim is not None and len(change.claim) > MAX_CLAIM:
            raise StoreError("commit", lease.job, f"an open claim of {len(change.claim)} "
                             f"items exceeds {MAX_CLAIM}: finish a page before claiming more")
        if change.checkpoint is not None:
            check_cursor(lease.job, change.checkpoint[1])  # nothing written
        result = Committed(row=change.expected)
        rows = list(change.rows)
        final = change
        while len(rows) > ROWS_PER_TRANSACTION:
            # Leading chunks: each drops its rows' items from the open claim in the same
            # transaction, so wherever a crash stops the commit, every item of the page
            # is either still claimed (no row written) or named by its own row only: the
            # next run finds failures-for-good failed, never a vanished run's work.
            chunk, rows = rows[:ROWS_PER_TRANSACTION], rows[ROWS_PER_TRANSACTION:]
            chunk_token = _token(lease)
            shrink = self._shrink_update(lease, final.expected, chunk_token,
                                         [r.work_id for r in chunk])
            self._transact(lease, final, chunk_token, shrink, chunk, now_ms, result)
            final = dataclasses.replace(final, expected=dataclasses.replace(
                final.expected, token=chunk_token, claim=_without(
                    final.expected.claim, {r.work_id for r in chunk})))
        token = _token(lease)
        write = self._row_update(lease, final, token, now_ms)
        if not rows:
            self._update_row(lease, final, token, write, result)
        else:
            self._transact(lease, final, token, write, rows, now_ms, result)
        result.row = self._after(lease, final, token, now_ms)
        return result

    # -- the job row's write -------------------------------------------------------------

    def _row_update(self, lease: Fence, change: Commit, token: str,
                    now_ms: int) -> tuple[Expr, str, str]:
        e = Expr()
        condition = self._row_condition(e, lease, change.expected)
        sets = [f"{e.n('commit_token')} = {e.v(token)}"]
        removes: list[str] = []
        if change.claim:
            sets += [f"{e.n('claim_run_id')} = {e.v(lease.run_id)}",
                     f"{e.n('claim_fence')} = {e.v(lease.fence)}",
                     f"{e.n('claim_expires_at_ms')} = {e.v(change.claim_expires_at_ms)}",
                     f"{e.n('claim')} = {e.v(change.claim)}"]
        elif change.expected.claim is not None:
            removes += [e.n(a) for a in _CLAIM_ATTRS]
        if change.checkpoint is not None:
            expected_seq, cursor = change.checkpoint
            seq = e.n("seq")
            # the sequence as read: never backwards, never twice
            condition += (f" AND attribute_not_exists({seq})" if expected_seq == 0
                          else f" AND {seq} = {e.v(expected_seq)}")
            sets += [f"{seq} = {e.v(expected_seq + 1)}",
                     f"{e.n('cursor_run_id')} = {e.v(lease.run_id)}",
                     f"{e.n('cursor_fence')} = {e.v(lease.fence)}",
                     f"{e.n('cursor_at_ms')} = {e.v(now_ms)}"]
            if cursor is not None:
                sets.append(f"{e.n('cursor')} = {e.v(cursor)}")
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        return e, update, condition

    def _row_condition(self, e: Expr, lease: Fence, expected: JobRow) -> str:
        """The fence is still ours, and the row is as this run last wrote or read it."""
        token = e.n("commit_token")
        return (f"{e.n('hw')} = {e.v(lease.fence)} AND "
                + (f"attribute_not_exists({token})" if expected.token is None
                   else f"{token} = {e.v(expected.token)}"))

    def _shrink_update(self, lease: Fence, expected: JobRow, token: str,
                       work_ids: Sequence[str]) -> tuple[Expr, str, str]:
        """A leading chunk's job-row write: the fence and the row as expected, the open
        claim without ``work_ids`` (their rows are written in the same transaction)."""
        e = Expr()
        condition = self._row_condition(e, lease, expected)
        update = f"SET {e.n('commit_token')} = {e.v(token)}"
        named = [w for w in dict.fromkeys(work_ids)
                 if expected.claim is not None and w in expected.claim.items]
        if named:
            claim = e.n("claim")
            update += " REMOVE " + ", ".join(f"{claim}.{e.n(w)}" for w in named)
        return e, update, condition

    def _update_row(self, lease: Fence, change: Commit, token: str,
                    write: tuple[Expr, str, str], result: Committed) -> None:
        e, update, condition = write
        for attempt in range(_RETRIES):
            result.requests += 1
            try:
                self._client.update_item(
                    TableName=self.table_name, Key=self._row_key(lease.job),
                    UpdateExpression=update, ConditionExpression=condition,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD", **e.params(update, condition))
                return
            except (ClientError, BotoCoreError) as exc:
                if isinstance(exc, ClientError) and code(exc) == "ConditionalCheckFailedException":
                    self._refused(lease, change, token, old_item(exc))
                    return  # our own earlier attempt (its response was lost)
                if transient(exc) and attempt < _RETRIES - 1:
                    _backoff(attempt)
                    continue  # the same write: a landed one is recognised by its token
                raise StoreError("commit", lease.job, str(exc)) from exc

    def _refused(self, lease: Fence, change: Commit, token: str | None,
                 raw: dict[str, Any] | None) -> None:
        """A refused job-row write: ours (its token is there), or the fence moved on
        (:class:`LeaseLostError`), or the row is not as this run knows it."""
        now = job_row(lease.job, raw) if raw is not None else self.read_row(lease.job)
        if token is not None and now.token == token:
            return
        if now.fence != lease.fence:
            raise LeaseLostError(lease.job, lease.run_id, lease.fence,
                                 f"the job row carries fence {now.fence}") from None
        if change.checkpoint is not None and now.token == change.expected.token:
            raise StoreError(
                "checkpoint", lease.job,
                f"checkpoint moved under run {lease.run_id} (expected seq "
                f"{change.checkpoint[0]}, found {now.checkpoint.seq} by "
                f"{now.checkpoint.run_id})")
        raise StoreError("commit", lease.job,
                         f"the job row was written since run {lease.run_id} read it "
                         f"(token {change.expected.token!r}, now {now.token!r})")

    def _after(self, lease: Fence, change: Commit, token: str | None,
               now_ms: int) -> JobRow:
        """The job row as this commit left it (no read)."""
        expected = change.expected
        claim = (OpenClaim(lease.run_id, lease.fence, change.claim_expires_at_ms,
                           dict(change.claim)) if change.claim else None)
        checkpoint = expected.checkpoint
        if change.checkpoint is not None:
            seq, cursor = change.checkpoint
            checkpoint = Checkpoint(cursor=cursor if cursor is not None else checkpoint.cursor,
                                    seq=seq + 1, run_id=lease.run_id, fence=lease.fence,
                                    updated_at_ms=now_ms)
        return JobRow(job=lease.job, fence=lease.fence, checkpoint=checkpoint, claim=claim,
                      token=token, hold_until_ms=expected.hold_until_ms)

    # -- transactions of unresolved rows ---------------------------------------------------

    def _transact(self, lease: Fence, change: Commit, token: str,
                  write: tuple[Expr, str, str], rows: list[Unresolved], now_ms: int,
                  result: Committed) -> None:
        """One transaction: the rows with the job row's write ``write`` (``token``)."""
        pending = list(rows)
        throttled = False  # (the last conflicting attempt's cause, for the error)
        for attempt in range(_RETRIES):
            if not pending:
                self._update_row(lease, change, token, write, result)
                return
            head = self._row_action(lease, write)
            # the rows first, the job row last: a change stream shows the rows before the
            # claim that named them is dropped (and the checkpoint past them moves)
            actions = [self._row_put(lease.job, r, lease, now_ms) for r in pending] + [head]
            result.requests += 1
            try:
                self._client.transact_write_items(TransactItems=actions,
                                                  ClientRequestToken=uuid.uuid4().hex)
                return
            except (ClientError, BotoCoreError) as exc:
                if not isinstance(exc, ClientError) or code(exc) != "TransactionCanceledException":
                    if transient(exc) and attempt < _RETRIES - 1:
                        _backoff(attempt)
                        continue
                    raise StoreError("commit", lease.job, str(exc)) from exc
                why = reasons(exc)
                if len(why) != len(actions):
                    raise StoreError("commit", lease.job,
                                     f"cancelled with {len(why)} reasons for {len(actions)} "
                                     f"actions: {exc}") from exc
                if why[-1].get("Code") == "ConditionalCheckFailed":
                    self._refused(lease, change, token, why[-1].get("Item"))
                    return  # ours: the whole transaction landed earlier
                kept: list[Unresolved] = []
                conflict = False
                for row, reason in zip(pending, why[:-1], strict=True):
                    if reason.get("Code") == "ConditionalCheckFailed":
                        result.completed.append(row.work_id)  # completed meanwhile: final
                    else:
                        conflict = conflict or reason.get("Code") not in (None, "None")
                        kept.append(row)
                pending = kept
                # the job row's partition (or the unresolved index) throttled: wait as for
                # a throttle, seconds, as the lease's transactions do (lease.backoff)
                throttled = any(r.get("Code") in THROTTLE_REASONS for r in why)
                if (conflict or why[-1].get("Code") not in (None, "None")) \
                        and attempt < _RETRIES - 1:  # (no wait after the last try)
                    if throttled:
                        backoff(attempt, throttled=True)
                    else:
                        _backoff(attempt)
        if not pending:  # the last try's rows were all completed meanwhile
            self._update_row(lease, change, token, write, result)
            return
        raise StoreError("commit", lease.job, f"transaction still refused after {_RETRIES} "
                         "tries" + (" for the partition's throttle (ThrottlingError: its "
                                    "write capacity is spent, see docs/capacity.md)"
                                    if throttled else " by concurrent transactions"))

    def _row_action(self, lease: Fence, write: tuple[Expr, str, str]) -> dict[str, Any]:
        e, update, condition = write
        return {"Update": {"TableName": self.table_name, "Key": self._row_key(lease.job),
                           "UpdateExpression": update, "ConditionExpression": condition,
                           "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                           **e.params(update, condition)}}

    def _row_put(self, job: str, row: Unresolved, lease: Fence, now_ms: int) -> dict[str, Any]:
        """An unresolved row, never over a completion that is still live."""
        e = Expr()
        state = e.n("state")
        condition = (f"attribute_not_exists({state}) OR {state} <> "
                     f"{e.v(ItemState.COMPLETED.value)} OR {e.n(TTL_ATTRIBUTE)} < "
                     f"{e.v(now_ms // 1000)}")
        values: dict[str, Any] = {
            PARTITION_KEY: item_pk(job, row.work_id), SORT_KEY: ITEM_SK,
            "job": job, "work_id": row.work_id, "state": row.state.value,
            "run_id": lease.run_id, "fence": lease.fence, "updated_at_ms": now_ms,
            "attempts": row.attempts, "retryable": bool(row.retryable),
            UNRESOLVED_PK: _unresolved_pk(job, row.work_id),
            UNRESOLVED_SK: _unresolved_sk(row.state, row.work_id),
        }
        if row.error is not None:
            values["last_error"] = row.error[:_MAX_ERROR]
        if row.payload_hash:
            values["payload_hash"] = row.payload_hash
        if row.source_id is not None:
            values["source_id"] = row.source_id
        if row.ttl_s is not None:
            values[TTL_ATTRIBUTE] = now_ms // 1000 + row.ttl_s
        if row.held_until_ms is not None:
            values["held_until_ms"] = row.held_until_ms
        if row.excerpt is not None:
            values["excerpt"] = row.excerpt
        return {"Put": {"TableName": self.table_name,
                        "Item": {k: to_attr(v) for k, v in values.items()},
                        "ConditionExpression": condition,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        **e.params(condition)}}

    # -- building blocks -----------------------------------------------------------------

    def _fact_item(self, job: str, fact: Completion, now_ms: int, ttl_s: int) -> dict[str, Any]:
        values: dict[str, Any] = {
            PARTITION_KEY: item_pk(job, fact.work_id), SORT_KEY: ITEM_SK,
            "job": job, "work_id": fact.work_id, "state": ItemState.COMPLETED.value,
            "destination_id": fact.destination_id, "run_id": fact.run_id,
            "fence": fact.fence, "attempts": fact.attempts, "completed_at_ms": now_ms,
            TTL_ATTRIBUTE: now_ms // 1000 + ttl_s,
        }
        if fact.payload_hash:
            values["payload_hash"] = fact.payload_hash
        if fact.source_id is not None:
            values["source_id"] = fact.source_id
        return {k: to_attr(v) for k, v in values.items()}

    def _row_key(self, job: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": FENCE_SK}}



class FactsNotWrittenError(StoreError):
    """Completion facts the table would not take after every retry.

    Attributes:
        work_ids: those not written (the others of the call were).
    """

    def __init__(self, job: str, work_ids: list[str], message: str) -> None:
        self.work_ids = work_ids
        super().__init__("write_facts", job, message)


def _fact_id(request: dict[str, Any]) -> str:
    return str(from_attr(request["PutRequest"]["Item"]["work_id"]))


def _token(lease: Fence) -> str:
    return f"{lease.fence}-{uuid.uuid4().hex[:12]}"  # names the writer's fence


def _without(claim: OpenClaim | None, work_ids: set[str]) -> OpenClaim | None:
    if claim is None:
        return None
    return dataclasses.replace(claim, items={w: h for w, h in claim.items.items()
                                             if w not in work_ids})


def _backoff(attempt: int) -> None:
    time.sleep(min(1.0, 0.02 * 2 ** attempt))
