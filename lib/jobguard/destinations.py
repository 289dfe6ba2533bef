"""Destination helpers: write an effect at most once per work id, and look it up again.

A destination receives the work id as its idempotency key and records a destination
id that proves the effect happened. Two common destinations are covered here:

* :class:`DynamoDBDestination`: one item per work id, written with
  ``attribute_not_exists(<key>)``. A repeat learns the existing destination id from
  the failed write itself (``ReturnValuesOnConditionCheckFailure=ALL_OLD``).
* :class:`S3Destination`: one object per work id, written with ``If-None-Match: *``.
  A repeat reads the existing object's id with ``HeadObject``.

Timeline of one work id at either destination::

    put ──write(condition: absent)──► effect + destination id ──► returned
     │                                  ▲
     │ timeout / lost response          │ repeat put: condition fails,
     ▼                                  │ existing id returned, nothing overwritten
    outcome unknown ──reconcile──► destination id (found) or None (never applied)

Timeouts and connection errors are never caught here: the caller classifies them as
"outcome unknown" (:func:`jobguard.workitems.is_outcome_unknown`) and reconciles.
Every other AWS failure is wrapped in :class:`DestinationError`. Because every ``put``
is conditional, calling it again after any failure is safe: it never applies an
effect twice.

Only botocore is imported here (``import boto3`` is slow on a cold start); pass any
boto3 or botocore client.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any, Final

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    IncompleteReadError,
)
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from ._destination_wire import (
    _DYNAMODB_KEY_MAX_BYTES,
    _S3_KEY_MAX_BYTES,
    _S3_KEY_SAFE,
    _attribute_value,
    _before_destination,
    _check_work_id,
    _error_code,
    _http_status,
    _s3_destination_id,
)
from .callsites import RETRY, SURFACE, UNCERTAIN, Path, Target, call_site
from .errors import JobGuardError
from .workitems import OutcomeUnknown

__all__ = [
    "DESTINATION_ID_ATTRIBUTE",
    "DestinationError",
    "DestinationOutcomeUnknown",
    "DynamoDBDestination",
    "S3Destination",
]

DESTINATION_ID_ATTRIBUTE: Final = "destination_id"
"""Attribute of a :class:`DynamoDBDestination` item that holds its destination id."""

# Transport failures: the request may or may not have been applied (or, for connect
# errors, was surely not). The caller tells these apart, so they propagate unchanged.
_TRANSPORT_ERRORS: Final = (HTTPClientError, BotocoreConnectionError, IncompleteReadError)

# S3 answers 409 ConditionalRequestConflict while another conditional write to the
# same key is in flight; it asks for a retry. A few short pauses are plenty.
_S3_CONFLICT_ATTEMPTS: Final = 4
_S3_CONFLICT_BACKOFF_S: Final = 0.05


class DestinationError(JobGuardError):
    """A destination failed in a way the helper could not resolve.

    Timeouts and connection errors are never wrapped in this (see the module docs);
    the botocore error that caused it is chained as ``__cause__``.

    Attributes:
        destination: where the effect lands, e.g. ``"dynamodb:notes"`` or
            ``"s3://exports/reports/"``.
        work_id: the work id the call was for.
    """

    def __init__(self, destination: str, work_id: str, message: str) -> None:
        self.destination = destination
        self.work_id = work_id
        super().__init__(f"{destination} work_id {work_id!r}: {message}")


class DestinationOutcomeUnknown(DestinationError, OutcomeUnknown):
    """The destination answered with a server error (5xx): the write may or may not have
    been applied. The item becomes ``uncertain`` and is reconciled before any redo."""


# Throttling answers: refused before anything was applied, whatever their status (S3's
# SlowDown is a 503), so a known failure, not an unknown outcome.
_THROTTLED: Final = frozenset({"SlowDown", "Throttling", "ThrottlingException",
                               "ProvisionedThroughputExceededException", "RequestLimitExceeded",
                               "TooManyRequestsException"})


def _failure(destination: str, work_id: str, what: str, exc: ClientError) -> DestinationError:
    """A refused call, as the error its outcome calls for (5xx: unknown; throttled: known)."""
    if _http_status(exc) >= 500 and _error_code(exc) not in _THROTTLED:
        return DestinationOutcomeUnknown(destination, work_id, f"{what}: {exc}")
    return DestinationError(destination, work_id, f"{what}: {exc}")


# -- call sites (see jobguard.callsites) --------------------------------------------

DYNAMODB_PUT = call_site(
    "destination.dynamodb.put", "dynamodb", "PutItem", "DynamoDBDestination.put",
    throttle=SURFACE, server_error=UNCERTAIN, timeout=UNCERTAIN, lost=RETRY,
    note="throttled: `DestinationError`, the item is recorded failed (retryable: nothing "
         "was applied); 5xx or timeout: outcome unknown, the item is `uncertain`; a "
         "resend refused by its own write returns the stored destination id",
    paths=(Path.DESTINATION,), target=Target.DESTINATION,
)
DYNAMODB_RECONCILE = call_site(
    "destination.dynamodb.reconcile", "dynamodb", "GetItem", "DynamoDBDestination.reconcile",
    throttle=UNCERTAIN, server_error=UNCERTAIN, timeout=UNCERTAIN, lost=RETRY,
    note="the item stays `uncertain` (nothing redone) until a later lookup answers",
    paths=(Path.DESTINATION,), target=Target.DESTINATION,
)
S3_PUT = call_site(
    "destination.s3.put", "s3", "PutObject", "S3Destination.put",
    throttle=SURFACE, server_error=UNCERTAIN, timeout=UNCERTAIN, lost=RETRY,
    note="as the DynamoDB put; `If-None-Match: *` refuses the resend (412) and the "
         "stored object's id is read back",
    paths=(Path.DESTINATION,), target=Target.DESTINATION,
)
S3_HEAD = call_site(
    "destination.s3.head", "s3", "HeadObject", "S3Destination._head",
    throttle=UNCERTAIN, server_error=UNCERTAIN, timeout=UNCERTAIN, lost=RETRY,
    note="the lookup of reconcile and of a refused put: the item stays `uncertain`",
    paths=(Path.DESTINATION,), target=Target.DESTINATION,
)


# --------------------------------------------------------------------------- DynamoDB


class DynamoDBDestination:
    """A DynamoDB table as a destination: one item per work id, written at most once.

    The table's partition key is ``key_attribute`` (a string) and it has no sort key.
    Each item stores a generated destination id (a uuid4 hex) in ``destination_id``.

    Args:
        table_name: The destination table.
        client: A boto3 or botocore DynamoDB client.
        key_attribute: Name of the table's partition key, which holds the work id.

    Example:
        >>> import boto3  # doctest: +SKIP
        >>> notes = DynamoDBDestination("notes", client=boto3.client("dynamodb"))  # doctest: +SKIP
        >>> work_id = "contact-42:create-note"
        >>> first = notes.put(work_id, {"text": "hi", "score": 0.5})  # doctest: +SKIP
        >>> notes.put(work_id, {"text": "hi again"}) == first  # doctest: +SKIP
        True
        >>> notes.reconcile(work_id) == first  # doctest: +SKIP
        True
        >>> notes.reconcile("contact-43:create-note") is None  # doctest: +SKIP
        True
    """

    def __init__(self, table_name: str, *, client: Any, key_attribute: str = "work_id") -> None:
        if not isinstance(table_name, str) or not table_name:
            raise ValueError("table_name: must be a non-empty string")
        if not isinstance(key_attribute, str) or not key_attribute:
            raise ValueError("key_attribute: must be a non-empty string")
        if key_attribute == DESTINATION_ID_ATTRIBUTE:
            raise ValueError(f"key_attribute: {DESTINATION_ID_ATTRIBUTE!r} is reserved")
        self._table_name = table_name
        self._client = client
        self._key_attribute = key_attribute

    @staticmethod
    def create_table(client: Any, table_name: str, *, key_attribute: str = "work_id") -> str:
        """Create an on-demand table keyed by ``key_attribute`` (for the local emulator,
        tests and benchmarks; a deployment's table comes from its stack). Returns its name."""
        client.create_table(
            TableName=table_name,
            KeySchema=[{"AttributeName": key_attribute, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key_attribute, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        return table_name

    @property
    def destination(self) -> str:
        """``dynamodb:<table_name>``, as named in errors."""
        return f"dynamodb:{self._table_name}"

    def put(self, work_id: str, item: dict[str, Any]) -> str:
        """Write ``item`` under ``work_id`` unless an item for it exists already.

        Args:
            work_id: The work id (its string form), stored in the key attribute.
            item: Plain values (str, int, float, bool, None, bytes, dict, list). It may
                not hold the key attribute or ``destination_id``.

        Returns:
            The destination id: the new one, or on a repeat the one stored by the
            first successful put (whose item is left exactly as it was).

        Raises:
            ValueError: ``work_id`` or ``item`` cannot be written.
            TypeError: ``item`` holds a value of an unsupported type.
            DestinationError: DynamoDB refused the write, or the existing item has no
                destination id.
            botocore.exceptions.ReadTimeoutError: (and other timeouts and connection
                errors) the outcome is unknown; :meth:`reconcile` tells.

        Example:
            >>> notes.put("contact-42:create-note", {"text": "hi"})  # doctest: +SKIP
            '3f0c9a7e0d5b4f7c9c0f2b3a4d5e6f70'
        """
        _check_work_id(work_id, max_bytes=_DYNAMODB_KEY_MAX_BYTES, key_safe=False)
        if not isinstance(item, Mapping):
            raise TypeError(f"item: must be a dict, got {type(item).__name__}")
        for reserved in (self._key_attribute, DESTINATION_ID_ATTRIBUTE):
            if reserved in item:
                raise ValueError(f"item: may not hold {reserved!r}; put() sets it")
        destination_id = uuid.uuid4().hex
        attributes = _attribute_value(item, "item")["M"]
        _before_destination(work_id)
        attributes[self._key_attribute] = {"S": work_id}
        attributes[DESTINATION_ID_ATTRIBUTE] = {"S": destination_id}
        try:
            self._client.put_item(
                TableName=self._table_name,
                Item=attributes,
                # Absent: the first put for this work id. Present: a repeat, which must
                # neither overwrite nor read again: the failed write returns the item.
                ConditionExpression="attribute_not_exists(#work_id)",
                ExpressionAttributeNames={"#work_id": self._key_attribute},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise _failure(self.destination, work_id, "put failed", exc) from exc
            return self._stored_id(work_id, exc.response.get("Item"), cause=exc)
        except _TRANSPORT_ERRORS:
            raise
        except BotoCoreError as exc:
            raise DestinationError(self.destination, work_id, f"put failed: {exc}") from exc
        return destination_id

    def reconcile(self, work_id: str) -> str | None:
        """The destination id stored for ``work_id``, or None if it was never written.

        One strongly consistent ``GetItem``: safe to call right after a timeout.

        Raises:
            ValueError: ``work_id`` cannot be a key.
            DestinationError: DynamoDB refused the read, or the item has no
                destination id.

        Example:
            >>> notes.reconcile("contact-42:create-note")  # doctest: +SKIP
            '3f0c9a7e0d5b4f7c9c0f2b3a4d5e6f70'
        """
        _check_work_id(work_id, max_bytes=_DYNAMODB_KEY_MAX_BYTES, key_safe=False)
        try:
            response = self._client.get_item(
                TableName=self._table_name,
                Key={self._key_attribute: {"S": work_id}},
                ConsistentRead=True,
                ProjectionExpression="#destination_id",
                ExpressionAttributeNames={"#destination_id": DESTINATION_ID_ATTRIBUTE},
            )
        except _TRANSPORT_ERRORS:
            raise
        except ClientError as exc:
            raise _failure(self.destination, work_id, "reconcile failed", exc) from exc
        except BotoCoreError as exc:
            raise DestinationError(self.destination, work_id, f"reconcile failed: {exc}") from exc
        item = response.get("Item")
        if item is None:
            return None
        return self._stored_id(work_id, item)

    def _stored_id(self, work_id: str, item: object, *, cause: Exception | None = None) -> str:
        """The destination id in a stored item (DynamoDB JSON), which must hold one."""
        value = None
        if isinstance(item, Mapping):
            attribute = item.get(DESTINATION_ID_ATTRIBUTE)
            value = attribute.get("S") if isinstance(attribute, Mapping) else None
        if not isinstance(value, str) or not value:
            error = DestinationError(
                self.destination,
                work_id,
                f"an item exists but holds no {DESTINATION_ID_ATTRIBUTE!r} string",
            )
            raise error from cause
        return value

    def __repr__(self) -> str:
        return f"DynamoDBDestination({self._table_name!r}, key_attribute={self._key_attribute!r})"


# --------------------------------------------------------------------------- S3


class S3Destination:
    """An S3 bucket as a destination: one object per work id, never overwritten.

    The object key is ``<prefix><work_id>``. The destination id is the object's
    VersionId on a versioned bucket, else its ETag (without quotes). Reading a missing
    object must answer 404, so the caller needs ``s3:ListBucket`` on the bucket
    (without it S3 answers 403, which is raised as :class:`DestinationError`).

    Args:
        bucket: The destination bucket.
        client: A boto3 or botocore S3 client.
        prefix: Prepended to every work id to form the key, e.g. ``"exports/"``.

    Example:
        >>> import boto3  # doctest: +SKIP
        >>> s3 = boto3.client("s3")  # doctest: +SKIP
        >>> exports = S3Destination("reports", client=s3, prefix="daily/")  # doctest: +SKIP
        >>> work_id = "report-2026-01-05:export"
        >>> etag = exports.put(work_id, b"a,b\\n1,2\\n", content_type="text/csv")  # doctest: +SKIP
        >>> exports.put(work_id, b"other") == etag  # doctest: +SKIP
        True
        >>> exports.reconcile(work_id) == etag  # doctest: +SKIP
        True
    """

    def __init__(self, bucket: str, *, client: Any, prefix: str = "") -> None:
        if not isinstance(bucket, str) or not bucket:
            raise ValueError("bucket: must be a non-empty string")
        if not isinstance(prefix, str) or (prefix and not _S3_KEY_SAFE.fullmatch(prefix)):
            raise ValueError(
                f"prefix: {prefix!r} holds a character outside [A-Za-z0-9!_.*'()/:@+=,-]"
            )
        if len(prefix.encode("utf-8")) >= _S3_KEY_MAX_BYTES:
            raise ValueError(f"prefix: must be shorter than {_S3_KEY_MAX_BYTES} bytes")
        self._bucket = bucket
        self._client = client
        self._prefix = prefix

    @property
    def destination(self) -> str:
        """``s3://<bucket>/<prefix>``, as named in errors."""
        return f"s3://{self._bucket}/{self._prefix}"

    def _key(self, work_id: str) -> str:
        max_bytes = _S3_KEY_MAX_BYTES - len(self._prefix.encode("utf-8"))
        return self._prefix + _check_work_id(work_id, max_bytes=max_bytes, key_safe=True)

    def put(
        self, work_id: str, body: bytes, *, content_type: str = "application/octet-stream"
    ) -> str:
        """Write ``body`` as the object for ``work_id`` unless that object exists.

        The write is conditional (``If-None-Match: *``), so a repeat or a concurrent
        writer never overwrites: it gets the existing object's destination id.

        Args:
            work_id: The work id; the object key is ``<prefix><work_id>``.
            body: The object's content.
            content_type: The object's ``Content-Type``.

        Returns:
            The destination id of the object now stored for ``work_id``.

        Raises:
            ValueError: ``work_id`` is empty, or too long as a key.
            DestinationError: S3 refused the write; or the object existed when the
                write was refused but was gone when read back (deleted in between:
                nothing is rewritten, an operator decides).
            botocore.exceptions.ReadTimeoutError: (and other timeouts and connection
                errors) the outcome is unknown; :meth:`reconcile` tells.

        Example:
            >>> exports.put(work_id, b"a,b\\n1,2\\n", content_type="text/csv")  # doctest: +SKIP
            '9dd4e461268c8034f5c8564e155c67a6'
        """
        key = self._key(work_id)
        _before_destination(work_id)
        for attempt in range(1, _S3_CONFLICT_ATTEMPTS + 1):
            try:
                response = self._client.put_object(
                    Bucket=self._bucket,
                    Key=key,
                    Body=body,
                    ContentType=content_type,
                    IfNoneMatch="*",  # create only; S3 checks and writes atomically
                )
            except ClientError as exc:
                code, status = _error_code(exc), _http_status(exc)
                if code == "PreconditionFailed" or status == 412:
                    # The object exists: a repeat, or a concurrent writer won.
                    existing = self._head(work_id, key)
                    if existing is None:
                        raise DestinationError(
                            self.destination,
                            work_id,
                            "the object existed when the write was refused but is gone now",
                        ) from exc
                    return existing
                conflict = code == "ConditionalRequestConflict" or status == 409
                if conflict and attempt < _S3_CONFLICT_ATTEMPTS:
                    # Another conditional write to this key is in flight: S3 asks for
                    # a retry, whose answer is then 412 (it won) or 200 (it failed).
                    time.sleep(_S3_CONFLICT_BACKOFF_S * attempt)
                    continue
                raise _failure(self.destination, work_id, "put failed", exc) from exc
            except _TRANSPORT_ERRORS:
                raise
            except BotoCoreError as exc:
                raise DestinationError(self.destination, work_id, f"put failed: {exc}") from exc
            return _s3_destination_id(response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def reconcile(self, work_id: str) -> str | None:
        """The destination id of the object for ``work_id``, or None if there is none.

        One ``HeadObject`` (S3 reads are strongly consistent).

        Raises:
            ValueError: ``work_id`` is empty, or too long as a key.
            DestinationError: S3 refused the read (403 too: grant ``s3:ListBucket``).

        Example:
            >>> exports.reconcile("report-2026-01-05:export")  # doctest: +SKIP
            '9dd4e461268c8034f5c8564e155c67a6'
        """
        return self._head(work_id, self._key(work_id))

    def _head(self, work_id: str, key: str) -> str | None:
        try:
            response = self._client.head_object(Bucket=self._bucket, Key=key)
        except ClientError as exc:
            if _http_status(exc) == 404 or _error_code(exc) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise _failure(self.destination, work_id, "lookup failed", exc) from exc
        except _TRANSPORT_ERRORS:
            raise
        except BotoCoreError as exc:
            raise DestinationError(self.destination, work_id, f"lookup failed: {exc}") from exc
        return _s3_destination_id(response)

    def __repr__(self) -> str:
        return f"S3Destination({self._bucket!r}, prefix={self._prefix!r})"
