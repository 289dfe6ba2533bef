"""Planning a recovery: the request (a job, a bounded range, a mode), and the plan it
makes from the source and the ledger (reads only): counts, a sample and the
confirmation token bound to the request and to the plan (private;
:mod:`jobguard.recovery` exports it and executes a plan).

Its one reason to change is what a recovery may ask and how the ledger's items are
classified for it; taking the lease and replaying the plan are :mod:`jobguard.recovery`'s.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ._claim_values import identify, rejection
from ._durations import human
from .errors import InvalidRequestError
from .workitems import DamagedItem, ItemRecord, ItemState, payload_differs

__all__ = ["Plan", "RecoveryMode", "RecoveryRequest", "make_plan", "parse_request"]

MAX_TIME_WINDOW = timedelta(days=7)
SAMPLE_SIZE = 10


class RecoveryMode(StrEnum):
    """Which items a recovery replays. Completed items are never replayed."""

    UNFINISHED = "unfinished"
    """Never attempted, failed, and uncertain (reconciled first)."""
    FAILED = "failed"
    """Only items that failed."""
    UNCERTAIN = "uncertain"
    """Only items whose outcome is unknown (reconciled first; redone only if absent)."""


class RecoveryRequest(BaseModel):
    """A recovery request (the recovery Lambda's event). Strict: no extra fields."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    job: str = Field(min_length=1, max_length=64)
    cursor_from: str | None = Field(default=None, min_length=1, max_length=512)
    cursor_to: str | None = Field(default=None, min_length=1, max_length=512)
    time_from: AwareDatetime | None = None
    time_to: AwareDatetime | None = None
    mode: RecoveryMode = RecoveryMode.UNFINISHED
    dry_run: bool = True
    confirm: str | None = Field(default=None, min_length=1, max_length=64)
    max_items: int = Field(default=1000, gt=0, le=100_000)
    requested_by: str | None = Field(default=None, max_length=256)
    wait_seconds: int | None = Field(default=None, ge=0, le=900)
    """How long to wait for a running run's lease. Default: 60 s, or half of what the
    invocation has left after the job's time margin, if less. A wait that does not fit
    the invocation's remaining time is refused (:func:`recover`)."""

    @model_validator(mode="before")
    @classmethod
    def _lenient_json(cls, data: Any) -> Any:
        # JSON has no datetimes or enums: accept their string forms in strict mode.
        if isinstance(data, dict):
            data = dict(data)
            for key in ("time_from", "time_to"):
                if isinstance(data.get(key), str):
                    try:
                        data[key] = datetime.fromisoformat(data[key])
                    except ValueError:
                        raise ValueError(f"{key}: {data[key]!r} is not an ISO-8601 time"
                                         ) from None
            if isinstance(data.get("mode"), str):
                try:
                    data["mode"] = RecoveryMode(data["mode"])
                except ValueError:
                    names = ", ".join(m.value for m in RecoveryMode)
                    raise ValueError(f"mode: unknown mode {data['mode']!r}; one of {names} "
                                     "(completed items are never replayed)") from None
        return data

    @model_validator(mode="after")
    def _bounded(self) -> RecoveryRequest:
        by_cursor = self.cursor_from is not None or self.cursor_to is not None
        by_time = self.time_from is not None or self.time_to is not None
        if by_cursor and by_time:
            raise ValueError("cursor_from: give a cursor range or a time range, not both")
        if not by_cursor and not by_time:
            raise ValueError("cursor_from: a bounded range is required "
                             "(cursor_from and cursor_to, or time_from and time_to)")
        if by_cursor:
            if self.cursor_from is None or self.cursor_to is None:
                missing = "cursor_to" if self.cursor_to is None else "cursor_from"
                raise ValueError(f"{missing}: both ends of the range are required")
            if _cursor_key(self.cursor_from) >= _cursor_key(self.cursor_to):
                raise ValueError(f"cursor_to: the range is empty or reversed "
                                 f"({self.cursor_from!r} .. {self.cursor_to!r})")
        if by_time:
            if self.time_from is None or self.time_to is None:
                missing = "time_to" if self.time_to is None else "time_from"
                raise ValueError(f"{missing}: both ends of the range are required")
            if self.time_from >= self.time_to:
                raise ValueError("time_to: the range is empty or reversed")
            if self.time_to - self.time_from > MAX_TIME_WINDOW:
                raise ValueError(f"time_to: the window is longer than {human(MAX_TIME_WINDOW)}; "
                                 "recover in smaller windows")
        return self

    def identity(self) -> dict[str, Any]:
        """What the confirmation token is bound to (not dry_run/confirm/requester)."""
        return {"job": self.job, "cursor_from": self.cursor_from, "cursor_to": self.cursor_to,
                "time_from": self.time_from.isoformat() if self.time_from else None,
                "time_to": self.time_to.isoformat() if self.time_to else None,
                "mode": self.mode.value, "max_items": self.max_items}


def _cursor_key(cursor: str) -> tuple[int, str]:
    """Numeric cursors compare as numbers, others as strings."""
    return (0, f"{int(cursor):030d}") if cursor.isdigit() else (1, cursor)


def parse_request(event: object) -> RecoveryRequest:
    """Validate a recovery request; :class:`InvalidRequestError` names the field."""
    if not isinstance(event, dict):
        raise InvalidRequestError("request", f"must be a JSON object, got {type(event).__name__}")
    try:
        return RecoveryRequest.model_validate(event)
    except ValidationError as exc:
        error = exc.errors()[0]
        message = str(error["msg"]).removeprefix("Value error, ")
        field_name = ".".join(str(p) for p in error["loc"])
        named = message.split(": ", 1)[0] if ": " in message else None
        if named is not None and (not field_name or named in RecoveryRequest.model_fields):
            field_name, message = message.split(": ", 1)
        ctx = error.get("ctx") or {}
        if error["type"] == "extra_forbidden":
            message = "is not a field of a recovery request"
        elif error["type"] == "missing":
            message = "is required"
        elif error["type"] == "timezone_aware":
            message = "needs its timezone (e.g. 2026-11-01T00:00:00Z)"
        elif error["type"] in ("greater_than", "greater_than_equal", "less_than",
                               "less_than_equal"):
            words = {"greater_than": "more than", "greater_than_equal": "at least",
                     "less_than": "less than", "less_than_equal": "at most"}[error["type"]]
            bound = next(iter(ctx.values()), "?")
            message = f"must be {words} {bound}, got {error.get('input')!r}"
        elif error["type"] in ("string_too_short", "string_too_long"):
            message = (f"must be {ctx.get('min_length', 1)} to "
                       f"{ctx.get('max_length', '?')} characters" if "max_length" in ctx
                       else "must not be empty")
        raise InvalidRequestError(field_name or "request", message) from None


@dataclass
class Plan:
    """What a recovery would do."""

    selected: int = 0
    completed: int = 0
    failed: int = 0
    uncertain: int = 0
    never_attempted: int = 0
    to_replay: int = 0
    skipped_by_mode: int = 0
    expired: int = 0
    """Completed rows past their TTL: absent, as every run treats them (counted in
    ``never_attempted`` too)."""
    conflicts: int = 0
    """Completed or unresolved rows whose recorded payload differs from the record's
    payload now: the work id was reused for other content."""
    conflict_ids: list[str] = field(default_factory=list)
    rejected: int = 0
    """Records in the range no work id can be made for (``work_id()`` or ``payload()``
    raises): never replayed; fix them at the source and recover again."""
    rejected_sample: list[str] = field(default_factory=list)
    """Up to 10 of them: the ledger key and why."""
    damaged: int = 0
    """Items whose ledger row is not a readable item (:class:`DamagedItem`): what they
    are cannot be known, so they are never replayed (nor counted done); look at each,
    then ``jobguard resolve`` it."""
    damaged_sample: list[str] = field(default_factory=list)
    """Up to 10 of them: the row's key and what is wrong."""
    sample: list[str] = field(default_factory=list)
    token: str = ""
    records: list[Any] = field(default_factory=list, repr=False)
    rows: dict[str, ItemRecord] = field(default_factory=dict, repr=False)
    replay_ids: list[str] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()
                if k not in ("records", "rows", "replay_ids")}


