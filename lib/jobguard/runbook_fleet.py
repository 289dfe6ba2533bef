"""The alarms of a fleet of jobs (:class:`jobguard.cdk.JobFleet`), with their runbook text.

A job alone gets 11-18 alarms (:func:`jobguard.runbook_alarms.job_alarms`), each watching one of
its own metrics: $1.10-$1.80 a month at list price, plus a custom metric per name per job.
A fleet keeps each failure mode detectable for a fraction of that:

- one alarm per job, the dead-man (``liveness``): the job's function was not invoked
  for its window (``AWS/Lambda Invocations``, free; no data breaches). A QUEUE or
  COALESCE job also keeps its trigger queue's age alarm (``AWS/SQS``, free);
- one alarm per failure mode for the whole fleet, on a metric the whole fleet shares: the
  jobs' EMF metrics carry ``fleet`` instead of ``job`` (:mod:`jobguard.observability`);
  the fleet's dead-letter queues (undelivered ticks, failed ticks, dead-lettered
  triggers) are one queue each; Lambda's account-wide ``Throttles``. A stale tick
  (``TriggersStale``) pages too: it invokes the function without running the job, so
  a job whose every tick is stale would never page otherwise.

Which job: each fleet alarm's text names the CloudWatch Logs Insights query that lists
the jobs behind it (every EMF line carries ``job`` as a property), or the queue whose
messages name it, and ``jobguard runs JOB`` for the job found.

Example:
    >>> from jobguard.runbook_fleet import fleet_alarms
    >>> sorted(fleet_alarms("ops", queues=True))[:3]
    ['busy', 'dropped', 'failed_ticks']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from .config import OverlapPolicy
from .definitions import AlarmWindow, JobDefinition
from .runbook_alarms import ASYNC_RETRIES, AlarmText, _human, busy_metric, job_alarms

__all__ = ["FleetAlarm", "fleet_alarms", "fleet_job_alarms", "liveness_alarm", "logs_query",
           "paused_windows"]


@dataclass(frozen=True)
class FleetAlarm:
    """A fleet alarm: its words, and the shared metric it watches (``metric`` an EMF
    name with the ``fleet`` dimension, or None for a queue's or Lambda's own)."""

    text: AlarmText
    metric: str | None


def logs_query(metric: str) -> str:
    """The Logs Insights query (over the fleet's function log groups) that names the jobs
    behind ``metric``: the EMF lines that carry it, counted by their ``job``. An EMF line
    holds a metric's values as a list (``"LeaseLost":[1.0]``), which Logs Insights
    flattens to ``LeaseLost.0``: a query on the field ``LeaseLost`` finds nothing."""
    return f'filter @message like /"{metric}":/ | stats count(*) by job'


def _which(metric: str) -> str:
    return (f"Which job: Logs Insights on the fleet's log groups, `{logs_query(metric)}`; "
            "then `jobguard runs JOB --last 20`.")


_COUNTED = (
    # key, metric, title, what happened, decision
    ("overlap", "RunsNearInterval", "overlap ahead",
     "A run of a job of fleet {fleet} took longer than its overlap threshold (a share of "
     "its interval): its next tick will meet a running run.",
     "shorten that job's batch, lengthen its interval, or find the slow destination."),
    ("dropped", "TriggersDropped", "trigger dropped",
     "A trigger of a QUEUE job of fleet {fleet} was dropped: max_queued were already "
     "pending. It will not run.",
     "raise that job's max_queued only if the backlog can drain; start a manual run if "
     "the dropped window matters."),
    ("lease_lost", "LeaseLost", "lease lost",
     "A run of a job of fleet {fleet} lost its lease and stopped; it committed nothing "
     "after that.",
     "check DynamoDB throttling and the run's duration against its lease; the next "
     "trigger resumes the work."),
    ("uncertain", "UncertainOutcomes", "uncertain work items",
     "A work item of a job of fleet {fleet} has an unknown outcome; it is never redone "
     "blindly.",
     "if it persists after the next sweep, check the destination, then `jobguard recover "
     "JOB ...` (dry run first)."),
    ("records_rejected", "ItemsRejected", "source records rejected",
     "A run of a job of fleet {fleet} met source records no work id could be made for; "
     "nothing was done for them.",
     "`jobguard items JOB --status rejected` says why; fix them at the source, then "
     "recover their range."),
    ("incomplete", "RunsIncomplete", "run incomplete",
     "A run of a job of fleet {fleet} ended with items failed, uncertain or rejected.",
     "`jobguard runs JOB --status incomplete` names them; recover with --mode failed or "
     "--mode uncertain once the destination is healthy."),
    ("reconciled", "ReconciliationFindings", "reconciliation findings",
     "Reconciliation found the effect of an uncertain item of a job of fleet {fleet} "
     "already at the destination and recorded it completed.",
     "nothing if rare; if it repeats, that job's destination calls time out after "
     "landing."),
    ("stale", "TriggersStale", "stale ticks",
     "A tick of a job of fleet {fleet} arrived more than its stale_after after its "
     "scheduled time and was recorded `stale`: it did not run. A job whose every tick is "
     "stale never runs, and its liveness alarm stays quiet (the function is invoked).",
     "`jobguard runs JOB --status stale` shows when its ticks arrive; find what holds them "
     "up (throttles, Lambda's retries of failing ticks, a replay past stale_after), or "
     "raise that job's stale_after if its ticks are meant to wait that long; start a "
     "manual run if the missed window matters."),
    ("messages_rejected", "TriggerMessagesRejected", "trigger message rejected",
     "A message on a trigger queue of fleet {fleet} could never become a trigger; it was "
     "recorded `rejected` and deleted. Only jobguard writes these queues.",
     "`jobguard runs JOB --status rejected` names its sender; stop it."),
)


def paused_windows(jobs: Sequence[JobDefinition]) -> dict[str, AlarmWindow]:
    """The fleet's paused alarms: one per distinct paused-too-long window of its jobs
    (:meth:`JobDefinition.paused_window`: periods of two ticks covering the job's
    ``paused_alarm_after``), keyed ``paused``, ``paused_2``... shortest period first. A
    single window of hourly periods would never see a paused daily job (one paused tick
    a day), and would page a job meant to stay paused for days."""
    windows = sorted({job.paused_window() for job in jobs},
                     key=lambda w: (w.period, w.periods))
    return {("paused" if index == 0 else f"paused_{index + 1}"): window
            for index, window in enumerate(windows)}


def fleet_alarms(fleet: str, *, queues: bool,
                 paused: Mapping[str, AlarmWindow] | None = None) -> dict[str, FleetAlarm]:
    """The fleet-wide alarms of ``fleet``; ``queues``: some job has a trigger queue;
    ``paused``: the paused alarms' windows (:func:`paused_windows`; by default one, of a
    job ticking at most hourly and paused a day)."""
    found: dict[str, FleetAlarm] = {}
    for key, metric, title, means, decide in _COUNTED:
        if key in ("dropped", "messages_rejected") and not queues:
            continue
        found[key] = FleetAlarm(AlarmText(key, title, means.format(fleet=fleet),
                                          f"{decide} {_which(metric)}"), metric)
    found["busy"] = FleetAlarm(AlarmText(
        "busy", "triggers meet active runs every hour",
        f"Triggers of fleet {fleet} met an active run (skipped, queued or coalesced) in "
        "each of the last 3 hours: some job's runs no longer fit its schedule.",
        f"shorten that job's batch or lengthen its interval. "
        f"{_which('TriggersMetActiveRun')}"), "TriggersMetActiveRun")
    if paused is None:
        paused = {"paused": AlarmWindow(timedelta(hours=1), 24)}
    for key, window in paused.items():
        found[key] = FleetAlarm(AlarmText(
            key, "a job paused too long",
            f"Ticks of fleet {fleet} found a job paused in each of the last {window.periods} "
            f"periods of {_human(window.period)} ({_human(window.span)}: the "
            "paused_alarm_after of its jobs that tick this often).",
            f"`jobguard status JOB` says who paused it and why; resume it once its "
            f"destination is healthy. {_which('TriggersPaused')}"), "TriggersPaused")
    found["schedule_dlq"] = FleetAlarm(AlarmText(
        "schedule_dlq", "a tick was dead-lettered",
        f"The fleet's schedule dead-letter queue is not empty: Scheduler could not deliver "
        f"a tick of a job of fleet {fleet}; that tick never ran.",
        "each message's body is the tick (its `job`); fix the cause, start a manual run if "
        "the window matters, then purge the queue."), None)
    found["failed_ticks"] = FleetAlarm(AlarmText(
        "failed_ticks", "failed ticks",
        f"The fleet's failed-ticks queue is not empty: a tick of a job of fleet {fleet} "
        f"failed its first attempt and {ASYNC_RETRIES} retries, or Lambda dropped it "
        "(function errors, timeouts, or too old).",
        "each message's requestPayload is the tick (its `job`) and responsePayload the "
        "error; fix the cause, replay the payload to that job's function within its "
        "stale_after, then delete the message."), None)
    if queues:
        found["trigger_dlq"] = FleetAlarm(AlarmText(
            "trigger_dlq", "a queued trigger was dead-lettered",
            f"The fleet's trigger dead-letter queue is not empty: a queued trigger of a job "
            f"of fleet {fleet} was delivered its maximum number of times without "
            "completing (its run failed each time).",
            "the message body's `job` and `trigger_id` name it; start a manual run if the work "
            "is still needed, then purge the queue."), None)
    found["throttles"] = FleetAlarm(AlarmText(
        "throttles", "functions throttled",
        "Lambda throttled invocations in this account (the fleet's functions or others): "
        "the account's concurrency was used up.",
        "nothing is lost yet (Lambda retries ticks, SQS redelivers triggers); if it "
        "persists, find what uses the concurrency or raise the quota."), None)
    return found


def liveness_alarm(job: JobDefinition, window_span: timedelta) -> AlarmText:
    """The one alarm of each job of a fleet: its function was not invoked."""
    return AlarmText(
        "liveness", "no tick arrived",
        f"The function of {job.name} was not invoked for {_human(window_span)}; no data "
        "counts too. Its schedule is disabled or deleted, or ticks never arrive. (Runs that "
        "fail, are cut or paused page as the fleet's failed-ticks, incomplete and paused "
        "alarms.)",
        f"check the schedule is enabled and the fleet's schedule dead-letter queue; "
        f"`jobguard status {job.name}` and `jobguard runs {job.name} --last 20`.")


def fleet_job_alarms(fleet: str, job: JobDefinition) -> dict[str, AlarmText]:
    """The alarms that page for ``job`` deployed in ``fleet`` (``jobguard runbook``):
    its own (``liveness``; a QUEUE or COALESCE job's ``trigger_queue_age``), then the
    fleet's whose metric or queue this job can feed, each with its which-job query. The
    paused alarm is the one of this job's own window."""
    queues = job.config().needs_queue
    found: dict[str, AlarmText] = {}
    window = job.no_success_window()
    if window is not None:
        found["liveness"] = liveness_alarm(job, window.span)
    if queues:
        found["trigger_queue_age"] = job_alarms(job)["trigger_queue_age"]
    feeds = {"overlap": job.overlap_threshold(job.timeout) is not None,
             "dropped": job.policy is OverlapPolicy.QUEUE,
             "busy": busy_metric(job) is not None}
    shared = fleet_alarms(fleet, queues=queues, paused={"paused": job.paused_window()})
    for key, alarm in shared.items():
        if feeds.get(key, True):
            found[f"fleet/{key}"] = alarm.text
    return found
