"""DynamoDB wire helpers shared by the store modules (private).

Plain Python values <-> DynamoDB JSON for the few types jobguard stores, an expression
builder that names every attribute, and the parts of a failed call that matter.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

__all__ = ["THROTTLE_REASONS", "Expr", "code", "first_reason", "from_attr", "item",
           "old_item", "plain", "reasons", "to_attr", "transient"]

# Answers worth another try: nothing was applied (throttling), or it is unknown whether
# it was (a 5xx, a timeout, a dropped connection) and the write recognises its own
# earlier effect.
_TRANSIENT_CODES = frozenset({
    "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
    "InternalServerError", "ServiceUnavailable", "TransactionConflictException",
})


THROTTLE_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded",
                              "RequestLimitExceeded"})
"""A cancelled transaction's reasons that say "the partition's capacity is spent": try
again once it refills (``lease.backoff(..., throttled=True)``)."""


def transient(exc: BaseException) -> bool:
    """A failure worth retrying within the deadline (see ``_TRANSIENT_CODES``)."""
    if isinstance(exc, ClientError):
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return code(exc) in _TRANSIENT_CODES or status >= 500
    return isinstance(exc, BotoCoreError)


def to_attr(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, str):
        return {"S": value}
    if value is None:
        return {"NULL": True}
    if isinstance(value, dict):
        return {"M": {str(k): to_attr(v) for k, v in value.items()}}
    raise TypeError(f"unsupported attribute value {value!r}")


def from_attr(attr: dict[str, Any]) -> Any:
    (kind, raw), = attr.items()
    if kind == "S":
        return raw
    if kind == "N":
        number = Decimal(raw)
        return int(number) if number == number.to_integral_value() else float(number)
    if kind == "BOOL":
        return bool(raw)
    if kind == "NULL":
        return None
    if kind == "M":
        return {k: from_attr(v) for k, v in raw.items()}
    if kind == "L":
        return [from_attr(v) for v in raw]
    return raw


def item(values: dict[str, Any]) -> dict[str, Any]:
    return {k: to_attr(v) for k, v in values.items() if v is not None}


def plain(item: dict[str, Any] | None) -> dict[str, Any]:
    return {k: from_attr(v) for k, v in (item or {}).items()}


class Expr:
    """Builds expression attribute names and values as the expression is written."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self._placeholders: dict[str, str] = {}

    def n(self, attribute: str) -> str:
        placeholder = self._placeholders.get(attribute)
        if placeholder is None:
            placeholder = self._placeholders[attribute] = f"#a{len(self.names)}"
            self.names[placeholder] = attribute
        return placeholder

    def v(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = to_attr(value)
        return placeholder

    def params(self, *expressions: str) -> dict[str, Any]:
        """Names and values used by ``expressions`` (DynamoDB refuses unused ones)."""
        text = " ".join(expressions)
        used = set(re.findall(r"[#:][a-z]\d+", text))
        params: dict[str, Any] = {
            "ExpressionAttributeNames": {k: v for k, v in self.names.items() if k in used}
        }
        values = {k: v for k, v in self.values.items() if k in used}
        if values:
            params["ExpressionAttributeValues"] = values
        return params


def code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def old_item(exc: ClientError) -> dict[str, Any] | None:
    """The row a failed condition was evaluated against (``ALL_OLD``)."""
    response: dict[str, Any] = dict(exc.response)
    item = response.get("Item")
    return item if isinstance(item, dict) else None


def first_reason(exc: ClientError) -> dict[str, Any]:
    """The first cancellation reason of a cancelled transaction (ours is item 0)."""
    response: dict[str, Any] = dict(exc.response)
    reasons = response.get("CancellationReasons") or [{}]
    first = reasons[0]
    return first if isinstance(first, dict) else {}




def reasons(exc: ClientError) -> list[dict[str, Any]]:
    """All cancellation reasons of a cancelled transaction, in request order."""
    response: dict[str, Any] = dict(exc.response)
    found = response.get("CancellationReasons") or []
    return [r if isinstance(r, dict) else {} for r in found]
