"""The seed's failure cases, each a named drill against a deployed stack.

Every drill injects its fault with a switch (:mod:`jobguard.drill.switches`) or by
delivering triggers the way AWS may (twice, late, concurrently), waits on what the stack
records (never on a fixed sleep), then checks all three sides: the run records and the
lease row, the item ledger and the checkpoint, and the destination
(:mod:`.context`). The drills of any deployed job are :mod:`.job_drills`, re-exported
here with the context's names the runner imports.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

from ..records import Decision, RunStatus
from ..recovery import EXECUTE_ALIAS
from ..workitems import ItemState
from .context import (
    CRM,
    REPORT,
    SKEW_MS,
    Drill,
    DrillContext,
    Seeded,
    check_crm,
    check_report,
    counted,
    decision_counts,
    in_period,
    now_ms,
    period_name,
)
from .job_drills import job_drills
from .report import DrillResult
from .stack import now_utc

__all__ = ["CRM", "DRILLS", "REPORT", "Drill", "DrillContext", "job_drills"]


def second_worker(ctx: DrillContext, result: DrillResult) -> None:
    """A second worker while the first processes the same batch."""
    stack, since = ctx.stack, now_ms()
    seeded = ctx.seed("second-worker", 12)
    ctx.arm(CRM, "second-worker", point="after_claim", action="pause")
    result.injected.append("crm-sync run 1 paused right after claiming its page (12 items)")
    stack.tick(CRM, ctx.tick_time(CRM))
    held = ctx.held(CRM, "second-worker")
    late = ctx.seed("second-worker-late", 3)
    stack.tick(CRM, ctx.tick_time(CRM))
    result.injected.append("second tick delivered while run 1 holds the batch; 3 more "
                           "changes arrive meanwhile")
    record = stack.wait_run(CRM, since, lambda r: r.decision is not Decision.RAN,
                            "the second tick's decision")
    ledger = stack.ledger(CRM, seeded.work_ids)
    result.check("runs", f"second tick: {record.decision.value} behind run "
                 f"{record.holder_run_id} (not a second worker)",
                 record.decision is Decision.COALESCED
                 and record.holder_run_id == held["held_by"])
    result.check("ledger", "while paused, the batch is claimed by run 1 alone",
                 all(r.run_id == held["held_by"] and r.state is ItemState.CLAIMED
                     for r in ledger.values()) and len(ledger) == 12)
    ctx.release(CRM, "second-worker")
    stack.wait_settled(CRM, since)
    ctx.disarm(CRM, "second-worker")
    records = stack.runs(CRM, since)
    follow_ups = [r for r in records if r.trigger_kind == "follow_up"
                  and r.decision is Decision.RAN]
    result.check("runs", f"the coalesced tick became one follow-up run "
                 f"({len(follow_ups)} follow-up)", len(follow_ups) == 1)
    check_crm(ctx, result, Seeded(seeded.changes + late.changes), since)


def paused_after_lock(ctx: DrillContext, result: DrillResult) -> None:
    """The first worker paused after acquiring the lock, before writing a result."""
    stack, since = ctx.stack, now_ms()
    seeded = ctx.seed("paused-after-lock", 6)
    ctx.arm(CRM, "paused-crm", point="after_acquire", action="pause")
    ctx.arm(REPORT, "paused-report", point="after_acquire", action="pause")
    result.injected.append("crm-sync and report-export runs paused right after acquiring "
                           "the lease, heartbeat alive")
    stack.tick(CRM, ctx.tick_time(CRM))
    periods = [now_utc().replace(minute=0, second=0, microsecond=0) - timedelta(hours=h)
               for h in (3, 2, 1)]
    stack.tick(REPORT, in_period(periods[0]))
    crm_held = ctx.held(CRM, "paused-crm")
    report_held = ctx.held(REPORT, "paused-report")
    before = stack.lease(CRM).expires_at_ms or 0
    stack.tick(CRM, ctx.tick_time(CRM))
    stack.tick(CRM, ctx.tick_time(CRM))
    for period in periods[1:]:
        stack.tick(REPORT, in_period(period))
    result.injected.append("2 crm-sync ticks and 2 report-export ticks (the next periods) "
                           "during the pause")
    stack.wait("4 decisions behind the paused runs", lambda: (
        len([r for r in stack.runs(CRM, since) if r.decision is not Decision.RAN]) >= 2
        and len([r for r in stack.runs(REPORT, since)
                 if r.decision is not Decision.RAN]) >= 2))
    stack.wait("a heartbeat during the pause",
               lambda: (stack.lease(CRM).expires_at_ms or 0) > before, timeout_s=30)
    lease = stack.lease(CRM)
    result.check("runs", "the paused run kept its lease by heartbeat "
                 f"(holder {lease.run_id}, fence {lease.fence})",
                 lease.run_id == crm_held["held_by"])
    ledger = stack.ledger(CRM, seeded.work_ids)
    result.check("ledger", "nothing claimed or written while paused before the batch",
                 not ledger)
    ctx.release(CRM, "paused-crm")
    ctx.release(REPORT, "paused-report")
    stack.wait_settled(CRM, since)
    stack.wait_settled(REPORT, since)
    ctx.disarm(CRM, "paused-crm")
    ctx.disarm(REPORT, "paused-report")
    crm_runs = stack.runs(CRM, since)
    result.check("runs", f"crm-sync: {counted(decision_counts(crm_runs))}: the two ticks coalesced "
                 "into one follow-up", decision_counts(crm_runs)["coalesced"] == 2
                 and sum(1 for r in crm_runs if r.trigger_kind == "follow_up") == 1)
    report_runs = stack.runs(REPORT, since)
    ran = [r for r in report_runs if r.decision is Decision.RAN
           and r.status is RunStatus.SUCCEEDED]
    result.check("runs", f"report-export: {counted(decision_counts(report_runs))}: every period "
                 "queued and then run once", len(ran) == 3
                 and decision_counts(report_runs)["queued"] == 2
                 and any(r.run_id == report_held["held_by"] for r in ran))
    check_crm(ctx, result, seeded, since)
    check_report(ctx, result, [period_name(p) for p in periods], since)



def lease_expiry(ctx: DrillContext, result: DrillResult) -> None:
    """Lease expiry and recovery without duplicates."""
    stack, since = ctx.stack, now_ms()
    seeded = ctx.seed("lease-expiry", 10)
    ctx.arm(CRM, "frozen", point="after_claim", action="pause", freeze=True, hold_s=90)
    result.injected.append("crm-sync run 1 frozen after claiming its page: no heartbeat, "
                           "no progress (a stopped process)")
    stack.tick(CRM, ctx.tick_time(CRM))
    held = ctx.held(CRM, "frozen")
    expired = stack.wait_lease_free(CRM, SKEW_MS)
    result.check("runs", f"run 1's lease expired unrenewed (fence {expired.fence})",
                 expired.run_id == held["held_by"])
    stack.tick(CRM, ctx.tick_time(CRM))
    result.injected.append("next tick after the lease expired")
    taker = stack.wait_run(CRM, since, lambda r: r.decision is Decision.RAN
                           and r.run_id != held["held_by"] and r.status is not
                           RunStatus.RUNNING, "the taking-over run")
    result.check("runs", f"run 2 took over with fence {taker.fence} > {expired.fence} "
                 f"and ended {taker.status.value}",
                 (taker.fence or 0) > expired.fence and taker.status is RunStatus.SUCCEEDED)
    ctx.release(CRM, "frozen")
    result.injected.append("run 1 thawed after run 2 finished")
    first = stack.wait_run(CRM, since, lambda r: r.run_id == held["held_by"]
                           and r.status is RunStatus.LEASE_LOST,
                           "run 1 to record that it lost its lease")
    result.check("runs", f"run 1 ended {first.status.value}: it wrote nothing after "
                 "waking (its fence is stale)", first.status is RunStatus.LEASE_LOST)
    stack.wait_settled(CRM, since)
    ctx.disarm(CRM, "frozen")
    ledger = stack.ledger(CRM, seeded.work_ids)
    result.check("ledger", "every item completed by run 2 (FENCE: run 1's claims were "
                 "superseded)", all(r.run_id == taker.run_id for r in ledger.values()))
    check_crm(ctx, result, seeded, since)


def restart_mid_call(ctx: DrillContext, result: DrillResult) -> None:
    """A restart during a destination call, then reconciliation."""
    stack, since = ctx.stack, now_ms()
    seeded = ctx.seed("restart-mid-call", 8)
    ctx.arm(CRM, "crash", point="after_process", action="crash", skip=3)
    result.injected.append("crm-sync's process exits right after the destination accepted "
                           "the 4th note, before the outcome is recorded")
    stack.tick(CRM, ctx.tick_time(CRM))
    held = ctx.held(CRM, "crash")
    notes = ctx.notes(seeded)
    result.check("destination", f"at the crash: {sum(notes.values())} notes written, "
                 "0 recorded in the ledger", sum(notes.values()) == 4 and not any(
                     r.state is ItemState.COMPLETED
                     for r in stack.ledger(CRM, seeded.work_ids).values()))
    stack.wait_lease_free(CRM, SKEW_MS)
    result.injected.append("Lambda retried the crashed invoke (same trigger); next tick "
                           "after the lease expired")
    stack.tick(CRM, ctx.tick_time(CRM))
    taker = stack.wait_run(CRM, since, lambda r: r.decision is Decision.RAN
                           and r.run_id != held["held_by"], "the run after the restart")
    stack.wait_settled(CRM, since)
    ctx.disarm(CRM, "crash")
    reconciled = int(taker.extra.get("reconciled", 0) or 0)
    result.check("ledger", f"run 2 reconciled {reconciled} notes found at the destination "
                 "instead of writing them again", reconciled == 4)
    records = stack.runs(CRM, since)
    abandoned = [r for r in records if r.status is RunStatus.ABANDONED]
    result.check("runs", "the crashed run is recorded abandoned, taken over once",
                 [r.run_id for r in abandoned] == [held["held_by"]])
    sweep = stack.invoke(stack.reconciler(CRM), {})
    result.check("ledger", f"the reconciler's sweep finds nothing left unresolved ({sweep})",
                 not sweep.get("function_error"))
    check_crm(ctx, result, seeded, since)


def duplicate_deliveries(ctx: DrillContext, result: DrillResult) -> None:
    """Two scheduler registrations for one tick, and one tick delivered three times."""
    stack, since = ctx.stack, now_ms()
    period = now_utc().replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
    at = in_period(period)
    execution = str(uuid.uuid4())
    threads = [threading.Thread(target=stack.tick, args=(REPORT, at),
                                kwargs={"execution_id": e})
               for e in (execution, execution, execution, str(uuid.uuid4()),
                         str(uuid.uuid4()))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.injected.append("report-export's tick for one period: delivered 3 times, plus "
                           "2 more registrations of the same schedule, all at once")
    crm_at = ctx.tick_time(CRM)
    seeded = ctx.seed("duplicate-deliveries", 4)
    for _ in range(3):
        stack.tick(CRM, crm_at)
    result.injected.append("crm-sync's tick delivered 3 times")
    stack.wait("5 report-export decisions", lambda: len(stack.runs(REPORT, since)) >= 5)
    stack.wait("3 crm-sync decisions", lambda: len(stack.runs(CRM, since)) >= 3)
    stack.wait_settled(REPORT, since)
    stack.wait_settled(CRM, since)
    report = decision_counts(stack.runs(REPORT, since))
    result.check("runs", f"report-export: {counted(report)}: one run, four duplicates",
                 report["ran"] == 1 and report["duplicate"] == 4)
    crm = decision_counts(stack.runs(CRM, since))
    result.check("runs", f"crm-sync: {counted(crm)}: one run, two duplicates",
                 crm["ran"] == 1 and crm["duplicate"] == 2)
    check_report(ctx, result, [period_name(period)], since)
    check_crm(ctx, result, seeded, since)


def recovery_during_schedule(ctx: DrillContext, result: DrillResult) -> None:
    """A manual recovery while the normal schedule is active."""
    stack, since = ctx.stack, now_ms()
    before = stack.checkpoint(CRM).cursor
    seeded = ctx.seed("recovery", 6)
    ctx.arm(CRM, "crash-before-recovery", point="after_process", action="crash", skip=2)
    stack.tick(CRM, ctx.tick_time(CRM))
    ctx.held(CRM, "crash-before-recovery")
    result.injected.append("crm-sync run 1 died after the destination accepted 3 of 6 "
                           "notes (its lease still runs)")
    request = {"job": CRM, "cursor_from": before or "0", "cursor_to": seeded.last_seq,
               "requested_by": "jobguard-drill", "wait_seconds": 45}
    recovery_fn = stack.recovery_function
    plan = stack.invoke(recovery_fn, request)
    counts = plan.get("plan", {})
    result.check("ledger", f"dry run planned {counts.get('to_replay')} to replay of "
                 f"{counts.get('selected')} selected (wrote nothing)",
                 plan.get("result") == "planned" and counts.get("selected") == 6)
    answer: dict[str, Any] = {}

    def execute() -> None:
        answer.update(stack.invoke(recovery_fn, {**request, "dry_run": False,
                                                 "confirm": counts.get("token")},
                                   qualifier=EXECUTE_ALIAS))

    worker = threading.Thread(target=execute)
    worker.start()
    result.injected.append("recovery executed with the plan's token while the dead run's "
                           "lease was still held; a scheduled tick arrives meanwhile")
    stack.tick(CRM, ctx.tick_time(CRM))
    worker.join(120)
    stack.wait_settled(CRM, since)
    ctx.disarm(CRM, "crash-before-recovery")
    # the token is no permission: sent to the function itself (what a planner may
    # invoke), the same execution is refused; only the execute alias executes
    planner = stack.invoke(recovery_fn, {**request, "dry_run": False,
                                         "confirm": counts.get("token")})
    result.check("runs", f"the execution with the plan's token, invoked as the function "
                 f"itself: {planner.get('result')} ({planner.get('field')}); only the "
                 f"{EXECUTE_ALIAS!r} alias executes",
                 planner.get("result") == "refused" and planner.get("field") == "dry_run")
    summary = answer.get("summary", {})
    refusal = f" ({answer.get('field')}: {answer.get('error')})" if answer.get("error") else ""
    result.check("runs", f"recovery {answer.get('result')}{refusal}: reconciled "
                 f"{summary.get('reconciled')}, replayed {summary.get('replayed')} "
                 "(only the safe remainder)",
                 answer.get("result") == "executed"
                 and summary.get("reconciled", 0) + summary.get("replayed", 0)
                 + summary.get("already_completed", 0) == 6)
    records = stack.runs(CRM, since)
    recovery_runs = [r for r in records if r.trigger_kind == "recovery"]
    fences = sorted(r.fence or 0 for r in records if r.decision is Decision.RAN)
    result.check("runs", f"recovery ran under the job's lease, never beside a run "
                 f"(fences {fences})", len(recovery_runs) == 1 and len(set(fences)) ==
                 len(fences))
    # the recovery's run record counts what it reconciled, as every run's does
    check_crm(ctx, result, seeded, since)


def partial_failure(ctx: DrillContext, result: DrillResult) -> None:
    """A partial batch failure resumed from a clear checkpoint."""
    stack, since = ctx.stack, now_ms()
    before = stack.checkpoint(CRM)
    seeded = ctx.seed("partial-failure", 10)
    failing = seeded.work_ids[3]
    ctx.arm(CRM, "refuse", point="before_destination", action="fail", match=failing)
    result.injected.append(f"the destination refuses change 4 of 10 ({failing}) once")
    stack.tick(CRM, ctx.tick_time(CRM))
    first = stack.wait_run(CRM, since, lambda r: r.decision is Decision.RAN, "run 1")
    stack.wait_settled(CRM, since)
    item = stack.items.get(CRM, failing)
    result.check("ledger", f"run 1: {first.extra.get('completed')} completed, change 4 "
                 f"{item.state.value if item else 'missing'} (retryable "
                 f"{item.retryable if item else '?'}: {item.last_error if item else ''})",
                 item is not None and item.state is ItemState.FAILED and item.retryable
                 and int(first.extra.get("completed", 0)) == 9
                 and int(first.extra.get("failed", 0)) == 1)
    checkpoint = stack.checkpoint(CRM)
    result.check("ledger", f"the checkpoint is clear: seq {before.seq} -> {checkpoint.seq}, "
                 "at the batch's end; the failure stays in the ledger, not behind the "
                 "checkpoint", checkpoint.seq == before.seq + 1
                 and checkpoint.cursor == seeded.last_seq)
    late = ctx.seed("partial-failure-next", 3)
    since_next = now_ms()
    stack.tick(CRM, ctx.tick_time(CRM))
    result.injected.append("3 new changes, then the next tick")
    second = stack.wait_run(CRM, since_next, lambda r: r.decision is Decision.RAN, "run 2")
    stack.wait_settled(CRM, since)
    result.check("runs", f"run 2 resumed from the checkpoint: selected "
                 f"{second.extra.get('selected')} (only the new changes), redid none",
                 int(second.extra.get("selected", 0)) == 3)
    request = {"job": CRM, "cursor_from": before.cursor or "0", "cursor_to": seeded.last_seq,
               "mode": "failed", "requested_by": "jobguard-drill"}
    recovery_fn = stack.recovery_function
    plan = stack.invoke(recovery_fn, request).get("plan", {})
    done = stack.invoke(recovery_fn, {**request, "dry_run": False,
                                      "confirm": plan.get("token")}, qualifier=EXECUTE_ALIAS)
    again = stack.invoke(recovery_fn, request).get("plan", {})
    summary = done.get("summary", {})
    result.injected.append("recovery of the batch's range, mode failed")
    result.check("runs", f"recovery replayed {summary.get('replayed')} (the failed change "
                 f"only; plan said {plan.get('to_replay')}), a second plan finds "
                 f"{again.get('to_replay')}", plan.get("to_replay") == 1
                 and summary.get("replayed") == 1 and again.get("to_replay") == 0)
    ctx.disarm(CRM, "refuse")
    check_crm(ctx, result, Seeded(seeded.changes + late.changes), since)


def backlog_chain(ctx: DrillContext, result: DrillResult) -> None:
    """A backlog longer than one run, drained by a chain while a second tick arrives."""
    from ..definitions import DRILL_TIMEOUT

    stack, since = ctx.stack, now_ms()
    seeded = ctx.seed("backlog-chain", 60)
    ctx.arm(CRM, "backlog-first", point="after_claim", action="pause",
            hold_s=int(DRILL_TIMEOUT.total_seconds()))
    ctx.arm(CRM, "backlog-link", point="after_acquire", action="pause", skip=1)
    result.injected.append("60 changes on the feed; run 1 held after claiming its first "
                           "page until its invocation has less than its time margin left")
    stack.tick(CRM, ctx.tick_time(CRM))
    first = ctx.held(CRM, "backlog-first")
    held_at = now_ms()
    stack.wait("run 1 out of time (less than its 10 s margin of the drill timeout)",
               lambda: now_ms() - held_at > (DRILL_TIMEOUT - timedelta(seconds=8)
                                          ).total_seconds() * 1000,
               timeout_s=DRILL_TIMEOUT.total_seconds())
    ctx.release(CRM, "backlog-first")
    link = ctx.held(CRM, "backlog-link")
    result.injected.append("the chain's second link held after taking the lease from the "
                           "hand-off; a second tick delivered meanwhile")
    stack.tick(CRM, ctx.tick_time(CRM))
    second = stack.wait_run(CRM, since, lambda r: r.decision is not Decision.RAN,
                            "the second tick's decision")
    ctx.release(CRM, "backlog-link")
    stack.wait_settled(CRM, since)
    ctx.disarm(CRM, "backlog-first")
    ctx.disarm(CRM, "backlog-link")
    records = stack.runs(CRM, since)
    by_id = {r.run_id: r for r in records}
    one, two = by_id.get(first["held_by"]), by_id.get(link["held_by"])
    result.check("runs", f"run 1 stopped for time and handed the job to {link['held_by']}",
                 one is not None and one.extra.get("stopped") == "time"
                 and one.extra.get("continued_by") == link["held_by"])
    result.check("runs", "the next link is a continuation naming run 1, fence + 1",
                 two is not None and two.trigger_kind == "continuation"
                 and two.extra.get("continues") == first["held_by"]
                 and one is not None and two.fence == (one.fence or 0) + 1)
    result.check("runs", f"second tick: {second.decision.value} behind the chain's link "
                 f"{second.holder_run_id}", second.decision is Decision.COALESCED
                 and second.holder_run_id == link["held_by"])
    ran = sorted((r for r in records if r.decision is Decision.RAN),
                 key=lambda r: r.started_at_ms)
    inside = [r for r in ran if one is not None and two is not None
              and r.run_id not in (one.run_id, two.run_id)
              and r.started_at_ms < (two.ended_at_ms or 0)]
    follow_ups = [r for r in ran if r.trigger_kind == "follow_up"]
    result.check("runs", f"no run inside the chain ({len(inside)}); one follow-up after it "
                 f"({len(follow_ups)})", not inside and len(follow_ups) == 1
                 and two is not None
                 and follow_ups[0].started_at_ms >= (two.ended_at_ms or 0))
    check_crm(ctx, result, seeded, since)


DRILLS = (
    Drill("second-worker", "a second worker while the first processes the same batch",
          second_worker),
    Drill("paused-after-lock", "the first worker paused after acquiring the lock",
          paused_after_lock),
    Drill("lease-expiry", "lease expiry and recovery without duplicates", lease_expiry),
    Drill("restart-mid-call", "a restart during a destination call, then reconciliation",
          restart_mid_call),
    Drill("duplicate-deliveries",
          "two scheduler registrations for one tick; one tick delivered three times",
          duplicate_deliveries),
    Drill("recovery-during-schedule", "a manual recovery while the schedule is active",
          recovery_during_schedule),
    Drill("partial-failure", "a partial batch failure resumed from a clear checkpoint",
          partial_failure),
    Drill("backlog-chain", "a backlog longer than one run drained by a chain while a "
          "second tick arrives", backlog_chain),
)

