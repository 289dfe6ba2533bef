"""A work-item row read back: an item record, or a :class:`DamagedItem` naming what is
wrong (private).

Anyone who may write the table (the job's own role, an operator, a restore from an old
backup, another tool) can leave a row under an item's key that is not an item. A reader
that raised on it would stop every run, sweep, recovery and ``jobguard items`` of the
job; one that guessed could take it for done (skipping work) or for absent (doing it
again). So each row is checked, attribute by attribute, against what jobguard writes,
and a row that fails is returned as damaged, with its key and every problem named.

The job row (checkpoint, open claim, fence high-water mark) is read here too
(:func:`job_row`): the ledger's reads and its writes (a refused write reads the row it
found) both decode it.
"""

from __future__ import annotations

from typing import Any

from ._dynamo import plain
from ._run_rows import quote_value, value_kind
from .schema import PARTITION_KEY, TTL_ATTRIBUTE
from .workitems import Checkpoint, DamagedItem, ItemRecord, ItemState, JobRow, OpenClaim

__all__ = ["job_row", "read_item_row"]

_TEXT = ("job", "work_id", "run_id", "last_error", "destination_id", "payload_hash",
         "source_id", "excerpt")
_NUMBERS = ("fence", "claim_expires_at_ms", "attempts", "created_at_ms", "updated_at_ms",
            "completed_at_ms", TTL_ATTRIBUTE, "held_until_ms")
_PROBLEM_CHARS = 500


def _problems(row: dict[str, Any], job: str, key_work_id: str | None) -> list[str]:
    said: list[str] = []
    state = row.get("state")
    if not isinstance(state, str) or state not in {m.value for m in ItemState}:
        said.append(f"state {quote_value(state)} is not an item state jobguard writes")
    for name in _TEXT:
        value = row.get(name)
        if value is not None and not isinstance(value, str):
            said.append(f"{name} is {value_kind(value)}, not text")
    for name in _NUMBERS:
        value = row.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            said.append(f"{name} is {value_kind(value)}, not a whole number")
    retryable = row.get("retryable")
    if retryable is not None and not isinstance(retryable, bool):
        said.append(f"retryable is {value_kind(retryable)}, not a boolean")
    if isinstance(row.get("job"), str) and row["job"] != job:
        said.append(f"job {quote_value(row['job'])} is not the job of its key")
    work_id = row.get("work_id")
    if isinstance(work_id, str) and key_work_id is not None and work_id != key_work_id:
        said.append(f"work_id {quote_value(work_id)} is not the work id in its key")
    return said


def read_item_row(job: str, raw: dict[str, Any] | None) -> ItemRecord | None:
    """One row under an item's key (DynamoDB JSON) of ``job``: an item record; a
    :class:`DamagedItem` (an ``ItemRecord`` read as uncertain) naming each problem; or
    None when there is no row (or only a key).

    Example:
        >>> read_item_row("j", {"pk": {"S": "ITEM#j#a"}, "sk": {"S": "ITEM"},
        ...                     "state": {"S": "bogus"}}).problem
        "state 'bogus' is not an item state jobguard writes"
    """
    row = plain(raw)
    if not row or set(row) <= {PARTITION_KEY, "sk"}:
        return None
    partition = row.get(PARTITION_KEY)
    prefix = f"ITEM#{job}#"
    key_work_id = (partition.removeprefix(prefix) if isinstance(partition, str)
                   and partition.startswith(prefix) else None)
    said = _problems(row, job, key_work_id)
    work_id = key_work_id if key_work_id is not None else row.get("work_id")
    if said:
        problem = "; ".join(said)
        if len(problem) > _PROBLEM_CHARS:
            problem = problem[: _PROBLEM_CHARS - 3] + "..."
        return DamagedItem(job=job, work_id=str(work_id or ""), problem=problem)
    return ItemRecord(
        job=job,
        work_id=str(work_id or ""),
        state=ItemState(row["state"]),
        run_id=row.get("run_id"),
        fence=row.get("fence"),
        claim_expires_at_ms=row.get("claim_expires_at_ms"),
        attempts=row.get("attempts") or 0,
        retryable=bool(row.get("retryable", False)),
        last_error=row.get("last_error"),
        destination_id=row.get("destination_id"),
        payload_hash=row.get("payload_hash"),
        created_at_ms=row.get("created_at_ms"),
        updated_at_ms=row.get("updated_at_ms", row.get("completed_at_ms")),
        completed_at_ms=row.get("completed_at_ms"),
        ttl_epoch_s=row.get(TTL_ATTRIBUTE),
        source_id=row.get("source_id"),
        held_until_ms=row.get("held_until_ms"),
        excerpt=row.get("excerpt"),
    )


def job_row(job: str, raw: dict[str, Any] | None) -> JobRow:
    """The job row as stored (absent: fence 0, no checkpoint, no claim)."""
    row = plain(raw)
    hw = row.get("hw", 0)
    claim = None
    if isinstance(row.get("claim_run_id"), str):
        stored = row.get("claim")
        items: dict[Any, Any] = stored if isinstance(stored, dict) else {}
        claim = OpenClaim(run_id=row["claim_run_id"], fence=int(row.get("claim_fence", 0)),
                          expires_at_ms=int(row.get("claim_expires_at_ms", 0)),
                          items={str(k): str(v) for k, v in items.items()})
    checkpoint = Checkpoint(cursor=row.get("cursor"), seq=int(row.get("seq", 0)),
                            run_id=row.get("cursor_run_id"), fence=row.get("cursor_fence"),
                            updated_at_ms=row.get("cursor_at_ms"))
    hold = row.get("hold_until_ms")
    return JobRow(job=job, fence=hw if isinstance(hw, int) else 0, checkpoint=checkpoint,
                  claim=claim, token=row.get("commit_token"),
                  hold_until_ms=hold if isinstance(hold, int) else None)
