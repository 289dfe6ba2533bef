"""Work items: one business action each, under a stable identity.

A work id is the source record id plus the operation (``contact-42:create-note``). It
is the destination's idempotency key, and it is not a run id: a recovery run reuses the
work id under a new run id.

Ledger states::

    (absent) ──claim──► claimed ──complete──► completed   (TTL'd, skipped by every run)
                          │  │
                          │  └──fail(retryable)──► failed ──claim──► claimed
                          │
                          └── outcome unknown, or its run lost the fence first ──► uncertain
                                  uncertain ──reconcile: found──► completed
                                  uncertain ──reconcile: not found──► claimed (safe retry)

Where each state lives (:mod:`jobguard.dynamodb_items`): ``claimed`` is the run's open
claim on the job row (one fenced write per page, whatever its size); ``completed`` is an
immutable completion fact keyed by work id, written without a fence (it only states
what the destination holds); ``failed`` and ``uncertain`` are rows of their own,
written under the fence and findable through the sparse index. Unresolved items
(claimed, failed, uncertain) never expire.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ._work_keys import (
    _HASHED,
    _OPERATION,
    CLAIM_HASH_CHARS,
    MAX_SOURCE_KEPT,
    _unescape,
    claim_hash,
    payload_differs,
    rejected_key,
    source_key,
)
from .errors import JobGuardError
from .schema import ITEM_SK, item_pk

__all__ = [
    "CLAIM_HASH_CHARS",
    "Checkpoint",
    "Commit",
    "Committed",
    "Completion",
    "DamagedItem",
    "Fence",
    "InvalidWorkIdError",
    "MAX_SOURCE_KEPT",
    "ItemRecord",
    "ItemState",
    "JobRow",
    "OpenClaim",
    "OutcomeUnknown",
    "Unresolved",
    "WorkId",
    "check_key",
    "claim_hash",
    "is_outcome_unknown",
    "payload_differs",
    "rejected_key",
    "source_key",
]


class InvalidWorkIdError(JobGuardError, ValueError):
    """A work id that cannot be a stable identity.

    Attributes:
        field: ``"source_id"``, ``"operation"`` or ``"work_id"`` (a key that no work id
            makes).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def check_key(text: object) -> str:
    """``text`` if it is a key a :class:`WorkId` makes (``str(work_id)``), else
    :class:`InvalidWorkIdError` naming ``work_id``. Hashed keys are accepted as they
    are: their source id is known only by its digest."""
    if not isinstance(text, str) or not text:
        raise InvalidWorkIdError("work_id", "must be a non-empty string")
    source, sep, operation = text.rpartition(":")
    if source.startswith(_HASHED) and re.fullmatch(r"[0-9a-f]{64}", source[len(_HASHED):]) \
            and _OPERATION.fullmatch(operation):
        return text
    WorkId.parse(text)
    return text


