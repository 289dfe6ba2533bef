"""Work items: one business action each, under a stable identity.

A work id is the source record id plus the operation (``contact-42:create-note``). It
is the destination's idempotency key, and it is not a run id: a recovery run reuses the
work id under a new run id.

Ledger states::

    (absent) ──claim──► claimed ──complete──► completed   (TTL'd, skipped by every run)
                          │  │
                          │  └──fail(retryable)──► failed ──claim──► claimed
                          │
                          └── outcome unknown, or claim expired with no result ──► uncertain
                                  uncertain ──reconcile: found──► completed
                                  uncertain ──reconcile: not found──► claimed (safe retry)

Unresolved items (claimed, failed, uncertain) never expire.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from .errors import JobGuardError

__all__ = [
    "Checkpoint",
    "ClaimRequest",
    "Fence",
    "ItemRecord",
    "ItemState",
    "OutcomeUnknown",
    "Result",
    "Settle",
    "WorkId",
    "is_outcome_unknown",
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


# -- the requests a run makes of the ledger (storage-independent) ----------------------


@dataclass(frozen=True, slots=True)
class Fence:
    """The lease a write is made under: every write checks it is still current."""

    job: str
    run_id: str
    fence: int


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """Claim ``work_id``. ``after_uncertain`` claims an uncertain item that reconciliation
    did not find at the destination (a safe retry); otherwise the item must be absent,
    retryable-failed, or a completed row whose TTL has passed."""

    work_id: str
    payload_hash: str | None = None
    after_uncertain: bool = False
    after_failure: bool = False
    """Recovery only: claim a failed item even if it was not retryable."""


@dataclass(frozen=True, slots=True)
class Settle:
    """One outcome to record.

    ``kind``: ``complete`` / ``fail`` / ``uncertain`` (the run holds the claim);
    ``expire`` (mark a claim whose holder vanished uncertain: ``observed_run_id`` is the
    claim seen); ``found`` (reconciliation found it at the destination: uncertain to
    completed); ``not_found`` (reconciliation did not: uncertain to retryable failed);
    ``release`` (the run never started this item: the claim is given back).
    """

    work_id: str
    kind: str
    destination_id: str | None = None
    error: str | None = None
    retryable: bool = False
    observed_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The job's cursor. ``seq`` grows by one per advance (never backwards)."""

    cursor: str | None = None
    seq: int = 0
    run_id: str | None = None
    fence: int | None = None
    updated_at_ms: int | None = None


@dataclass
class Result:
    """Which actions were applied, and the current rows of those that were refused."""

    done: list[str] = field(default_factory=list)
    refused: dict[str, ItemRecord | None] = field(default_factory=dict)
    requests: int = 0
