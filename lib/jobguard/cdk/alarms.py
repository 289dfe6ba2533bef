"""Alarms that name the decision an operator must make.

Every alarm's description is runbook text in two parts, ``What happened.`` and
``Decide: ...``, ending with where to look: ``Runbook: <the stack's runbook link>``, or
the command that prints it (:mod:`jobguard.cdk.destination`). The README's runbook has
the same words.

Example:
    >>> runbook_alarm(self, "LeaseLost", metric=metric, threshold=1,
    ...               runbook=Runbook(means="A run lost its lease.",
    ...                               decide="check DynamoDB throttling."),
    ...               action=alarms.bind(self, job="crm-sync"))  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobguard.errors import ConfigError
from jobguard.observability import NAMESPACE
from jobguard.runbook import AlarmText, table_alarms

from .destination import BoundAlarms

__all__ = ["DECIDE", "Runbook", "async_dropped_alarm", "from_text",
           "job_metric", "runbook_alarm", "table_throttle_alarms", "throttles_alarm"]

DECIDE = "Decide:"
_MAX_DESCRIPTION = 1024  # CloudWatch's limit
SERVICE = "jobguard"
"""The ``service`` dimension jobguard's metrics carry (with ``job``)."""


@dataclass(frozen=True, kw_only=True)
class Runbook:
    """What an alarm means and the decision it asks for."""

    means: str
    decide: str

    def text(self, reference: str) -> str:
        """The description: what happened, the decision, then ``reference`` (where the
        runbook is: :attr:`BoundAlarms.reference`)."""
        return f"{self.means} {DECIDE} {self.decide} {reference}"


def job_metric(job: str, name: str, *, statistic: str = "Sum",
               period: Duration | None = None) -> cloudwatch.Metric:
    """One of jobguard's EMF metrics for ``job`` (namespace ``JobGuard``)."""
    return cloudwatch.Metric(
        namespace=NAMESPACE, metric_name=name,
        dimensions_map={"job": job, "service": SERVICE},
        statistic=statistic, period=period or Duration.minutes(5),
    )


def runbook_alarm(
    scope: Construct,
    construct_id: str,
    *,
    metric: cloudwatch.IMetric,
    threshold: float,
    runbook: Runbook,
    evaluation_periods: int = 1,
    comparison: cloudwatch.ComparisonOperator = (
        cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD),
    action: BoundAlarms,
    missing_data: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
) -> cloudwatch.Alarm:
    """An alarm whose description is ``runbook``'s text ending with ``action``'s runbook
    reference, notifying ``action``'s destination when it fires and when it is OK again
    (none when alarms are off, as the description says). No data is not a breach unless
    ``missing_data`` says so (the dead-man alarm: silence is the symptom)."""
    description = runbook.text(action.reference)
    if len(description) > _MAX_DESCRIPTION:
        raise ConfigError("runbook", f"{len(description)} characters; CloudWatch allows "
                          f"{_MAX_DESCRIPTION}: {description[:80]}...")
    alarm = cloudwatch.Alarm(
        scope, construct_id,
        metric=metric,
        threshold=threshold,
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=evaluation_periods,
        comparison_operator=comparison,
        treat_missing_data=missing_data,
        alarm_description=description,
    )
    action.apply(alarm)
    return alarm


def from_text(text: AlarmText) -> Runbook:
    """The runbook words of one of :mod:`jobguard.runbook`'s alarm texts."""
    return Runbook(means=text.means, decide=text.decide)


def throttles_alarm(scope: Construct, construct_id: str, function: lambda_.IFunction, *,
                    runbook: Runbook,
                    action: BoundAlarms) -> cloudwatch.Alarm:
    """Lambda throttled the function (``Throttles``), in any 5-minute period."""
    return runbook_alarm(
        scope, construct_id,
        metric=function.metric_throttles(period=Duration.minutes(5), statistic="Sum"),
        threshold=1, action=action, runbook=runbook,
    )


def async_dropped_alarm(scope: Construct, construct_id: str, function: lambda_.IFunction, *,
                        runbook: Runbook,
                        action: BoundAlarms) -> cloudwatch.Alarm:
    """Lambda dropped an asynchronous event of the function (``AsyncEventsDropped``)."""
    return runbook_alarm(
        scope, construct_id,
        metric=function.metric("AsyncEventsDropped", period=Duration.minutes(5),
                               statistic="Sum"),
        threshold=1, action=action, runbook=runbook,
    )


def errors_alarm(scope: Construct, construct_id: str, function: lambda_.IFunction, *,
                 runbook: Runbook,
                 action: BoundAlarms) -> cloudwatch.Alarm:
    """The function raised (Lambda's ``Errors``), in any 5-minute period."""
    return runbook_alarm(
        scope, construct_id,
        metric=function.metric_errors(period=Duration.minutes(5), statistic="Sum"),
        threshold=1, action=action, runbook=runbook,
    )


def dlq_alarm(scope: Construct, construct_id: str, queue: sqs.IQueue, *, runbook: Runbook,
              action: BoundAlarms) -> cloudwatch.Alarm:
    """The dead-letter queue is not empty."""
    return runbook_alarm(
        scope, construct_id,
        metric=queue.metric_approximate_number_of_messages_visible(
            period=Duration.minutes(5), statistic="Maximum"),
        threshold=1, action=action, runbook=runbook,
    )


def table_throttle_alarms(scope: Construct, table: dynamodb.ITable, *,
                          action: BoundAlarms) -> dict[str, cloudwatch.Alarm]:
    """DynamoDB throttled the table's reads or writes, in any 5-minute period.

    Two alarms, not one sum: a metric-math sum of two sparse series has no value where
    either is missing. (CloudWatch ignores missing data for AWS/DynamoDB metrics whatever
    the alarm says.)
    """
    texts = table_alarms()
    return {
        key: runbook_alarm(
            scope, construct_id,
            metric=table.metric(metric, period=Duration.minutes(5), statistic="Sum"),
            threshold=1, action=action, runbook=from_text(texts[key]))
        for key, construct_id, metric in (
            ("read_throttles", "ReadThrottlesAlarm", "ReadThrottleEvents"),
            ("write_throttles", "WriteThrottlesAlarm", "WriteThrottleEvents"),
        )
    }
