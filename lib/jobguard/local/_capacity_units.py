"""What one DynamoDB request costs in capacity units, as DynamoDB bills it (pure).

Its one reason to change: DynamoDB's billing rules (item size, write and read units,
transactions' double cost). :mod:`jobguard.local.throughput` re-exports these functions;
what a budget does with the units is there and in :mod:`jobguard.local._throttle`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["KB", "READ_UNIT_BYTES", "item_bytes", "read_units", "write_units"]

KB = 1024
READ_UNIT_BYTES = 4 * KB


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
