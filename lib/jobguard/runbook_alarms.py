"""The alarms of a job, its reconciler, the recovery function and the table, each with its
runbook text (:class:`AlarmText`: what it means, what to decide), from the job's
definition alone.

The CDK constructs put these words on the alarms, ``jobguard runbook`` prints them
(:mod:`jobguard.runbook`) and a fleet's alarms reuse them (:mod:`jobguard.runbook_fleet`),
so what the pager says and what the runbook says cannot drift. This module changes when an
alarm, or what it tells the operator, does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from .config import OverlapPolicy
from .definitions import AlarmWindow, JobDefinition
from .errors import ConfigError

__all__ = ["ASYNC_RETRIES", "SWEEP_SILENCE_INTERVALS", "AlarmText", "busy_metric",
           "busy_window", "job_alarms", "queue_age_limit", "reconciler_alarms",
           "recovery_alarms", "sweep_window", "table_alarms"]

ASYNC_RETRIES = 2
"""Lambda's retries of an asynchronous invoke (a tick, a sweep) that failed; the stack
sets this many, then the event goes to the function's failed-ticks queue."""


@dataclass(frozen=True)
class AlarmText:
    """What an alarm means, and the decision it asks of the operator."""

    key: str
    title: str
    means: str
    decide: str


_BUSY = {
    OverlapPolicy.SKIP: ("TriggersSkipped", "skipped"),
    OverlapPolicy.COALESCE: ("TriggersCoalesced", "coalesced into a follow-up run"),
    OverlapPolicy.QUEUE: ("TriggersQueued", "queued behind the active run"),
}


def busy_metric(job: JobDefinition) -> tuple[str, str] | None:
    """The metric (and its verb) that counts triggers meeting an active run."""
    return _BUSY.get(job.policy)


def busy_window(job: JobDefinition) -> tuple[timedelta | None, int, str]:
    """How the repeated-busy alarm counts: (period or None for a day, periods, words)."""
    count, interval = job.skipped_alarm_count, job.interval
    if interval is not None and interval * count <= timedelta(days=1):
        return interval, count, f"for {count} intervals in a row"
    return None, 1, f"{count} times within a day"


