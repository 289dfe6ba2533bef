"""A scheduled reconciler for a job that asks for one (``reconciler_schedule``).

It sweeps the job's unresolved items against the destination. It takes the job's lease
like any run, so it never overlaps the job's own runs (a sweep is skipped while the job
runs). It runs the job's own ``reconcile``, so it gets the job's
``JobDefinition.environment`` (its destination) too: grant it what ``reconcile`` reads
(``notes.grant_read_data(reconciler.function)``). The function reads ``JOBGUARD_TABLE``,
``JOBGUARD_RECOVERY_MODULES`` (the module of the job's handler, which registers the
job) and ``JOBGUARD_JOB``; for a job with a trigger queue also
``JOBGUARD_TRIGGER_QUEUE_URL``: a sweep that held the lease while a follow-up was
pending sends it again and wakes a deferred trigger when it releases, so the follow-up
runs right after the sweep instead of at the next trigger.

It adds the stack output ``<Job>ReconcilerFunctionName``. A drills bundle and
``-c jobguard:local=true`` act on it as on :class:`jobguard.cdk.GuardedJob`.

Example:
    >>> Reconciler(self, "CrmSyncReconciler", job=CRM_SYNC, table=table, bundle=bundle,
    ...            alarms=alarms)  # doctest: +SKIP
"""

from __future__ import annotations

from datetime import timedelta

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobguard import environment
from jobguard.callsites import Path, Target, required_actions
from jobguard.definitions import JobDefinition
from jobguard.deployment import reconciler_output_key
from jobguard.errors import ConfigError
from jobguard.functions.reconciler import SWEEP_SUCCEEDED
from jobguard.runbook import ASYNC_RETRIES, reconciler_alarms, sweep_window

from ._context import local_deployment
from ._function import check_extra_environment, python_function, seconds
from ._outputs import check_free, mark
from ._queues import SendOnlyDestination
from ._queues import dead_letter_queue as new_dead_letter_queue
from ._schedule import function_schedule
from ._text import module_of
from .alarms import (
    async_dropped_alarm,
    dlq_alarm,
    errors_alarm,
    from_text,
    job_metric,
    runbook_alarm,
    throttles_alarm,
)
from .bundle import LambdaBundle
from .destination import AlarmDestination, require
from .table import JobTable

__all__ = ["RECONCILER_HANDLER", "Reconciler", "reconciler_paths"]

RECONCILER_HANDLER = "jobguard.functions.reconciler.lambda_handler"
SWEEP_MAX_EVENT_AGE = timedelta(hours=1)
"""A sweep not delivered within an hour is dropped: the next sweep covers it."""


def reconciler_paths(*, queued: bool) -> frozenset[Path]:
    """A sweep is a run that reads the unresolved items; releasing the lease of a job
    with a trigger queue, it sends the pending follow-up again and wakes a deferred one."""
    return frozenset({Path.RUN, Path.SWEEP, *([Path.FOLLOW_UP] if queued else [])})


def _refuse_plain_job(job: JobDefinition) -> None:
    """A sweep reconciles with a registered ``BatchJob``'s ``reconcile``; for a plain
    ``@guarded`` handler every sweep would be refused at runtime, so it is refused here.
    Judged when the handler's module imports at synth (registering its job); a module
    that does not import here (its dependencies, its variables) is left to the function."""
    import importlib

    from jobguard import registry

    try:
        importlib.import_module(module_of(job.handler))
    except Exception:  # noqa: BLE001 - not importable at synth: nothing to judge by
        return
    if job.name not in registry.names():
        raise ConfigError(
            "reconciler_schedule",
            f"job {job.name!r} ({job.handler}) registers no BatchJob: a reconciler sweeps "
            "with a BatchJob's reconcile, and every sweep of a plain @guarded handler would "
            "be refused. Register the job (jobguard.registry.register), or drop "
            "reconciler_schedule (a plain handler's runs reconcile with claim(reconcile=))")


