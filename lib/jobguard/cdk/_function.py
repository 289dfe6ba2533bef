"""A jobguard Python function: its own role and its own log group, nothing implicit.

The role is created here (not by Lambda's default, which attaches the AWS managed
``AWSLambdaBasicExecutionRole`` with logs on ``*``): it may write only to the function's
own log group; everything else is granted by the construct that owns the function.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobguard import environment as jobguard_environment
from jobguard.definitions import RESERVED_ENV_NAMES, RESERVED_ENV_PREFIXES
from jobguard.errors import ConfigError

from ._lint import acknowledge
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

RESERVED_PREFIXES = RESERVED_ENV_PREFIXES
"""Environment variables a job's ``environment`` may not set: Lambda's own, and the
ones the stack sets from the job definition (refused when defined too; checked again
here for a definition changed after)."""


def seconds(value: timedelta) -> Duration:
    return Duration.seconds(int(value.total_seconds()))


def check_extra_environment(job_name: str, extra: Mapping[str, str]) -> None:
    for key, value in extra.items():
        if key.startswith(RESERVED_PREFIXES) or key in RESERVED_ENV_NAMES:
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
    tracing: bool = False,
    log_key: kms.IKey | None = None,
) -> lambda_.Function:
    """A function running ``handler`` from the bundle, writing only to its own logs
    (encrypted with ``log_key`` when given). ``tracing``: X-Ray active tracing, and
    ``JOBGUARD_TRACING=1`` so that jobguard traces each run with the Powertools Tracer.
    A drills bundle's function gets ``JOBGUARD_DRILLS=1`` (it honours drill switches)."""
    module = handler.rsplit(".", 1)[0]
    if not bundle.has_module(module):
        raise ConfigError("handler", f"{handler!r}: module {module!r} is not in the code "
                          "asset (add its package to the bundle's packages)")
    log_group = logs.LogGroup(scope, f"{construct_id}Logs", retention=log_retention,
                              encryption_key=log_key)
    role = iam.Role(
        scope, f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"{description[:900]} (writes only to its own log group)",
    )
    function = lambda_.Function(
        scope, construct_id,
        runtime=bundle.runtime,
        architecture=bundle.architecture,
        code=bundle.code_for(scope),
        layers=bundle.layers,
        handler=handler,
        timeout=seconds(timeout),
        memory_size=memory_mb,
        environment={**environment, jobguard_environment.TRACING: "1" if tracing else "0",
                     **({jobguard_environment.DRILLS: "1"} if bundle.drills else {})},
        description=description[:256],
        role=role,
        log_group=log_group,
        tracing=lambda_.Tracing.ACTIVE if tracing else None,
    )
    role.add_to_policy(iam.PolicyStatement(actions=sorted(LOG_ACTIONS),
                                           resources=[log_group.log_group_arn]))
    _acknowledge_function(function, log_group)
    if tracing:
        Validations.of(role).acknowledge(Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason="X-Ray active tracing (jobguard:tracing=true): xray:PutTraceSegments and "
                   "xray:PutTelemetryRecords support no resource-level permissions, so Lambda's "
                   "tracing statement names Resource '*'.",
        ))
    return function


def _acknowledge_function(function: lambda_.Function, log_group: logs.LogGroup) -> None:
    """What checkov and cfn-lint flag on every jobguard function, and why it stands."""
    acknowledge(log_group, "CKV_AWS_158",
                "CloudWatch Logs encrypts the group at rest with its service key; the logs "
                "hold run ids, job names and counts, no business payloads")
    acknowledge(function, "CKV_AWS_117",
                "the function calls only AWS APIs (DynamoDB, SQS, S3, CloudWatch) over TLS with "
                "IAM auth; a VPC would add NAT or endpoints and cold-start time and protect no "
                "data path")
    acknowledge(function, "CKV_AWS_115",
                "overlap is decided by the job's fenced lease, not by concurrency: a second "
                "invocation records a decision and exits; reserving concurrency would take it "
                "from the account's other functions")
    acknowledge(function, "CKV_AWS_116",
                "failed invocations are kept elsewhere: an undelivered tick in the schedule's "
                "DLQ, a failed queued trigger in the trigger queue's DLQ (redrive); a failed "
                "run is on the run log and alarmed")
    acknowledge(function, "CKV_AWS_173",
                "the variables name resources (table, queue URL, module names), no secrets; "
                "Lambda encrypts them at rest with its service key")
    acknowledge(function, "W3005",
                "CDK makes the function depend on its role (and the role's policy), so that "
                "the policy exists before the first invocation; the GetAtt alone would not "
                "wait for the policy")

