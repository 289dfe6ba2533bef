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


_LAST_MS = (1 << 48) - 1
"""The last millisecond a run id can hold (:func:`jobguard.ids.run_id_bounds`)."""
_DISPLACED = (RunStatus.ABANDONED, RunStatus.LEASE_LOST)


def collect_lane(store: RunLogReader, job: str, window: Window, *, now_ms: int) -> Lane:
    """One job's lane: its run records in the range, and the run holding its lease.

    A range that reaches now also reads every record claiming a later start: run ids
    sort by their worker's clock, so a worker whose clock runs ahead writes records
    "in the future", which are counted (``ahead``), never silently absent. The run
    holding the lease is drawn from the lease row: expired, if its lease ran out with
    no one taking it over; a takeover, if the row's previous run is one the log says
    was displaced (abandoned, or its lease lost).
    """
    to_ms = _LAST_MS if window.to_ms >= now_ms else window.to_ms
    log = store.runs_between(job, from_ms=window.from_ms, to_ms=to_ms)
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
        extra: dict[str, object] = {"lease_expires_at_ms": lease.expires_at_ms,
                                    "heartbeat_at_ms": lease.heartbeat_at_ms}
        if lease.prev_run_id and any(r.run_id == lease.prev_run_id and r.status in _DISPLACED
                                     for r in records):
            extra["displaced_run_id"] = lease.prev_run_id  # its taker's record comes later
        if lease.handed_from:  # the next link of a chain, not started yet: in its chain
            extra["continues"] = lease.handed_from
        records.append(RunRecord(
            job=job, run_id=lease.run_id, trigger_id=lease.trigger_id or "",
            trigger_kind="continuation" if lease.handed_from else "", policy="",
            decision=Decision.RAN, status=RunStatus.RUNNING,
            started_at_ms=lease.acquired_at_ms, fence=lease.fence, owner=lease.owner,
            extra=extra))
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
