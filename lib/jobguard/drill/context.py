"""What every drill works with (the seed's drills and any job's): the deployed stack's
context, the example jobs' data, and the checks of the three sides after a drill.

:class:`DrillContext` seeds crm-sync's change feed, counts what reached the destinations
(crm-sync's notes, report-export's exported periods), hands out scheduled times no tick
used yet, and arms, waits on and releases drill switches (:mod:`.switches`).
:func:`check_crm` and :func:`check_report` check the run records, the item ledger and
the checkpoint, and the destination once a drill settled. Changes when what the drills
seed or check does; the drills themselves are :mod:`.drills` and :mod:`.job_drills`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..records import RunRecord
from ..workitems import ItemState
from . import switches
from .report import DrillResult, tally
from .stack import DeployedStack, now_utc

__all__ = ["CRM", "REPORT", "SKEW_MS", "Drill", "DrillContext", "Seeded", "check_crm",
           "check_report", "counted", "decision_counts", "in_period", "now_ms",
           "period_name"]

CRM = "crm-sync"
REPORT = "report-export"
SKEW_MS = 5000
"""The jobs' skew margin (JobConfig's default): a lease is free this long after it ends."""


@dataclass
class Seeded:
    """Contact changes a drill put on crm-sync's change feed."""

    changes: list[dict[str, str]]

    @property
    def work_ids(self) -> list[str]:
        return [f"{c['contact_id']}@{c['seq']}:create-note" for c in self.changes]

    @property
    def last_seq(self) -> str:
        return self.changes[-1]["seq"]


@dataclass
class DrillContext:
    stack: DeployedStack
    say: Callable[[str], None] = print
    _used: set[str] = field(default_factory=set)
    """Scheduled times already ticked (a tick is job + scheduled time: never reuse one)."""

    # -- crm-sync's data ---------------------------------------------------------------

    def seed(self, drill: str, n: int) -> Seeded:
        """``n`` new changes after everything on the feed (sequence numbers only grow)."""
        base = time.time_ns() // 1000
        changes = [{"seq": f"{base + i:020d}", "contact_id": f"{drill}-{i:03d}",
                    "change": f"{drill}: contact {i} changed"} for i in range(n)]
        table = self.stack.outputs["CrmContactChangesTable"]
        for change in changes:
            self.stack.ddb.put_item(TableName=table, Item={
                "pk": {"S": "changes"}, **{k: {"S": v} for k, v in change.items()}})
        return Seeded(changes)

    def notes(self, seeded: Seeded) -> Counter[str]:
        """How many notes the destination holds for each seeded change."""
        table = self.stack.outputs["CrmNotesTable"]
        wanted = set(seeded.work_ids)
        counts: Counter[str] = Counter()
        kwargs: dict[str, Any] = {"TableName": table}
        while True:
            page = self.stack.ddb.scan(**kwargs)
            for item in page.get("Items", []):
                work_id = item["work_id"]["S"]
                if work_id in wanted:
                    counts[work_id] += 1
            if "LastEvaluatedKey" not in page:
                return counts
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # -- report-export's data ----------------------------------------------------------

    def exports(self, periods: list[str]) -> Counter[str]:
        """Object versions per exported period: a second accepted write would show as a
        second version of the same key (the bucket is versioned)."""
        bucket = self.stack.outputs["ReportBucketName"]
        counts: Counter[str] = Counter()
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": "reports/"}
        while True:
            page = self.stack.s3.list_object_versions(**kwargs)
            for version in page.get("Versions", []):
                for period in periods:
                    if period in version["Key"]:
                        counts[period] += 1
            if not page.get("IsTruncated"):
                return counts
            kwargs["KeyMarker"] = page.get("NextKeyMarker")
            kwargs["VersionIdMarker"] = page.get("NextVersionIdMarker")

    # -- triggers ------------------------------------------------------------------------

    def tick_time(self, job: str) -> datetime:
        """A scheduled time no earlier tick of this job used (ticks are deduplicated by
        job + scheduled time, as they must be)."""
        at = now_utc().replace(microsecond=0) - timedelta(seconds=60)
        while at.isoformat() in self._used:
            at += timedelta(seconds=1)
        self._used.add(at.isoformat())
        return at

    # -- switches ---------------------------------------------------------------------------

    def arm(self, job: str, name: str, **spec: Any) -> str:
        switches.arm(self.stack.ddb, self.stack.table, job, name, **spec)
        return name

    def held(self, job: str, name: str) -> dict[str, Any]:
        return switches.wait_held(self.stack.ddb, self.stack.table, job, name, timeout_s=60)

    def release(self, job: str, name: str) -> None:
        switches.release(self.stack.ddb, self.stack.table, job, name)

    def disarm(self, job: str, name: str) -> None:
        switches.disarm(self.stack.ddb, self.stack.table, job, name)


