"""A guarded job: its function, its schedule, its trigger queue and its alarms.

Everything is read from one :class:`jobguard.definitions.JobDefinition`, the same object
the handler guards itself with, so the schedule, the queue and the policy cannot drift:

- the function (arm64, the job's timeout and memory, its own log group);
- an EventBridge Scheduler schedule whose input is the tick jobguard expects
  (``job``, ``scheduled_at`` = ``<aws.scheduler.scheduled-time>``, ``execution_id``,
  ``policy``), with a bounded retry policy and a dead-letter queue;
- for ``QUEUE`` and ``COALESCE`` jobs, the SQS FIFO trigger queue (its own DLQ, a
  visibility timeout of at least 6x the function timeout) and an event source mapping
  with batch size 1 and partial batch responses;
- an on-failure destination for its asynchronous ticks (the failed-ticks queue): a
  tick that failed every attempt Lambda made is kept there to be replayed, not lost;
- alarms whose descriptions carry the runbook decision, notifying ``alarms`` (required)
  when they fire and when they are OK again;
- the stack output ``<Job>Job`` (:func:`jobguard.deployment.job_output`): the job as
  deployed, its function and trigger queue, so ``jobguard --stack`` finds them.

Built with a drills bundle (``LambdaBundle(drills=True)``) it deploys the job's drill
timings (:meth:`JobDefinition.for_drills`), sets ``JOBGUARD_DRILLS=1`` and may read the
job's drill switches. With ``-c jobguard:local=true`` (or with drills) its schedule is
created disabled: the drills deliver every tick.

Example:
    >>> GuardedJob(self, "CrmSync", job=CRM_SYNC, table=table, bundle=bundle,
    ...            alarms=alarms_to_email("oncall@example.com"))  # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobguard import environment
from jobguard.callsites import Path, Target, required_actions
from jobguard.config import OverlapPolicy
from jobguard.definitions import VISIBILITY_FACTOR, JobDefinition
from jobguard.deployment import job_output, job_output_key
from jobguard.errors import ConfigError
from jobguard.runbook import ASYNC_RETRIES

from ._context import local_deployment
from ._function import check_extra_environment, python_function, seconds
from ._job_alarms import fleet_job_alarms, own_alarms
from ._job_widgets import job_widgets
from ._outputs import check_free, mark
from ._queues import (
    FAILED_EVENT_ACTIONS,
    RETENTION,
    SendOnlyDestination,
    dead_letter_queue,
    secure_queue,
)
from ._schedule import function_schedule
from .bundle import LambdaBundle
from .destination import AlarmDestination, BoundAlarms, require
from .table import JobTable

__all__ = [
    "FAILED_EVENT_ACTIONS",
    "FleetWiring",
    "MAPPING_ACTIONS",
    "SCHEDULER_MAX_EVENT_AGE",
    "GuardedJob",
    "job_paths",
    "receive_budget",
    "tick_input",
]

MAPPING_ACTIONS: dict[str, str] = {
    "sqs:ReceiveMessage": "the event source mapping polls the trigger queue with the "
                          "function's role (no jobguard code receives)",
    "sqs:DeleteMessage": "the event source mapping deletes a message once its invocation "
                         "reports it done",
    "sqs:GetQueueAttributes": "the event source mapping reads the queue's attributes when it "
                              "is created and while it polls",
}
"""Actions the function's role needs that no jobguard call makes: what the event source
mapping does with it, each with its reason (``tests/infra/test_iam`` allows these extras
and no others)."""


def job_paths(job: JobDefinition) -> frozenset[Path]:
    """The code paths a job's own function runs: every run; its trigger queue's when its
    policy has one, and taking back a queued decision for a ``QUEUE`` job (the only
    delete a run makes); the sweep's reads when its handler reads unresolved items."""
    paths = {Path.RUN}
    if job.config().needs_queue:
        paths.add(Path.QUEUE)
    if job.policy is OverlapPolicy.QUEUE:
        paths.add(Path.QUEUED)
    if job.sweeps_unresolved:
        paths.add(Path.SWEEP)
    if job.max_chain > 1:
        paths.add(Path.CONTINUE)  # a link invokes its own function for the next one
    return frozenset(paths)


