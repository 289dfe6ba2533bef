"""A guarded job's rows of the stack's dashboard (:class:`jobguard.cdk.JobGuardDashboard`):
its run duration against the interval, its trigger decisions, the lease, work items,
queue depths and the function. Changes when what the dashboard shows of a job does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_

from ._text import human
from .alarms import job_metric

if TYPE_CHECKING:
    from .guarded_job import GuardedJob

__all__ = ["function_widget", "job_widgets"]


def job_widgets(guarded: GuardedJob) -> list[list[cloudwatch.IWidget]]:
    """Rows of dashboard widgets for this job."""
    job, name = guarded.job, guarded.job.name

    def metrics(*names: str, statistic: str = "Sum") -> list[cloudwatch.IMetric]:
        return [job_metric(name, n, statistic=statistic) for n in names]

    interval = job.interval or job.timeout
    header = cloudwatch.TextWidget(
        width=24, height=2,
        markdown=f"### {name}: {job.policy.value}, {job.schedule}, timeout "
                 f"{human(job.timeout)}, lease {human(job.lease)}\n{job.description}")
    annotations = [cloudwatch.HorizontalAnnotation(
        value=interval.total_seconds() * 1000, label="interval")]
    overlap = job.overlap_threshold(job.timeout)
    if overlap is not None:
        annotations.append(cloudwatch.HorizontalAnnotation(
            value=overlap.total_seconds() * 1000, label="overlap alarm"))
    duration = cloudwatch.GraphWidget(
        title="Run duration (ms, max)", width=8,
        left=metrics("RunDuration", statistic="Maximum"),
        left_annotations=annotations)
    rejected = ("TriggerMessagesRejected",) if guarded.trigger_queue is not None else ()
    decisions = cloudwatch.GraphWidget(
        title="Trigger decisions", width=8, stacked=True,
        left=metrics("TriggersSkipped", "TriggersQueued", "TriggersCoalesced",
                     "TriggersDropped", "TriggersStale", "TriggersDuplicate",
                     "TriggersPaused", *rejected))
    lease = cloudwatch.GraphWidget(
        title="Lease", width=8,
        left=metrics("LeaseAcquireAttempts", "RunSucceeded", "LeaseTakeovers", "LeaseLost"))
    items = cloudwatch.GraphWidget(
        title="Work items", width=8,
        left=metrics("ItemsCompleted", "ItemsFailed", "ItemsRetried", "RunsIncomplete",
                     "UncertainOutcomes", "ReconciliationFindings",
                     "CompletionsRejected", "ItemsRejected"))
    queues: list[cloudwatch.IMetric] = [
        guarded.schedule_dlq.metric_approximate_number_of_messages_visible(
            label="schedule DLQ", statistic="Maximum"),
        guarded.failed_ticks.metric_approximate_number_of_messages_visible(
            label="failed ticks", statistic="Maximum")]
    if guarded.trigger_queue is not None and guarded.trigger_dlq is not None:
        queues += [
            guarded.trigger_queue.metric_approximate_number_of_messages_visible(
                label="trigger queue (visible)", statistic="Maximum"),
            guarded.trigger_queue.metric_approximate_number_of_messages_not_visible(
                label="trigger queue (deferred or running)", statistic="Maximum"),
            guarded.trigger_dlq.metric_approximate_number_of_messages_visible(
                label="trigger DLQ", statistic="Maximum"),
        ]
    queue_widget = cloudwatch.GraphWidget(title="Queues", width=8, left=queues)
    function = function_widget(guarded.function, f"{name} function")
    return [[header], [duration, decisions, lease], [items, queue_widget, function]]


def function_widget(function: lambda_.IFunction, title: str) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(
        title=title, width=8,
        left=[function.metric_invocations(statistic="Sum"),
              function.metric_errors(statistic="Sum"),
              function.metric_throttles(statistic="Sum")],
        right=[function.metric_duration(statistic="Maximum")])
