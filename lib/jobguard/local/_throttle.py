"""What enforces a :class:`~jobguard.local.throughput.PartitionBudget`: one DynamoDB
request admitted, refused or charged.

Its one reason to change: how an operation draws on its partitions' buckets (which keys
each DynamoDB operation touches, what it is charged afterwards) and the shapes DynamoDB
refuses it in (``ProvisionedThroughputExceededException``, a transaction's
``ThrottlingError`` reasons, a batch's unprocessed keys). The rules themselves are the
module doc of :mod:`jobguard.local.throughput`; the emulator calls :func:`serve`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ._capacity_units import item_bytes, read_units, write_units
from .throughput import Partition, PartitionBudget

__all__ = ["Response", "Tables", "serve"]

_PREFIX = "com.amazonaws.dynamodb.v20120810#"
_PTEE = "ProvisionedThroughputExceededException"
_THROTTLED_MESSAGE = (
    "Throughput exceeds the current capacity of your table or index. DynamoDB is "
    "automatically scaling your table or index so please try again shortly. If exceptions "
    "persist, check if you have a hot key: "
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html")
_CHARGED_ERRORS = ("ConditionalCheckFailedException", "TransactionCanceledException")

Response = tuple[int, dict[str, str], bytes]
Item = dict[str, Any]


class Tables(Protocol):
    """What serving needs of the emulator's tables: each table's key attributes and the
    item stored under a key (DynamoDB JSON), read without a request."""

    def key_attributes(self, table: str, index: str | None = None
                       ) -> tuple[str, str | None]: ...

    def read(self, table: str, key: Mapping[str, Any]) -> Item | None: ...


def _error(code: str, message: str, **extra: Any) -> Response:
    import json
    import uuid

    body = json.dumps({"__type": _PREFIX + code, "message": message, **extra}).encode()
    return 400, {"Content-Type": "application/x-amz-json-1.0",
                 "x-amzn-RequestId": str(uuid.uuid4())}, body


def _scalar(value: Mapping[str, Any]) -> str:
    return str(next(iter(value.values())))


class _Request:
    """One request's partitions, estimates and (after it is served) what it cost."""

    def __init__(self, tables: Tables, params: Mapping[str, Any], operation: str) -> None:
        self.tables = tables
        self.params = params
        self.operation = operation

    def key(self, table: str, item: Mapping[str, Any]) -> tuple[Partition, Item]:
        hash_attr, range_attr = self.tables.key_attributes(table)
        key = {hash_attr: item[hash_attr]}
        if range_attr is not None:
            key[range_attr] = item[range_attr]
        return (table, _scalar(item[hash_attr])), key


def _sum(pairs: list[tuple[Partition, float]]) -> dict[Partition, float]:
    total: dict[Partition, float] = {}
    for partition, units in pairs:
        total[partition] = total.get(partition, 0.0) + units
    return total