def job_alarms(job: JobDefinition) -> dict[str, AlarmText]:
    """The alarms a job gets (they depend on its policy), with their runbook text.

    The CDK stack puts these words on the alarms and ``jobguard runbook`` prints them.
    """
    name, interval = job.name, job.interval
    pace = f"its {_human(interval)} interval" if interval else f"its {_human(job.timeout)} timeout"
    texts: list[AlarmText] = []
    share = job.overlap_share()
    if share is not None:
        texts.append(AlarmText(
            "overlap", "overlap ahead",
            f"Overlap ahead: a run of {name} took more than {share:.0%} of "
            f"{pace}; the next tick will meet a running run (policy {job.policy.value}).",
            f"shorten the batch (batch_size {job.batch_size}), lengthen the interval, or find "
            "the slow destination, before runs stop fitting."))
    window = job.no_success_window()
    if window is not None:
        texts.append(AlarmText(
            "no_success", "no successful run",
            f"No run of {name} succeeded for {_human(window.span)} ({window.periods} intervals "
            f"of {_human(window.period)}); no data counts too. The job has stopped doing its "
            "work: a disabled or deleted schedule, ticks that never arrive, a run that fails "
            "or is cut every time, or a paused job.",
            f"check the schedule is enabled, its dead-letter and failed-ticks queues, the "
            f"function's errors and throttles, and `jobguard runs {name} --last 20`. A paused "
            f"job stops succeeding too: `jobguard status {name}` says who paused it."))
    paused = job.paused_window()
    texts.append(AlarmText(
        "paused", "paused too long",
        f"Ticks of {name} found it paused (`jobguard pause`) throughout {_human(paused.span)}: "
        "it has not run since, and its unfinished work waits.",
        f"resume it (`jobguard resume {name}`) once the destination is healthy; "
        f"`jobguard status {name}` shows who paused it and why. Raise paused_alarm_after "
        "only for a pause that is meant to last."))
    busy = busy_metric(job)
    if busy is not None:
        texts.append(AlarmText(
            "busy", f"triggers {busy[1]} repeatedly",
            f"Triggers of {name} were {busy[1]} {busy_window(job)[2]}: runs no longer fit "
            "the schedule.",
            "raise max_queued only if the backlog can drain; otherwise slow the schedule."
            if job.policy is OverlapPolicy.QUEUE else
            "shorten the batch, lengthen the interval, or find the slow destination."))
    if job.policy is OverlapPolicy.QUEUE:
        texts.append(AlarmText(
            "dropped", "trigger dropped",
            f"A trigger of {name} was dropped: {job.max_queued} were already pending "
            "(max_queued). That trigger will not run.",
            "raise max_queued only if the backlog can drain; otherwise slow the schedule. "
            "Start a manual run if the dropped window matters."))
    if job.policy is not OverlapPolicy.REPLACE:  # REPLACE ends old runs this way
        texts.append(AlarmText(
            "lease_lost", "lease lost",
            f"A run of {name} lost its lease (a renewal was refused or did not land in "
            "time) and stopped; it committed nothing after that.",
            f"check DynamoDB throttling and the run's duration against the "
            f"{_human(job.lease)} lease; the next trigger resumes the work."))
    texts += [
        AlarmText(
            "uncertain", "uncertain work items",
            f"A work item of {name} has an unknown outcome (its claim expired, or a "
            "destination call failed ambiguously). It is never redone blindly: the next "
            "run or the reconciler checks the destination first.",
            "if it persists after the next reconciler sweep, check the destination, then "
            f"run recovery for the item's cursor range (`jobguard recover {name} ...`, dry "
            "run first)."),
        AlarmText(
            "records_rejected", "source records rejected",
            f"A run of {name} met source records no work id could be made for (its "
            "work_id() or payload() raised, or a source id held a lone surrogate). Nothing "
            "was done for them; the run and the checkpoint went past them.",
            f"`jobguard items {name} --status rejected` says why for each; fix the records "
            f"(or work_id()) at the source, then recover their cursor range (`jobguard "
            f"recover {name} ...`, dry run first)."),
        AlarmText(
            "incomplete", "run incomplete",
            f"A run of {name} finished with work items failed, still uncertain or "
            "rejected (the counts are on its run record, status `incomplete`). Its trigger "
            "is done; those items are not retried by the next tick unless they are retryable.",
            f"`jobguard runs {name} --status incomplete` and `jobguard items {name}` name "
            "them; once the destination is healthy, recover their cursor range with "
            "`--mode failed` or `--mode uncertain` (dry run first); for a plain @guarded "
            f"job, `jobguard resolve {name}` each uncertain item you checked."),
        AlarmText(
            "reconciled", "reconciliation findings",
            f"Reconciliation found the effect of an uncertain item of {name} already at "
            "the destination (the call landed, its response was lost) and recorded it as "
            "completed instead of redoing it.",
            "nothing if rare; if it repeats, destination calls time out after landing: "
            "raise the client timeout or look at the destination's latency."),
        AlarmText(
            "schedule_dlq", "a tick was dead-lettered",
            f"The dead-letter queue is not empty: EventBridge Scheduler could not deliver a "
            f"tick of {name} within its retries; that tick never ran.",
            "read the message's error attributes, fix the cause (throttling, a deleted "
            "function, permissions), start a manual run if the missed window matters, then "
            "purge the queue."),
    ]
    if job.policy in (OverlapPolicy.QUEUE, OverlapPolicy.COALESCE):
        texts.append(AlarmText(
            "trigger_dlq", "a queued trigger was dead-lettered",
            f"The dead-letter queue is not empty: a queued trigger or follow-up of {name} "
            "was delivered its maximum number of times without completing.",
            "find its trigger_id in the job's run records; if the work is still needed "
            "start a manual run, then purge the queue."))
    if job.policy in (OverlapPolicy.QUEUE, OverlapPolicy.COALESCE):
        texts.append(AlarmText(
            "trigger_queue_age", "a queued trigger waits too long",
            f"The oldest message on the trigger queue of {name} is older than "
            f"{_human(queue_age_limit(job))}, longer than a healthy backlog takes to drain: "
            "queued triggers or the follow-up are not being run.",
            f"check the function's errors and throttles and the event source mapping "
            f"(enabled?); `jobguard status {name}` shows the holder and what is pending."))
        texts.append(AlarmText(
            "messages_rejected", "trigger message rejected",
            f"A message on the trigger queue of {name} could never become a trigger of it "
            "(not JSON, another shape, another job's message, a field that fails "
            "validation). It was recorded `rejected` and deleted, so the triggers behind it "
            "ran; nothing of it ran. Only jobguard writes this queue: someone else did.",
            f"`jobguard runs {name} --status rejected` names each message's field, reason, "
            "sender id and an excerpt. Find the sender (another job given this queue's URL "
            "as JOBGUARD_TRIGGER_QUEUE_URL, a hand-sent test, a producer that is not "
            "jobguard) and stop it. If it was work someone meant, start a manual run."))
    texts += [
        AlarmText(
            "errors", "function errors",
            f"The function of {name} raised an error (see the function's log).",
            f"read the failed run's error in its run record; Lambda retries the tick "
            f"{ASYNC_RETRIES} times, and completed work items are skipped on retry."),
        AlarmText(
            "throttles", "function throttled",
            f"Lambda throttled invocations of the function of {name}: the account's (or the "
            "function's reserved) concurrency was used up.",
            "Lambda retries a throttled tick and SQS redelivers a queued trigger, so nothing "
            "is lost yet; if it persists, find what uses the concurrency or raise the "
            "quota. A tick delivered after stale_after is recorded stale."),
        _async_dropped(f"the function of {name}", "tick"),
        _failed_events(name, "tick", job.stale_after),
    ]
    return {t.key: t for t in texts}


