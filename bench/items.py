"""Figures 6-8: work items. Requests per item, wall-time overhead, scale.

The job is a ``BatchJob`` in the crm-sync shape (one note per changed contact, work id
``<contact>:create-note``), as in ``tests/scenarios/_items.py``; the source pages through
generated contacts (cursor = index), so no source list of 100k records sits in memory.
The alternative is Powertools' ``idempotent_function`` around the same destination call,
once per record, with ``DynamoDBPersistenceLayer`` keyed on the contact id.

- :func:`measure_requests`: DynamoDB requests per item of jobguard (batch 1 flushed
  per item; batch 100 flushed per page) and of Powertools, counted with
  :data:`bench.counting.COUNTER`. The destination writes a real note to its own table,
  through a client the counter does not see. The same runs are metered in write units
  (:data:`bench.write_units.METER`): ``wcu_per_item_b1``, ``wcu_per_item_b100`` and
  ``powertools_wcu_per_item`` are the units of the whole run over its items, so
  jobguard's per-run writes (lease acquire, release + run record) are spread over them,
  as its requests are.
- :func:`measure_overhead`: wall time of 1,000 destination calls (a no-op that sleeps
  20 ms) bare, guarded, and through Powertools, with :data:`LATENCY` adding 5 ms to every
  DynamoDB request the libraries send.
- :func:`measure_scale`: a fresh child process (``bench/items_child.py``) per size
  (``--scale-items``: 1k and 10k by default, 10k and 100k for the full figure) works
  through that many items against an emulator running in yet another process;
  throughput and the child's own peak RSS (``VmHWM``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from jobguard import (
    BatchJob,
    ClaimedItem,
    GuardedJob,
    ItemRecord,
    JobConfig,
    Page,
    WorkId,
    current_run,
)

from .common import BenchError, unique_name
from .counting import COUNTER
from .lambda_context import FakeLambdaContext
from .write_units import METER

ROOT = Path(__file__).resolve().parent.parent
CHILD = ROOT / "bench" / "items_child.py"
RESULT_PREFIX = "BENCH_RESULT "
OPERATION = "create-note"
LEASE = timedelta(minutes=5)
DESTINATION_S = 0.020
"""The destination call of the overhead figure: a no-op that takes 20 ms."""
REQUEST_LATENCY_S = 0.005
"""Injected before every DynamoDB request of jobguard or Powertools (overhead figure)."""

Destination = Callable[[str, dict[str, Any]], str]


# -- the source and the job ------------------------------------------------------------


def contact(i: int) -> dict[str, Any]:
    return {"id": f"contact-{i:06d}", "change": f"email changed #{i}"}


def key_of(record: dict[str, Any]) -> str:
    """The destination's idempotency key (the work id's string form)."""
    return str(WorkId(record["id"], OPERATION))


class ItemSync(BatchJob[dict]):
    """``n`` generated contacts, one destination call each (crm-sync shape).

    ``select`` generates the page it is asked for (cursor = index of the next contact),
    so the source holds nothing; ``calls`` counts destination calls (no per-item list).
    """

    def __init__(self, config: JobConfig, n: int, destination: Destination,
                 find: Callable[[str], str | None] = lambda key: None,
                 **guard_options: Any) -> None:
        super().__init__(config, **guard_options)
        self.n = n
        self.destination = destination
        self.find = find
        self.calls = 0

    def select(self, cursor: str | None, limit: int) -> Page[dict]:
        start = 0 if cursor is None else int(cursor)
        stop = min(start + limit, self.n)
        return Page([contact(i) for i in range(start, stop)], str(stop))

    def work_id(self, record: dict) -> WorkId:
        return WorkId(record["id"], OPERATION)

    def process(self, record: dict, item: ClaimedItem) -> str:
        self.calls += 1
        return self.destination(item.key, record)

    def reconcile(self, record: dict | None, item: ItemRecord) -> str | None:
        return self.find(item.work_id)


def item_config(name: str, table: str, *, batch_size: int, flush: str) -> JobConfig:
    return JobConfig(name=name, table_name=table, batch_size=batch_size, flush=flush,
                     lease=LEASE)


def manual_event(job: str) -> dict[str, Any]:
    return {"job": job, "manual": True, "trigger_id": uuid.uuid4().hex[:12]}


# -- destinations ------------------------------------------------------------------------


def uncounted_client(aws: Any) -> Any:
    """A DynamoDB client whose requests :data:`COUNTER` does not count and whose writes
    :data:`METER` does not meter (the destination's)."""
    ddb = aws.client("dynamodb")
    ddb.meta.events.unregister("before-send", COUNTER._on_send)  # noqa: SLF001
    return METER.unregister_from(ddb)


@dataclass
class Notes:
    """A destination table of notes keyed by work id (its idempotency key), written
    through its own, uncounted client: the crm-sync destination of the scenario tests."""

    ddb: Any
    name: str
    calls: int = 0

    @classmethod
    def create(cls, aws: Any) -> Notes:
        ddb = uncounted_client(aws)
        from jobguard.destinations import DynamoDBDestination

        return cls(ddb, DynamoDBDestination.create_table(ddb, unique_name("bench-notes")))

    def put(self, key: str, record: dict[str, Any]) -> str:
        """Create the note once per key; a repeat returns the existing note id."""
        self.calls += 1
        note_id = uuid.uuid4().hex
        try:
            self.ddb.put_item(
                TableName=self.name,
                Item={"work_id": {"S": key}, "note_id": {"S": note_id},
                      "text": {"S": record["change"]}},
                ConditionExpression="attribute_not_exists(work_id)",
            )
        except self.ddb.exceptions.ConditionalCheckFailedException:
            found = self.find(key)
            if found is None:
                raise
            return found
        return note_id

    def find(self, key: str) -> str | None:
        item = self.ddb.get_item(TableName=self.name, Key={"work_id": {"S": key}},
                                 ConsistentRead=True).get("Item")
        return item["note_id"]["S"] if item else None

    def count(self) -> int:
        return int(self.ddb.scan(TableName=self.name, Select="COUNT")["Count"])


def sleeping_destination(key: str, record: dict[str, Any]) -> str:
    """A destination call that does nothing for 20 ms (no AWS request of its own)."""
    time.sleep(DESTINATION_S)
    return f"note-{key}"


# -- injected request latency ----------------------------------------------------------


class InjectedLatency:
    """Sleeps before every DynamoDB request while active (a ``before-send`` hook), and
    times the HTTP round trips that follow.

    Installed like :class:`bench.counting.RequestCounter`, in botocore's
    ``BUILTIN_HANDLERS``, so it reaches every client however a library builds it; it
    does nothing until :meth:`active` is entered. Only ``dynamodb`` requests are
    delayed; while it is active the benchmark sends no others, and its destination
    sends none at all.

    ``wire_s`` is the time spent in botocore's ``Endpoint._send`` (request on the wire,
    the emulator's work, response read) while active: the part of a request that
    the injected latency stands for in AWS. The sleep runs before it, in ``before-send``.
    """

    def __init__(self) -> None:
        self._delay_s = 0.0
        self._lock = threading.Lock()
        self.injected = 0
        self.wire_s = 0.0

    def install(self) -> None:
        from botocore import endpoint, handlers

        entry = ("before-send", self._on_send)
        if entry not in handlers.BUILTIN_HANDLERS:
            handlers.BUILTIN_HANDLERS.append(entry)
        original = endpoint.Endpoint._send
        if getattr(original, "bench_timed", False):
            return

        def timed_send(endpoint_self: Any, request: Any) -> Any:
            if not self._delay_s:
                return original(endpoint_self, request)
            started = time.perf_counter()
            try:
                return original(endpoint_self, request)
            finally:
                with self._lock:
                    self.wire_s += time.perf_counter() - started

        timed_send.bench_timed = True  # type: ignore[attr-defined]
        endpoint.Endpoint._send = timed_send  # type: ignore[method-assign]

    def _on_send(self, event_name: str, **_: Any) -> None:
        delay = self._delay_s
        if delay and event_name.startswith("before-send.dynamodb."):
            time.sleep(delay)
            with self._lock:
                self.injected += 1

    @contextmanager
    def active(self, delay_s: float) -> Iterator[InjectedLatency]:
        with self._lock:
            self.injected = 0
            self.wire_s = 0.0
        self._delay_s = delay_s
        try:
            yield self
        finally:
            self._delay_s = 0.0


LATENCY = InjectedLatency()
"""Installed by :mod:`bench.run` at start-up, next to the request counter."""


# -- figure 6: requests per item -----------------------------------------------------------


@dataclass
class ItemCount:
    """Requests, write and read units of one side's whole run (fixed per-run costs
    included), and their breakdowns (``Operation``; ``Operation.kind row`` for the
    units)."""

    requests: int
    items: int
    operations: dict[str, int] = field(default_factory=dict)
    units: int = 0
    unit_operations: dict[str, int] = field(default_factory=dict)
    reads: float = 0.0
    read_operations: dict[str, float] = field(default_factory=dict)
    stored_bytes: int = 0
    """The largest item the run left in its table (a completion, a Powertools record)."""

    @property
    def per_item(self) -> float:
        return self.requests / self.items

    @property
    def units_per_item(self) -> float:
        return self.units / self.items

    @property
    def reads_per_item(self) -> float:
        return self.reads / self.items


def _metered_units() -> tuple[int, dict[str, int], float, dict[str, float]]:
    units = METER.operations()
    if not units:
        raise BenchError("no write unit metered: was the library's botocore session created "
                         "before WriteUnitMeter.install()?")
    reads = METER.read_operations()
    return sum(units.values()), units, sum(reads.values()), reads


def _count_guarded(aws: Any, table: str, n: int, *, batch_size: int, flush: str) -> ItemCount:
    notes = Notes.create(aws)
    name = unique_name(f"bench-items-b{batch_size}")
    job = ItemSync(item_config(name, table, batch_size=batch_size, flush=flush), n,
                   notes.put, notes.find)
    handler = job.handler()
    COUNTER.reset()
    with METER.metering(aws):
        report = handler(manual_event(name), FakeLambdaContext())
    ops = COUNTER.operations()
    _check_report(report, n, f"batch {batch_size}")
    _check_calls(notes, n)
    return ItemCount(sum(ops.values()), n, ops, *_metered_units(),
                     stored_bytes=_largest(aws, table, "ITEM#"))


def _count_claim(aws: Any, table: str, n: int) -> ItemCount:
    """``Run.claim()`` in a plain guarded handler, batch 1, flushed per item (no
    checkpoint: the handler iterates its own records)."""
    notes = Notes.create(aws)
    name = unique_name("bench-claim-b1")

    def lambda_handler(event: Any, context: Any) -> int:
        done = 0
        records = (contact(i) for i in range(n))
        for item in current_run().claim(records, work_id=lambda r: WorkId(r["id"], OPERATION),
                                        reconcile=lambda record, row: notes.find(row.work_id)):
            with item:
                item.complete(destination_id=notes.put(item.key, item.record))
                done += 1
        return done

    job = GuardedJob(item_config(name, table, batch_size=1, flush="item"), lambda_handler)
    COUNTER.reset()
    done = job(manual_event(name), FakeLambdaContext())
    ops = COUNTER.operations()
    if done != n:
        raise BenchError(f"Run.claim: expected {n} completed items, got {done!r}")
    _check_calls(notes, n)
    return ItemCount(sum(ops.values()), n, ops)


def _count_powertools(aws: Any, table: str, n: int) -> ItemCount:
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    notes = Notes.create(aws)
    create_note = _powertools_create_note(
        notes.put, DynamoDBPersistenceLayer(table_name=table), IdempotencyConfig,
        idempotent_function)
    COUNTER.reset()
    with METER.metering(aws):
        for i in range(n):
            create_note(record=contact(i))
    ops = COUNTER.operations()
    _check_calls(notes, n)
    return ItemCount(sum(ops.values()), n, ops, *_metered_units(),
                     stored_bytes=_largest(aws, table, ""))


def _largest(aws: Any, table: str, prefix: str) -> int:
    """The largest item of ``table`` whose partition key starts with ``prefix``, in bytes
    as DynamoDB sizes it (read through the meter's side client)."""
    from .write_units import item_bytes

    client = METER.side_client(aws)
    largest = 0
    for page in client.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            key = next(iter(item.get("pk", item.get("id", {"S": ""})).values()))
            if str(key).startswith(prefix):
                largest = max(largest, item_bytes(item))
    return largest


def _powertools_create_note(destination: Destination, store: Any, config_type: Any,
                            idempotent_function: Any) -> Callable[..., Any]:
    """The destination call behind ``@idempotent_function``, keyed on the contact id,
    with the Lambda context registered (it sets the in-progress expiry)."""
    config = config_type(event_key_jmespath="id")
    config.register_lambda_context(FakeLambdaContext())

    @idempotent_function(data_keyword_argument="record", persistence_store=store,
                         config=config)
    def create_note(record: dict[str, Any]) -> dict[str, str]:
        return {"note_id": destination(key_of(record), record)}

    return create_note


def _check_report(report: Any, n: int, what: str) -> None:
    if not isinstance(report, dict) or report.get("completed") != n or report.get(
            "stopped") != "exhausted":
        raise BenchError(f"{what}: expected {n} completed items, got {report!r}")


def _check_destination(notes: Notes, n: int) -> None:
    if notes.count() != n:
        raise BenchError(f"destination holds {notes.count()} notes; expected {n}")


def _check_calls(notes: Notes, n: int) -> None:
    if notes.calls != n or notes.count() != n:
        raise BenchError(f"destination saw {notes.calls} calls and holds {notes.count()} "
                         f"notes; expected {n} of each")


def measure_requests(aws: Any, tables: Callable[[], str], idem_table: Callable[[], str],
                     n: int, meta: dict[str, Any]) -> dict[str, float]:
    """Requests and write units per item of the whole run (per-run costs spread over the
    items): batch 1 and batch 100 ``BatchJob`` runs, ``Run.claim()`` (requests only), and
    Powertools' ``idempotent_function`` per item."""
    b1 = _count_guarded(aws, tables(), n, batch_size=1, flush="item")
    claim = _count_claim(aws, tables(), n)
    b100 = _count_guarded(aws, tables(), n, batch_size=100, flush="page")
    theirs = _count_powertools(aws, idem_table(), n)
    meta["item_requests"] = {
        "items": n,
        "b1": {"requests": b1.requests, "operations": b1.operations},
        "claim_b1": {"requests": claim.requests, "operations": claim.operations},
        "b100": {"requests": b100.requests, "operations": b100.operations},
        "powertools": {"requests": theirs.requests, "operations": theirs.operations},
    }
    meta["item_write_units"] = {
        "items": n,
        "b1": {"units": b1.units, "operations": b1.unit_operations},
        "b100": {"units": b100.units, "operations": b100.unit_operations},
        "powertools": {"units": theirs.units, "operations": theirs.unit_operations},
    }
    meta["item_read_units"] = {
        "items": n,
        "b1": {"units": b1.reads, "operations": b1.read_operations},
        "b100": {"units": b100.reads, "operations": b100.read_operations},
        "powertools": {"units": theirs.reads, "operations": theirs.read_operations},
    }
    return {
        "requests_per_item_b1": b1.per_item,
        "claim_requests_per_item_b1": claim.per_item,
        "requests_per_item_b100": b100.per_item,
        "powertools_requests_per_item": theirs.per_item,
        "wcu_per_item_b1": b1.units_per_item,
        "wcu_per_item_b100": b100.units_per_item,
        "powertools_wcu_per_item": theirs.units_per_item,
        "rcu_per_item_b1": b1.reads_per_item,
        "rcu_per_item_b100": b100.reads_per_item,
        "powertools_rcu_per_item": theirs.reads_per_item,
        "item_bytes": float(b100.stored_bytes),
        "powertools_item_bytes": float(theirs.stored_bytes),
    }


# -- recovery of 10 items, 5 of them already applied ---------------------------------------


class Crash(BaseException):
    """A run dying in the middle of its page (not an error the library records per item)."""


RECOVERY_ITEMS = 10
RECOVERY_APPLIED = 5


def measure_recovery(aws: Any, table: str, idem_table: str,
                     meta: dict[str, Any]) -> dict[str, float]:
    """Write and read units of recovering 10 items of which the destination holds 5.

    jobguard: a ``BatchJob`` run (batch 10, flushed per page) claims the 10, creates 5
    notes and dies before the 6th (its claim stays open, no outcome written); the
    recovery of the range is planned and executed (``recover``, dry run off), metered:
    the plan's and the execution's reads, the lease, the reconciliation that finds the 5,
    the replay of the others, the run record. Powertools: the same 10 through
    ``idempotent_function``, the destination holding 5 that its table does not record as
    completed, metered (its duplicate destination calls counted).
    """
    from jobguard.recovery import recover

    notes = Notes.create(aws)
    name = unique_name("bench-recovery")
    applied = {"n": 0}

    def dying(key: str, record: dict[str, Any]) -> str:
        if applied["n"] == RECOVERY_APPLIED:
            raise Crash("the run died")
        applied["n"] += 1
        return notes.put(key, record)

    config = item_config(name, table, batch_size=RECOVERY_ITEMS, flush="page")
    with suppress(Crash):
        ItemSync(config, RECOVERY_ITEMS, dying, notes.find).handler()(
            manual_event(name), FakeLambdaContext())
    if notes.count() != RECOVERY_APPLIED:
        raise BenchError(f"recovery: the dying run left {notes.count()} notes")
    job = ItemSync(config, RECOVERY_ITEMS, notes.put, notes.find)
    request = {"job": name, "cursor_from": "0", "cursor_to": str(RECOVERY_ITEMS),
               "dry_run": False, "requested_by": "bench"}
    calls_before = notes.calls
    with METER.metering(aws):
        answer = recover(request, job=job, threshold=1000)
        units, unit_ops, reads, read_ops = _metered_units()
    summary = answer.get("summary", {})
    if (summary.get("reconciled"), summary.get("replayed")) != (
            RECOVERY_APPLIED, RECOVERY_ITEMS - RECOVERY_APPLIED):
        raise BenchError(f"recovery: expected 5 reconciled and 5 replayed, got {answer!r}")
    _check_destination(notes, RECOVERY_ITEMS)
    if notes.calls - calls_before != RECOVERY_ITEMS - RECOVERY_APPLIED:
        raise BenchError("recovery: a note found at the destination was created again")
    theirs, duplicates = _powertools_recovery(aws, idem_table)
    meta["recovery_units"] = {
        "items": RECOVERY_ITEMS, "already_applied": RECOVERY_APPLIED,
        "jobguard": {"write_units": units, "write_operations": unit_ops,
                     "read_units": reads, "read_operations": read_ops,
                     "summary": summary},
        "powertools": {**theirs, "duplicate_destination_calls": duplicates},
    }
    return {"wcu_recovery_10": float(units), "rcu_recovery_10": reads,
            "powertools_wcu_recovery_10": float(theirs["write_units"]),
            "powertools_rcu_recovery_10": theirs["read_units"]}


def _powertools_recovery(aws: Any, idem_table: str) -> tuple[dict[str, Any], int]:
    """The same 10 through ``idempotent_function``, the destination already holding 5 of
    them and the table recording none as completed (the run that applied them died
    before recording them; its in-progress records expired)."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    notes = Notes.create(aws)
    for i in range(RECOVERY_APPLIED):
        notes.put(key_of(contact(i)), contact(i))
    before = notes.calls
    create_note = _powertools_create_note(
        notes.put, DynamoDBPersistenceLayer(table_name=idem_table), IdempotencyConfig,
        idempotent_function)
    with METER.metering(aws):
        for i in range(RECOVERY_ITEMS):
            create_note(record=contact(i))
        units, unit_ops, reads, read_ops = _metered_units()
    _check_destination(notes, RECOVERY_ITEMS)
    duplicates = notes.calls - before - (RECOVERY_ITEMS - RECOVERY_APPLIED)
    return ({"write_units": units, "write_operations": unit_ops, "read_units": reads,
             "read_operations": read_ops}, duplicates)


# -- figure 7: wall-time overhead --------------------------------------------------------


@dataclass
class Timed:
    seconds: float
    requests: int = 0
    injected: int = 0
    wire_s: float = 0.0
    emulator_s: float = 0.0


def measure_overhead(aws: Any, table: str, idem_table: str, n: int,
                     meta: dict[str, Any]) -> dict[str, float]:
    """One repetition per side, in this order: bare, guarded, Powertools."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    def service() -> float:
        return float(aws.dynamodb_service_s)

    # bare: the same destination calls, nothing else
    records = [contact(i) for i in range(n)]
    started = time.perf_counter()
    for record in records:
        sleeping_destination(key_of(record), record)
    bare = Timed(time.perf_counter() - started)

    # guarded: BatchJob, batch 100, page flush. Clients are built before the clock
    # starts (once per container in Lambda), on both sides.
    name = unique_name("bench-overhead")
    job = ItemSync(item_config(name, table, batch_size=100, flush="page"), n,
                   sleeping_destination)
    handler = job.handler()
    handler.runtime()
    with LATENCY.active(REQUEST_LATENCY_S) as latency:
        COUNTER.reset()
        before = service()
        started = time.perf_counter()
        report = handler(manual_event(name), FakeLambdaContext())
        ours = Timed(time.perf_counter() - started, COUNTER.total(), latency.injected,
                     latency.wire_s, service() - before)
    _check_report(report, n, "overhead")

    # Powertools: idempotent_function around each destination call
    create_note = _powertools_create_note(
        sleeping_destination, DynamoDBPersistenceLayer(table_name=idem_table),
        IdempotencyConfig, idempotent_function)
    with LATENCY.active(REQUEST_LATENCY_S) as latency:
        COUNTER.reset()
        before = service()
        started = time.perf_counter()
        for record in records:
            create_note(record=record)
        theirs = Timed(time.perf_counter() - started, COUNTER.total(), latency.injected,
                       latency.wire_s, service() - before)

    meta["overhead"] = {
        "items": n,
        "destination_ms": DESTINATION_S * 1000,
        "injected_ms_per_request": REQUEST_LATENCY_S * 1000,
        "seconds": {"bare": bare.seconds, "jobguard": ours.seconds,
                    "powertools": theirs.seconds},
        "requests": {"jobguard": ours.requests, "powertools": theirs.requests},
        "wire_s": {"jobguard": ours.wire_s, "powertools": theirs.wire_s},
        "emulator_service_s": {"jobguard": ours.emulator_s, "powertools": theirs.emulator_s},
        "ratio_without_emulator_service": {
            "jobguard": (ours.seconds - ours.emulator_s) / bare.seconds,
            "powertools": (theirs.seconds - theirs.emulator_s) / bare.seconds},
    }
    for side in (ours, theirs):
        if side.injected != side.requests:
            raise BenchError(f"latency injected on {side.injected} requests, "
                             f"{side.requests} counted")
    return {
        "overhead_ratio": ours.seconds / bare.seconds,
        "powertools_overhead_ratio": theirs.seconds / bare.seconds,
        "overhead_ratio_net": (ours.seconds - ours.wire_s) / bare.seconds,
        "powertools_overhead_ratio_net": (theirs.seconds - theirs.wire_s) / bare.seconds,
        "overhead_wire_s": ours.wire_s,
        "powertools_overhead_wire_s": theirs.wire_s,
        "bare_loop_s": bare.seconds,
        "guarded_loop_s": ours.seconds,
        "powertools_loop_s": theirs.seconds,
    }


# -- figure 8: scale ---------------------------------------------------------------------


@dataclass
class ScaleResult:
    items: int
    runs: int
    seconds: float
    items_per_s: float
    baseline_rss_mb: float
    peak_rss_mb: float
    requests: int
    emulator_rss_mb: float | None
    ru_maxrss_mb: float
    run_seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class EmulatorProcess:
    endpoint: str
    pid: int


@contextmanager
def emulator_process() -> Iterator[EmulatorProcess]:
    """``python -m jobguard.local.emulator --port 0`` in a process of its own, stopped
    (SIGTERM, by its pid) on exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobguard.local.emulator", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        prefix = "JOBGUARD_EMULATOR endpoint="
        if not line.startswith(prefix):
            raise BenchError(f"the emulator process did not start: {line!r}")
        yield EmulatorProcess(line[len(prefix):], proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _rss_mb(pid: int) -> float | None:
    """Current resident set of another process (Linux ``/proc``), MB."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def scale_one(n: int, per_run: int, batch_size: int = 100) -> ScaleResult:
    """A fresh emulator process and a fresh child process that processes ``n`` items."""
    with emulator_process() as emulator:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "POWERTOOLS_", "JOBGUARD_"))}
        env.update({
            "AWS_ENDPOINT_URL": emulator.endpoint, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
            "PYTHONPATH": str(ROOT),
        })
        proc = subprocess.run(
            [sys.executable, str(CHILD), "--items", str(n), "--per-run", str(per_run),
             "--batch-size", str(batch_size)],
            env=env, cwd=ROOT, capture_output=True, text=True,
            timeout=3600, check=False,
        )
        emulator_rss = _rss_mb(emulator.pid)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or not lines:
        raise BenchError(f"scale child ({n} items) failed ({proc.returncode}): "
                         f"{proc.stderr.strip()[-1500:]}")
    data = json.loads(lines[-1][len(RESULT_PREFIX):])
    return ScaleResult(items=n, runs=data["runs"], seconds=data["seconds"],
                       items_per_s=n / data["seconds"],
                       baseline_rss_mb=data["baseline_rss_mb"],
                       peak_rss_mb=data["peak_rss_mb"], requests=data["requests"],
                       emulator_rss_mb=emulator_rss, ru_maxrss_mb=data["ru_maxrss_mb"],
                       run_seconds=data["run_seconds"])