def _body(response: Response) -> dict[str, Any]:
    import json

    try:
        found = json.loads(response[2] or b"{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _rewritten(response: Response, body: dict[str, Any]) -> Response:
    """``response`` with another body, its length and checksum (which botocore checks
    on every DynamoDB answer, retrying a mismatch) made for it."""
    import json
    import zlib

    data = json.dumps(body).encode()
    headers = {k: v for k, v in response[1].items()
               if k.lower() not in ("content-length", "x-amz-crc32")}
    headers.update({"Content-Length": str(len(data)), "x-amz-crc32": str(zlib.crc32(data))})
    return response[0], headers, data


def _charged(response: Response) -> bool:
    if response[0] == 200:
        return True
    kind = str(_body(response).get("__type", ""))
    return kind.endswith(_CHARGED_ERRORS)


def serve(budget: PartitionBudget, operation: str, params: dict[str, Any], *,
          tables: Tables, send: Callable[[dict[str, Any]], Response], attempt: int = 1
          ) -> Response:
    """Serve one DynamoDB request (``operation``, its JSON ``params``) under ``budget``:
    refused in DynamoDB's shape, or sent (``send``: the emulator itself, with the params
    to serve, possibly fewer keys than asked) and charged. Operations the budget does
    not meter are sent as they are."""
    handler = _HANDLERS.get(operation)
    if handler is None or not budget.applies:
        return send(params)
    budget.note_request(attempt)
    return handler(budget, _Request(tables, params, operation), send)


def _single_write(budget: PartitionBudget, request: _Request,
                  send: Callable[[dict[str, Any]], Response]) -> Response:
    params = request.params
    table = params["TableName"]
    new = params.get("Item")
    partition, key = request.key(table, new if new is not None else params["Key"])
    before = request.tables.read(table, key)
    estimate = write_units(before=before, after=new)
    if budget.admits({partition: estimate}, {}):
        budget.note_refused(request.operation, {partition})
        return _error(_PTEE, _THROTTLED_MESSAGE)
    response = send(dict(params))
    if _charged(response):
        budget.charge({partition: write_units(before=before,
                                              after=request.tables.read(table, key))}, {})
    return response


def _get(budget: PartitionBudget, request: _Request,
         send: Callable[[dict[str, Any]], Response]) -> Response:
    params = request.params
    table = params["TableName"]
    partition, key = request.key(table, params["Key"])
    units = read_units(item_bytes(request.tables.read(table, key)),
                       consistent=bool(params.get("ConsistentRead")))
    if budget.admits({}, {partition: units}):
        budget.note_refused("GetItem", {partition})
        return _error(_PTEE, _THROTTLED_MESSAGE)
    response = send(dict(params))
    if response[0] == 200:
        budget.charge({}, {partition: units})
    return response


def _query_partition(request: _Request) -> Partition | None:
    """The partition a query reads: its key condition's partition-key value."""
    import re

    params = request.params
    table, index = params["TableName"], params.get("IndexName")
    hash_attr, _ = request.tables.key_attributes(table, index)
    space = f"{table}/{index}" if index else table
    legacy = params.get("KeyConditions")
    if legacy and hash_attr in legacy:
        return space, _scalar(legacy[hash_attr]["AttributeValueList"][0])
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    for name, value in re.findall(r"([#\w.]+)\s*=\s*(:\w+)",
                                  str(params.get("KeyConditionExpression", ""))):
        if names.get(name, name) == hash_attr and value in values:
            return space, _scalar(values[value])
    return None


def _query(budget: PartitionBudget, request: _Request,
           send: Callable[[dict[str, Any]], Response]) -> Response:
    params = request.params
    consistent = bool(params.get("ConsistentRead"))
    partition = _query_partition(request)
    if partition is not None and budget.admits({}, {partition: read_units(
            0, consistent=consistent)}):
        budget.note_refused("Query", {partition})
        return _error(_PTEE, _THROTTLED_MESSAGE)
    response = send(dict(params))
    if response[0] == 200 and partition is not None:
        table = params["TableName"]
        found = _body(response).get("Items") or []
        if params.get("IndexName"):
            nbytes = sum(item_bytes(i) for i in found)
        else:  # a projection returns less than the query read: the items' whole size
            nbytes = sum(item_bytes(request.tables.read(table, request.key(table, i)[1])
                                    or i) for i in found)
        budget.charge({}, {partition: read_units(nbytes, consistent=consistent)})
    return response


def _scan(budget: PartitionBudget, request: _Request,
          send: Callable[[dict[str, Any]], Response]) -> Response:
    params = request.params
    response = send(dict(params))
    if response[0] == 200 and not params.get("IndexName"):
        table = params["TableName"]
        per: dict[Partition, int] = {}
        for item in _body(response).get("Items") or []:
            partition = request.key(table, item)[0]
            per[partition] = per.get(partition, 0) + item_bytes(item)
        budget.charge({}, {p: read_units(n, consistent=bool(params.get("ConsistentRead")))
                           for p, n in per.items()})
    return response


def _batch_get(budget: PartitionBudget, request: _Request,
               send: Callable[[dict[str, Any]], Response]) -> Response:
    asked: dict[str, Any] = request.params["RequestItems"]
    served: dict[str, Any] = {}
    unprocessed: dict[str, Any] = {}
    charges: list[tuple[Partition, float]] = []
    refused_all: set[Partition] = set()
    for table, spec in asked.items():
        consistent = bool(spec.get("ConsistentRead"))
        keep, left = [], []
        costs = [(request.key(table, key), key) for key in spec["Keys"]]
        units = [(p, read_units(item_bytes(request.tables.read(table, k)),
                                consistent=consistent)) for (p, k), _ in costs]
        refused = budget.admits({}, _sum(units))
        refused_all |= refused
        for ((partition, _k), key), (_p, cost) in zip(costs, units, strict=True):
            if partition in refused:
                left.append(key)
            else:
                keep.append(key)
                charges.append((partition, cost))
        if keep:
            served[table] = {**spec, "Keys": keep}
        if left:
            unprocessed[table] = {**spec, "Keys": left}
    if not served:
        budget.note_refused("BatchGetItem", refused_all)
        return _error(_PTEE, _THROTTLED_MESSAGE)
    response = send({**request.params, "RequestItems": served})
    if response[0] != 200:
        return response
    budget.charge({}, _sum(charges))
    if not unprocessed:
        return response
    budget.note_refused("BatchGetItem", refused_all)
    body = _body(response)
    body["UnprocessedKeys"] = {**(body.get("UnprocessedKeys") or {}), **unprocessed}
    return _rewritten(response, body)


def _batch_write(budget: PartitionBudget, request: _Request,
                 send: Callable[[dict[str, Any]], Response]) -> Response:
    asked: dict[str, Any] = request.params["RequestItems"]
    served: dict[str, list[Any]] = {}
    unprocessed: dict[str, list[Any]] = {}
    sent: list[tuple[str, Partition, Item, Item | None]] = []
    refused_all: set[Partition] = set()
    for table, writes in asked.items():
        entries = []
        for write in writes:
            new = write.get("PutRequest", {}).get("Item")
            partition, key = request.key(
                table, new if new is not None else write["DeleteRequest"]["Key"])
            before = request.tables.read(table, key)
            entries.append((write, partition, key, before,
                            write_units(before=before, after=new)))
        refused = budget.admits(_sum([(e[1], e[4]) for e in entries]), {})
        refused_all |= refused
        for write, partition, key, before, _units in entries:
            if partition in refused:
                unprocessed.setdefault(table, []).append(write)
            else:
                served.setdefault(table, []).append(write)
                sent.append((table, partition, key, before))
    if not served:
        budget.note_refused("BatchWriteItem", refused_all)
        return _error(_PTEE, _THROTTLED_MESSAGE)
    response = send({**request.params, "RequestItems": served})
    if response[0] != 200:
        return response
    budget.charge(_sum([(partition, write_units(before=before,
                                                after=request.tables.read(table, key)))
                        for table, partition, key, before in sent]), {})
    if not unprocessed:
        return response
    budget.note_refused("BatchWriteItem", refused_all)
    body = _body(response)
    merged = dict(body.get("UnprocessedItems") or {})
    for table, writes in unprocessed.items():
        merged[table] = [*merged.get(table, []), *writes]
    body["UnprocessedItems"] = merged
    return _rewritten(response, body)


def _cancelled(kinds: list[bool]) -> Response:
    """``TransactionCanceledException``: ``ThrottlingError`` for each throttled action."""
    codes = ["ThrottlingError" if throttled else "None" for throttled in kinds]
    reasons = [{"Code": "ThrottlingError", "Message": _THROTTLED_MESSAGE} if throttled
               else {"Code": "None"} for throttled in kinds]
    return _error("TransactionCanceledException",
                  "Transaction cancelled, please refer cancellation reasons for specific "
                  f"reasons [{', '.join(codes)}]", CancellationReasons=reasons)


def _transact_write(budget: PartitionBudget, request: _Request,
                    send: Callable[[dict[str, Any]], Response]) -> Response:
    actions = []
    for entry in request.params["TransactItems"]:
        ((kind, op),) = entry.items()
        table = op["TableName"]
        new = op.get("Item") if kind == "Put" else None
        partition, key = request.key(table, new if new is not None else op["Key"])
        before = request.tables.read(table, key)
        actions.append((table, partition, key, before,
                        write_units(before=before, after=new, transactional=True)))
    refused = budget.admits(_sum([(a[1], a[4]) for a in actions]), {})
    if refused:
        budget.note_refused("TransactWriteItems", refused)
        return _cancelled([a[1] in refused for a in actions])
    response = send(dict(request.params))
    if _charged(response):
        budget.charge(_sum([(partition, write_units(
            before=before, after=request.tables.read(table, key), transactional=True))
            for table, partition, key, before, _ in actions]), {})
    return response


def _transact_get(budget: PartitionBudget, request: _Request,
                  send: Callable[[dict[str, Any]], Response]) -> Response:
    reads = []
    for entry in request.params["TransactItems"]:
        op = entry["Get"]
        partition, key = request.key(op["TableName"], op["Key"])
        reads.append((partition, read_units(item_bytes(request.tables.read(
            op["TableName"], key)), consistent=True, transactional=True)))
    refused = budget.admits({}, _sum(reads))
    if refused:
        budget.note_refused("TransactGetItems", refused)
        return _cancelled([p in refused for p, _ in reads])
    response = send(dict(request.params))
    if response[0] == 200:
        budget.charge({}, _sum(reads))
    return response


_HANDLERS: dict[str, Callable[[PartitionBudget, _Request, Callable[[dict[str, Any]],
                                                                   Response]], Response]] = {
    "GetItem": _get,
    "PutItem": _single_write,
    "UpdateItem": _single_write,
    "DeleteItem": _single_write,
    "Query": _query,
    "Scan": _scan,
    "BatchGetItem": _batch_get,
    "BatchWriteItem": _batch_write,
    "TransactWriteItems": _transact_write,
    "TransactGetItems": _transact_get,
}
