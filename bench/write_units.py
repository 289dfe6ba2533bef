"""DynamoDB write units: what a library's writes would be billed, however it builds its client.

DynamoDB bills write units, not requests. :class:`WriteUnitMeter` is installed like
:class:`bench.counting.RequestCounter`, in botocore's ``BUILTIN_HANDLERS``, so every
client created afterwards carries it; it does nothing in a thread until that thread
enters :meth:`WriteUnitMeter.metering`. Then, for each DynamoDB write the thread sends
(``PutItem``, ``UpdateItem``, ``DeleteItem``, ``BatchWriteItem``, ``TransactWriteItems``
with ``Put`` / ``Update`` / ``Delete`` / ``ConditionCheck``), it reads every touched
item just before the call (``before-parameter-build``) and just after it (``after-call``)
through a side client that is neither metered nor counted, and adds the units by these
rules (the pure functions below):

- a write costs the larger of the item's size before and after, in 1 KB units rounded up,
  at least 1 (:func:`size_units`);
- inside ``TransactWriteItems`` it costs twice that, and so does a ``ConditionCheck``
  (by the size of the item checked);
- a refused conditional write (``ConditionalCheckFailedException``), and every action of
  a cancelled transaction (``TransactionCanceledException``), is still charged, at the
  item's size before (doubled in a transaction); other failures are not charged;
- each secondary-index entry added or removed costs 1 more, an index key change 2
  (:func:`index_units`; an entry rewritten in place, which only an ``ALL`` or ``INCLUDE``
  projection has, 1). Index units are not doubled in a transaction.

Item size (:func:`item_bytes`) is the sum over attributes of the UTF-8 name bytes and the
value bytes: S its UTF-8 bytes, N (significant digits + 1) // 2 + 1 (as
:func:`bench.request_counts.lease_row_bytes` counts it), B its bytes, BOOL and NULL 1,
sets the sum of their elements, M and L 3 plus their contents (names and values of a M)
plus 1 per element (the AWS guide's element overhead).

Reads are metered too, apart (:meth:`WriteUnitMeter.read_operations`), from what each
read returned (:func:`read_units`): a consistent read costs 1 read unit per 4 KB or part
of one of each item (``GetItem``, every key of a ``BatchGetItem``, a key with no item
still 1), of the whole result for ``Query`` / ``Scan``; an eventually consistent read
half that.

Key attributes and indexes come from ``DescribeTable``, cached per table. The reads are
not atomic with the write: a write by another thread between them would be misread, so
meter only a thread whose items no other thread writes meanwhile (the benchmark's
measurements are sequential). Units are kept per thread, like the request counts.
Standard library and botocore only.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "METER",
    "Action",
    "Index",
    "TableShape",
    "WriteUnitMeter",
    "action_units",
    "attribute_bytes",
    "index_units",
    "item_bytes",
    "read_units",
    "size_units",
    "write_actions",
]

KB = 1024
READ_UNIT_BYTES = 4 * KB
READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                    "TransactWriteItems"})
CHARGED_FAILURES = frozenset({"ConditionalCheckFailedException",
                              "TransactionCanceledException"})

Item = Mapping[str, Any]
"""An item in DynamoDB JSON: attribute name -> ``{"S": ...}`` etc."""


# -- sizes and units (pure) ----------------------------------------------------------------


def attribute_bytes(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value in DynamoDB JSON (the name is not included)."""
    (kind, raw), = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return _number_bytes(raw)
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in raw)
    if kind == "NS":
        return sum(_number_bytes(n) for n in raw)
    if kind == "BS":
        return sum(len(b) for b in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + attribute_bytes(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(attribute_bytes(v) + 1 for v in raw)
    raise ValueError(f"unknown attribute type {kind!r}")


def _number_bytes(raw: str) -> int:
    return (len(raw.strip("-").replace(".", "")) + 1) // 2 + 1


def item_bytes(item: Item | None) -> int:
    """An item's size as DynamoDB bills it (0 for no item)."""
    return sum(len(name.encode()) + attribute_bytes(value)
               for name, value in (item or {}).items())


def size_units(nbytes: int) -> int:
    """Write units of a write of ``nbytes``: 1 per KB or part of one, at least 1."""
    return max(1, math.ceil(nbytes / KB))


@dataclass(frozen=True)
class Index:
    """A secondary index: its key attributes and what it projects."""

    name: str
    keys: tuple[str, ...]
    projection: str = "KEYS_ONLY"
    non_key: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TableShape:
    """A table's key attributes and secondary indexes (from ``DescribeTable``)."""

    keys: tuple[str, ...]
    indexes: tuple[Index, ...] = ()

    def key_of(self, item: Item) -> dict[str, Any]:
        return {name: item[name] for name in self.keys}

    @classmethod
    def from_description(cls, table: Mapping[str, Any]) -> TableShape:
        indexes = tuple(
            Index(ix["IndexName"], tuple(k["AttributeName"] for k in ix["KeySchema"]),
                  ix.get("Projection", {}).get("ProjectionType", "KEYS_ONLY"),
                  frozenset(ix.get("Projection", {}).get("NonKeyAttributes", ())))
            for ix in [*table.get("GlobalSecondaryIndexes", ()),
                       *table.get("LocalSecondaryIndexes", ())]
        )
        return cls(tuple(k["AttributeName"] for k in table["KeySchema"]), indexes)


def index_units(before: Item | None, after: Item | None, indexes: Sequence[Index]) -> int:
    """Index writes of one applied write: 1 per entry added or removed, 2 per key change
    (delete + put), 1 per entry rewritten in place (a projected non-key attribute changed;
    never for ``KEYS_ONLY``). An index is sparse: an item without all of its key
    attributes has no entry in it."""
    before, after = before or {}, after or {}
    units = 0
    for index in indexes:
        was = all(k in before for k in index.keys)
        now = all(k in after for k in index.keys)
        if was and now:
            if any(before[k] != after[k] for k in index.keys):
                units += 2
            elif _projected_change(before, after, index):
                units += 1
        elif was or now:
            units += 1
    return units


def _projected_change(before: Item, after: Item, index: Index) -> bool:
    if index.projection == "ALL":
        return dict(before) != dict(after)
    if index.projection == "INCLUDE":
        return any(before.get(k) != after.get(k) for k in index.non_key)
    return False


def action_units(kind: str, before: Item | None, after: Item | None, *,
                 transactional: bool, indexes: Sequence[Index] = (),
                 applied: bool = True) -> int:
    """Write units of one write action.

    Args:
        kind: ``"put"``, ``"update"``, ``"delete"`` or ``"check"`` (a transaction's
            ``ConditionCheck``: twice the checked item's size, no index writes).
        before: The item before the call (None if there was none).
        after: The item after it (ignored unless ``applied``).
        transactional: Inside ``TransactWriteItems`` (twice the size units).
        indexes: The table's secondary indexes.
        applied: False for a refused conditional write or a cancelled transaction's
            action: charged at the size before, with no index writes.
    """
    if kind == "check":
        return 2 * size_units(item_bytes(before))
    factor = 2 if transactional else 1
    if not applied:
        return factor * size_units(item_bytes(before))
    return (factor * size_units(max(item_bytes(before), item_bytes(after)))
            + index_units(before, after, indexes))


def read_units(operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]
               ) -> dict[str, float]:
    """Read units of one answered read, per table (see the module docstring)."""
    def per_item(nbytes: int) -> int:
        return max(1, math.ceil(nbytes / READ_UNIT_BYTES))

    if operation == "GetItem":
        units = per_item(item_bytes(parsed.get("Item")))
        return {params["TableName"]: units * (1.0 if params.get("ConsistentRead") else 0.5)}
    if operation == "BatchGetItem":
        found: dict[str, float] = {}
        left = parsed.get("UnprocessedKeys") or {}
        for table, request in params["RequestItems"].items():
            items = (parsed.get("Responses") or {}).get(table, [])
            asked = len(request["Keys"]) - len((left.get(table) or {}).get("Keys", []))
            units = sum(per_item(item_bytes(i)) for i in items) + max(0, asked - len(items))
            found[table] = units * (1.0 if request.get("ConsistentRead") else 0.5)
        return found
    if operation in ("Query", "Scan"):
        units = per_item(sum(item_bytes(i) for i in parsed.get("Items", [])))
        return {params["TableName"]: units * (1.0 if params.get("ConsistentRead") else 0.5)}
    return {}


# -- what a request writes (pure) ----------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One item a write request touches. ``key`` is None for a put (take it from
    ``item`` with the table's key attributes)."""

    table: str
    kind: str
    transactional: bool = False
    key: Mapping[str, Any] | None = None
    item: Mapping[str, Any] | None = None

    def key_in(self, shape: TableShape) -> dict[str, Any]:
        if self.key is not None:
            return dict(self.key)
        if self.item is None:
            raise ValueError("an action needs a key or an item")
        return shape.key_of(self.item)


_TRANSACT_KINDS = {"Put": "put", "Update": "update", "Delete": "delete",
                   "ConditionCheck": "check"}


def write_actions(operation: str, params: Mapping[str, Any]) -> list[Action]:
    """The items a DynamoDB request writes (or checks), from its parameters; [] for any
    other operation."""
    if operation == "PutItem":
        return [Action(params["TableName"], "put", item=params["Item"])]
    if operation == "UpdateItem":
        return [Action(params["TableName"], "update", key=params["Key"])]
    if operation == "DeleteItem":
        return [Action(params["TableName"], "delete", key=params["Key"])]
    if operation == "TransactWriteItems":
        actions = []
        for entry in params["TransactItems"]:
            (name, body), = entry.items()
            actions.append(Action(body["TableName"], _TRANSACT_KINDS[name], True,
                                  key=body.get("Key"), item=body.get("Item")))
        return actions
    if operation == "BatchWriteItem":
        return _batch_actions(params["RequestItems"])
    return []


def _batch_actions(requests: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Action]:
    actions = []
    for table, entries in requests.items():
        for entry in entries:
            if "PutRequest" in entry:
                actions.append(Action(table, "put", item=entry["PutRequest"]["Item"]))
            else:
                actions.append(Action(table, "delete", key=entry["DeleteRequest"]["Key"]))
    return actions


def key_id(key: Mapping[str, Any]) -> tuple[Any, ...]:
    """A hashable form of a key in DynamoDB JSON."""
    return tuple(sorted((name, *value.items()) for name, value in key.items()))


# -- the meter -----------------------------------------------------------------------------


@dataclass
class _Pending:
    operation: str
    actions: list[Action]
    keys: list[dict[str, Any]]
    shapes: list[TableShape]
    before: list[dict[str, Any] | None]


class WriteUnitMeter:
    """Write units of the DynamoDB writes each thread sends while it meters.

    :meth:`install` before anything creates the session to be measured (as for the
    request counter); then ``with meter.metering(aws): ...`` in the thread to measure.
    """

    _CONTEXT_KEY = "bench.write_units"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self._units: dict[int, Counter[str]] = {}
        self._reads: dict[int, dict[str, float]] = {}
        self._errors: dict[int, list[str]] = {}
        self._shapes: dict[str, TableShape] = {}
        self._reader: Any = None
        self._reader_source: Any = None

    # handlers ----------------------------------------------------------------------------

    @property
    def handlers(self) -> list[tuple[str, Any]]:
        return [("before-parameter-build.dynamodb", self._before),
                ("after-call.dynamodb", self._after)]

    def install(self) -> None:
        """Meter every botocore session created from now on (idle until metering)."""
        from botocore import handlers

        for entry in self.handlers:
            if entry not in handlers.BUILTIN_HANDLERS:
                handlers.BUILTIN_HANDLERS.append(entry)

    def uninstall(self) -> None:
        """Stop adding the handlers to new sessions (clients already built keep them)."""
        from botocore import handlers

        for entry in self.handlers:
            while entry in handlers.BUILTIN_HANDLERS:
                handlers.BUILTIN_HANDLERS.remove(entry)

    def unregister_from(self, client: Any) -> Any:
        """Take the meter's handlers off one client (the side client, a destination's)."""
        for event, handler in self.handlers:
            client.meta.events.unregister(event, handler)
        return client

    def side_client(self, aws: Any) -> Any:
        """A DynamoDB client of ``aws`` that is neither metered nor counted."""
        from .counting import COUNTER

        client = self.unregister_from(aws.client("dynamodb"))
        client.meta.events.unregister("before-send", COUNTER._on_send)  # noqa: SLF001
        return client

    # use ---------------------------------------------------------------------------------

    @contextmanager
    def metering(self, aws: Any) -> Iterator[WriteUnitMeter]:
        """Meter the calling thread's writes (reading items through a side client of
        ``aws``); its units restart from 0."""
        with self._lock:
            if self._reader_source is not aws:
                self._reader, self._reader_source = self.side_client(aws), aws
                self._shapes.clear()
        self.reset_thread()
        self._local.on = True
        try:
            yield self
        finally:
            self._local.on = False

    def reset_thread(self) -> None:
        with self._lock:
            self._units.pop(threading.get_ident(), None)
            self._reads.pop(threading.get_ident(), None)
            self._errors.pop(threading.get_ident(), None)

    def operations(self) -> dict[str, int]:
        """Units of the calling thread, per ``Operation.kind row`` (row: the item's sort
        key up to ``#``, e.g. ``UpdateItem.update LEASE``; a refused write is marked)."""
        with self._lock:
            errors = self._errors.get(threading.get_ident())
            if errors:
                raise RuntimeError(f"{len(errors)} writes could not be metered; the first: "
                                   f"{errors[0]}")
            return dict(self._units.get(threading.get_ident(), Counter()))

    def read_operations(self) -> dict[str, float]:
        """Read units of the calling thread, per ``Operation row`` (as :meth:`operations`)."""
        with self._lock:
            return dict(self._reads.get(threading.get_ident(), {}))

    def read_total(self) -> float:
        return sum(self.read_operations().values())

    def total(self) -> int:
        return sum(self.operations().values())

    # the reads ---------------------------------------------------------------------------

    def _shape(self, table: str) -> TableShape:
        shape = self._shapes.get(table)
        if shape is None:
            described = self._reader.describe_table(TableName=table)["Table"]
            shape = self._shapes[table] = TableShape.from_description(described)
        return shape

    def _read(self, tables: Sequence[str],
              keys: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
        """The items at ``keys`` (None where there is none), strongly consistent."""
        if len(keys) == 1:
            found = self._reader.get_item(TableName=tables[0], Key=keys[0],
                                          ConsistentRead=True).get("Item")
            return [found]
        items: dict[tuple[str, tuple[Any, ...]], dict[str, Any]] = {}
        wanted = [(t, k) for t, k in zip(tables, keys, strict=True)]
        for start in range(0, len(wanted), 100):
            request: dict[str, Any] = {}
            for table, key in wanted[start:start + 100]:
                request.setdefault(table, {"Keys": [], "ConsistentRead": True})["Keys"].append(
                    key)
            while request:
                answer = self._reader.batch_get_item(RequestItems=request)
                for table, found in answer.get("Responses", {}).items():
                    shape = self._shape(table)
                    for item in found:
                        items[(table, key_id(shape.key_of(item)))] = item
                request = answer.get("UnprocessedKeys") or {}
        return [items.get((t, key_id(k))) for t, k in wanted]

    # the handlers ------------------------------------------------------------------------

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any],
                **_: Any) -> None:
        if not getattr(self._local, "on", False):
            return
        if model.name in READS:
            context[self._CONTEXT_KEY] = (model.name, dict(params))
            return
        if model.name not in WRITES:
            return
        try:
            self._read_before(model.name, params, context)
        except Exception as exc:  # never disturb the library's call; fail the reading
            self._failed(exc)

    def _read_before(self, operation: str, params: dict[str, Any],
                     context: dict[str, Any]) -> None:
        actions = write_actions(operation, params)
        shapes = [self._shape(a.table) for a in actions]
        keys = [a.key_in(s) for a, s in zip(actions, shapes, strict=True)]
        before = self._read([a.table for a in actions], keys)
        context[self._CONTEXT_KEY] = _Pending(operation, actions, keys, shapes, before)

    def _after(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        pending: _Pending | tuple[str, dict[str, Any]] | None = context.pop(
            self._CONTEXT_KEY, None)
        if pending is None:
            return
        if isinstance(pending, tuple):
            try:
                self._add_reads(*pending, parsed)
            except Exception as exc:  # never disturb the library's call; fail the reading
                self._failed(exc)
            return
        try:
            self._add(pending, parsed)
        except Exception as exc:  # never disturb the library's call; fail the reading
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            self._errors.setdefault(threading.get_ident(), []).append(repr(exc))

    def _add(self, pending: _Pending, parsed: Any) -> None:
        error = parsed.get("Error", {}).get("Code") if isinstance(parsed, dict) else None
        if error and error not in CHARGED_FAILURES:
            return
        applied = [error is None] * len(pending.actions)
        written = [True] * len(pending.actions)
        if pending.operation == "BatchWriteItem" and not error:
            left = self._unprocessed(parsed)
            written = [(a.table, key_id(k)) not in left
                       for a, k in zip(pending.actions, pending.keys, strict=True)]
        reread = [i for i, a in enumerate(pending.actions)
                  if applied[i] and written[i] and a.kind != "check"]
        after: list[dict[str, Any] | None] = list(pending.before)
        if reread:
            fresh = self._read([pending.actions[i].table for i in reread],
                               [pending.keys[i] for i in reread])
            for i, item in zip(reread, fresh, strict=True):
                after[i] = item
        units: Counter[str] = Counter()
        for i, action in enumerate(pending.actions):
            if not written[i]:
                continue  # left unprocessed by BatchWriteItem: not written, not charged
            label = (f"{pending.operation}.{action.kind} "
                     f"{_row(pending.keys[i], pending.shapes[i])}"
                     + ("" if applied[i] else " (refused)"))
            units[label] += action_units(
                action.kind, pending.before[i], after[i], transactional=action.transactional,
                indexes=pending.shapes[i].indexes, applied=applied[i])
        with self._lock:
            self._units.setdefault(threading.get_ident(), Counter()).update(units)

    def _add_reads(self, operation: str, params: dict[str, Any], parsed: Any) -> None:
        if not isinstance(parsed, dict) or parsed.get("Error"):
            return
        rows: dict[str, float] = {}
        for table, units in read_units(operation, params, parsed).items():
            label = operation
            keys = [params.get("Key")] if operation == "GetItem" else (
                params.get("RequestItems", {}).get(table, {}).get("Keys", []))
            kinds = sorted({_row(k, self._shape(table)) for k in keys if k})
            label = f"{operation} {'+'.join(kinds) or table}"
            rows[label] = rows.get(label, 0.0) + units
        with self._lock:
            mine = self._reads.setdefault(threading.get_ident(), {})
            for label, units in rows.items():
                mine[label] = mine.get(label, 0.0) + units

    def _unprocessed(self, parsed: dict[str, Any]) -> set[tuple[str, tuple[Any, ...]]]:
        left = set()
        for action in _batch_actions(parsed.get("UnprocessedItems") or {}):
            left.add((action.table, key_id(action.key_in(self._shape(action.table)))))
        return left


def _row(key: Mapping[str, Any], shape: TableShape) -> str:
    """A label for the kind of row: the sort key's part before ``#`` (a table without a
    sort key: its key attribute's name)."""
    if len(shape.keys) < 2:
        return shape.keys[0]
    raw = next(iter(key[shape.keys[-1]].values()))
    return raw.split("#", 1)[0] if isinstance(raw, str) else shape.keys[-1]


METER = WriteUnitMeter()
"""The process-wide meter :mod:`bench.run` installs at start-up."""
