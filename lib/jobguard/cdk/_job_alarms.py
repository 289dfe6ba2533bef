"""A guarded job's alarms (:class:`jobguard.cdk.GuardedJob`), by runbook key: the job's
own (:func:`own_alarms`), or, for a job of a :class:`jobguard.cdk.JobFleet`, the two it
keeps (:func:`fleet_job_alarms`; the fleet watches the rest).

Their words come from :mod:`jobguard.runbook`, which ``jobguard runbook`` prints too, so
the pager and the runbook cannot disagree. Changes when an alarm of a job, what it
watches or when it fires, does (the metrics and alarms page is read from these calls:
``docs/_hooks/reference_alarms.py``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from jobguard.runbook import busy_metric, busy_window, job_alarms, queue_age_limit
from jobguard.runbook_fleet import liveness_alarm

from ._function import seconds
from .alarms import (
    Runbook,
    async_dropped_alarm,
    dlq_alarm,
    errors_alarm,
    from_text,
    job_metric,
    runbook_alarm,
    throttles_alarm,
)
from .destination import BoundAlarms

if TYPE_CHECKING:
    from .guarded_job import GuardedJob

__all__ = ["fleet_job_alarms", "own_alarms"]


def own_alarms(guarded: GuardedJob, action: BoundAlarms) -> dict[str, cloudwatch.Alarm]:
    """The job's alarms. Their words come from jobguard.runbook, which
    `jobguard runbook` prints too, so the pager and the runbook cannot disagree."""
    job, name = guarded.job, guarded.job.name
    texts = job_alarms(job)
    alarms: dict[str, cloudwatch.Alarm] = {}

    def runbook(key: str) -> Runbook:
        return from_text(texts[key])

    # refused when defined if no run can last that long (RunDuration is cut by the
    # timeout); checked again against this function's timeout by check_deployment
    budget = job.overlap_threshold(job.timeout)
    if budget is not None:
        alarms["overlap"] = runbook_alarm(
            guarded, "OverlapAheadAlarm",
            metric=job_metric(name, "RunDuration", statistic="Maximum"),
            threshold=budget.total_seconds() * 1000,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            action=action, runbook=runbook("overlap"),
        )
    # no dead-man alarm where the schedule is disabled (local and drill deployments:
    # only the drills deliver ticks, so silence is their normal state)
    window = job.no_success_window() if guarded.schedule_enabled else None
    if window is not None:
        # the dead-man alarm: silence is the symptom, so missing data breaches
        alarms["no_success"] = runbook_alarm(
            guarded, "NoSuccessAlarm",
            metric=job_metric(name, "RunSucceeded", period=seconds(window.period)),
            threshold=1, comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=window.periods,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
            action=action, runbook=runbook("no_success"),
        )
    paused = job.paused_window()
    alarms["paused"] = runbook_alarm(
        guarded, "PausedAlarm",
        metric=job_metric(name, "TriggersPaused", period=seconds(paused.period)),
        threshold=1, evaluation_periods=paused.periods, action=action,
        runbook=runbook("paused"),
    )
    busy = busy_metric(job)
    if busy is not None:
        period, periods, _ = busy_window(job)
        metric = job_metric(name, busy[0], period=seconds(period or timedelta(days=1)))
        alarms["busy"] = runbook_alarm(
            guarded, "BusyAlarm", metric=metric,
            threshold=1.0 if period is not None else float(job.skipped_alarm_count),
            evaluation_periods=periods, action=action, runbook=runbook("busy"),
        )
    if "dropped" in texts:
        alarms["dropped"] = runbook_alarm(
            guarded, "DroppedAlarm", metric=job_metric(name, "TriggersDropped"),
            threshold=1, action=action, runbook=runbook("dropped"),
        )
    if "lease_lost" in texts:
        alarms["lease_lost"] = runbook_alarm(
            guarded, "LeaseLostAlarm", metric=job_metric(name, "LeaseLost"),
            threshold=1, action=action, runbook=runbook("lease_lost"),
        )
    alarms["uncertain"] = runbook_alarm(
        guarded, "UncertainAlarm", metric=job_metric(name, "UncertainOutcomes"),
        threshold=1, action=action, runbook=runbook("uncertain"),
    )
    alarms["records_rejected"] = runbook_alarm(
        guarded, "RecordsRejectedAlarm", metric=job_metric(name, "ItemsRejected"),
        threshold=1, action=action, runbook=runbook("records_rejected"),
    )
    alarms["incomplete"] = runbook_alarm(
        guarded, "IncompleteAlarm", metric=job_metric(name, "RunsIncomplete"),
        threshold=1, action=action, runbook=runbook("incomplete"),
    )
    alarms["reconciled"] = runbook_alarm(
        guarded, "ReconciliationFindingsAlarm",
        metric=job_metric(name, "ReconciliationFindings"), threshold=1, action=action,
        runbook=runbook("reconciled"),
    )
    alarms["schedule_dlq"] = dlq_alarm(
        guarded, "ScheduleDlqAlarm", guarded.schedule_dlq, action=action,
        runbook=runbook("schedule_dlq"),
    )
    if guarded.trigger_dlq is not None:
        alarms["trigger_dlq"] = dlq_alarm(
            guarded, "TriggerDlqAlarm", guarded.trigger_dlq, action=action,
            runbook=runbook("trigger_dlq"),
        )
    if guarded.trigger_queue is not None:
        alarms["trigger_queue_age"] = runbook_alarm(
            guarded, "TriggerQueueAgeAlarm",
            metric=guarded.trigger_queue.metric_approximate_age_of_oldest_message(
                period=Duration.minutes(5), statistic="Maximum"),
            threshold=queue_age_limit(job).total_seconds(), action=action,
            runbook=runbook("trigger_queue_age"),
        )
        # a message that is no trigger was deleted at once (so the triggers behind it
        # ran): nothing else would tell anyone that something writes to this queue
        alarms["messages_rejected"] = runbook_alarm(
            guarded, "TriggerMessagesRejectedAlarm",
            metric=job_metric(name, "TriggerMessagesRejected"), threshold=1,
            action=action, runbook=runbook("messages_rejected"),
        )
    alarms["errors"] = errors_alarm(
        guarded, "ErrorsAlarm", guarded.function, action=action, runbook=runbook("errors"),
    )
    alarms["throttles"] = throttles_alarm(
        guarded, "ThrottlesAlarm", guarded.function, action=action, runbook=runbook("throttles"))
    alarms["async_dropped"] = async_dropped_alarm(
        guarded, "AsyncDroppedAlarm", guarded.function, action=action,
        runbook=runbook("async_dropped"))
    alarms["failed_ticks"] = dlq_alarm(
        guarded, "FailedTicksAlarm", guarded.failed_ticks, action=action,
        runbook=runbook("failed_ticks"))
    return alarms


def fleet_job_alarms(guarded: GuardedJob, action: BoundAlarms) -> dict[str, cloudwatch.Alarm]:
    """A fleet job's own alarms: the dead-man on its function's invocations (free
    metric, where its schedule fires) and its trigger queue's age; the fleet watches
    the rest (:mod:`jobguard.runbook_fleet`)."""
    job, alarms = guarded.job, {}
    window = job.no_success_window() if guarded.schedule_enabled else None
    if window is not None:
        alarms["liveness"] = runbook_alarm(
            guarded, "LivenessAlarm",
            metric=guarded.function.metric_invocations(
                period=seconds(window.period), statistic="Sum"),
            threshold=1, comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=window.periods,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
            action=action, runbook=from_text(liveness_alarm(job, window.span)))
    if guarded.trigger_queue is not None:
        alarms["trigger_queue_age"] = runbook_alarm(
            guarded, "TriggerQueueAgeAlarm",
            metric=guarded.trigger_queue.metric_approximate_age_of_oldest_message(
                period=Duration.minutes(5), statistic="Maximum"),
            threshold=queue_age_limit(job).total_seconds(), action=action,
            runbook=from_text(job_alarms(job)["trigger_queue_age"]))
    return alarms
