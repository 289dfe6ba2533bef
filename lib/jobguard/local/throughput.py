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

This module is the budget's model, its one reason to change: the limits
(:class:`PartitionThroughput`), the buckets and what they counted
(:class:`PartitionBudget`, its :meth:`~PartitionBudget.summary` the report). What a
request costs is :mod:`jobguard.local._capacity_units` (re-exported here); what enforces
the budget on each request is :mod:`jobguard.local._throttle`.

Example:
    >>> budget = PartitionBudget(PartitionThroughput().scaled(0.01), clock=lambda: 0.0)
    >>> budget.limits.write_units_per_s, budget.limits.read_units_per_s
    (10.0, 30.0)
    >>> write_units(before=None, after={"pk": {"S": "x" * 1500}}, transactional=True)
    4
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ._capacity_units import item_bytes, read_units, write_units

__all__ = [
    "PartitionBudget",
    "PartitionThroughput",
    "item_bytes",
    "read_units",
    "write_units",
]

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

