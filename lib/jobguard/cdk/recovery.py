"""The recovery Lambda: not scheduled, invokable only by the principals you name.

It knows the jobs whose handler modules are listed in ``JOBGUARD_RECOVERY_MODULES``
(each registers its BatchJob). Its timeout is the longest job timeout, so a claim it
takes (at most its job's timeout) never outlives it.

No resource policy is added except for ``invokers``; a principal that would make it
public (``*``) is refused. Account administrators can still invoke it through their own
IAM permissions, as for any function.

Example:
    >>> RecoveryFunction(self, "Recovery", jobs=JOBS, table=table, bundle=bundle,
    ...                  invokers=[iam.ArnPrincipal(oncall_role_arn)])  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobguard import environment
from jobguard.callsites import Path
from jobguard.definitions import JobDefinition
from jobguard.errors import ConfigError
from jobguard.runbook import recovery_alarms

from ._function import python_function
from ._text import module_of
from .alarms import errors_alarm, from_text, throttles_alarm
from .bundle import LambdaBundle
from .table import JobTable

__all__ = ["OPTIONAL_ENVIRONMENT", "RECOVERY_HANDLER", "RECOVERY_PATHS", "RecoveryFunction"]

RECOVERY_HANDLER = "jobguard.functions.recovery.lambda_handler"

RECOVERY_PATHS = frozenset({Path.RUN, Path.SWEEP})
"""A recovery is a run (it takes the job's lease) that plans by reading items. It has no
trigger queue: one function serves every job, and a follow-up pending when it releases
runs at the job's next trigger (recoveries are rare and operator-driven)."""

OPTIONAL_ENVIRONMENT = {
    environment.RECOVERY_CONFIRM_ABOVE: "confirm_above",
}
"""Variables jobguard reads only when set (it has a default), and the argument that sets
each one here."""


class RecoveryFunction(Construct):
    """The bounded recovery function for ``jobs``.

    Args:
        invokers: the principals allowed to invoke it (never ``*``).
        confirm_above: plans larger than this many items need the dry run's token
            (jobguard's default when not given).
        encryption_key, tracing: as for :class:`jobguard.cdk.GuardedJob`.

    It is invoked by an operator (synchronously, for its answer), never by a schedule,
    so it has no on-failure destination: a failed recovery answers with its error.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        jobs: Sequence[JobDefinition],
        table: JobTable,
        bundle: LambdaBundle,
        invokers: Sequence[iam.IPrincipal] = (),
        alarm_action: cloudwatch.IAlarmAction | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        handler: str = RECOVERY_HANDLER,
        confirm_above: int | None = None,
        encryption_key: kms.IKey | None = None,
        tracing: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        if not jobs:
            raise ConfigError("jobs", "recovery needs at least one job")
        modules = sorted({module_of(job.handler) for job in jobs})
        timeout = max(job.timeout for job in jobs)
        for job in jobs:  # a recovery's claims (the job's claim_for) must fit its timeout
            job.check_deployment(function_timeout=timeout)
        variables = {
            environment.TABLE: table.table_name,
            environment.RECOVERY_MODULES: ",".join(modules),
        }
        if confirm_above is not None:
            if isinstance(confirm_above, bool) or not isinstance(confirm_above, int) \
                    or confirm_above < 1:
                raise ConfigError("confirm_above", f"must be an integer >= 1, got "
                                  f"{confirm_above!r}")
            variables[environment.RECOVERY_CONFIRM_ABOVE] = str(confirm_above)
        self.function = python_function(
            self, "Function",
            bundle=bundle, handler=handler,
            timeout=timeout,
            memory_mb=max(job.memory_mb for job in jobs),
            environment=variables,
            description="jobguard recovery: plan (dry run by default) or execute a bounded "
                        f"recovery of {', '.join(sorted(j.name for j in jobs))}",
            log_retention=log_retention,
            tracing=tracing,
            log_key=encryption_key,
        )
        self.paths = RECOVERY_PATHS
        table.grant_paths(self.function, jobs=[job.name for job in jobs], paths=self.paths)
        for principal in invokers:
            _refuse_public(Stack.of(self), principal)
            self.function.grant_invoke(principal)
        texts = recovery_alarms()
        self.alarms = {
            "errors": errors_alarm(self, "ErrorsAlarm", self.function, action=alarm_action,
                                   runbook=from_text(texts["errors"])),
            "throttles": throttles_alarm(self, "ThrottlesAlarm", self.function,
                                         action=alarm_action,
                                         runbook=from_text(texts["throttles"])),
        }


def _refuse_public(stack: Stack, principal: iam.IPrincipal) -> None:
    fragment = json.dumps(stack.resolve(principal.policy_fragment.principal_json))
    if isinstance(principal, iam.AnyPrincipal) or '"*"' in fragment:
        raise ConfigError("invokers", "recovery must not be publicly invokable: name the "
                          "roles or accounts that may invoke it")