@dataclass(frozen=True, slots=True)
class WorkId:
    """The identity of one business action: source record id + operation.

    The source id may be any text a system hands you (any length, any punctuation, any
    Unicode but a lone surrogate, which is not text). Its key, ``str(work_id)``, is
    ``<source key>:<operation>`` (:func:`source_key`: the source id itself when it is
    plain, else escaped or hashed), the destination's idempotency key and the ledger's.
    The operation may not contain ``:``, so the key parses back unambiguously even when
    source ids do.

    Example:
        >>> str(WorkId("contact-42", "create-note"))
        'contact-42:create-note'
        >>> str(WorkId("https://crm.example/c/42#notes", "create-note"))
        '#https://crm.example/c/42%23notes:create-note'
        >>> WorkId.parse("urn:crm:42:create-note").source_id
        'urn:crm:42'
    """

    source_id: str
    operation: str

    def __post_init__(self) -> None:
        if not isinstance(self.source_id, str) or not self.source_id:
            raise InvalidWorkIdError(
                "source_id", "must be a non-empty string, got "
                + ("''" if self.source_id == "" else type(self.source_id).__name__))
        try:
            self.source_id.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidWorkIdError(
                "source_id", f"{ascii(self.source_id)[:120]} holds a lone UTF-16 surrogate at "
                f"character {exc.start} (a broken JSON escape?): it is not text any store "
                "keeps; fix the record at its source") from None
        if not isinstance(self.operation, str) or not _OPERATION.fullmatch(self.operation):
            raise InvalidWorkIdError(
                "operation",
                f"{self.operation!r} must be 1-63 lowercase letters, digits, '_', '.', '-', "
                "starting with a letter (no ':': it delimits the work id)",
            )

    @property
    def key(self) -> str:
        """The idempotency key: ``<source key>:<operation>`` (see :func:`source_key`)."""
        return f"{source_key(self.source_id)}:{self.operation}"

    @property
    def kept_as_is(self) -> bool:
        """Whether the key holds the source id as it is (not escaped or hashed)."""
        return source_key(self.source_id) == self.source_id

    def __str__(self) -> str:
        return self.key

    @classmethod
    def parse(cls, text: str) -> WorkId:
        """The work id whose key is ``text`` (:class:`InvalidWorkIdError` if none is,
        or if it is a hashed key, whose source id is known only by its digest)."""
        source, sep, operation = text.rpartition(":")
        if not sep or not source:
            raise InvalidWorkIdError("operation", f"{text!r} has no '<source>:<operation>' "
                                     "form")
        if source.startswith(_HASHED):
            raise InvalidWorkIdError("work_id", f"{text!r} is a hashed key: its source id "
                                     "is kept on its ledger rows, not in the key")
        if source.startswith("#"):
            try:
                source = _unescape(source[1:])
            except (ValueError, UnicodeDecodeError):
                raise InvalidWorkIdError("work_id", f"{text!r} is not an escaped key"
                                         ) from None
        work_id = cls(source, operation)
        if str(work_id) != text:
            raise InvalidWorkIdError("work_id", f"{text!r} is not the key of any work id "
                                     f"(the source {source!r} has the key "
                                     f"{str(work_id)!r})")
        return work_id


class ItemState(StrEnum):
    """A work item's state in the ledger."""

    CLAIMED = "claimed"
    """A run holds it (run id + fence) until ``claim_expires_at_ms``."""
    COMPLETED = "completed"
    """The destination confirmed it; ``destination_id`` proves it. Expires by TTL."""
    FAILED = "failed"
    """The action failed with a known outcome; retried later only if ``retryable``."""
    UNCERTAIN = "uncertain"
    """Outcome unknown: reconciled against the destination before anything is redone."""
    REJECTED = "rejected"
    """No work id could be made for the record (its ``work_id()`` or ``payload()``
    raised, e.g. a source id holding a lone surrogate): nothing was claimed or called;
    the run and the checkpoint went past it. Kept (``last_error`` says why) for
    ``item_ttl``; fix the record at its source, then recover its range."""


@dataclass(frozen=True, kw_only=True)
class ItemRecord:
    """One ledger row as read back."""

    job: str
    """The job's name."""
    work_id: str
    """The item's stable identity: source record id + operation
    (``contact-42:create-note``)."""
    state: ItemState
    """Where the item stands."""
    run_id: str | None = None
    """The run that wrote this state."""
    fence: int | None = None
    """The fence that run held."""
    claim_expires_at_ms: int | None = None
    """A claimed item: when its claim lapses (then it is uncertain)."""
    attempts: int = 0
    """How many attempts were made at it."""
    retryable: bool = False
    """A failed item: whether a later run (or a recovery) may redo it."""
    last_error: str | None = None
    """The last failure's text (a rejected record: why no work id could be made)."""
    destination_id: str | None = None
    """A completed item: the id the destination holds its effect under, the proof it
    happened."""
    payload_hash: str | None = None
    """A hash of the payload it was claimed with: the same work id with another payload
    is a conflict."""
    created_at_ms: int | None = None
    """When the row was first written."""
    updated_at_ms: int | None = None
    """When it was last written."""
    completed_at_ms: int | None = None
    """When it was recorded completed."""
    ttl_epoch_s: int | None = None
    """A completed or rejected row: when it expires (epoch seconds). Failed and
    uncertain rows never expire."""
    source_id: str | None = None
    """The original source id, where the key holds it escaped or hashed (at most
    :data:`MAX_SOURCE_KEPT` bytes of it)."""
    held_until_ms: int | None = None
    """An uncertain item a displaced run may still call the destination for: nobody
    reconciles or redoes it before then (see :attr:`JobRow.hold_until_ms`)."""
    excerpt: str | None = None
    """A rejected record: an excerpt of it (at most 200 bytes), to find it at its source."""

    def claim_expired(self, now_ms: int, skew_ms: int) -> bool:
        return (
            self.state is ItemState.CLAIMED
            and self.claim_expires_at_ms is not None
            and self.claim_expires_at_ms < now_ms - skew_ms
        )

    def live(self, now_s: int) -> bool:
        """False for a completed or rejected record whose TTL passed: treated as absent
        everywhere."""
        return not (
            self.state in (ItemState.COMPLETED, ItemState.REJECTED)
            and self.ttl_epoch_s is not None
            and self.ttl_epoch_s < now_s
        )


