"""The DynamoDB item ledger and checkpoint: the only module that writes work items.

:class:`DynamoItemStore` is the ledger's store: its reads and queries are here, its
writes (completion facts, the job row's fenced write, unresolved rows; what is written
and why each write is safe) in :mod:`jobguard._item_writes`, which it inherits. Each
changes for its own reason: a new query, or a write's conditions.

Reads: a consistent ``BatchGetItem`` of a page's items before claiming (100 keys a
call, the page size's natural bound); :meth:`DynamoItemStore.get_many` overlays the open
claim, so its items read as ``claimed`` (by the claim's run and fence).

Layout (same table as leases and runs)::

    job row      pk = JOB#<job>              sk = FENCE  (hw; seq, cursor, cursor_*;
                                                          claim, claim_*; commit_token)
    item row     pk = ITEM#<job>#<work id>   sk = ITEM   (one partition per item)
    index "unresolved" (sparse, keys only): unresolved_pk = UNRESOLVED#<job>#<shard 00-15>,
        unresolved_sk = <state>#<work id>; on failed/uncertain rows only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ._dynamo import from_attr, transient
from ._item_rows import job_row, read_item_row
from ._item_writes import (
    _RETRIES,
    MAX_CLAIM,
    PUT_BATCH,
    ROWS_PER_TRANSACTION,
    FactsNotWrittenError,
    ItemWrites,
    _backoff,
    shard_of,
)
from .callsites import RETRY, STOP, SURFACE, Path, Target, call_site
from .errors import StoreError
from .schema import (
    FENCE_SK,
    ITEM_SK,
    PARTITION_KEY,
    SORT_KEY,
    UNRESOLVED_INDEX,
    UNRESOLVED_PK,
    UNRESOLVED_SHARDS,
    UNRESOLVED_SK,
    item_pk,
    unresolved_pk,
)
from .workitems import Checkpoint, DamagedItem, ItemRecord, ItemState, JobRow

__all__ = ["MAX_CLAIM", "PUT_BATCH", "ROWS_PER_TRANSACTION", "DynamoItemStore",
           "FactsNotWrittenError", "item_record", "job_row", "shard_of"]

GET_BATCH = 100  # BatchGetItem's limit: one call per page of 100


# -- call sites (see jobguard.callsites) --------------------------------------------

READ_ROW = call_site(
    "items.read_row", "dynamodb", "GetItem", "DynamoItemStore.read_row",
    throttle=STOP, server_error=STOP, timeout=STOP, lost=RETRY,
    note="the job row (checkpoint, open claim) before any claim: the run ends `failed`, "
         "releases, nothing claimed",
    paths=(Path.RUN,),
)
LOOKUP = call_site(
    "items.lookup", "dynamodb", "BatchGetItem", "DynamoItemStore.lookup",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="a page's items before claiming (consistent, 100 keys a call): retried with "
         "backoff (6 tries), unprocessed keys asked again; then the run fails, nothing "
         "claimed",
    paths=(Path.RUN,),
)
GET_MANY = call_site(
    "items.get_many", "dynamodb", "BatchGetItem", "DynamoItemStore.get_many",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read with the open claim (recovery plan, sweeps, CLI); unprocessed keys are "
         "asked again",
    paths=(Path.SWEEP, Path.OPERATOR),
)
UNRESOLVED = call_site(
    "items.unresolved", "dynamodb", "Query", "DynamoItemStore._indexed",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read of the sparse index (sweeps, CLI `items`)",
    paths=(Path.SWEEP, Path.OPERATOR), target=Target.INDEX,
)


# -- rows ------------------------------------------------------------------------------


def item_record(job: str, raw: dict[str, Any] | None) -> ItemRecord | None:
    """An item row (DynamoDB JSON) of ``job`` as read: an item record, a
    :class:`~jobguard.workitems.DamagedItem` when the row is not a readable item (never
    an exception), or None when there is no row."""
    return read_item_row(job, raw)


class DynamoItemStore(ItemWrites):
    """Work items and the checkpoint of any number of jobs, in the jobguard table.

    Example:
        >>> items = DynamoItemStore("jobguard", client=ddb)  # doctest: +SKIP
        >>> row = items.read_row("crm-sync")  # doctest: +SKIP
        >>> items.commit(fence, Commit(expected=row, claim={"contact-42:create-note": ""},
        ...                            claim_expires_at_ms=now + 900_000),
        ...              now_ms=now)  # doctest: +SKIP
    """

    def __init__(self, table_name: str, *, client: Any) -> None:
        self.table_name = table_name
        self._client = client

    # -- reads -----------------------------------------------------------------------

    def read_row(self, job: str) -> JobRow:
        """The job row, strongly consistent."""
        try:
            response = self._client.get_item(
                TableName=self.table_name, Key=self._row_key(job), ConsistentRead=True)
        except (ClientError, BotoCoreError) as exc:
            raise StoreError("read_row", job, str(exc)) from exc
        return job_row(job, response.get("Item"))

    def read_checkpoint(self, job: str) -> Checkpoint:
        return self.read_row(job).checkpoint

    def lookup(self, job: str, work_ids: Sequence[str], *, with_row: bool = False,
               ) -> tuple[dict[str, ItemRecord], JobRow | None]:
        """Consistent reads of items' own rows (facts, unresolved rows), without the open
        claim; with ``with_row`` the job row too (in the first call when it fits)."""
        return self._batch_get(job, work_ids, with_row=with_row, retry_errors=True,
                               call=lambda request: self._client.batch_get_item(
                                   RequestItems=request))

    def get_many(self, job: str, work_ids: Sequence[str], *, now_ms: int | None = None,
                 with_claim: bool = False) -> dict[str, ItemRecord]:
        """Each item as the ledger holds it: its row, or ``claimed`` while an open claim
        names it and it is not completed (the claim's run and fence). With ``now_ms``, a
        completion past its TTL counts as absent under a claim, as every run treats it;
        ``with_claim`` adds every item of the open claim."""

        def call(request: dict[str, Any]) -> Any:
            return self._client.batch_get_item(RequestItems=request)

        found, row = self._batch_get(job, work_ids, with_row=True, retry_errors=False,
                                     call=call)
        ids = list(dict.fromkeys(work_ids))
        if with_claim and row is not None and row.claim is not None:
            asked = set(ids)
            missing = [w for w in row.claim.items if w not in asked]
            if missing:
                more, _ = self._batch_get(job, missing, with_row=False, retry_errors=False,
                                          call=call)
                found.update(more)
                ids += missing
        return overlay(found, row, ids, now_ms=now_ms)

    def get(self, job: str, work_id: str) -> ItemRecord | None:
        return self.get_many(job, [work_id]).get(work_id)

    def unresolved(self, job: str, *, states: Sequence[ItemState] | None = None,
                   limit: int = 1000, now_ms: int | None = None) -> list[ItemRecord]:
        """A job's claimed / failed / uncertain items, at most ``limit``: the open
        claim's first, then the uncertain rows the sparse index names, then the failed
        ones, each confirmed by a consistent read (an index is eventually consistent).
        Damaged rows (:class:`DamagedItem`) always, last. Rejected records only when
        ``states`` names them (with ``now_ms``, those past their TTL are absent).

        The index is read state by state (its sort key leads with the state), so however
        many failed rows are indexed, an uncertain one is never cut off by them."""
        wanted = set(states) if states else {ItemState.CLAIMED, ItemState.FAILED,
                                             ItemState.UNCERTAIN}
        work_ids: list[str] = []
        for state in (ItemState.UNCERTAIN, ItemState.FAILED, ItemState.REJECTED):
            if state in wanted:
                work_ids += self._indexed(job, state, limit - len(work_ids))
        confirmed = self.get_many(job, work_ids, now_ms=now_ms, with_claim=True)
        order = {ItemState.CLAIMED: 0, ItemState.UNCERTAIN: 1, ItemState.FAILED: 2,
                 ItemState.REJECTED: 3}
        # a damaged row is listed whatever ``states`` asks (after the readable ones):
        # what it is cannot be known, and it is never silently dropped
        kept = [r for r in confirmed.values()
                if (r.state in wanted or isinstance(r, DamagedItem))
                and (now_ms is None or r.live(now_ms // 1000))]
        return sorted(kept, key=lambda r: 4 if isinstance(r, DamagedItem)
                      else order.get(r.state, 3))[:limit]

    def _indexed(self, job: str, state: ItemState, limit: int) -> list[str]:
        """Up to ``limit`` work ids the index files under ``state``, shard by shard."""
        work_ids: list[str] = []
        for shard in range(UNRESOLVED_SHARDS):
            kwargs: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": UNRESOLVED_INDEX,
                "KeyConditionExpression": "#p = :p AND begins_with(#s, :s)",
                "ExpressionAttributeNames": {"#p": UNRESOLVED_PK, "#s": UNRESOLVED_SK},
                "ExpressionAttributeValues": {
                    ":p": {"S": unresolved_pk(job, f"{shard:02d}")},
                    ":s": {"S": f"{state.value}#"}},
            }
            while len(work_ids) < limit:
                kwargs["Limit"] = limit - len(work_ids)
                response = self._client.query(**kwargs)
                for raw in response.get("Items", []):
                    sk = str(from_attr(raw[UNRESOLVED_SK]))
                    work_ids.append(sk.split("#", 1)[1])
                if "LastEvaluatedKey" not in response:
                    break
                kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return work_ids[:limit]

    def _batch_get(self, job: str, work_ids: Sequence[str], *, with_row: bool,
                   retry_errors: bool, call: Any,
                   ) -> tuple[dict[str, ItemRecord], JobRow | None]:
        found: dict[str, ItemRecord] = {}
        row: JobRow | None = None
        keys = [self._key(job, w) for w in dict.fromkeys(work_ids)]
        if with_row:
            keys.insert(0, self._row_key(job))
        row_seen = False
        for start in range(0, len(keys), GET_BATCH):
            request: dict[str, Any] = {self.table_name: {
                "Keys": keys[start:start + GET_BATCH], "ConsistentRead": True}}
            for attempt in range(_RETRIES * 2):
                try:
                    response = call(request)
                except (ClientError, BotoCoreError) as exc:
                    if retry_errors and transient(exc) and attempt < _RETRIES * 2 - 1:
                        _backoff(attempt)
                        continue
                    if retry_errors:
                        raise StoreError("lookup", job, str(exc)) from exc
                    raise
                for raw in response.get("Responses", {}).get(self.table_name, []):
                    if raw.get(SORT_KEY, {}).get("S") == FENCE_SK:
                        row, row_seen = job_row(job, raw), True
                        continue
                    record = item_record(job, raw)
                    if record is not None:
                        found[record.work_id] = record
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                _backoff(attempt)
            if request:
                raise StoreError("lookup", job, "keys still unprocessed after retries")
        if with_row and not row_seen:
            row = JobRow(job=job)
        return found, row

    def _key(self, job: str, work_id: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": item_pk(job, work_id)}, SORT_KEY: {"S": ITEM_SK}}


def overlay(found: dict[str, ItemRecord], row: JobRow | None, work_ids: Sequence[str],
            *, now_ms: int | None = None) -> dict[str, ItemRecord]:
    """Rows, with the open claim's items that are not completed read as ``claimed``."""
    claim = row.claim if row is not None else None
    if claim is None or row is None:
        return dict(found)
    merged = dict(found)
    for work_id in work_ids:
        if work_id not in claim.items:
            continue
        current = merged.get(work_id)
        if current is not None and current.state is ItemState.COMPLETED and (
                now_ms is None or current.live(now_ms // 1000)):
            continue  # a completion fact is final
        claimed = claim.record(row.job, work_id)
        if current is not None:
            claimed = dataclasses.replace(
                claimed, attempts=current.attempts, last_error=current.last_error,
                payload_hash=current.payload_hash or claimed.payload_hash,
                created_at_ms=current.created_at_ms)
        merged[work_id] = claimed
    return merged