def _name_damaged(plan: Plan, row: DamagedItem) -> None:
    """A damaged row in the range: named, never replayed."""
    plan.damaged += 1
    if len(plan.damaged_sample) < SAMPLE_SIZE:
        plan.damaged_sample.append(str(row))


def _state(row: ItemRecord) -> str:
    """A row's state as a plan's token sees it (a damaged row's is ``damaged``)."""
    return "damaged" if isinstance(row, DamagedItem) else row.state.value


def _in_scope(row: ItemRecord | None, mode: RecoveryMode) -> bool:
    if row is None:
        return mode is RecoveryMode.UNFINISHED
    if row.state is ItemState.FAILED:
        return mode in (RecoveryMode.UNFINISHED, RecoveryMode.FAILED)
    if row.state in (ItemState.UNCERTAIN, ItemState.CLAIMED):
        return mode in (RecoveryMode.UNFINISHED, RecoveryMode.UNCERTAIN)
    return False


def make_plan(job: Any, items: Any, request: RecoveryRequest, *, now_ms: int) -> Plan:
    """Select the range's records and classify them from the ledger (reads only).

    A completed row whose TTL has passed (``now_ms``) is absent, as it is to every run:
    DynamoDB deletes expired items up to days late, and a run may claim it again.

    The range is the records the job's ``select`` returns after ``cursor_from`` (the
    same meaning as a checkpoint), up to and including ``cursor_to``: cut exactly
    when the job implements ``cursor_of``, at page bounds otherwise.
    """
    if request.time_from is not None and request.time_to is not None:
        start, end = job.cursor_at(request.time_from), job.cursor_at(request.time_to)
    else:
        start, end = request.cursor_from, request.cursor_to
    records: list[Any] = []
    cursor = start
    while True:
        page = job.select(cursor, min(job.config.batch_size, 1000))
        if not page.records:
            break
        for record in page.records:
            position = job.cursor_of(record)
            if position is not None and _cursor_key(position) > _cursor_key(end):
                break
            records.append(record)
        else:
            if page.next_cursor is None or _cursor_key(page.next_cursor) >= _cursor_key(end):
                break
            cursor = page.next_cursor
            if len(records) > request.max_items:
                break
            continue
        break
    if len(records) > request.max_items:
        raise InvalidRequestError(
            "max_items", f"the range holds more than {request.max_items} records: narrow it "
            "or raise max_items")
    by_id, digests, rejected = _identities(job, records)
    read = items.get_many(job.config.name, list(by_id), now_ms=now_ms)
    rows = {w: row for w, row in read.items() if row.live(now_ms // 1000)}
    plan = Plan(selected=len(by_id) + len(rejected), records=records, rows=rows,
                expired=len(read) - len(rows), rejected=len(rejected),
                rejected_sample=[f"{r.work_id}: {r.error}" for r in rejected[:SAMPLE_SIZE]])
    for work_id in by_id:
        row = rows.get(work_id)
        if isinstance(row, DamagedItem):
            _name_damaged(plan, row)
            continue
        if row is not None and payload_differs(row.payload_hash, digests[work_id]):
            plan.conflicts += 1
            if len(plan.conflict_ids) < SAMPLE_SIZE:
                plan.conflict_ids.append(work_id)
        if row is None:
            plan.never_attempted += 1
        elif row.state is ItemState.COMPLETED:
            plan.completed += 1
        elif row.state is ItemState.FAILED:
            plan.failed += 1
        else:
            plan.uncertain += 1
        if _in_scope(row, request.mode):
            plan.replay_ids.append(work_id)
        elif row is None or row.state is not ItemState.COMPLETED:
            plan.skipped_by_mode += 1
    plan.to_replay = len(plan.replay_ids)
    plan.sample = plan.replay_ids[:SAMPLE_SIZE]
    fingerprint = {"request": request.identity(),
                   "plan": sorted([f"{w}={_state(rows[w]) if w in rows else 'new'}"
                                   for w in by_id] + [f"{r.work_id}=rejected"
                                                      for r in rejected])}
    plan.token = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:24]
    return plan


def _identities(job: Any, records: list[Any]) -> tuple[dict[str, Any], dict[str, str | None],
                                                         list[Any]]:
    """The records by work id, their payload hashes, and the rejected ones (no work id
    can be made for them: one record never stops a recovery either)."""
    by_id: dict[str, Any] = {}
    digests: dict[str, str | None] = {}
    rejected: dict[str, Any] = {}
    for record in records:
        try:
            wid, digest = identify(record, job.work_id, job.payload)
        except Exception as exc:  # noqa: BLE001 - reported, never replayed
            row = rejection(record, exc, 0, redact=getattr(job.config, "redact", None))
            rejected.setdefault(row.work_id, row)
            continue
        by_id.setdefault(str(wid), record)
        digests.setdefault(str(wid), digest)
    return by_id, digests, list(rejected.values())