@dataclass(frozen=True, kw_only=True)
class DamagedItem(ItemRecord):
    """A row under a work item's key that is not a readable item: a state no jobguard
    writes, an attribute missing or of the wrong type (edited by hand, written by
    another tool, or by anyone who may write the table). Readers name it in its place
    and go on (:class:`~jobguard.records.DamagedRun` is its run-log twin).

    It reads as ``uncertain`` (so nothing takes it for done, nor for absent), with
    nothing else of the row trusted; a run and a sweep leave it as it is (counted
    uncertain, logged with its problem), a recovery plan names it and replays it not.
    An operator's ``jobguard resolve`` replaces it with a readable row.

    Example:
        >>> DamagedItem(job="crm-sync", work_id="contact-42:create-note",
        ...             problem="state 'bogus' is not an item state").as_dict()
        ... # doctest: +NORMALIZE_WHITESPACE
        {'job': 'crm-sync', 'work_id': 'contact-42:create-note',
         'damaged': {'pk': 'ITEM#crm-sync#contact-42:create-note', 'sk': 'ITEM',
                     'problem': "state 'bogus' is not an item state"}}
    """

    state: ItemState = ItemState.UNCERTAIN
    """Always ``uncertain``: what the row says is not trusted."""
    problem: str
    """What is wrong with it, each damaged attribute named (at most about 500
    characters; values quoted in part)."""

    @property
    def pk(self) -> str:
        """The row's partition key, which names it (``ITEM#<job>#<work id>``)."""
        return item_pk(self.job, self.work_id)

    def as_dict(self) -> dict[str, Any]:
        """The shape the CLI's JSON gives it: ``{"job", "work_id", "damaged": {"pk",
        "sk", "problem"}}`` (a readable item's has no ``damaged``)."""
        return {"job": self.job, "work_id": self.work_id,
                "damaged": {"pk": self.pk, "sk": ITEM_SK, "problem": self.problem}}

    def __str__(self) -> str:
        return f"{self.pk}: {self.problem}"


class OutcomeUnknown(JobGuardError):
    """Raise this from a destination call whose outcome you cannot know.

    The item becomes ``uncertain`` and is reconciled before it is ever redone. These
    are treated the same way without wrapping (:func:`is_outcome_unknown`): every
    ``TimeoutError`` (incl. ``socket.timeout``) and ``ConnectionError`` (resets, aborts,
    broken pipes, refused connections), botocore's ``HTTPClientError`` family
    (``ReadTimeoutError``, ``ConnectTimeoutError``, ``EndpointConnectionError``,
    ``ConnectionClosedError``, ...) and ``ResponseStreamingError``, urllib3's
    ``HTTPError`` family, and ``requests``' ``ConnectionError`` / ``Timeout`` /
    ``ChunkedEncodingError``.

    Even a connect error is uncertain: clients retry, and the call that finally failed
    to connect may follow an attempt that was delivered and timed out. Reconciling
    first costs one lookup; redoing blindly could apply the action twice.
    """


_UNKNOWN_BY_NAME = {
    ("botocore.exceptions", "HTTPClientError"),
    ("botocore.exceptions", "ConnectionError"),
    ("botocore.exceptions", "ResponseStreamingError"),
    ("urllib3.exceptions", "HTTPError"),
    ("requests.exceptions", "ConnectionError"),
    ("requests.exceptions", "Timeout"),
    ("requests.exceptions", "ChunkedEncodingError"),
}


def is_outcome_unknown(exc: BaseException) -> bool:
    """Whether ``exc`` leaves a destination call's outcome unknown (see OutcomeUnknown)."""
    if isinstance(exc, OutcomeUnknown | TimeoutError | ConnectionError):
        return True
    return any((cls.__module__, cls.__name__) in _UNKNOWN_BY_NAME for cls in type(exc).__mro__)


# -- what the ledger holds and what a run writes to it (storage-independent) -----------
# (how payload hashes are compared, claim_hash and payload_differs: ._work_keys)


