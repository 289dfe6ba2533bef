"""The timeline at 10,000 run records: render time and page size (``make bench``).

A day of three jobs' run log, 10,000 records in all, made the way the library writes
them (run ids from the start time, one record per trigger decision): runs of 5 s to
2 min one after the other, triggers decided while a run held the lease (skipped,
queued, coalesced, duplicate), a failure, an incomplete run or a takeover now and then.
The records are written into the embedded emulator's table, then:

``timeline_10k_ms``
    Median wall time of building the timeline from the 10,000 records and rendering the
    whole HTML page (what ``jobguard timeline --html`` does after its reads). Target:
    under 2,000 ms.
``timeline_10k_bytes``
    That page's size in bytes (UTF-8). Target: under 2,000,000.
``timeline_10k_text_ms``
    The same records as the terminal view (``--output text``), median.
``timeline_10k_read_ms``
    Reading the 10,000 records back through ``DynamoJobStore.runs_between`` (paged
    queries) from the emulator: moto's time, far slower than DynamoDB's; reported, no
    target.

Beside them, one job's lane alone (built from the records in memory, the same build
and render), where a lane is densest:

``timeline_dense_10k_ms`` / ``timeline_dense_10k_bytes``
    10,000 runs of one job over a day, one after the other, 5 % failed and 2 %
    incomplete (seeded). Targets: those of 10,000 records, under 2,000 ms and 2,000,000
    bytes.
``timeline_badday_10k_ms`` / ``timeline_badday_10k_bytes``
    The same day with half the runs failed (seeded at random): the page an operator
    opens on a bad day, each failure in its own place. Same targets.
``timeline_month_43k_ms`` / ``timeline_month_43k_bytes``
    30 days of a 1-minute job, 43,200 runs, 5 % failed: the longest range the command
    takes. Reported, no target (more than 10,000 records).
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from jobguard.dynamodb import DynamoJobStore
from jobguard.ids import new_run_id
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import Window, collect, render_page, render_text

__all__ = ["JOBS", "LANES", "day_of_records", "measure", "measure_lanes", "one_job"]

JOBS = ("crm-sync", "report-export", "invoice-mailer")
DAY_MS = 86_400_000


def day_of_records(n: int, start_ms: int, *, seed: int = 13) -> dict[str, list[RunRecord]]:
    """``n`` run records over one day across :data:`JOBS`, in start order per job."""
    rng = random.Random(seed)
    per_job = {job: [] for job in JOBS}  # type: dict[str, list[RunRecord]]
    step = DAY_MS * len(JOBS) // n  # one record per job every step ms, on average
    for index, job in enumerate(JOBS):
        quota = n // len(JOBS) + (n % len(JOBS) if index == 0 else 0)
        at, fence, records = start_ms, 0, per_job[job]
        while len(records) < quota:
            fence += 1
            length = rng.randint(5_000, min(120_000, 2 * step))
            roll = rng.random()
            status = (RunStatus.FAILED if roll < 0.02 else RunStatus.INCOMPLETE if roll < 0.05
                      else RunStatus.LEASE_LOST if roll < 0.06 else RunStatus.SUCCEEDED)
            run = RunRecord(
                job=job, run_id=new_run_id(at), trigger_id=f"{job}@tick:{at}",
                trigger_kind="tick", policy="COALESCE", decision=Decision.RAN, status=status,
                started_at_ms=at, ended_at_ms=at + length, fence=fence, owner=f"{job}/w",
                error="TimeoutError: the CRM did not answer" if status is RunStatus.FAILED
                else None, extra={"selected": 100, "completed": 100 if roll >= 0.05 else 97,
                                  "failed": 0 if roll >= 0.05 else 2,
                                  "uncertain": 0 if roll >= 0.05 else 1})
            records.append(run)
            if status is RunStatus.LEASE_LOST and len(records) < quota:
                fence += 1
                taker_at = at + length // 2
                records.append(RunRecord(
                    job=job, run_id=new_run_id(taker_at), trigger_id=f"{job}@tick:{taker_at}",
                    trigger_kind="tick", policy="COALESCE", decision=Decision.RAN,
                    status=RunStatus.SUCCEEDED, started_at_ms=taker_at,
                    ended_at_ms=taker_at + length, fence=fence,
                    extra={"displaced_run_id": run.run_id, "selected": 100, "completed": 100}))
                length += length // 2
            decided = rng.choice((0, 0, 1, 1, 2))
            for k in range(decided):
                if len(records) >= quota:
                    break
                when = at + (k + 1) * length // (decided + 1)
                decision = rng.choice((Decision.SKIPPED, Decision.COALESCED,
                                       Decision.DUPLICATE, Decision.QUEUED))
                records.append(RunRecord(
                    job=job, run_id=new_run_id(when), trigger_id=f"{job}@tick:{when}",
                    trigger_kind="tick", policy="COALESCE", decision=decision,
                    status=RunStatus(decision.value), started_at_ms=when, ended_at_ms=when,
                    owner=f"{job}/w", holder_run_id=run.run_id, holder_fence=run.fence))
            at += length + rng.randint(1_000, step // 2)
    return per_job


def one_job(n: int, start_ms: int, span_ms: int, *, failed: float, incomplete: float = 0.0,
            seed: int = 17) -> list[RunRecord]:
    """``n`` runs of one job spread evenly over ``span_ms``, each lasting 60 % of its
    slot, failed or incomplete at random (seeded), in start order."""
    rng = random.Random(seed)
    step = span_ms // n
    records = []
    for i in range(n):
        at, roll = start_ms + i * step, rng.random()
        status = (RunStatus.FAILED if roll < failed else RunStatus.INCOMPLETE
                  if roll < failed + incomplete else RunStatus.SUCCEEDED)
        records.append(RunRecord(
            job="crm-sync", run_id=new_run_id(at), trigger_id=f"crm-sync@tick:{at}",
            trigger_kind="tick", policy="COALESCE", decision=Decision.RAN, status=status,
            started_at_ms=at, ended_at_ms=at + step * 6 // 10, fence=i + 1,
            owner="crm-sync/w", error="TimeoutError: the CRM did not answer"
            if status is RunStatus.FAILED else None,
            extra={"selected": 100, "completed": 100 if status is RunStatus.SUCCEEDED
                   else 97, "failed": 0 if status is RunStatus.SUCCEEDED else 3}))
    return records


LANES = {  # name: (records, span_ms, failed, incomplete)
    "dense_10k": (10_000, DAY_MS, 0.05, 0.02),
    "badday_10k": (10_000, DAY_MS, 0.5, 0.0),
    "month_43k": (43_200, 30 * DAY_MS, 0.05, 0.0),
}


def measure_lanes(*, repeats: int = 3) -> dict[str, float]:
    """One job's lane alone, built from records in memory: ``timeline_<case>_ms`` (the
    median of build + render) and ``timeline_<case>_bytes`` for each of :data:`LANES`."""
    from jobguard.timeline import build_timeline

    start_ms = 1_800_000_000_000
    figures: dict[str, float] = {}
    for name, (n, span_ms, failed, incomplete) in LANES.items():
        records = one_job(n, start_ms, span_ms, failed=failed, incomplete=incomplete)
        window = Window(start_ms, start_ms + span_ms)
        took, page = [], ""
        for _ in range(repeats):
            began = time.perf_counter()
            timeline = build_timeline([("crm-sync", records)], window, now_ms=window.to_ms)
            page = render_page(timeline)
            took.append((time.perf_counter() - began) * 1000)
        if len(timeline.lanes[0].bars) != n:
            raise AssertionError(f"{name}: the timeline shows {len(timeline.lanes[0].bars)} "
                                 f"of the {n} runs")
        figures[f"timeline_{name}_ms"] = round(statistics.median(took), 1)
        figures[f"timeline_{name}_bytes"] = len(page.encode())
    return figures


def _write(ddb: Any, table: str, per_job: dict[str, list[RunRecord]]) -> None:
    store = DynamoJobStore(table, client=ddb)
    items = [{"PutRequest": {"Item": store._run_item(r, 2_000_000_000)}}  # noqa: SLF001
             for records in per_job.values() for r in records]
    for i in range(0, len(items), 25):
        batch = {table: items[i:i + 25]}
        while batch:
            batch = ddb.batch_write_item(RequestItems=batch).get("UnprocessedItems") or {}


def measure(ddb: Any, table: str, *, n: int = 10_000, repeats: int = 3) -> dict[str, float]:
    """The figures above, and the composition of the log (``timeline_10k_*``)."""
    start_ms = 1_800_000_000_000
    per_job = day_of_records(n, start_ms)
    assert sum(len(r) for r in per_job.values()) == n
    _write(ddb, table, per_job)
    store = DynamoJobStore(table, client=ddb)
    last_ms = max(r.ended_at_ms or r.started_at_ms for rs in per_job.values() for r in rs)
    window = Window(start_ms, last_ms + 60_000)
    now_ms = window.to_ms
    began = time.perf_counter()
    timeline = collect(store, list(JOBS), window, now_ms=now_ms)
    read_ms = (time.perf_counter() - began) * 1000
    drawn = sum(len(lane.bars) + len(lane.marks) for lane in timeline.lanes)
    if drawn != n:
        raise AssertionError(f"the timeline shows {drawn} of the {n} records")
    logs = {job: list(records) for job, records in per_job.items()}
    page_ms, text_ms, page = [], [], ""
    from jobguard.timeline import build_timeline

    for _ in range(repeats):
        began = time.perf_counter()
        page = render_page(build_timeline(list(logs.items()), window, now_ms=now_ms))
        page_ms.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        render_text(build_timeline(list(logs.items()), window, now_ms=now_ms), width=120)
        text_ms.append((time.perf_counter() - began) * 1000)
    return {
        "timeline_10k_ms": round(statistics.median(page_ms), 1),
        "timeline_10k_bytes": len(page.encode()),
        "timeline_10k_text_ms": round(statistics.median(text_ms), 1),
        "timeline_10k_read_ms": round(read_ms, 1),
        "timeline_10k_runs": sum(len(lane.bars) for lane in timeline.lanes),
        "timeline_10k_not_run": sum(len(lane.marks) for lane in timeline.lanes),
        "timeline_10k_takeovers": sum(len(lane.markers) for lane in timeline.lanes),
        **measure_lanes(repeats=repeats),
    }
