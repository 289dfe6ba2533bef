"""What a claim is made of: a record's work id, payload hash and fingerprint, the
ledger row of a record no work id can be made for, and the values an outcome may carry
(a destination id, an error's text, a reconcile's answer) (private; :mod:`jobguard.claims`
exports them).

Its one reason to change is how a record is identified and what an outcome may hold;
the engine that claims and records is :mod:`jobguard.claims`'.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

from ._bounds import bounded_text
from ._redact import Redactor, error_text, redacted
from .errors import JobGuardError
from .workitems import (
    MAX_SOURCE_KEPT,
    ItemRecord,
    ItemState,
    Unresolved,
    WorkId,
    rejected_key,
    source_key,
)

__all__ = ["MAX_DESTINATION_ID", "MAX_EXCERPT", "MAX_PAYLOAD_HASH", "destination_id_problem",
           "fingerprint", "identify", "kept_source", "payload_hash", "rejection",
           "remaining_ms"]

_MAX_ERROR = 1000


MAX_DESTINATION_ID = 1024
"""Bytes (UTF-8) of a destination id: it is stored with every completion."""
MAX_PAYLOAD_HASH = 64
"""Characters of a payload hash kept as given; a longer one is hashed (stable)."""


def destination_id_problem(value: object) -> str | None:
    """Why ``value`` cannot be a destination id (None: it can). The one check for every
    way an id is recorded: a run's ``complete``, a reconcile's answer, ``resolve``."""
    if not isinstance(value, str) or not value:
        return f"must be a non-empty string, got {type(value).__name__}"
    if not value.strip():
        return "must not be blank (only whitespace)"
    if len(value.encode("utf-8")) > MAX_DESTINATION_ID:
        return (f"must be at most {MAX_DESTINATION_ID} bytes (UTF-8), got "
                f"{len(value.encode('utf-8'))}")
    return None


def payload_hash(key: str, value: object) -> str | None:
    """A record's payload hash as stored: None, or a string of at most 64 characters
    (a longer one, e.g. the content itself, is reduced to its SHA-256)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise JobGuardError(f"{key}: payload() must return a string or None, got "
                            f"{type(value).__name__}")
    if len(value) > MAX_PAYLOAD_HASH:
        return hashlib.sha256(value.encode()).hexdigest()[:32]
    return value


def _reconciled(answer: object) -> str | None:
    """What a ``reconcile`` answered: a destination id (found), or None / "" (not found).
    Anything else is no answer (:class:`TypeError`): the item stays uncertain, never
    redone on the strength of an answer that is neither."""
    if answer is None or answer == "":
        return None
    problem = destination_id_problem(answer)
    if problem is not None:
        raise TypeError(f"reconcile() must return the destination id (a string) or None; "
                        f"its answer {problem}")
    assert isinstance(answer, str)
    return answer


def _held_until(row: ItemRecord) -> int:
    """Until when a displaced run may still call the destination for this item (0: no
    hold on it)."""
    return row.held_until_ms or 0


def _describe(error: BaseException | str, redact: Redactor | None = None) -> str:
    """An error as an item row keeps it: the whole text through the job's ``redact``,
    then bounded."""
    return bounded_text(redacted(error_text(error), redact), _MAX_ERROR) or ""


def _stable(value: Any) -> Any:
    """A JSON stand-in for what JSON cannot hold, the same for the same content in any
    process: a set, its members in order; its text (a datetime, a Decimal), unless that
    names where it lives in memory (an object without a repr of its own), then its
    fields; a value whose text cannot be read at all, its type."""
    if isinstance(value, set | frozenset):
        return sorted(value, key=_sort_key)
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - e.g. an ORM object detached from its session
        text = None
    if text is not None and " at 0x" not in text:
        return text
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    fields = dict(getattr(value, "__dict__", None) or {})
    for cls in type(value).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if isinstance(name, str) and hasattr(value, name):
                fields.setdefault(name, getattr(value, name))
    if fields:
        return {"__type__": type(value).__qualname__, **fields}
    return f"<{type(value).__qualname__}>"


def _sort_key(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=_stable)
    except Exception:  # noqa: BLE001 - ordered by what can be said of it
        return f"<{type(value).__qualname__}>"


def _plain(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """``value`` with every mapping's keys as JSON writes them and every member made
    JSON (a tuple key, keys of mixed types, a cycle): for a hash of what json.dumps
    refuses."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if id(value) in seen:
        return "<cycle>"
    seen = seen | {id(value)}
    if isinstance(value, dict | list | tuple | set | frozenset):
        if isinstance(value, dict):
            return {(k if isinstance(k, str) else _sort_key(k)): _plain(v, seen)
                    for k, v in value.items()}
        members = [_plain(v, seen) for v in value]
        return sorted(members, key=_sort_key) if isinstance(value, set | frozenset) \
            else members
    return _plain(_stable(value), seen)


def _canonical(record: Any) -> str | None:
    try:
        return json.dumps(record, sort_keys=True, separators=(",", ":"), default=_stable)
    except Exception:  # noqa: BLE001 - keys JSON cannot sort, a cycle: made plain first
        pass
    try:
        return json.dumps(_plain(record), sort_keys=True, separators=(",", ":"))
    except Exception:  # noqa: BLE001 - not JSON, and not made so: no content hash
        return None


def fingerprint(record: Any) -> str | None:
    """A stable hash of a record's content (canonical JSON), or None if not JSON."""
    text = _canonical(record)
    if text is None:
        return None
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:32]


MAX_EXCERPT = 200
"""Bytes (UTF-8) of a rejected record kept on its ledger row, so it can be found."""


def rejection(record: Any, error: BaseException, ttl_s: int, *,
              after_cursor: str | None = None, redact: Redactor | None = None) -> Unresolved:
    """The ledger row of a record no work id could be made for: keyed by the record's
    content (the same bad record is one row however often it is selected), saying why,
    with an excerpt of it and the cursor its page was selected after (to find it, and
    to recover its range once it is fixed). The reason and the excerpt pass through the
    job's ``redact`` (the key is the record's unredacted content's hash)."""
    text = _canonical(record)
    if text is None:
        text = f"<{type(record).__qualname__}>"
    digest = hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:32]
    where = f" (its page was selected after cursor {after_cursor!r})" \
        if after_cursor is not None else ""
    return Unresolved(rejected_key(digest), ItemState.REJECTED,
                      error=_describe(f"{error_text(error)}{where}", redact), ttl_s=ttl_s,
                      excerpt=bounded_text(redacted(text, redact), MAX_EXCERPT))


def identify(record: Any, work_id: Callable[[Any], WorkId],
             payload: Callable[[Any], str | None]) -> tuple[WorkId, str | None]:
    """A record's work id and payload hash. Raises whatever the user's functions raise,
    and :class:`TypeError` for a ``work_id()`` that returns no :class:`WorkId`: each is
    a record that cannot be worked on (:func:`rejection`), never a reason to stop."""
    wid = work_id(record)
    if not isinstance(wid, WorkId):
        raise TypeError(f"work_id() must return a WorkId, got {type(wid).__name__}")
    return wid, payload_hash(str(wid), payload(record))


def kept_source(wid: WorkId) -> str | None:
    """The original source id, kept on ledger rows where the key escapes or hashes it."""
    if source_key(wid.source_id) == wid.source_id:
        return None
    return bounded_text(wid.source_id, MAX_SOURCE_KEPT)


def remaining_ms(context: Any) -> float:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return float(remaining()) if callable(remaining) else float("inf")
