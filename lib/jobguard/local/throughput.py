"""A per-partition throughput budget for the in-process emulator, as DynamoDB enforces it.

moto serves any number of requests a second to any key; DynamoDB does not. One partition
takes at most 1,000 write units and 3,000 read units a second, and every row of one
partition key shares them (:doc:`docs/capacity.md`). While a :class:`PartitionBudget` is
given to :func:`jobguard.local.emulator.in_process` (``throughput=``), every DynamoDB data
request the emulator serves is first admitted by the budget of each partition key it
touches, and charged afterwards:

- **units**: a write costs the larger of the item's size before and after, in 1 KB units
  rounded up, at least 1 (a refused conditional write too, at its size before); a read
  1 unit per 4 KB or part of one (a missing item still 1), half that when eventually
  consistent; inside ``TransactWriteItems`` / ``TransactGetItems`` every action costs
  twice (a ``ConditionCheck`` too). A ``Query`` costs its items together, rounded once.
  Item size is DynamoDB's: attribute names plus values (:func:`item_bytes`).
- **buckets**: each (table, partition key) has a write bucket and a read bucket that hold
  at most one second of its limit and refill continuously at that limit; a request is
  admitted when every bucket it draws from holds its estimated cost (or is full, for a
  request larger than a second's worth) and then charged what it really cost (an update
  that grew the item may leave the bucket a little in debt, to be refilled first).
- **refusals**, in DynamoDB's shapes: a single-item call is answered HTTP 400
  ``ProvisionedThroughputExceededException`` (botocore retries it with backoff); a
  transaction ``TransactionCanceledException`` whose ``CancellationReasons`` say
  ``ThrottlingError`` for each action on a throttled partition and ``None`` for the others
  (botocore does not retry it: the caller does); a batch leaves the throttled keys in
  ``UnprocessedItems`` / ``UnprocessedKeys``, or is refused whole with
  ``ProvisionedThroughputExceededException`` when none was admitted. A refused request
  is not applied and costs nothing.

What it leaves out, on purpose: secondary-index partitions (an index write is budgeted
on the base table's key only), a ``Scan`` (charged, never refused), control-plane calls,
the table-level quota, and partitions shared by several keys (here each key has a
partition of its own: the best case; on AWS a key never gets more).

Example:
    >>> budget = PartitionBudget(PartitionThroughput().scaled(0.01), clock=lambda: 0.0)
    >>> budget.limits.write_units_per_s, budget.limits.read_units_per_s
    (10.0, 30.0)
    >>> write_units(before=None, after={"pk": {"S": "x" * 1500}}, transactional=True)
    4
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "PartitionBudget",
    "PartitionThroughput",
    "item_bytes",
    "read_units",
    "write_units",
]

KB = 1024
READ_UNIT_BYTES = 4 * KB


# -- sizes and units (pure) ----------------------------------------------------------


def _number_bytes(raw: str) -> int:
    digits = raw.lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def _value_bytes(value: Mapping[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        return _number_bytes(str(raw))
    if kind == "B":
        return len(raw) if isinstance(raw, bytes | bytearray) else len(str(raw))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(s).encode()) for s in raw)
    if kind == "NS":
        return sum(_number_bytes(str(n)) for n in raw)
    if kind == "BS":
        return sum(len(b) if isinstance(b, bytes | bytearray) else len(str(b)) for b in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_bytes(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(_value_bytes(v) + 1 for v in raw)
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def item_bytes(item: Mapping[str, Any] | None) -> int:
    """An item's size as DynamoDB counts it (DynamoDB JSON in): attribute name bytes plus
    value bytes (a number (significant digits + 1) // 2 + 1; a map or list 3 plus its
    contents plus 1 per element). ``None`` (no item) is 0."""
    if not item:
        return 0
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def write_units(*, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
                transactional: bool = False) -> int:
    """Write units of one write: the larger of the item's size before and after, 1 KB
    units rounded up, at least 1; twice that inside a transaction."""
    units = max(1, math.ceil(max(item_bytes(before), item_bytes(after)) / KB))
    return 2 * units if transactional else units


def read_units(nbytes: int, *, consistent: bool, transactional: bool = False) -> float:
    """Read units of reading ``nbytes`` (one item, or a query's items together): 1 per
    4 KB or part of one, at least 1; half when eventually consistent; twice inside a
    transaction (always consistent)."""
    units = max(1, math.ceil(nbytes / READ_UNIT_BYTES))
    if transactional:
        return 2.0 * units
    return float(units) if consistent else units / 2


# -- the budget ----------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionThroughput:
    """Per-partition limits, in units a second (DynamoDB's: 1,000 write, 3,000 read).

    Example:
        >>> PartitionThroughput().scaled(0.01)
        PartitionThroughput(write_units_per_s=10.0, read_units_per_s=30.0)
    """

    write_units_per_s: float = 1000.0
    """Write units one partition key takes a second."""
    read_units_per_s: float = 3000.0
    """Read units (strongly consistent reads of 4 KB) one partition key takes a second."""

    def __post_init__(self) -> None:
        for name in ("write_units_per_s", "read_units_per_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"PartitionThroughput({name}=...) must be a number > 0, "
                                 f"got {value!r}")

    def scaled(self, factor: float) -> PartitionThroughput:
        """These limits times ``factor`` (``0.01``: a load at 1/100 scale)."""
        if isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 0:
            raise ValueError(f"scaled(factor=...) must be a number > 0, got {factor!r}")
        return PartitionThroughput(self.write_units_per_s * factor,
                                   self.read_units_per_s * factor)


@dataclass
class _Bucket:
    rate: float
    balance: float
    at: float

    def refill(self, now: float) -> None:
        if now > self.at:
            self.balance = min(self.rate, self.balance + (now - self.at) * self.rate)
            self.at = now

    def holds(self, cost: float) -> bool:
        return self.balance >= min(cost, self.rate) - 1e-9


Partition = tuple[str, str]
"""(table, partition key value)."""


@dataclass
class PartitionBudget:
    """Token buckets per partition key, and what they refused (see the module doc).

    Args:
        limits: units a second per partition key.
        clock: seconds, monotonic (default :func:`time.monotonic`); a test moves its own.
    """

    limits: PartitionThroughput = field(default_factory=PartitionThroughput)
    clock: Callable[[], float] = time.monotonic
    write_consumed: defaultdict[Partition, float] = field(
        default_factory=lambda: defaultdict(float))
    """Write units charged per partition, in all."""
    read_consumed: defaultdict[Partition, float] = field(
        default_factory=lambda: defaultdict(float))
    """Read units charged per partition, in all."""
    throttled: Counter[str] = field(default_factory=Counter)
    """Refused requests, per operation (a batch answered with unprocessed keys counts)."""
    throttled_by_key: Counter[str] = field(default_factory=Counter)
    """Refused requests per partition-key kind (the key's text before its first ``#``:
    ``JOB``: a job's lease, job row, triggers and runs; ``ITEM``: a work item)."""
    requests: int = 0
    """Data requests the budget saw (each attempt of the SDK's)."""
    sdk_retries: int = 0
    """Attempts that were the SDK's retries (botocore's ``amz-sdk-request: attempt=N``)."""

    def __post_init__(self) -> None:
        self._writes: dict[Partition, _Bucket] = {}
        self._reads: dict[Partition, _Bucket] = {}
        self._lock = threading.Lock()
        self._off = threading.local()

    # -- buckets ---------------------------------------------------------------------

    def _bucket(self, kind: str, partition: Partition) -> _Bucket:
        buckets = self._writes if kind == "write" else self._reads
        rate = (self.limits.write_units_per_s if kind == "write"
                else self.limits.read_units_per_s)
        now = self.clock()
        bucket = buckets.get(partition)
        if bucket is None:
            bucket = buckets[partition] = _Bucket(rate, rate, now)
        bucket.refill(now)
        return bucket

    def admits(self, writes: Mapping[Partition, float], reads: Mapping[Partition, float]
               ) -> set[Partition]:
        """The partitions among ``writes`` / ``reads`` (estimated units each) whose
        buckets cannot take them now: empty means admitted. Nothing is charged."""
        with self._lock:
            refused = {p for p, cost in writes.items()
                       if not self._bucket("write", p).holds(cost)}
            refused |= {p for p, cost in reads.items()
                        if not self._bucket("read", p).holds(cost)}
            return refused

    def charge(self, writes: Mapping[Partition, float], reads: Mapping[Partition, float]
               ) -> None:
        """Take what a served request cost from its partitions' buckets."""
        with self._lock:
            for partition, units in writes.items():
                self._bucket("write", partition).balance -= units
                self.write_consumed[partition] += units
            for partition, units in reads.items():
                self._bucket("read", partition).balance -= units
                self.read_consumed[partition] += units

    def available(self, table: str, key: str) -> tuple[float, float]:
        """(write, read) units the partition ``key`` of ``table`` could take now."""
        with self._lock:
            return (self._bucket("write", (table, key)).balance,
                    self._bucket("read", (table, key)).balance)

    def note_refused(self, operation: str, partitions: set[Partition]) -> None:
        with self._lock:
            self.throttled[operation] += 1
            for kind in sorted({key.split("#", 1)[0] for _, key in partitions}):
                self.throttled_by_key[kind] += 1

    def note_request(self, attempt: int) -> None:
        with self._lock:
            self.requests += 1
            if attempt > 1:
                self.sdk_retries += 1

    # -- who is budgeted -------------------------------------------------------------

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """This thread's requests bypass the budget for the block (a checker's own
        reads, which are not the load under test)."""
        before = getattr(self._off, "on", False)
        self._off.on = True
        try:
            yield
        finally:
            self._off.on = before

    @property
    def applies(self) -> bool:
        """Whether this thread's requests are budgeted now."""
        return not getattr(self._off, "on", False)

    def summary(self) -> dict[str, Any]:
        """Counts for a report: requests, SDK retries, refusals by operation and key kind,
        units charged on the busiest partition."""
        with self._lock:
            hottest = sorted(self.write_consumed.items(), key=lambda kv: -kv[1])[:1]
            return {
                "write_units_per_s": self.limits.write_units_per_s,
                "read_units_per_s": self.limits.read_units_per_s,
                "requests": self.requests,
                "sdk_retries": self.sdk_retries,
                "throttled_requests": sum(self.throttled.values()),
                "throttled_by_operation": dict(sorted(self.throttled.items())),
                "throttled_by_key": dict(sorted(self.throttled_by_key.items())),
                "write_units": round(sum(self.write_consumed.values()), 1),
                "read_units": round(sum(self.read_consumed.values()), 1),
                "hottest_partition": (
                    {"key": hottest[0][0][1], "write_units": round(hottest[0][1], 1)}
                    if hottest else None),
            }


# -- serving one request under the budget ---------------------------------------------

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
