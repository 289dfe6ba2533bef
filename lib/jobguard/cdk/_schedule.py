"""An EventBridge Scheduler schedule that invokes exactly one function.

CDK's ``LambdaInvoke`` target grants its role the function *and* ``<function arn>:*``
(every version and alias). A jobguard schedule invokes the unqualified function only,
so its role here may do exactly two things: invoke that function, and send an
undeliverable tick to the schedule's dead-letter queue.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import jsii
from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from ._lint import acknowledge

SCHEDULE_GROUP = "default"


@jsii.implements(scheduler.IScheduleTarget)
class _InvokeFunction:
    def __init__(self, config: scheduler.ScheduleTargetConfig) -> None:
        self._config = config

    def bind(self, _schedule: scheduler.ISchedule) -> scheduler.ScheduleTargetConfig:
        return self._config


def function_schedule(
    scope: Construct,
    construct_id: str,
    *,
    function: lambda_.IFunction,
    expression: str,
    payload: dict[str, Any],
    dead_letter_queue: sqs.IQueue,
    retry_attempts: int,
    max_event_age: timedelta,
    description: str,
    enabled: bool = True,
) -> scheduler.Schedule:
    """A schedule (default group, UTC, no flexible window) invoking ``function``;
    created DISABLED when not ``enabled`` (a local deployment: see
    :attr:`infra.settings.StackSettings.local`)."""
    role = iam.Role(
        scope, f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com", conditions={
            "StringEquals": {
                "aws:SourceAccount": Aws.ACCOUNT_ID,
                "aws:SourceArn": f"arn:{Aws.PARTITION}:scheduler:{Aws.REGION}:"
                                 f"{Aws.ACCOUNT_ID}:schedule-group/{SCHEDULE_GROUP}",
            }}),
        description=f"{description[:900]}: invoke the function, dead-letter a tick",
    )
    role.add_to_policy(iam.PolicyStatement(
        actions=["lambda:InvokeFunction"], resources=[function.function_arn]))
    role.add_to_policy(iam.PolicyStatement(
        actions=["sqs:SendMessage"], resources=[dead_letter_queue.queue_arn]))
    if dead_letter_queue.encryption_master_key is not None:  # a customer-managed key
        dead_letter_queue.encryption_master_key.grant(role, "kms:GenerateDataKey",
                                                      "kms:Decrypt")
    target = _InvokeFunction(scheduler.ScheduleTargetConfig(
        arn=function.function_arn,
        role=role,
        input=scheduler.ScheduleTargetInput.from_object(payload),
        dead_letter_config=scheduler.CfnSchedule.DeadLetterConfigProperty(
            arn=dead_letter_queue.queue_arn),
        retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
            maximum_event_age_in_seconds=int(max_event_age.total_seconds()),
            maximum_retry_attempts=retry_attempts),
    ))
    schedule = scheduler.Schedule(
        scope, construct_id,
        schedule=scheduler.ScheduleExpression.expression(expression),
        description=description[:512],
        target=target,
        enabled=enabled,
    )
    # The schedule must not be created before its role may invoke the function.
    schedule.node.add_dependency(role)
    acknowledge(schedule, "W3005",
                "the explicit dependency on the role also waits for the role's policy (the "
                "invoke permission) before the schedule can fire; the GetAtt alone would not")
    return schedule