def queue_age_limit(job: JobDefinition) -> timedelta:
    """How old the oldest trigger-queue message of a healthy ``job`` can be: a message
    waits for the runs ahead of it (``max_queued`` of them for ``QUEUE``, the active one
    for ``COALESCE``), each a timeout long, or a lease past it if its worker died."""
    ahead = job.max_queued if job.policy is OverlapPolicy.QUEUE else 1
    return (ahead + 1) * (job.timeout + job.lease)


def _async_dropped(function: str, event: str) -> AlarmText:
    return AlarmText(
        "async_dropped", f"{event}s dropped",
        f"Lambda gave up on an asynchronous {event} of {function} (AsyncEventsDropped): its "
        "retries failed, it grew older than the maximum event age, or it was throttled past "
        "it.",
        f"the {event} is in the failed-{event}s queue unless sending it there failed too "
        "(read the function's log): replay it as that queue's alarm says.")


def _failed_events(name: str, event: str, stale_after: timedelta | None) -> AlarmText:
    late = (f"Replay it within stale_after ({_human(stale_after)} after its scheduled_at); "
            "later, a replayed tick is recorded stale: start a manual run instead. "
            if stale_after is not None else "")
    return AlarmText(
        f"failed_{event}s", f"failed {event}s",
        f"The failed-{event}s queue of {name} is not empty: a {event} failed its first "
        f"attempt and {ASYNC_RETRIES} retries (or grew too old) and did not succeed.",
        f"each message holds the original event (requestPayload), the last error "
        "(responsePayload) and why Lambda stopped (requestContext.condition). Fix the cause, "
        "then send requestPayload to the function again (`aws lambda invoke --invocation-type "
        "Event --payload ...`); the same tick is one trigger, so a second replay is recorded "
        f"duplicate. {late}Then delete the message.")


SWEEP_SILENCE_INTERVALS = 3
"""The reconciler's dead-man alarm: no completed sweep for this many sweep intervals."""
_SWEEP_RANGE = {True: timedelta(days=1), False: timedelta(days=7)}
"""CloudWatch evaluates an alarm over at most 1 day with periods under an hour, else 7."""


def sweep_window(job: JobDefinition) -> AlarmWindow:
    """The reconciler's dead-man alarm window: one period per sweep interval, for
    :data:`SWEEP_SILENCE_INTERVALS` intervals (more where a healthy sweep, a timeout
    long, can end further apart). Refused, naming ``reconciler_schedule``, where the
    interval cannot be derived or CloudWatch cannot look back that far.

    Example:
        >>> from jobguard.definitions import JobDefinition
        >>> sweep_window(JobDefinition(name="j", handler="m.h", schedule="rate(5 minutes)",
        ...     policy=OverlapPolicy.SKIP, timeout=timedelta(minutes=4),
        ...     lease=timedelta(minutes=2), reconciler_schedule="rate(1 hour)")).span
        datetime.timedelta(seconds=10800)
    """
    from ._cron import longest_gap
    from .definitions import _RATE, _UNITS

    expression = job.reconciler_schedule or ""
    match = _RATE.fullmatch(expression)
    gap = (timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2).rstrip("s")])
           if match else longest_gap(expression))
    if gap is None:
        raise ConfigError("reconciler_schedule", f"{expression!r}: the time between two "
                          "sweeps cannot be derived from it (a day of the month, L, W, #), "
                          "and the reconciler's dead-man alarm counts sweeps per interval: "
                          "use rate() or a weekly cron()")
    healthy = (gap + job.timeout) // gap + 1
    window = AlarmWindow(gap, max(SWEEP_SILENCE_INTERVALS, healthy))
    limit = _SWEEP_RANGE[gap < timedelta(hours=1)]
    if window.span > limit:
        raise ConfigError("reconciler_schedule", f"{expression!r}: the reconciler's dead-man "
                          f"alarm would watch {window.periods} sweeps ({_human(window.span)}), "
                          f"but CloudWatch looks back at most {_human(limit)}: sweep more "
                          "often")
    return window