@dataclass(frozen=True)
class Drill:
    name: str
    title: str
    run: Callable[[DrillContext, DrillResult], None]



def now_ms() -> int:
    return int(time.time() * 1000)


def check_crm(ctx: DrillContext, result: DrillResult, seeded: Seeded,
                since_ms: int) -> None:
    """The three sides for crm-sync after a drill: every change one note, every item
    completed, the checkpoint at the last change; and the job's row in the table."""
    stack = ctx.stack
    notes = ctx.notes(seeded)
    ledger = stack.ledger(CRM, seeded.work_ids)
    dups = sum(n - 1 for n in notes.values() if n > 1)
    missing = [w for w in seeded.work_ids if notes[w] == 0]
    result.check("destination", f"{len(seeded.work_ids)} changes -> "
                 f"{sum(notes.values())} notes, {dups} duplicates, {len(missing)} missing",
                 dups == 0 and not missing)
    states = Counter(r.state.value for r in ledger.values())
    result.check("ledger", f"every item completed ({counted(states)})",
                 len(ledger) == len(seeded.work_ids)
                 and all(r.state is ItemState.COMPLETED for r in ledger.values()))
    checkpoint = stack.checkpoint(CRM)
    result.check("ledger", f"checkpoint at the last change ({checkpoint.cursor}, "
                 f"seq {checkpoint.seq})", (checkpoint.cursor or "") >= seeded.last_seq)
    records = stack.runs(CRM, since_ms)
    result.keep_runs(records)
    result.tallies.append(tally(CRM, records, ledger.values(), duplicates=dups))


def counted(counter: Counter[Any]) -> str:
    """Counts as a person reads them (``ran 1, skipped 2``), not as a Python dict."""
    return ", ".join(f"{getattr(k, 'value', k)} {v}" for k, v in sorted(
        counter.items(), key=lambda kv: str(getattr(kv[0], "value", kv[0])))) or "none"


def decision_counts(records: list[RunRecord]) -> Counter[str]:
    return Counter(r.decision.value for r in records)



def in_period(start: datetime) -> datetime:
    """A scheduled time inside report-export's period ``start`` that no earlier drill run
    this hour used: the period's own export is made once, but each drill run's ticks are
    new triggers (a tick is job + scheduled time), so the drills can run again."""
    return start + timedelta(seconds=int(time.time()) % 3600)


def period_name(at: datetime) -> str:
    """report-export's name for the period starting at ``at`` (its work id's source)."""
    return at.strftime("%Y-%m-%dT%H:00Z")


def check_report(ctx: DrillContext, result: DrillResult, periods: list[str],
                   since_ms: int) -> None:
    exports = ctx.exports(periods)
    dups = sum(n - 1 for n in exports.values() if n > 1)
    missing = [p for p in periods if exports[p] == 0]
    result.check("destination", f"{len(periods)} periods -> {sum(exports.values())} export "
                 f"versions, {dups} duplicates, {len(missing)} missing",
                 dups == 0 and not missing)
    records = ctx.stack.runs(REPORT, since_ms)
    result.keep_runs(records)
    work_ids = [f"report@{p}:export" for p in periods]
    ledger = {k: v for k, v in ctx.stack.items.get_many(REPORT, work_ids).items()}
    if ledger:
        result.check("ledger", "every period's item completed",
                     all(r.state is ItemState.COMPLETED for r in ledger.values()))
    result.tallies.append(tally(REPORT, records, ledger.values(), duplicates=dups))

