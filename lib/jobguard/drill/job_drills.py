"""Drills for any deployed guarded job (``jobguard drill --job NAME``), whatever its code:
a trigger while a run is paused (what its policy does), one tick delivered three times,
a frozen run's lease expiring and taken over. They check the run log and the lease and
count the items its runs left in the ledger; what lands at the destination is the job's
own to check. Changes when what a drill of any job checks does.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from ..records import Decision, RunRecord, RunStatus
from .context import SKEW_MS, Drill, DrillContext, counted, decision_counts, now_ms
from .report import DrillResult, JobTally, tally
from .stack import DeployedStack

__all__ = ["job_drills"]

_OVERLAP_EXPECT: dict[str, tuple[str, Callable[[Counter[str], list[RunRecord]], bool]]] = {
    "SKIP": ("both `skipped`, one run", lambda d, rs: d["skipped"] == 2 and d["ran"] == 1),
    "QUEUE": ("both `queued`, then run once each",
              lambda d, rs: d["queued"] == 2 and d["ran"] == 3),
    "COALESCE": ("both `coalesced` into one follow-up run",
                 lambda d, rs: d["coalesced"] == 2 and d["ran"] == 2),
    "REPLACE": ("the paused run replaced (`lease_lost`), the newest run succeeded",
                lambda d, rs: any(r.status is RunStatus.LEASE_LOST for r in rs)
                and rs[-1].status is RunStatus.SUCCEEDED),
}


def _job_tally(stack: DeployedStack, job: str, records: list[RunRecord]) -> JobTally:
    """A job's row, its done/fail/uncert counted on the ledger: the items its drill's
    runs last wrote (whatever work ids the job's code gives them)."""
    return tally(job, records, stack.items_of_runs(job, [r.run_id for r in records]))


def job_drills(job: str) -> tuple[Drill, ...]:
    """Drills for any deployed guarded job (the library installs its switches): they
    check the run log and the lease, and count the items its runs left in the ledger
    (what lands at the destination is the job's own to check)."""

    def overlap(ctx: DrillContext, result: DrillResult) -> None:
        stack, since = ctx.stack, now_ms()
        policy = stack.jobs[job].policy
        ctx.arm(job, "overlap", point="after_acquire", action="pause")
        stack.tick(job, ctx.tick_time(job))
        held = ctx.held(job, "overlap")
        stack.tick(job, ctx.tick_time(job))
        stack.tick(job, ctx.tick_time(job))
        result.injected.append(f"{job}'s run paused after acquiring the lease; 2 more ticks")
        if policy != "REPLACE":
            stack.wait("2 decisions behind the paused run", lambda: len(
                [r for r in stack.runs(job, since) if r.decision is not Decision.RAN]) >= 2)
            lease = stack.lease(job)
            result.check("lease", f"the paused run still holds the lease (fence {lease.fence})",
                         lease.run_id == held["held_by"])
        ctx.release(job, "overlap")
        stack.wait_settled(job, since)
        records = stack.runs(job, since)
        what, holds = _OVERLAP_EXPECT[policy]
        decisions = decision_counts(records)
        result.check("runs", f"{policy}: {counted(decisions)}: {what}", holds(decisions, records))
        result.keep_runs(records)
        result.tallies.append(_job_tally(stack, job, records))

    def duplicates(ctx: DrillContext, result: DrillResult) -> None:
        stack, since = ctx.stack, now_ms()
        at = ctx.tick_time(job)
        threads = [threading.Thread(target=stack.tick, args=(job, at)) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        result.injected.append(f"{job}'s tick delivered 3 times at once")
        stack.wait("3 decisions", lambda: len(stack.runs(job, since)) >= 3)
        stack.wait_settled(job, since)
        records = stack.runs(job, since)
        decisions = decision_counts(records)
        result.check("runs", f"{counted(decisions)}: one run, two duplicates",
                     decisions["ran"] == 1 and decisions["duplicate"] == 2)
        result.keep_runs(records)
        result.tallies.append(_job_tally(stack, job, records))

    def expiry(ctx: DrillContext, result: DrillResult) -> None:
        stack, since = ctx.stack, now_ms()
        ctx.arm(job, "frozen", point="after_acquire", action="pause", freeze=True,
                hold_s=300)
        stack.tick(job, ctx.tick_time(job))
        held = ctx.held(job, "frozen")
        result.injected.append(f"{job}'s run frozen after acquiring (no heartbeat) until "
                               "its lease expired; then a tick; then it wakes")
        expired = stack.wait_lease_free(job, SKEW_MS)
        stack.tick(job, ctx.tick_time(job))
        taker = stack.wait_run(job, since, lambda r: r.decision is Decision.RAN
                               and r.run_id != held["held_by"], "the taking-over run",
                               timeout_s=300)
        ctx.release(job, "frozen")
        first = stack.wait_run(job, since, lambda r: r.run_id == held["held_by"]
                               and r.status is RunStatus.LEASE_LOST, "the frozen run's end",
                               timeout_s=300)
        stack.wait_settled(job, since)
        result.check("runs", f"taken over with fence {taker.fence} > {expired.fence}; the "
                     f"frozen run ended {first.status.value}",
                     (taker.fence or 0) > expired.fence)
        records = stack.runs(job, since)
        result.keep_runs(records)
        result.tallies.append(_job_tally(stack, job, records))

    return (
        Drill(f"{job}:overlap", "a trigger while a run is paused: the job's policy", overlap),
        Drill(f"{job}:duplicate-deliveries", "one tick delivered three times", duplicates),
        Drill(f"{job}:lease-expiry", "a frozen run's lease expires and is taken over",
              expiry),
    )
