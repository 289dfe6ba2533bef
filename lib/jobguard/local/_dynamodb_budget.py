"""DynamoDB under a partition budget, in the in-process emulator.

Its one reason to change: how the in-process emulator hands a DynamoDB request to
:func:`jobguard.local._throttle.serve` and back (the botocore request read, a batch's
served keys forwarded to moto, moto's tables read without a request, the answer rebuilt
as botocore takes it). The budget itself is :mod:`jobguard.local.throughput`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ._emulator_env import DEFAULT_REGION

if TYPE_CHECKING:
    from botocore.awsrequest import AWSPreparedRequest, AWSResponse

    from .throughput import PartitionBudget, PartitionThroughput

# The budget the in-process emulator enforces (in_process(throughput=...)), or None.
_BUDGET: list[PartitionBudget | None] = [None]


class _MotoTables:
    """The emulator's tables as :func:`jobguard.local._throttle.serve` reads them:
    straight from moto's backend, under the DynamoDB lock, without a request."""

    def __init__(self, region: str) -> None:
        self._region = region

    def _table(self, name: str) -> Any:
        from moto.dynamodb.models import dynamodb_backends

        for account in list(dynamodb_backends.keys()):
            backend = dynamodb_backends[account][self._region]
            if name in backend.tables:
                return backend.tables[name]
        raise KeyError(name)

    def key_attributes(self, table: str, index: str | None = None) -> tuple[str, str | None]:
        found = self._table(table)
        if index is None:
            return found.hash_key_attr, found.range_key_attr
        for candidate in [*found.global_indexes, *found.indexes]:
            if candidate.name == index:
                schema = {k["KeyType"]: k["AttributeName"] for k in candidate.schema}
                return schema["HASH"], schema.get("RANGE")
        raise KeyError(f"{table}/{index}")

    def read(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        found = self._table(table)
        hash_key = DynamoType(key[found.hash_key_attr])
        range_attr = found.range_key_attr
        range_key = DynamoType(key[range_attr]) if range_attr is not None else None
        item = found.get_item(hash_key, range_key)
        if item is None:
            return None
        attributes: dict[str, Any] = item.to_json()["Attributes"]
        return attributes


def _budgeted(budget: PartitionBudget, original: Any, stubber: Any, event_name: str,
              request: AWSPreparedRequest, kwargs: dict[str, Any]) -> AWSResponse | None:
    """One DynamoDB request served under the partition budget (the lock is held)."""
    import json

    from botocore.awsrequest import AWSPreparedRequest, AWSResponse
    from botocore.compat import HTTPHeaders
    from moto.core.botocore_stubber import MockRawResponse

    from ._throttle import serve

    target: Any = request.headers.get("X-Amz-Target", b"")
    if isinstance(target, bytes):
        target = target.decode("latin-1")
    operation = str(target).rsplit(".", 1)[-1]
    body: Any = request.body or b"{}"
    params = json.loads(body.decode() if isinstance(body, bytes) else body)
    marker: Any = request.headers.get("amz-sdk-request", b"")
    if isinstance(marker, bytes):
        marker = marker.decode("latin-1")
    found = re.search(r"attempt=(\d+)", str(marker))
    region = (urlsplit(str(request.url)).hostname or "").split(".")[1:2] or [DEFAULT_REGION]

    def send(served: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if served == params:
            forwarded = request
        else:  # fewer keys than asked (a batch): a request of its own, the caller's intact
            data = json.dumps(served).encode()
            headers = HTTPHeaders()
            for name, value in request.headers.items():
                if name.lower() != "content-length":
                    headers[name] = value
            headers["Content-Length"] = str(len(data))
            forwarded = AWSPreparedRequest(method=request.method, url=request.url,
                                           headers=headers, body=data, stream_output=False)
        answer = original(stubber, event_name, forwarded, **kwargs)
        content = answer.content
        return int(answer.status_code), dict(answer.headers.items()), (
            content if isinstance(content, bytes) else str(content).encode())

    status, headers, content = serve(budget, operation, params, tables=_MotoTables(region[0]),
                                     send=send, attempt=int(found.group(1)) if found else 1)
    answer_headers = HTTPHeaders()
    for name, value in headers.items():
        answer_headers[name] = value
    return AWSResponse(request.url, status, answer_headers, MockRawResponse(content))


def _budget_of(throughput: PartitionThroughput | PartitionBudget | None
               ) -> PartitionBudget | None:
    from .throughput import PartitionBudget, PartitionThroughput

    if throughput is None or isinstance(throughput, PartitionBudget):
        return throughput
    if isinstance(throughput, PartitionThroughput):
        return PartitionBudget(throughput)
    raise TypeError(f"in_process(throughput=...) takes a PartitionThroughput or a "
                    f"PartitionBudget, got {type(throughput).__name__}")
