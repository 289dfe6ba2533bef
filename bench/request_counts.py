"""Figures 1-3: AWS requests per happy-path run and per SKIP decision.

Both sides are built the way their users build them (``@guarded(...)`` with the table
name; ``DynamoDBPersistenceLayer(table_name=...)``), so each library makes its own
client; :data:`bench.counting.COUNTER` counts that client's requests. With ``aws`` given,
each figure also meters the write units of ``n`` further invocations
(:data:`bench.write_units.METER`), in a pass of their own so the side reads stay out of
the timed invocations. The lease row after 10,000 skipped triggers
(:func:`lease_row_after_triggers`) is decided in a child process
(:func:`lease_rows_in_child`), beside the stages that only count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from jobguard import OverlapPolicy, guarded
from jobguard.requests import Take
from jobguard.schema import LEASE_SK, PARTITION_KEY, SORT_KEY, job_pk

from .common import BenchError, Ticks, mean, median
from .counting import COUNTER, RequestCounter
from .lambda_context import FakeLambdaContext
from .write_units import METER

LEASE = timedelta(minutes=5)
LEASE_ROW_TRIGGERS = 10_000
"""Triggers decided against a held lease before ``lease_row_bytes_10k_triggers``."""
ROOT = Path(__file__).resolve().parent.parent
RAN = {"ran": True}
Handler = Callable[[Any, Any], Any]


@dataclass
class Sample:
    """Per measured invocation: requests (mean); wall time and the calling thread's CPU
    time (medians, ms). The emulator serves from other threads, so ``cpu_ms`` is the
    library's own work (and botocore's), ``ms`` includes the emulator."""

    requests: float
    ms: float
    cpu_ms: float
    first_requests: int
    operations: dict[str, int] = field(default_factory=dict)
    units: Units | None = None


@dataclass
class Units:
    """Write units per metered invocation (mean), and per ``Operation.kind row``."""

    per_call: float
    operations: dict[str, float]


def _noop(event: Any, context: Any) -> dict[str, bool]:
    return dict(RAN)


def _measure(call: Handler, events: list[dict[str, Any]], counter: RequestCounter,
             expect: Callable[[Any], None], metered: Metered | None = None) -> Sample:
    """Invoke once to warm up, then once per remaining event, counting each one; then,
    if ``metered`` is given, once per metered event, metering the write units."""
    counter.reset()
    expect(call(events[0], FakeLambdaContext()))
    first = counter.total()
    if first == 0:
        raise BenchError("no request counted: was the library's botocore session created "
                         "before RequestCounter.install()?")
    counts: list[int] = []
    times: list[float] = []
    cpu: list[float] = []
    ops: dict[str, int] = {}
    for event in events[1:]:
        counter.reset()
        started, started_cpu = time.perf_counter(), time.thread_time()
        result = call(event, FakeLambdaContext())
        cpu.append((time.thread_time() - started_cpu) * 1000)
        times.append((time.perf_counter() - started) * 1000)
        counts.append(counter.total())
        for op, n in counter.operations().items():
            ops[op] = ops.get(op, 0) + n
        expect(result)
    return Sample(requests=mean(counts), ms=median(times), cpu_ms=median(cpu),
                  first_requests=first, operations=ops,
                  units=_meter(call, expect, *metered) if metered else None)


Metered = tuple[Any, list[dict[str, Any]]]
"""The emulator (:class:`~jobguard.local.emulator.LocalAWS`) and the events to meter."""


def _meter(call: Handler, expect: Callable[[Any], None], aws: Any,
           events: list[dict[str, Any]]) -> Units:
    """Write units of one invocation per event (mean), metered on the calling thread."""
    totals: list[int] = []
    ops: dict[str, int] = {}
    for event in events:
        with METER.metering(aws):
            expect(call(event, FakeLambdaContext()))
        totals.append(METER.total())
        for op, n in METER.operations().items():
            ops[op] = ops.get(op, 0) + n
    if not any(totals):
        raise BenchError("no write unit metered: was the library's botocore session created "
                         "before WriteUnitMeter.install()?")
    return Units(mean(totals), {op: n / len(events) for op, n in ops.items()})


def _metered(aws: Any, ticks: Ticks, job: str, n: int) -> Metered | None:
    return (aws, ticks.events(job, n)) if aws is not None else None


def _expect_ran(result: Any) -> None:
    if result != RAN:
        raise BenchError(f"expected the handler to run, got {result!r}")


def _expect_skipped(result: Any) -> None:
    if not isinstance(result, dict) or result.get("decision") != "skipped":
        raise BenchError(f"expected a skipped decision, got {result!r}")


def guarded_runs(table: str, ticks: Ticks, n: int, aws: Any = None) -> Sample:
    """``n`` sequential happy-path runs of a ``@guarded`` SKIP job (after one warm-up);
    with ``aws``, ``n`` more, metered."""
    job = guarded("bench-run", policy=OverlapPolicy.SKIP, lease=LEASE, table_name=table)(_noop)
    return _measure(job, ticks.events("bench-run", n + 1), COUNTER, _expect_ran,
                    _metered(aws, ticks, "bench-run", n))


def powertools_runs(table: str, ticks: Ticks, n: int, aws: Any = None) -> Sample:
    """``n`` sequential runs of a Powertools ``@idempotent`` handler keyed on the tick;
    with ``aws``, ``n`` more, metered."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent,
    )

    store = DynamoDBPersistenceLayer(table_name=table)
    config = IdempotencyConfig(event_key_jmespath="scheduled_at")
    handler = idempotent(persistence_store=store, config=config)(_noop)
    return _measure(handler, ticks.events("bench-run", n + 1), COUNTER, _expect_ran,
                    _metered(aws, ticks, "bench-run", n))