class Reconciler(Construct):
    """The job's reconciler function and its schedule.

    Args:
        alarms: where its alarms go (required), as for :class:`jobguard.cdk.GuardedJob`.
        dead_letter_queue: where undeliverable sweeps go: by default a queue of its own,
            with its alarm. A job's schedule DLQ would mix sweeps into ticks, under an
            alarm that asks for a manual run of the job.
        schedule_enabled: False creates the sweep's schedule DISABLED (a local
            deployment, where only what a drill delivers runs). By default disabled for
            ``-c jobguard:local=true`` and a drills bundle.
        encryption_key: as for :class:`jobguard.cdk.GuardedJob`.
        tracing: as for :class:`jobguard.cdk.GuardedJob`.
        trigger_queue: the job's trigger queue (a ``QUEUE``/``COALESCE`` job): the sweep
            may send and wake its follow-ups there, nothing else.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job: JobDefinition,
        table: JobTable,
        bundle: LambdaBundle,
        dead_letter_queue: sqs.IQueue | None = None,
        alarms: AlarmDestination | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        handler: str = RECONCILER_HANDLER,
        schedule_enabled: bool | None = None,
        encryption_key: kms.IKey | None = None,
        tracing: bool = False,
        trigger_queue: sqs.IQueue | None = None,
    ) -> None:
        destination = require(alarms, f"Reconciler {construct_id!r}")
        check_free(scope, reconciler_output_key(job.name), field="job",
                   what=f"Reconciler {construct_id!r} of job {job.name!r}")
        super().__init__(scope, construct_id)
        if job.reconciler_schedule is None:
            raise ConfigError("reconciler_schedule",
                              f"job {job.name!r} does not ask for a reconciler")
        sweeps: str = job.reconciler_schedule
        self.drills = bundle.drills
        if self.drills:  # its sweeps run as the job's deployed runs do
            job = job.for_drills()
        self.job = job
        if schedule_enabled is None:
            schedule_enabled = not (self.drills or local_deployment(self))
        job.check_deployment(function_timeout=job.timeout)  # its sweeps run as the job
        _refuse_plain_job(job)
        if trigger_queue is not None and not job.config().needs_queue:
            raise ConfigError("trigger_queue", f"job {job.name!r} ({job.policy.value}) has "
                              "no trigger queue")
        check_extra_environment(job.name, job.environment)
        variables = {
            **job.environment,
            environment.TABLE: table.table_name,
            environment.RECOVERY_MODULES: module_of(job.handler),
            environment.JOB_NAME: job.name,
        }
        if trigger_queue is not None:
            variables[environment.TRIGGER_QUEUE_URL] = trigger_queue.queue_url
        self.function = python_function(
            self, "Function",
            bundle=bundle, handler=handler, timeout=job.timeout, memory_mb=job.memory_mb,
            environment=variables,
            description=f"jobguard reconciler for {job.name} ({job.reconciler_schedule})",
            log_retention=log_retention,
            tracing=tracing,
            log_key=encryption_key,
        )
        self.paths = reconciler_paths(queued=trigger_queue is not None)
        table.grant_paths(self.function, jobs=[job.name], paths=self.paths)
        if self.drills:
            table.grant_drill_switches(self.function, jobs=[job.name])
        if trigger_queue is not None:
            self.function.add_to_role_policy(iam.PolicyStatement(
                actions=list(required_actions(self.paths, Target.TRIGGER_QUEUE)),
                resources=[trigger_queue.queue_arn]))
            if encryption_key is not None:
                encryption_key.grant_encrypt_decrypt(self.function)
        # A sweep that failed every attempt is kept, not lost (the next sweep covers it).
        self.failed_sweeps = new_dead_letter_queue(
            self, "FailedSweeps", fifo=False,
            holds=f"reconciler sweeps of {job.name} that failed every attempt Lambda made",
            for_queue=False, of="the function's asynchronous invocations (on-failure "
                                "destination)", encryption_key=encryption_key)
        self.function.configure_async_invoke(
            retry_attempts=ASYNC_RETRIES, max_event_age=seconds(SWEEP_MAX_EVENT_AGE),
            on_failure=SendOnlyDestination(self.failed_sweeps))
        # no dead-man alarm where the schedule is disabled (local and drill deployments)
        texts = reconciler_alarms(job, own_dead_letter_queue=dead_letter_queue is None,
                                  watched=schedule_enabled)
        alarm_action = destination.bind(self, job=job.name)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        if "no_sweep" in texts:
            # the dead-man alarm: no sweep completed; silence is the symptom, so missing
            # data breaches (a sweep skipped while the job runs counts nothing)
            window = sweep_window(job)
            self.alarms["no_sweep"] = runbook_alarm(
                self, "NoSweepAlarm",
                metric=job_metric(job.name, SWEEP_SUCCEEDED, period=seconds(window.period)),
                threshold=1, comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                evaluation_periods=window.periods,
                missing_data=cloudwatch.TreatMissingData.BREACHING,
                action=alarm_action, runbook=from_text(texts["no_sweep"]))
        if dead_letter_queue is None:
            dead_letter_queue = new_dead_letter_queue(
                self, "ScheduleDlq", fifo=False,
                holds=f"reconciler sweeps of {job.name} Scheduler could not deliver",
                for_queue=False, encryption_key=encryption_key)
            self.alarms["schedule_dlq"] = dlq_alarm(
                self, "ScheduleDlqAlarm", dead_letter_queue, action=alarm_action,
                runbook=from_text(texts["schedule_dlq"]))
        self.schedule_dlq: sqs.IQueue = dead_letter_queue
        self.schedule = function_schedule(
            self, "Schedule",
            function=self.function, expression=sweeps,
            payload={"job": job.name}, dead_letter_queue=dead_letter_queue,
            retry_attempts=3, max_event_age=SWEEP_MAX_EVENT_AGE,
            description=f"jobguard reconciler sweep for {job.name}",
            enabled=schedule_enabled,
        )
        self.alarms["errors"] = errors_alarm(
            self, "ErrorsAlarm", self.function, action=alarm_action,
            runbook=from_text(texts["errors"]))
        self.alarms["throttles"] = throttles_alarm(
            self, "ThrottlesAlarm", self.function, action=alarm_action,
            runbook=from_text(texts["throttles"]))
        self.alarms["async_dropped"] = async_dropped_alarm(
            self, "AsyncDroppedAlarm", self.function, action=alarm_action,
            runbook=from_text(texts["async_dropped"]))
        self.alarms["failed_sweeps"] = dlq_alarm(
            self, "FailedSweepsAlarm", self.failed_sweeps, action=alarm_action,
            runbook=from_text(texts["failed_sweeps"]))
        stack = Stack.of(self)
        output = CfnOutput(stack, reconciler_output_key(job.name),
                           value=self.function.function_name,
                           description=f"the jobguard reconciler of {job.name}")
        mark(output, f"Reconciler {construct_id!r} of job {job.name!r}")
