"""A jobguard Python function: its own role and its own log group, nothing implicit.

The role is created here (not by Lambda's default, which attaches the AWS managed
``AWSLambdaBasicExecutionRole`` with logs on ``*``): it may write only to the function's
own log group; everything else is granted by the construct that owns the function.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobguard.errors import ConfigError

from .bundle import LambdaBundle

LOG_ACTIONS: dict[str, str] = {
    "logs:CreateLogStream": "the Lambda runtime creates the invocation's log stream in the "
                            "function's own log group with the function's role",
    "logs:PutLogEvents": "the Lambda runtime writes the function's output (Powertools' "
                         "logs and EMF metrics) to its own log group with its role",
}
"""Actions every function's role has that no jobguard call makes: what Lambda itself
does with the role, on the function's own log group only (``tests/infra/test_iam``
allows these extras and no others)."""

RESERVED_PREFIXES = ("AWS_", "JOBGUARD_", "_")
"""Environment variables a job's ``environment`` may not set: Lambda's own, and the
ones the stack sets from the job definition."""


def seconds(value: timedelta) -> Duration:
    return Duration.seconds(int(value.total_seconds()))


def check_extra_environment(job_name: str, extra: Mapping[str, str]) -> None:
    for key, value in extra.items():
        if key.startswith(RESERVED_PREFIXES) or key in ("LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR"):
            raise ConfigError("environment", f"job {job_name!r} may not set {key!r}: "
                              "the stack and Lambda set it")
        if not isinstance(value, str):
            raise ConfigError("environment", f"job {job_name!r}: {key} must be a string")


def python_function(
    scope: Construct,
    construct_id: str,
    *,
    bundle: LambdaBundle,
    handler: str,
    timeout: timedelta,
    memory_mb: int,
    environment: Mapping[str, str],
    description: str,
    log_retention: logs.RetentionDays,
) -> lambda_.Function:
    """A function running ``handler`` from the bundle, writing only to its own logs."""
    module = handler.rsplit(".", 1)[0]
    if not bundle.has_module(module):
        raise ConfigError("handler", f"{handler!r}: module {module!r} is not in the code "
                          "asset (add its package to the bundle's packages)")
    log_group = logs.LogGroup(scope, f"{construct_id}Logs", retention=log_retention)
    role = iam.Role(
        scope, f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"{description[:900]} (writes only to its own log group)",
    )
    function = lambda_.Function(
        scope, construct_id,
        runtime=bundle.runtime,
        architecture=bundle.architecture,
        code=bundle.code,
        layers=bundle.layers,
        handler=handler,
        timeout=seconds(timeout),
        memory_size=memory_mb,
        environment=dict(environment),
        description=description[:256],
        role=role,
        log_group=log_group,
    )
    role.add_to_policy(iam.PolicyStatement(actions=sorted(LOG_ACTIONS),
                                           resources=[log_group.log_group_arn]))
    return function
