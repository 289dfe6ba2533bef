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
    "merge_results",
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


def merge_results(previous: dict[str, Any], figures: dict[str, float], faults_load: dict[str, Any],
                  meta: dict[str, Any]) -> dict[str, Any]:
    """The results file after this run: its figures replace those it measured, and every
    other key (a scale figure this run skipped, another tool's section) stays; ``meta``
    is merged the same way, one level down (``stage_s``, ``targets_met``...)."""
    old_meta = previous.get("meta", {}) if isinstance(previous.get("meta"), dict) else {}
    merged_meta = dict(old_meta)
    for key, value in meta.items():
        before = old_meta.get(key)
        merged_meta[key] = ({**before, **value} if isinstance(before, dict)
                            and isinstance(value, dict) else value)
    return {**previous, **figures, "faults_load": faults_load, "meta": merged_meta}