MAX_VISIBILITY = timedelta(hours=12)
SCHEDULER_MAX_EVENT_AGE = timedelta(hours=24)
ASYNC_MAX_EVENT_AGE = timedelta(hours=6)
MIN_EVENT_AGE = timedelta(minutes=1)
RETRIES_AFTER_FAILURE = 3
"""Deliveries of a queued trigger whose run failed, before it is moved to the DLQ."""

def tick_input(job: JobDefinition) -> dict[str, str]:
    """The schedule's input: a tick whose identity is the job and its scheduled time."""
    return {
        "job": job.name,
        "scheduled_at": scheduler.ContextAttribute.scheduled_time,
        "execution_id": scheduler.ContextAttribute.execution_id,
        "policy": job.policy.value,
    }


def receive_budget(job: JobDefinition) -> int:
    """How many deliveries a trigger message may take before the DLQ.

    A message whose trigger waits behind an active run is deferred (hidden until the
    holder's lease would end, at least lease - heartbeat ahead) and comes back: during a
    run as long as the function timeout that is at most ``timeout / (lease - heartbeat)
    + 1`` deliveries. Add the one that runs and :data:`RETRIES_AFTER_FAILURE`.
    """
    config = job.config()
    wait_per_delivery: timedelta = config.lease - config.heartbeat
    deferrals = math.ceil(job.timeout / wait_per_delivery) + 1
    return int(deferrals + 1 + RETRIES_AFTER_FAILURE)


@dataclass(frozen=True)
class FleetWiring:
    """What a job of a :class:`jobguard.cdk.JobFleet` shares with the fleet (made by the
    fleet, not by hand): its dead-letter queues, its alarm action, the stack its outputs go
    to. A job wired so has one alarm of its own (and its trigger queue's age), the fleet the
    rest."""

    name: str
    schedule_dlq: sqs.IQueue
    failed_ticks: sqs.IQueue
    trigger_dlq: sqs.IQueue | None
    action: BoundAlarms
    runbook: str | None
    output_stack: Stack


def _clamp(value: timedelta, low: timedelta, high: timedelta) -> timedelta:
    return max(low, min(value, high))


