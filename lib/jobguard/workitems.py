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

from .errors import JobGuardError

__all__ = [
    "CLAIM_HASH_CHARS",
    "Checkpoint",
    "Commit",
    "Committed",
    "Completion",
    "Fence",
    "ItemRecord",
    "ItemState",
    "JobRow",
    "OpenClaim",
    "OutcomeUnknown",
    "Unresolved",
    "WorkId",
    "claim_hash",
    "is_outcome_unknown",
    "payload_differs",
]

_SOURCE_MAX = 256
_OPERATION = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")
_SOURCE_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f#]")


class InvalidWorkIdError(JobGuardError, ValueError):
    """A work id that cannot be a stable identity.

    Attributes:
        field: ``"source_id"`` or ``"operation"``.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, slots=True)
class WorkId:
    """The identity of one business action: source record id + operation.

    The string form ``<source_id>:<operation>`` is the destination's idempotency key.
    The operation may not contain ``:``, so the form parses back unambiguously even
    when source ids do.

    Example:
        >>> str(WorkId("contact-42", "create-note"))
        'contact-42:create-note'
        >>> WorkId.parse("urn:crm:42:create-note").source_id
        'urn:crm:42'
    """

    source_id: str
    operation: str

    def __post_init__(self) -> None:
        if not isinstance(self.source_id, str) or not self.source_id:
            raise InvalidWorkIdError("source_id", "must be a non-empty string")
        if len(self.source_id.encode("utf-8")) > _SOURCE_MAX:
            # bytes, not characters: the work id is part of DynamoDB keys (partition key
            # at most 2,048 bytes, index sort key at most 1,024)
            raise InvalidWorkIdError(
                "source_id", f"must be at most {_SOURCE_MAX} bytes in UTF-8, got "
                f"{len(self.source_id.encode('utf-8'))}")
        if _SOURCE_FORBIDDEN.search(self.source_id) or self.source_id != self.source_id.strip():
            raise InvalidWorkIdError(
                "source_id",
                f"{self.source_id!r} holds a control character, '#' (the key delimiter) "
                "or surrounding whitespace",
            )
        if not isinstance(self.operation, str) or not _OPERATION.fullmatch(self.operation):
            raise InvalidWorkIdError(
                "operation",
                f"{self.operation!r} must be 1-63 lowercase letters, digits, '_', '.', '-', "
                "starting with a letter (no ':': it delimits the work id)",
            )

    def __str__(self) -> str:
        return f"{self.source_id}:{self.operation}"

    @classmethod
    def parse(cls, text: str) -> WorkId:
        source_id, sep, operation = text.rpartition(":")
        if not sep:
            raise InvalidWorkIdError("operation", f"{text!r} has no ':<operation>' part")
        return cls(source_id, operation)


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


@dataclass(frozen=True, kw_only=True)
class ItemRecord:
    """One ledger row as read back."""

    job: str
    work_id: str
    state: ItemState
    run_id: str | None = None
    fence: int | None = None
    claim_expires_at_ms: int | None = None
    attempts: int = 0
    retryable: bool = False
    last_error: str | None = None
    destination_id: str | None = None
    payload_hash: str | None = None
    created_at_ms: int | None = None
    updated_at_ms: int | None = None
    completed_at_ms: int | None = None
    ttl_epoch_s: int | None = None

    def claim_expired(self, now_ms: int, skew_ms: int) -> bool:
        return (
            self.state is ItemState.CLAIMED
            and self.claim_expires_at_ms is not None
            and self.claim_expires_at_ms < now_ms - skew_ms
        )

    def live(self, now_s: int) -> bool:
        """False for a completed record whose TTL passed: treated as absent everywhere."""
        return not (
            self.state is ItemState.COMPLETED
            and self.ttl_epoch_s is not None
            and self.ttl_epoch_s < now_s
        )


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


CLAIM_HASH_CHARS = 16
"""An open claim keeps this many leading characters of each item's payload hash: enough
to tell a reused work id from the same content, and the claim stays small (every write
to the job row is billed by the row's whole size)."""


def claim_hash(payload_hash: str | None) -> str:
    """The part of a payload hash an open claim keeps ('' for none)."""
    return (payload_hash or "")[:CLAIM_HASH_CHARS]


def payload_differs(stored: str | None, payload_hash: str | None) -> bool:
    """Whether a stored payload hash (whole, or an open claim's prefix of one) names
    other content than ``payload_hash``. Unknown on either side: not a difference."""
    if not stored or not payload_hash:
        return False
    return not payload_hash.startswith(stored) and not stored.startswith(payload_hash)


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
    seq: int = 0
    run_id: str | None = None
    fence: int | None = None
    updated_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class OpenClaim:
    """The page(s) a run has claimed: at most one open claim per job, on the job row.

    ``items`` maps each claimed work id to its payload hash prefix (:func:`claim_hash`).
    Only the fence holder can write it, so a claim whose ``fence`` is below the job's
    current fence belongs to a run that can write nothing more: its items without a
    completion are uncertain until reconciled.
    """

    run_id: str
    fence: int
    expires_at_ms: int
    items: dict[str, str] = field(default_factory=dict)

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
    fence: int = 0
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    claim: OpenClaim | None = None
    token: str | None = None


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


@dataclass(frozen=True, slots=True)
class Unresolved:
    """A failed or uncertain outcome: a row of its own, findable through the sparse
    index, written under the fence and never over a completion."""

    work_id: str
    state: ItemState
    error: str | None = None
    retryable: bool = False
    payload_hash: str | None = None
    attempts: int = 1


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
