"""Shared pieces: distinct triggers, tables, small statistics."""

from __future__ import annotations

import statistics
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from jobguard.dynamodb import create_table

__all__ = [
    "BenchError",
    "Ticks",
    "create_idempotency_table",
    "create_jobguard_table",
    "mean",
    "median",
    "unique_name",
]


class BenchError(RuntimeError):
    """A benchmark saw something other than what it set up (a wrong decision or count)."""


class Ticks:
    """Distinct scheduled times, one second apart, starting 30 minutes ago.

    Every trigger of the whole benchmark is distinct, so each one is a new decision
    (neither a duplicate delivery for jobguard nor a replay for Powertools), and all
    are younger than jobguard's default ``stale_after`` (1 hour).
    """

    def __init__(self) -> None:
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
        self._next = start
        self._lock = threading.Lock()

    def take(self) -> str:
        with self._lock:
            at, self._next = self._next, self._next + timedelta(seconds=1)
        return at.strftime("%Y-%m-%dT%H:%M:%SZ")

    def events(self, job: str, n: int) -> list[dict[str, Any]]:
        """``n`` EventBridge Scheduler inputs for ``job``, each a different tick."""
        return [{"job": job, "scheduled_at": self.take()} for _ in range(n)]


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_jobguard_table(ddb: Any, prefix: str = "bench-jobguard") -> str:
    name = unique_name(prefix)
    create_table(ddb, name)
    return name


def create_idempotency_table(ddb: Any, prefix: str = "bench-idempotency") -> str:
    """The table Powertools' ``DynamoDBPersistenceLayer`` expects (partition key ``id``)."""
    name = unique_name(prefix)
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.get_waiter("table_exists").wait(TableName=name)
    return name


def mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values))


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))
