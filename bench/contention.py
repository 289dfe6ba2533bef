"""Figure 4: 50 triggers of one job fired at once from 50 processes.

The parent (which serves :class:`~jobguard.local.emulator.LocalAWS` in a thread) forks
50 workers after importing jobguard and Powertools; each worker builds its handler, and
so its library's client, after the fork, then waits on a shared ``Barrier``. On release
every worker invokes its handler with its own (distinct) tick. A worker whose handler runs reports
"entered" and stays inside the handler until the parent has seen every trigger
decided, so overlapping runs are visible: for jobguard that is 1 run + 49 skipped, for
Powertools' ``@idempotent`` (no lease) all 50 run at once.

Times are ``time.perf_counter()`` (CLOCK_MONOTONIC, shared by all processes).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobguard import OverlapPolicy, guarded
from jobguard.dynamodb import DynamoJobStore
from jobguard.records import RunRecord

from .common import BenchError, Ticks, mean
from .counting import COUNTER
from .lambda_context import FakeLambdaContext

JOB = "bench-contend"
WORKERS = 50
TIMEOUT_S = 60.0
LEASE = timedelta(minutes=5)


@dataclass(frozen=True)
class Report:
    """One message from a worker. ``kind``: entered, done or error."""

    index: int
    kind: str
    at: float
    released_at: float = 0.0
    decision: str = ""
    requests: int = 0
    detail: str = ""


@dataclass
class ContentionResult:
    side: str
    decided_s: float
    """Barrier release to the last decision by a trigger that did not run (jobguard:
    the 49th skip) or, when every trigger ran (Powertools), to the last run's start."""
    decisions: int
    ran: int
    decisions_seen: dict[str, int]
    overlapping_runs: int
    requests_per_decision: float
    records: dict[str, int]

    @property
    def decisions_per_s(self) -> float:
        return self.decisions / self.decided_s


@dataclass
class _Shared:
    barrier: Any
    go_on: Any
    reports: Any


def _build(side: str, table: str, hold: Any) -> Any:
    """The worker's handler, built as its users build it; its client exists on return."""
    if side == "jobguard":
        job = guarded(JOB, policy=OverlapPolicy.SKIP, lease=LEASE, table_name=table)(hold)
        job.runtime()  # jobguard builds its client lazily: build it before the barrier
        return job
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent,
    )

    store = DynamoDBPersistenceLayer(table_name=table)
    config = IdempotencyConfig(event_key_jmespath="scheduled_at")
    return idempotent(persistence_store=store, config=config)(hold)


def _worker(side: str, index: int, event: dict[str, Any], table: str, shared: _Shared) -> None:
    released = 0.0

    def hold(event: Any, context: Any) -> dict[str, bool]:
        shared.reports.put(Report(index, "entered", time.perf_counter(), released))
        if not shared.go_on.wait(TIMEOUT_S):
            raise BenchError("the parent never let the run finish")
        return {"ran": True}

    try:
        handler = _build(side, table, hold)
        COUNTER.reset()  # drop the counts copied from the parent at fork
        shared.barrier.wait(TIMEOUT_S)
        released = time.perf_counter()
        result = handler(event, FakeLambdaContext())
        decided = time.perf_counter()
        decision = result.get("decision", "ran") if isinstance(result, dict) else "ran"
        shared.reports.put(Report(index, "done", decided, released, decision, COUNTER.total()))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        shared.reports.put(Report(index, "error", time.perf_counter(), released,
                                  detail=f"{type(exc).__name__}: {exc}"))


def _collect(shared: _Shared, n: int) -> list[Report]:
    """Read reports until every worker is done; open the gate once all have decided."""
    deadline = time.monotonic() + TIMEOUT_S
    reports: list[Report] = []
    decided: set[int] = set()
    finished: set[int] = set()
    while len(finished) < n:
        try:
            report: Report = shared.reports.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            shared.go_on.set()
            raise BenchError(f"timed out: {len(finished)}/{n} workers finished") from None
        reports.append(report)
        decided.add(report.index)
        if report.kind != "entered":
            finished.add(report.index)
        if len(decided) == n:
            shared.go_on.set()
    return reports


def _summarise(side: str, reports: list[Report], records: dict[str, int]) -> ContentionResult:
    errors = [r for r in reports if r.kind == "error"]
    if errors:
        raise BenchError(f"{side}: {len(errors)} workers failed, e.g. {errors[0].detail}")
    entered = {r.index: r for r in reports if r.kind == "entered"}
    done = [r for r in reports if r.kind == "done"]
    not_run = [r for r in done if r.index not in entered]
    start = min(r.released_at for r in done)
    last = max(r.at for r in not_run) if not_run else max(r.at for r in entered.values())
    return ContentionResult(
        side=side,
        decided_s=last - start,
        decisions=len(not_run) if not_run else len(entered),
        ran=len(entered),
        decisions_seen=dict(Counter(r.decision for r in done)),
        overlapping_runs=len(entered),
        requests_per_decision=mean([r.requests for r in (not_run or done)]),
        records=records,
    )


def _jobguard_records(ddb: Any, table: str) -> dict[str, int]:
    runs = DynamoJobStore(table, client=ddb).list_runs(JOB, limit=500)
    return dict(Counter(r.status.value if isinstance(r, RunRecord) else "damaged"
                        for r in runs))


def _powertools_records(ddb: Any, table: str) -> dict[str, int]:
    pages = ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    return dict(Counter(item["status"]["S"] for page in pages for item in page["Items"]))


def run(side: str, table: str, ddb: Any, ticks: Ticks, n: int = WORKERS) -> ContentionResult:
    """Fire ``n`` triggers at once from ``n`` forked processes; ``side``: jobguard|powertools."""
    ctx = mp.get_context("fork")
    shared = _Shared(barrier=ctx.Barrier(n), go_on=ctx.Event(), reports=ctx.Queue())
    events = ticks.events(JOB, n)
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()  # or a child would flush a copy of the buffer again
    procs = [ctx.Process(target=_worker, args=(side, i, events[i], table, shared), daemon=True)
             for i in range(n)]
    for proc in procs:
        proc.start()
    try:
        reports = _collect(shared, n)
    finally:
        shared.go_on.set()
        for proc in procs:
            proc.join(TIMEOUT_S)
            if proc.is_alive():
                proc.terminate()
    records = (_jobguard_records if side == "jobguard" else _powertools_records)(ddb, table)
    return _summarise(side, reports, records)
