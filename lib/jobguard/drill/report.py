"""What a drill saw: the checks it made on each side, and one row per job it touched."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records import Decision, RunRecord, RunStatus
from ..workitems import ItemRecord, ItemState

__all__ = ["COLUMNS", "Check", "DrillResult", "JobTally", "render_table", "tally"]


@dataclass
class Check:
    side: str
    """``runs`` (run records, lease row), ``ledger`` (work items, checkpoint) or
    ``destination``."""
    what: str
    ok: bool


@dataclass
class JobTally:
    job: str
    triggers: int = 0
    runs: int = 0
    skipped: int = 0
    queued: int = 0
    coalesced: int = 0
    duplicate: int = 0
    takeovers: int = 0
    completed: int = 0
    failed: int = 0
    uncertain: int = 0
    reconciled: int = 0
    duplicates_at_destination: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


COLUMNS = (("triggers", "trig"), ("runs", "runs"), ("skipped", "skip"),
           ("queued", "queue"), ("coalesced", "coal"), ("duplicate", "dup"),
           ("takeovers", "takeover"), ("completed", "done"), ("failed", "fail"),
           ("uncertain", "uncert"), ("reconciled", "recon"),
           ("duplicates_at_destination", "dest_dup"))
"""(count, header): headers short enough for 100 columns; the README explains each."""


@dataclass
class DrillResult:
    name: str
    title: str
    injected: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    tallies: list[JobTally] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    runs: list[dict[str, Any]] = field(default_factory=list)
    """The run records the drill read back (one line each), for ``--json`` readers."""
    started_at_ms: int = 0
    ended_at_ms: int = 0
    """When the drill ran (wall clock): the range of its timeline."""

    def check(self, side: str, what: str, ok: bool) -> bool:
        self.checks.append(Check(side, what, bool(ok)))
        return bool(ok)

    @property
    def held(self) -> bool:
        return (self.error is None and bool(self.checks) and all(c.ok for c in self.checks)
                and all(t.duplicates_at_destination == 0 for t in self.tallies))

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "title": self.title, "verdict": "held" if self.held else "FAILED",
            "seconds": round(self.seconds, 1), "injected": self.injected,
            "checks": [c.__dict__ for c in self.checks], "error": self.error,
            "jobs": [t.as_dict() for t in self.tallies], "runs": self.runs,
        }

    def keep_runs(self, records: Iterable[RunRecord]) -> None:
        keys = ("job", "run_id", "trigger_kind", "decision", "status", "fence", "selected",
                "completed", "failed", "uncertain", "reconciled", "already_done", "detail")
        for record in records:
            data = record.as_dict()
            self.runs.append({k: data[k] for k in keys if k in data})


def tally(job: str, records: Iterable[RunRecord], ledger: Iterable[ItemRecord],
          *, duplicates: int = 0) -> JobTally:
    """Count one job's run records (one per trigger decision) and final item states."""
    records = list(records)
    by_run: dict[str, RunRecord] = {}
    for record in records:
        by_run[record.run_id] = record  # a displaced run's own record wins if it wrote one
    decisions = Counter(r.decision for r in by_run.values())
    row = JobTally(job=job, triggers=len(by_run), runs=decisions[Decision.RAN],
                   skipped=decisions[Decision.SKIPPED], queued=decisions[Decision.QUEUED],
                   coalesced=decisions[Decision.COALESCED],
                   duplicate=decisions[Decision.DUPLICATE],
                   duplicates_at_destination=duplicates)
    row.takeovers = len({r.run_id for r in records if r.status in (RunStatus.ABANDONED,
                                                                   RunStatus.LEASE_LOST)})
    states = Counter(i.state for i in ledger)
    row.completed = states[ItemState.COMPLETED]
    row.failed = states[ItemState.FAILED]
    row.uncertain = states[ItemState.UNCERTAIN] + states[ItemState.CLAIMED]
    row.reconciled = sum(
        int(r.extra.get("reconciled", 0) or 0) for r in by_run.values())
    return row


def render_table(results: Sequence[DrillResult]) -> str:
    """The drills as a table a person reads in 100 columns: a line per drill (its name
    and verdict), then a line per job it touched with its counts."""
    widths = [len(short) + 2 for _, short in COLUMNS]
    job_w = max([15] + [len(t.job) + 3 for r in results for t in r.tallies])
    header = (f"{'drill / job':<{job_w}}"
              + "".join(f"{short:>{w}}" for (_, short), w in zip(COLUMNS, widths, strict=True)))
    lines = [header, "-" * len(header)]
    for result in results:
        verdict = "held" if result.held else "FAILED"
        lines.append(f"{result.name}  {verdict}" + (f"  ({result.error})" if result.error
                                                     else ""))
        for row in result.tallies or [JobTally(job="-")]:
            values = row.as_dict()
            cells = "".join(f"{values[key]:>{w}}"
                            for (key, _), w in zip(COLUMNS, widths, strict=True))
            lines.append(f"  {row.job:<{job_w - 2}}{cells}")
    return "\n".join(lines)