@dataclass(frozen=True, slots=True)
class Fence:
    """The lease a write is made under: every fenced write checks it is still current."""

    job: str
    run_id: str
    fence: int


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The job's cursor. ``seq`` grows by one per advance (never backwards)."""

    cursor: str | None = None
    """Where the next run selects from (None: the start)."""
    seq: int = 0
    """Grows by one per advance: a write names the seq it expects."""
    run_id: str | None = None
    """The run that advanced it last."""
    fence: int | None = None
    """The fence that run held."""
    updated_at_ms: int | None = None
    """When it last moved."""


@dataclass(frozen=True, slots=True)
class OpenClaim:
    """The page(s) a run has claimed: at most one open claim per job, on the job row.

    ``items`` maps each claimed work id to its payload hash prefix (:func:`claim_hash`).
    Only the fence holder can write it, so a claim whose ``fence`` is below the job's
    current fence belongs to a run that can write nothing more: its items without a
    completion are uncertain until reconciled.
    """

    run_id: str
    """The run that claimed the items."""
    fence: int
    """The fence it held."""
    expires_at_ms: int
    """When the claim lapses: its items without a completion are then uncertain."""
    items: dict[str, str] = field(default_factory=dict)
    """Each claimed work id and its payload hash prefix."""

    def record(self, job: str, work_id: str) -> ItemRecord:
        """The item as this claim holds it (a claimed :class:`ItemRecord`)."""
        return ItemRecord(job=job, work_id=work_id, state=ItemState.CLAIMED,
                          run_id=self.run_id, fence=self.fence,
                          claim_expires_at_ms=self.expires_at_ms,
                          payload_hash=self.items.get(work_id) or None)


@dataclass(frozen=True, slots=True)
class JobRow:
    """The job's row of the ledger: the fence high-water mark (moved by every lease
    acquisition and force release), the checkpoint and the open claim. ``token`` names
    the last write of the checkpoint or claim: the next one is conditioned on it."""

    job: str
    """The job's name."""
    fence: int = 0
    """The fence high-water mark: at least every fence the lease row has issued."""
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    """The job's cursor."""
    claim: OpenClaim | None = None
    """The open claim of the run that holds the fence, if any."""
    token: str | None = None
    """Names the last write of the checkpoint or claim; the next write is conditioned on
    it."""
    hold_until_ms: int | None = None
    """Until then a run displaced while alive (REPLACE) may still call the destination
    for the open claim of a lower fence: nobody reconciles or redoes those items before
    (set by the acquisition that displaced it)."""


@dataclass(frozen=True, slots=True)
class Completion:
    """A completion fact: the destination holds this item's effect (``destination_id``).

    True whoever observed it, so it is written without a fence and never conditioned:
    a later write of the same fact changes nothing that matters."""

    work_id: str
    destination_id: str
    run_id: str
    fence: int
    payload_hash: str | None = None
    attempts: int = 1
    source_id: str | None = None


@dataclass(frozen=True, slots=True)
class Unresolved:
    """A failed, uncertain or rejected outcome: a row of its own, findable through the
    sparse index, written under the fence and never over a completion. A rejected row
    expires (``ttl_s`` after it is written); the others never do."""

    work_id: str
    state: ItemState
    error: str | None = None
    retryable: bool = False
    payload_hash: str | None = None
    attempts: int = 1
    source_id: str | None = None
    ttl_s: int | None = None
    held_until_ms: int | None = None
    excerpt: str | None = None
    """A rejected record's excerpt (bounded), to find it at its source."""


@dataclass(frozen=True, slots=True)
class Commit:
    """One fenced write of the job row, and the unresolved rows that go with it.

    ``expected`` is the row as this run knows it (its ``token``): the write is refused if
    anything else wrote the row since. ``claim`` is the run's whole open claim after
    the write (None: no open claim); ``checkpoint`` is ``(expected seq, new cursor)``.
    """

    expected: JobRow
    claim: dict[str, str] | None = None
    claim_expires_at_ms: int = 0
    checkpoint: tuple[int, str | None] | None = None
    rows: tuple[Unresolved, ...] = ()


@dataclass
class Committed:
    """What a commit did: the row now, and the unresolved rows it did not write
    because the item was completed meanwhile (a completion fact is final)."""

    row: JobRow
    completed: list[str] = field(default_factory=list)
    requests: int = 0
