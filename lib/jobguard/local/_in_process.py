"""In-process mode: :func:`in_process`, ``moto.mock_aws()`` with DynamoDB requests serialised.

Its one reason to change: serving moto inside this process (botocore's stubber wrapped
to take the DynamoDB and S3 locks, the environment set and restored, the partition
budget installed for the block), for single-process tests: no sockets at all.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, overload

from ._dynamodb_budget import _BUDGET, _budget_of, _budgeted
from ._emulator_env import (
    _STEERING_ENV_NAMES,
    _STEERING_ENV_PREFIXES,
    DEFAULT_REGION,
    _ClientFactory,
    _fake_env,
    _override_environ,
    _restore_environ,
)
from ._serialize import _DYNAMODB_LOCK, _S3_LOCK, _is_dynamodb_request, _is_s3_request
from ._transactions import _patch_transactions, _unpatch_transactions

if TYPE_CHECKING:
    from botocore.awsrequest import AWSPreparedRequest, AWSResponse
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

    from .throughput import PartitionBudget, PartitionThroughput

__all__ = ["InProcessAWS", "in_process"]

# Guards the stubber patch's reference count and original (the transactions patch has
# its own guard).
_PATCH_GUARD = threading.Lock()
_patch_depth = 0
_original_stubber_call: Any = None


def _patch_stubber() -> None:
    """Wrap ``BotocoreStubber.__call__`` so DynamoDB (and S3) requests run one at a time."""
    global _patch_depth, _original_stubber_call
    from moto.core.botocore_stubber import BotocoreStubber

    with _PATCH_GUARD:
        _patch_depth += 1
        if _patch_depth > 1:
            return
        original = BotocoreStubber.__call__
        _original_stubber_call = original

        @functools.wraps(original)
        def serialized_call(
            self: BotocoreStubber, event_name: str, request: AWSPreparedRequest, **kwargs: Any
        ) -> AWSResponse | None:
            if _is_dynamodb_request(request):
                with _DYNAMODB_LOCK:
                    budget = _BUDGET[0]
                    if budget is not None and budget.applies:
                        return _budgeted(budget, original, self, event_name, request, kwargs)
                    return original(self, event_name, request, **kwargs)
            if _is_s3_request(request):
                with _S3_LOCK:
                    return original(self, event_name, request, **kwargs)
            return original(self, event_name, request, **kwargs)

        BotocoreStubber.__call__ = serialized_call  # type: ignore[method-assign]


def _unpatch_stubber() -> None:
    global _patch_depth, _original_stubber_call
    from moto.core.botocore_stubber import BotocoreStubber

    with _PATCH_GUARD:
        _patch_depth -= 1
        if _patch_depth > 0:
            return
        BotocoreStubber.__call__ = _original_stubber_call  # type: ignore[method-assign]
        _original_stubber_call = None


class InProcessAWS:
    """Handle yielded by :func:`in_process`: makes boto3 clients served by ``mock_aws``.

    Example:
        >>> with in_process() as aws:  # doctest: +SKIP
        ...     aws.client("dynamodb").list_tables()["TableNames"]
        []
    """

    def __init__(self, *, region: str = DEFAULT_REGION,
                 throughput: PartitionBudget | None = None) -> None:
        self._region = region
        self._clients = _ClientFactory(region=region, endpoint_url=None)
        self.throughput = throughput
        """The partition budget DynamoDB requests are served under, or None (no limit):
        its counts say what it charged and refused."""

    @property
    def region(self) -> str:
        """Region of the clients (and of the environment set by :func:`in_process`)."""
        return self._region

    @overload
    def client(self, service: Literal["dynamodb"]) -> DynamoDBClient: ...
    @overload
    def client(self, service: Literal["sqs"]) -> SQSClient: ...
    @overload
    def client(self, service: str) -> Any: ...

    def client(self, service: str) -> Any:
        """A boto3 client for ``service``, intercepted by moto (thread-safe to share).

        Args:
            service: boto3 service name, e.g. ``"dynamodb"`` or ``"sqs"``.

        Example:
            >>> with in_process() as aws:  # doctest: +SKIP
            ...     aws.client("sqs").create_queue(QueueName="jobs")
        """
        return self._clients.make(service)

    def __repr__(self) -> str:
        return f"InProcessAWS(region={self._region!r})"


@contextmanager
def in_process(*, region: str = DEFAULT_REGION,
               throughput: PartitionThroughput | PartitionBudget | None = None
               ) -> Iterator[InProcessAWS]:
    """``moto.mock_aws()`` with DynamoDB requests serialised, for single-process tests.

    For its duration: moto intercepts every boto3 call in this process; the fake
    credentials (``"testing"``) and ``AWS_DEFAULT_REGION`` / ``AWS_REGION`` are set in
    ``os.environ``, while ``AWS_ENDPOINT_URL*`` and ``AWS_PROFILE`` /
    ``AWS_DEFAULT_PROFILE`` are removed (they would route around the mock); moto's
    botocore hook holds a lock for every DynamoDB request (and another for every S3
    request), so conditional writes are atomic across threads; and transactions back up
    only the items they name. Everything is restored on exit, and moto drops its state.

    Args:
        region: Region for the environment and for :meth:`InProcessAWS.client`.
        throughput: Per-partition limits DynamoDB requests are served under
            (:mod:`jobguard.local.throughput`: units charged as DynamoDB bills them,
            requests past a partition key's budget refused in DynamoDB's shapes); a
            :class:`~jobguard.local.throughput.PartitionBudget` to keep its counts (or
            give it a clock). None (the default): no limit.

    Yields:
        An :class:`InProcessAWS` handle.

    Example:
        >>> with in_process() as aws:  # doctest: +SKIP
        ...     ddb = aws.client("dynamodb")
        ...     ddb.list_tables()["TableNames"]
        []
    """
    from moto import mock_aws

    from .. import _clients

    with mock_aws():
        # After mock_aws: it installs its own fake keys, which ours replace.
        saved = _override_environ(_fake_env(region), _STEERING_ENV_PREFIXES, _STEERING_ENV_NAMES)
        # jobguard's own clients come from a new session: one cached earlier (before
        # moto was imported, or under another endpoint) would route around the mock
        _clients.reset()
        budget = _budget_of(throughput)
        try:
            _patch_stubber()
            _patch_transactions()
            if budget is not None:
                if _BUDGET[0] is not None:
                    raise RuntimeError("an in_process(throughput=...) block is already "
                                       "running in this process: one budget at a time")
                _BUDGET[0] = budget
            try:
                yield InProcessAWS(region=region, throughput=budget)
            finally:
                if budget is not None:
                    _BUDGET[0] = None
                _unpatch_transactions()
                _unpatch_stubber()
        finally:
            _restore_environ(saved)
            _clients.reset()
