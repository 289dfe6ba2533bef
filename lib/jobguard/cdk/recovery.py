"""The recovery Lambda: not scheduled, invokable only by the principals you name.

It knows the jobs whose handler modules are listed in ``JOBGUARD_RECOVERY_MODULES``
(each registers its BatchJob). Its timeout is the longest job timeout, so a claim it
takes (at most its job's timeout) never outlives it.

Its role writes only the rows of the jobs it can execute a recovery of (a registered
``BatchJob``); a plain ``@guarded`` job's rows it reads, to plan (:func:`plan_only`).

It runs each job's own code (``select``, ``process``, ``reconcile``), so it gets each
job's ``JobDefinition.environment`` too (two jobs that set one variable differently are
refused); grant it what the jobs' code touches, as you grant each job's function
(``notes.grant_read_write_data(recovery.function)``).

Two ways in, two permissions. Invoked as itself (``function:NAME``) it only plans; an
execution must come through its alias ``execute`` (``function:NAME:execute``), which the
handler checks (:mod:`jobguard.functions.recovery`). Lambda authorizes each ARN on its
own: a grant of the function's ARN does not cover the alias. ``planners`` may invoke the
function (plan); ``invokers`` may invoke it and its alias (plan and execute). A principal
named by ARN or account gets a resource policy statement on each; a role of this app
gets an identity policy naming exactly those ARNs (and ``function:NAME:$LATEST``, which
plans too). No other statement is added, and a principal that would make it public
(``*``) is refused. Account administrators can still invoke either through their own IAM
permissions, as for any function: a policy granting ``lambda:InvokeFunction`` on ``*``
or ``function:NAME*`` lets its holder execute.

It adds the stack outputs ``RecoveryFunctionName`` (``output_name``; None for none), which
``jobguard recover --stack STACK`` reads to find the function, and
``RecoveryExecuteArn`` (``execute_output_name``), the alias's ARN to name in an
executor's IAM policy.

Built with a drills bundle it deploys the jobs' drill timings and may read their drill
switches, as :class:`jobguard.cdk.GuardedJob` does.

Example:
    >>> RecoveryFunction(self, "Recovery", jobs=JOBS, table=table, bundle=bundle,
    ...                  alarms=alarms,
    ...                  invokers=[iam.ArnPrincipal(oncall_role_arn)],
    ...                  planners=[iam.ArnPrincipal(support_role_arn)])  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import Annotations, CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobguard import environment
from jobguard.callsites import Path
from jobguard.definitions import JobDefinition
from jobguard.errors import ConfigError
from jobguard.recovery import EXECUTE_ALIAS
from jobguard.runbook import recovery_alarms

from ._function import check_extra_environment, python_function
from ._outputs import check_free, mark
from ._text import module_of
from .alarms import errors_alarm, from_text, throttles_alarm
from .bundle import LambdaBundle
from .destination import AlarmDestination, require
from .table import JobTable

__all__ = ["EXECUTE_ALIAS", "EXECUTE_OUTPUT_NAME", "OPTIONAL_ENVIRONMENT", "OUTPUT_NAME",
           "PLAN_PATHS", "RECOVERY_HANDLER", "RECOVERY_PATHS", "RecoveryFunction",
           "jobs_environment", "plan_only"]

OUTPUT_NAME = "RecoveryFunctionName"
"""The stack output that names the function (what ``jobguard recover --stack`` reads)."""
EXECUTE_OUTPUT_NAME = "RecoveryExecuteArn"
"""The stack output with the ARN of the ``execute`` alias (the resource an executor's
IAM policy names)."""

RECOVERY_HANDLER = "jobguard.functions.recovery.lambda_handler"

RECOVERY_PATHS = frozenset({Path.RUN, Path.SWEEP})
"""A recovery is a run (it takes the job's lease) that plans by reading items. It has no
trigger queue: one function serves every job, and a follow-up pending when it releases
runs at the job's next trigger (recoveries are rare and operator-driven)."""
PLAN_PATHS = frozenset({Path.SWEEP})
"""A plain ``@guarded`` job (no registered ``BatchJob``) can only be planned: its
unresolved items are read, nothing is written (:func:`plan_only`)."""

OPTIONAL_ENVIRONMENT = {
    environment.RECOVERY_CONFIRM_ABOVE: "confirm_above",
}
"""Variables jobguard reads only when set (it has a default), and the argument that sets
each one here."""


class RecoveryFunction(Construct):
    """The bounded recovery function for ``jobs``.

    Args:
        alarms: where its alarms go (required), as for :class:`jobguard.cdk.GuardedJob`.
        invokers: the principals that may plan and execute: invoke the function and its
            ``execute`` alias (never ``*``).
        planners: the principals that may only plan: invoke the function itself, never
            its alias (never ``*``).
        confirm_above: plans larger than this many items need the dry run's token
            (jobguard's default when not given).
        encryption_key: as for :class:`jobguard.cdk.GuardedJob`.
        tracing: as for :class:`jobguard.cdk.GuardedJob`.
        output_name: the stack output naming the function (``RecoveryFunctionName``,
            which ``jobguard recover`` looks for); None adds no output.
        execute_output_name: the stack output with the ``execute`` alias's ARN
            (``RecoveryExecuteArn``); None adds no output.

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
        planners: Sequence[iam.IPrincipal] = (),
        alarms: AlarmDestination | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        handler: str = RECOVERY_HANDLER,
        confirm_above: int | None = None,
        encryption_key: kms.IKey | None = None,
        tracing: bool = False,
        output_name: str | None = OUTPUT_NAME,
        execute_output_name: str | None = EXECUTE_OUTPUT_NAME,
    ) -> None:
        destination = require(alarms, f"RecoveryFunction {construct_id!r}")
        for key in (output_name, execute_output_name):
            if key is not None:
                check_free(scope, key, field="output_name",
                           what=f"RecoveryFunction {construct_id!r}")
        super().__init__(scope, construct_id)
        if not jobs:
            raise ConfigError("jobs", "recovery needs at least one job")
        self.drills = bundle.drills
        if self.drills:  # a recovery's claims fit the jobs' deployed (drill) timeouts
            jobs = [job.for_drills() for job in jobs]
        modules = sorted({module_of(job.handler) for job in jobs})
        timeout = max(job.timeout for job in jobs)
        for job in jobs:  # a recovery's claims (the job's claim_for) must fit its timeout
            job.check_deployment(function_timeout=timeout)
        variables = {
            **jobs_environment(jobs),
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
        # Writes only to the rows of jobs it can execute a recovery of; a plain
        # @guarded job's rows are read (planned), never written.
        self.plan_only, self.not_judged = _judge(jobs)
        for name, why in sorted(self.not_judged.items()):  # said, not silently granted
            Annotations.of(self).add_warning_v2(
                "jobguard:recovery-judged-at-synth",
                f"job {name}: its handler module did not import here ({why}), so whether it "
                "registers a BatchJob is unknown: recovery may write its rows. Make the "
                "module importable without its Lambda environment (read variables inside "
                "the handler) to grant a plain @guarded job reads only")
        self.paths = RECOVERY_PATHS
        self.paths_by_job = {job.name: PLAN_PATHS if job.name in self.plan_only
                             else RECOVERY_PATHS for job in jobs}
        for paths in (RECOVERY_PATHS, PLAN_PATHS):
            names = [name for name, held in self.paths_by_job.items() if held == paths]
            if names:
                table.grant_paths(self.function, jobs=names, paths=paths)
        if self.drills:
            table.grant_drill_switches(self.function, jobs=[job.name for job in jobs])
        # The alias runs what the function runs ($LATEST): a plan and its execution see
        # the same code. Only an invocation through it may execute.
        self.execute_alias = lambda_.Alias(
            self, "Execute", alias_name=EXECUTE_ALIAS, version=self.function.latest_version,
            description="jobguard recovery: the only way to execute a recovery (invoking "
                        "the function itself only plans)")
        for field_name, principals in (("invokers", invokers), ("planners", planners)):
            for principal in principals:
                _refuse_public(Stack.of(self), principal, field_name)
        for principal in (*invokers, *planners):
            # The function's own ARN (and $LATEST, which plans too), never ":*": a
            # grant with ":*" (grant_invoke's) would cover the execute alias.
            self.function.grant_invoke_latest_version(principal)
        for principal in invokers:
            self.execute_alias.grant_invoke(principal)
        if output_name is not None:
            mark(CfnOutput(Stack.of(self), output_name, value=self.function.function_name,
                           description="the jobguard recovery function (jobguard recover "
                                       "--stack)"), f"RecoveryFunction {construct_id!r}")
        if execute_output_name is not None:
            mark(CfnOutput(Stack.of(self), execute_output_name,
                           value=self.execute_alias.function_arn,
                           description="the jobguard recovery function's execute alias: "
                                       "name it in the IAM policy of those who may execute "
                                       "a recovery"), f"RecoveryFunction {construct_id!r}")
        texts = recovery_alarms()
        alarm_action = destination.bind(self)
        self.alarms = {
            "errors": errors_alarm(self, "ErrorsAlarm", self.function, action=alarm_action,
                                   runbook=from_text(texts["errors"])),
            "throttles": throttles_alarm(self, "ThrottlesAlarm", self.function,
                                         action=alarm_action,
                                         runbook=from_text(texts["throttles"])),
        }


def jobs_environment(jobs: Sequence[JobDefinition]) -> dict[str, str]:
    """The jobs' own variables (``JobDefinition.environment``), for a function that runs
    the code of all of them; one variable set differently by two jobs is refused."""
    merged: dict[str, str] = {}
    setters: dict[str, str] = {}
    for job in jobs:
        check_extra_environment(job.name, job.environment)
        for key, value in job.environment.items():
            if key in merged and merged[key] != value:
                raise ConfigError("environment", f"jobs {setters[key]!r} and {job.name!r} set "
                                  f"{key} differently; one function runs both jobs' code")
            merged[key], setters[key] = value, setters.get(key, job.name)
    return merged


def plan_only(jobs: Sequence[JobDefinition]) -> frozenset[str]:
    """The jobs of ``jobs`` whose handler module registers no ``BatchJob`` when imported
    here (a plain ``@guarded`` handler): recovery plans them and never executes, so it
    may read their rows and not write them. A module that does not import at synth is
    not judged (the function may recover its job: its writes are granted)."""
    return _judge(jobs)[0]


def _judge(jobs: Sequence[JobDefinition]) -> tuple[frozenset[str], dict[str, str]]:
    """:func:`plan_only`'s jobs, and the jobs not judged with why (their module's import
    failed here: raised, or exited, as a module that checks its variables may)."""
    import importlib

    from jobguard import registry

    found = set()
    not_judged: dict[str, str] = {}
    for job in jobs:
        try:
            importlib.import_module(module_of(job.handler))
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - nothing to judge by
            not_judged[job.name] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        if job.name not in registry.names():
            found.add(job.name)
    return frozenset(found), not_judged


def _refuse_public(stack: Stack, principal: iam.IPrincipal, field_name: str) -> None:
    fragment = json.dumps(stack.resolve(principal.policy_fragment.principal_json))
    if isinstance(principal, iam.AnyPrincipal) or '"*"' in fragment:
        raise ConfigError(field_name, "recovery must not be publicly invokable: name the "
                          "roles or accounts that may invoke it")