def guarded_skips(table: str, ticks: Ticks, n: int, aws: Any = None) -> Sample:
    """``n`` SKIP decisions (after one warm-up) while another run holds the lease; with
    ``aws``, ``n`` more, metered (the holder's thread is not).

    The holder is a second ``@guarded`` handler for the same job, running in another
    thread (so its requests are not counted), held inside its handler by a
    ``threading.Event``. Its heartbeat (every lease / 3 = 100 s) does not fire here.
    """
    entered, release = threading.Event(), threading.Event()

    def hold(event: Any, context: Any) -> dict[str, bool]:
        entered.set()
        if not release.wait(60):
            raise BenchError("the holder was never released")
        return dict(RAN)

    def job(handler: Handler) -> Handler:
        return guarded("bench-skip", policy=OverlapPolicy.SKIP, lease=LEASE,
                       table_name=table)(handler)

    holder, skipper = job(hold), job(_noop)
    box: dict[str, Any] = {}
    event = ticks.events("bench-skip", 1)[0]
    thread = threading.Thread(
        target=lambda: box.update(result=holder(event, FakeLambdaContext())), daemon=True
    )
    thread.start()
    try:
        if not entered.wait(10):
            raise BenchError("the holder did not start its run")
        sample = _measure(skipper, ticks.events("bench-skip", n + 1), COUNTER,
                          _expect_skipped, _metered(aws, ticks, "bench-skip", n))
    finally:
        release.set()
        thread.join(10)
    _expect_ran(box.get("result"))
    return sample


def lease_row_after_triggers(table: str, ddb: Any, n: int) -> int:
    """The lease row's size after ``n`` distinct manual triggers decided against a held
    lease (the trigger rate a rule-driven job can reach): each is skipped, so each leaves
    a trigger item and a record, and none may leave anything on the lease row."""
    from datetime import timedelta

    from jobguard import GuardedJob, JobConfig
    from jobguard.dynamodb import DynamoJobStore
    from jobguard.testing import ManualClock

    clock = ManualClock()
    store = DynamoJobStore(table, client=ddb)
    config = JobConfig(name="bench-rows", policy=OverlapPolicy.SKIP,
                       lease=timedelta(hours=3), table_name=table)
    job = GuardedJob(config, _noop, store=store, clock=clock)
    from jobguard.triggers import Trigger, TriggerKind

    store.take(Take(Trigger("bench-rows", "bench-rows@manual:holder", TriggerKind.MANUAL),
                    run_id="HOLDER", owner="bench/holder",
                    now_ms=int(clock.now().timestamp() * 1000), lease_ms=3 * 3_600_000))
    step = timedelta(hours=2) / n
    for i in range(n):
        job.handle(Trigger("bench-rows", f"bench-rows@manual:t{i:05d}", TriggerKind.MANUAL,
                           requested_by="bench"), None, None)
        clock.advance(step)
    return lease_row_bytes(ddb, table, "bench-rows")


@dataclass
class LeaseRowsChild:
    """:func:`lease_row_after_triggers` running in a child process
    (``bench/lease_rows_child.py``, on the in-process emulator), started by
    :func:`lease_rows_in_child`."""

    triggers: int
    proc: subprocess.Popen[str]

    def result(self) -> dict[str, Any]:
        """Wait for the child: ``{"lease_row_bytes", "triggers", "seconds"}``."""
        from .lease_rows_child import RESULT_PREFIX as prefix

        out, err = self.proc.communicate(timeout=3600)
        lines = [ln for ln in out.splitlines() if ln.startswith(prefix)]
        if self.proc.returncode != 0 or not lines:
            raise BenchError(f"the lease-row child ({self.triggers} triggers) failed "
                             f"({self.proc.returncode}): {err.strip()[-1500:]}")
        found: dict[str, Any] = json.loads(lines[-1][len(prefix):])
        return found


@contextmanager
def lease_rows_in_child(triggers: int = LEASE_ROW_TRIGGERS) -> Iterator[LeaseRowsChild]:
    """Start :func:`lease_row_after_triggers` over ``triggers`` in a fresh interpreter,
    so that its decisions run on another core while this process goes on; the child is
    stopped on exit if nobody waited for it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.lease_rows_child", "--triggers", str(triggers)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield LeaseRowsChild(triggers, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def lease_row_bytes(ddb: Any, table: str, job: str) -> int:
    """Approximate DynamoDB size of a job's lease row (attribute names + values).

    Every write to the row is billed by its full size (1 write unit per KB, twice that
    inside a transaction), and the row keeps a mark per trigger decided within
    ``dedup_window``.
    """
    key = {PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": LEASE_SK}}
    item = ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item", {})
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def _value_bytes(value: dict[str, Any]) -> int:
    (kind, raw), = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return (len(raw.strip("-").replace(".", "")) + 1) // 2 + 1
    return 1