def size_label(n: int) -> str:
    """``10000`` -> ``"10k"``: the suffix of the per-size scale figures."""
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def measure_scale(sizes: tuple[int, int], per_run: int, meta: dict[str, Any],
                  say: Callable[[str], None]) -> dict[str, float]:
    """One fresh emulator process and one fresh child per size, smaller size first."""
    results: list[ScaleResult] = []
    for n in sizes:
        result = scale_one(n, per_run)
        say(f"  {n} items in {result.runs} runs: {result.seconds:.1f} s, "
            f"{result.items_per_s:.0f} items/s, child peak RSS {result.peak_rss_mb:.1f} MB "
            f"(before the first run {result.baseline_rss_mb:.1f} MB)")
        results.append(result)
    small, large = results
    meta["scale"] = {
        "batch_size": 100, "flush": "page", "items_per_run": per_run,
        "destination": "no-op (returns an id; no AWS request, no sleep)",
        "sizes": {size_label(r.items): r.__dict__ for r in results},
    }
    return {
        "scale_items_small": float(small.items),
        "scale_items_large": float(large.items),
        "items_per_s": large.items_per_s,
        f"items_per_s_{size_label(small.items)}": small.items_per_s,
        f"peak_rss_mb_{size_label(small.items)}": small.peak_rss_mb,
        f"peak_rss_mb_{size_label(large.items)}": large.peak_rss_mb,
        "peak_rss_ratio": large.peak_rss_mb / small.peak_rss_mb,
        "rss_bytes_per_item": (large.peak_rss_mb - small.peak_rss_mb) * 2**20
                              / (large.items - small.items),
    }