def reconciler_alarms(job: JobDefinition, *, own_dead_letter_queue: bool,
                      watched: bool = True) -> dict[str, AlarmText]:
    """The alarms of the job's reconciler function and its sweep schedule; ``watched``
    False: no dead-man alarm (a schedule created disabled, where silence is normal)."""
    name = job.name
    texts = []
    if watched:
        window = sweep_window(job)
        texts.append(AlarmText(
            "no_sweep", "no sweep completed",
            f"No reconciler sweep of {name} completed for {_human(window.span)} "
            f"({window.periods} sweeps of {_human(window.period)}; no data counts): its "
            "uncertain and failed items are not checked against the destination. A "
            "disabled schedule, sweeps that never arrive or always fail, or a job that "
            "holds its lease at every sweep (a sweep skips while the job runs).",
            "check the sweep's schedule, the reconciler's dead-letter and failed-sweeps "
            f"queues, its errors, and skipped sweeps in `jobguard runs {name} --last 20`; "
            "if the job runs back to back, schedule the sweep between its runs. Nothing is "
            f"redone meanwhile (`jobguard recover {name} ... --mode uncertain` checks "
            "them now)."))
    if own_dead_letter_queue:
        texts.append(AlarmText(
            "schedule_dlq", "a sweep was dead-lettered",
            f"The dead-letter queue is not empty: a reconciler sweep of {name} was not "
            "delivered.",
            "read the message's error attributes and fix the cause; the next sweep covers "
            "what this one missed. Then purge the queue."))
    texts += [
        AlarmText(
            "errors", "reconciler errors",
            f"The reconciler of {name} raised an error (see its log).",
            "read its log; items it could not resolve stay uncertain and are swept again at "
            "the next run of the reconciler."),
        AlarmText(
            "throttles", "reconciler throttled",
            f"Lambda throttled the reconciler of {name}: the concurrency was used up.",
            "the next sweep covers what this one missed; if it persists, find what uses the "
            "concurrency or raise the quota."),
        AlarmText(
            "async_dropped", "sweeps dropped",
            f"Lambda gave up on an asynchronous sweep of the reconciler of {name} "
            "(AsyncEventsDropped): its retries failed, it grew older than the maximum event "
            "age, or it was throttled past it.",
            "read the reconciler's log and fix the cause; nothing needs replaying: the next "
            "sweep covers what this one missed."),
        AlarmText(
            "failed_sweeps", "failed sweeps",
            f"The failed-sweeps queue of the reconciler of {name} is not empty: a sweep "
            f"failed its first attempt and {ASYNC_RETRIES} retries (or grew too old).",
            "the message holds the last error (responsePayload) and why Lambda stopped "
            "(requestContext.condition). Fix the cause; nothing needs replaying: the next "
            "sweep covers what this one missed. Then delete the message."),
    ]
    return {t.key: t for t in texts}


def recovery_alarms() -> dict[str, AlarmText]:
    """The recovery function's alarms."""
    return {t.key: t for t in (
        AlarmText(
            "errors", "recovery errors",
            "The recovery function raised an error (see its log).",
            "read the returned summary and the log; a recovery that failed midway holds "
            "nothing (its lease expires) and can be planned again."),
        AlarmText(
            "throttles", "recovery throttled",
            "Lambda throttled an invocation of the recovery function.",
            "invoke it again; if it persists, find what uses the concurrency."),
    )}


def table_alarms() -> dict[str, AlarmText]:
    """The jobguard table's alarms (one table for every job of a stack)."""
    decide = ("a throttled renewal ends a run safely (lease_lost) and the next trigger "
              "resumes; an on-demand table throttles above twice its previous peak or on a "
              "hot key: look at the table's metrics by operation and the jobs' batch sizes, "
              "or warm the table for the load.")
    return {t.key: t for t in (
        AlarmText("read_throttles", "table reads throttled",
                  "DynamoDB throttled reads of the jobguard table (ReadThrottleEvents).",
                  decide),
        AlarmText("write_throttles", "table writes throttled",
                  "DynamoDB throttled writes to the jobguard table (WriteThrottleEvents): "
                  "lease renewals, decisions and item outcomes retried or failed.",
                  decide),
    )}


def _human(delta: timedelta) -> str:
    from ._durations import human

    return human(delta)
