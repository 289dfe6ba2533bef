"""A timeline read from a job store: the run log only, through its public read API.

``DynamoJobStore.runs_between`` pages through each job's run records in the range (run
ids sort by start time, so it is a key-range query, never a scan), and the lease row
names a run still going. Item counts come from each run's record (``BatchReport``), not
from the item ledger, so the ledger's layout is not assumed. The same against AWS,
MiniStack or the embedded emulator: only the client's endpoint differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..errors import DamagedRowError
from ..lease import LeaseState
from ..records import Decision, RunLog, RunRecord, RunStatus
from .model import Lane, Timeline, Window, build_lane

__all__ = ["RunLogReader", "collect", "collect_lane"]


class RunLogReader(Protocol):
    """What a timeline reads: ``DynamoJobStore`` is one."""

    def runs_between(self, job: str, *, from_ms: int, to_ms: int) -> RunLog: ...

    def read_lease(self, job: str) -> LeaseState: ...


def collect_lane(store: RunLogReader, job: str, window: Window, *, now_ms: int) -> Lane:
    """One job's lane: its run records in the range, and the run holding its lease."""
    log = store.runs_between(job, from_ms=window.from_ms, to_ms=window.to_ms)
    records = list(log.records)
    unreadable = list(log.unreadable)
    try:
        lease = store.read_lease(job)
    except DamagedRowError as damage:
        unreadable.append(f"the lease row: {damage}")
        lease = None
    if lease is not None and lease.run_id and lease.acquired_at_ms is not None \
            and not any(r.run_id == lease.run_id for r in records) \
            and lease.acquired_at_ms <= window.to_ms:
        records.append(RunRecord(
            job=job, run_id=lease.run_id, trigger_id=lease.trigger_id or "",
            trigger_kind="", policy="", decision=Decision.RAN, status=RunStatus.RUNNING,
            started_at_ms=lease.acquired_at_ms, fence=lease.fence, owner=lease.owner))
    return build_lane(job, records, window, now_ms=now_ms, unreadable=unreadable,
                      truncated=log.truncated)


def collect(store: RunLogReader, jobs: Sequence[str], window: Window, *, now_ms: int,
            title: str = "jobguard timeline") -> Timeline:
    """Every job's lane on one axis.

    Example:
        >>> from jobguard.dynamodb import DynamoJobStore  # doctest: +SKIP
        >>> timeline = collect(DynamoJobStore("jobguard", client=ddb), ["crm-sync"],
        ...                    Window(t0, t1), now_ms=t1)  # doctest: +SKIP
    """
    lanes = tuple(collect_lane(store, job, window, now_ms=now_ms) for job in jobs)
    return Timeline(window=window, lanes=lanes, generated_at_ms=now_ms, title=title)
