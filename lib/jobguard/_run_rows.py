"""A run-log row read back: a run record, or a :class:`DamagedRun` naming what is wrong
(private).

Anyone who may write the table (the job's own role, an operator, a restore from an
old backup, another tool) can leave a row under ``RUN#`` that is not a run record. A
reader that raised on it would hide every other record behind it (``jobguard runs``,
``jobguard status``); one that guessed would show a run that never was. So each row is
checked, attribute by attribute, against what jobguard writes, and a row that fails is
returned as damaged, with its key and every problem named, for the reader to show.
"""

from __future__ import annotations

from typing import Any

from ._dynamo import plain
from .records import DamagedRun, Decision, RunRecord, RunStatus
from .schema import PARTITION_KEY, RUN_PREFIX, SORT_KEY, TTL_ATTRIBUTE

__all__ = ["quote_value", "read_run_row", "value_kind"]

_MAX_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z, the last millisecond a date can show (a run id holds
later ones, up to the year 10889): a later "time" is no time."""
_TEXT = ("owner", "holder_run_id", "scheduled_at", "requested_by", "delivery_id", "error",
         "detail")
_TEXT_OR_EMPTY = ("trigger_id", "trigger_kind", "policy")
_TIMES = ("started_at_ms", "ended_at_ms")
_NUMBERS = ("fence", "holder_fence")
_KNOWN = frozenset({"job", "run_id", "decision", "status", "duration_ms", *_TEXT,
                    *_TEXT_OR_EMPTY, *_TIMES, *_NUMBERS})
_PROBLEM_CHARS = 500


def quote_value(value: Any) -> str:
    """A value as a problem quotes it: its repr, a long one cut."""
    if isinstance(value, str | bytes) and len(value) > 40:
        return f"{value[:40]!r}... ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def value_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {str: "text", int: "a number", float: "a fraction", dict: "a map",
            list: "a list", bytes: "binary"}.get(type(value), type(value).__name__)


def _problems(row: dict[str, Any], key_job: str | None, key_run_id: str) -> list[str]:
    said: list[str] = []
    for name in ("job", "run_id", "status"):
        if name not in row:
            said.append(f"{name} is missing")
    job, run_id = row.get("job"), row.get("run_id")
    if "job" in row and not isinstance(job, str):
        said.append(f"job is {value_kind(job)}, not text")
    elif isinstance(job, str) and key_job is not None and job != key_job:
        said.append(f"job {quote_value(job)} is not the job of its key ({quote_value(key_job)})")
    if "run_id" in row and not isinstance(run_id, str):
        said.append(f"run_id is {value_kind(run_id)}, not text")
    elif isinstance(run_id, str) and run_id != key_run_id:
        said.append(f"run_id {quote_value(run_id)} is not the id in its key")
    for name, kind in (("status", RunStatus), ("decision", Decision)):
        value = row.get(name)
        if name in row and (not isinstance(value, str)
                            or value not in {m.value for m in kind}):
            said.append(f"{name} {quote_value(value)} is not a run {name} jobguard writes")
    for name in _TEXT + _TEXT_OR_EMPTY:
        value = row.get(name)
        if value is not None and not isinstance(value, str):
            said.append(f"{name} is {value_kind(value)}, not text")
    for name in _TIMES + _NUMBERS:
        value = row.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            said.append(f"{name} is {value_kind(value)}, not a whole number")
        elif name in _TIMES and not 0 <= value <= _MAX_MS:
            said.append(f"{name} {quote_value(value)} is not a time in milliseconds")
    return said


def read_run_row(item: dict[str, Any]) -> RunRecord | DamagedRun:
    """One row under a job's run prefix (DynamoDB JSON), read as a run record, or as a
    damaged row naming its sort key and each problem.

    Example:
        >>> read_run_row({"pk": {"S": "JOB#j"}, "sk": {"S": "RUN#R1"},
        ...               "job": {"S": "j"}, "run_id": {"S": "R1"}}).problem
        'status is missing'
    """
    key = item.get(SORT_KEY) or {}
    sk = key.get("S") if isinstance(key, dict) else None
    sk = sk if isinstance(sk, str) else RUN_PREFIX + "?"
    partition = (item.get(PARTITION_KEY) or {}).get("S")
    key_job = partition.removeprefix("JOB#") if isinstance(partition, str) else None
    row = plain(item)
    said = _problems(row, key_job, sk.removeprefix(RUN_PREFIX))
    if said:
        problem = "; ".join(said)
        if len(problem) > _PROBLEM_CHARS:
            problem = problem[: _PROBLEM_CHARS - 3] + "..."
        return DamagedRun(job=key_job if key_job is not None else str(row.get("job")),
                          sk=sk, problem=problem)
    return RunRecord(
        job=row["job"],
        run_id=row["run_id"],
        trigger_id=row.get("trigger_id") or "",
        trigger_kind=row.get("trigger_kind") or "",
        policy=row.get("policy") or "",
        decision=Decision(row.get("decision", "ran")),
        status=RunStatus(row["status"]),
        started_at_ms=row.get("started_at_ms") or 0,
        ended_at_ms=row.get("ended_at_ms"),
        fence=row.get("fence"),
        owner=row.get("owner"),
        holder_run_id=row.get("holder_run_id"),
        holder_fence=row.get("holder_fence"),
        scheduled_at=row.get("scheduled_at"),
        requested_by=row.get("requested_by"),
        delivery_id=row.get("delivery_id"),
        error=row.get("error"),
        detail=row.get("detail"),
        extra={k: v for k, v in row.items()
               if k not in _KNOWN and k not in (PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE)},
    )