class GuardedJob(Construct):
    """One job, wired exactly as jobguard expects.

    Args:
        job: the job definition (the single source of truth).
        table: the stack's :class:`JobTable`.
        bundle: the stack's :class:`LambdaBundle` (must contain the job's handler); a
            drills bundle makes this a drill deployment of the job.
        alarms: where its alarms go (required): :func:`jobguard.cdk.alarms_to_email`,
            :func:`~jobguard.cdk.alarms_to_topic` or :func:`~jobguard.cdk.alarms_off`.
        log_retention: how long the function's logs are kept.
        queue_visibility_timeout: the trigger queue's visibility timeout; at least 6x the
            function timeout (the default), at most 12 h.
        schedule_retry_attempts: Scheduler's retries of a tick it could not deliver
            (0-185); retries stop once the tick is older than the job's ``stale_after``.
        schedule_enabled: False creates the schedule DISABLED (a local emulator that
            cannot fill in the scheduled time; ticks are then delivered by hand). By
            default disabled for ``-c jobguard:local=true`` and a drills bundle.
        encryption_key: a customer-managed KMS key for its queues and log group (SSE-SQS
            and CloudWatch Logs' own encryption when not given).
        tracing: X-Ray active tracing, each run traced by the Powertools Tracer.
        trigger_max_concurrency: the trigger queue's event source mapping's maximum
            concurrency (2-1000; Lambda's default when not given).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job: JobDefinition,
        table: JobTable,
        bundle: LambdaBundle,
        alarms: AlarmDestination | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        queue_visibility_timeout: timedelta | None = None,
        schedule_retry_attempts: int = 3,
        schedule_enabled: bool | None = None,
        encryption_key: kms.IKey | None = None,
        tracing: bool = False,
        trigger_max_concurrency: int | None = None,
        fleet: FleetWiring | None = None,
    ) -> None:
        destination = require(alarms, f"GuardedJob {construct_id!r}") if fleet is None else None
        check_free(fleet.output_stack if fleet is not None else scope, job_output_key(job.name),
                   field="job", what=(f"job {job.name!r} (names that differ only in '-', '_' "
                                      "and '.' share one)"))
        super().__init__(scope, construct_id)
        self.fleet = fleet
        self.definition = job
        """The job as given (:attr:`job` is the job as deployed)."""
        self.drills = bundle.drills
        if self.drills:  # seconds, not minutes: a drill waits out leases
            job = job.for_drills()
        self.job = job
        if schedule_enabled is None:
            schedule_enabled = not (self.drills or local_deployment(self))
        if trigger_max_concurrency is not None and (
                isinstance(trigger_max_concurrency, bool)
                or not isinstance(trigger_max_concurrency, int)
                or not 2 <= trigger_max_concurrency <= 1000):
            raise ConfigError("trigger_max_concurrency", "must be an integer 2-1000 (Lambda's "
                              f"range), got {trigger_max_concurrency!r}")
        visibility = self._visibility(queue_visibility_timeout)
        # Every safety rule again, against what is deployed here: this function's
        # timeout, this queue's visibility timeout and retention.
        self.config = job.check_deployment(
            function_timeout=job.timeout, queue_visibility_timeout=visibility,
            queue_retention=timedelta(seconds=RETENTION.to_seconds()))
        if not isinstance(schedule_retry_attempts, int) or not 0 <= schedule_retry_attempts <= 185:
            raise ConfigError("schedule_retry_attempts",
                              f"must be 0-185 (Scheduler's range), got {schedule_retry_attempts!r}")
        check_extra_environment(job.name, job.environment)

        self.trigger_queue: sqs.Queue | None = None
        self.trigger_dlq: sqs.IQueue | None = None
        self.trigger_mapping: lambda_.EventSourceMapping | None = None
        env = {environment.TABLE: table.table_name}
        overlap = job.overlap_threshold(job.timeout)
        if fleet is not None:
            env[environment.FLEET] = fleet.name
            if overlap is not None:
                env[environment.OVERLAP_AFTER_MS] = str(int(overlap.total_seconds() * 1000))
        if self.config.needs_queue:
            if fleet is not None and fleet.trigger_dlq is None:
                raise ConfigError("fleet", f"{job.name} has a trigger queue "
                                  f"({job.policy.value}): the fleet needs a trigger DLQ")
            trigger_dlq = dead_letter_queue(
                self, "TriggerDlq", fifo=True,
                holds=f"trigger messages of {job.name} that never ran", for_queue=True,
                encryption_key=encryption_key) if fleet is None else fleet.trigger_dlq
            assert trigger_dlq is not None
            self.trigger_dlq = trigger_dlq
            self.trigger_queue = secure_queue(
                self, "TriggerQueue", fifo=True, visibility_timeout=seconds(visibility),
                dead_letter_queue=sqs.DeadLetterQueue(
                    queue=trigger_dlq, max_receive_count=receive_budget(job)),
                encryption_key=encryption_key,
            )
            env[environment.TRIGGER_QUEUE_URL] = self.trigger_queue.queue_url

        self.function = python_function(
            self, "Function",
            bundle=bundle, handler=job.handler, timeout=job.timeout, memory_mb=job.memory_mb,
            environment={**job.environment, **env},
            description=f"jobguard job {job.name} ({job.policy.value}, {job.schedule}). "
                        f"{job.description}",
            log_retention=log_retention,
            tracing=tracing,
            log_key=encryption_key,
        )
        self.paths = job_paths(job)
        table.grant_paths(self.function, jobs=[job.name], paths=self.paths)
        if Path.CONTINUE in self.paths and self.function.role is not None:
            # invoking itself for the next link of a chain: a policy of its own (the
            # function does not wait for it, so its own ARN makes no dependency cycle)
            iam.Policy(self, "ContinuePolicy", roles=[self.function.role], statements=[
                iam.PolicyStatement(actions=list(required_actions(self.paths,
                                                                  Target.FUNCTION)),
                                    resources=[self.function.function_arn])])
        if self.drills:  # its own drill switch rows, only in a drill deployment
            table.grant_drill_switches(self.function, jobs=[job.name])
        if encryption_key is not None and self.trigger_queue is not None:
            # sending, deferring and receiving on a queue encrypted with the key
            encryption_key.grant_encrypt_decrypt(self.function)
        if self.trigger_queue is not None:
            queue_actions = required_actions(self.paths, Target.TRIGGER_QUEUE)
            self.function.add_to_role_policy(iam.PolicyStatement(
                actions=sorted({*queue_actions, *MAPPING_ACTIONS}),
                resources=[self.trigger_queue.queue_arn]))
            # One trigger per invocation; a deferred trigger is a reported item failure.
            self.trigger_mapping = lambda_.EventSourceMapping(
                self, "TriggerMapping", target=self.function,
                event_source_arn=self.trigger_queue.queue_arn,
                batch_size=1, report_batch_item_failures=True,
                max_concurrency=trigger_max_concurrency)
            self.trigger_mapping.node.add_dependency(self.function.role or self.function)
        # A tick retried by Lambda later than stale_after would only be recorded stale.
        # One that failed every attempt is kept on the failed-ticks queue, to replay.
        self.max_event_age = _clamp(self.config.stale_after, MIN_EVENT_AGE, ASYNC_MAX_EVENT_AGE)
        self.failed_ticks = dead_letter_queue(
            self, "FailedTicks", fifo=False,
            holds=f"ticks of {job.name} that failed every attempt Lambda made",
            for_queue=False, of="the function's asynchronous invocations (on-failure "
                                "destination)", encryption_key=encryption_key,
        ) if fleet is None else fleet.failed_ticks
        self.function.configure_async_invoke(
            retry_attempts=ASYNC_RETRIES,
            max_event_age=seconds(self.max_event_age),
            on_failure=SendOnlyDestination(self.failed_ticks))

        self.schedule_dlq = dead_letter_queue(
            self, "ScheduleDlq", fifo=False,
            holds=f"ticks of {job.name} that EventBridge Scheduler could not deliver",
            for_queue=False, encryption_key=encryption_key,
        ) if fleet is None else fleet.schedule_dlq
        self.schedule = function_schedule(
            self, "Schedule",
            function=self.function, expression=job.schedule, payload=tick_input(job),
            dead_letter_queue=self.schedule_dlq, retry_attempts=schedule_retry_attempts,
            max_event_age=_clamp(self.config.stale_after, MIN_EVENT_AGE,
                                 SCHEDULER_MAX_EVENT_AGE),
            description=f"jobguard tick for {job.name}",
            enabled=schedule_enabled,
        )
        self.schedule_enabled = schedule_enabled
        self.destination = destination
        if fleet is None:
            assert destination is not None
            self.alarms = own_alarms(self, destination.bind(self, job=job.name))
            stack, runbook_link = Stack.of(self), destination.runbook
        else:
            self.alarms = fleet_job_alarms(self, fleet.action)
            stack, runbook_link = fleet.output_stack, fleet.runbook
        self.output = CfnOutput(
            stack, job_output_key(job.name),
            value=stack.to_json_string(job_output(
                job=job, function=self.function.function_name,
                queue_url=self.trigger_queue.queue_url if self.trigger_queue else None,
                drills=self.drills, runbook=runbook_link,
                fleet=fleet.name if fleet is not None else None)),
            description=f"jobguard job {job.name} as deployed (jobguard --stack reads it)")
        mark(self.output, f"job {job.name!r}")

    # -- checks ----------------------------------------------------------------------------

    def _visibility(self, override: timedelta | None) -> timedelta:
        minimum: timedelta = self.job.timeout * VISIBILITY_FACTOR
        if override is None:
            default: timedelta = self.job.queue_visibility_timeout  # the definition's 6x
            return max(default, minimum)
        if not isinstance(override, timedelta):
            raise ConfigError("queue_visibility_timeout",
                              f"must be a datetime.timedelta, got {override!r}")
        # shorter than 6x the function timeout: refused by JobDefinition.check_deployment
        if override > MAX_VISIBILITY:
            raise ConfigError("queue_visibility_timeout",
                              f"{override!r} is longer than SQS allows (12 hours)")
        return override

    # -- dashboard -------------------------------------------------------------------------

    def widgets(self) -> list[list[cloudwatch.IWidget]]:
        """Rows of dashboard widgets for this job (:mod:`._job_widgets`)."""
        return job_widgets(self)
