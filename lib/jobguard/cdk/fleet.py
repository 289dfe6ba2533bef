"""A fleet of guarded jobs in one stack: nested stacks for room, fleet-wide alarms for cost.

CloudFormation refuses a stack of more than 500 resources, and a job alone takes about
35 (its queues, alarms, roles...): a stack reaches the limit at about a dozen jobs. A
:class:`JobFleet` puts its jobs in nested stacks (``AWS::CloudFormation::Stack``,
``jobs_per_stack`` jobs each), so the deployment keeps one stack name for the
operator (``jobguard --stack NAME``) and one ``<Job>Job`` output per job in it (what
:meth:`jobguard.deployment.Deployment.from_outputs` reads; 200 outputs a template allow
well over a hundred jobs).

A job alone costs $1.10-$1.80 a month in alarms and a custom metric per name; in a fleet
each job keeps one alarm of its own (its function was not invoked: the dead-man, on a free
``AWS/Lambda`` metric), a QUEUE or COALESCE job its trigger queue's age too, and the
fleet watches every other failure mode once, on metrics the whole fleet shares: the
jobs' EMF metrics carry the ``fleet`` dimension instead of ``job``, and the fleet has
one schedule dead-letter queue, one failed-ticks queue and one trigger dead-letter queue.
Each alarm's text says how to find the job (:mod:`jobguard.runbook_fleet`). One
dashboard per fleet.

Example:
    >>> fleet = JobFleet(self, "Fleet", jobs=JOBS, table=table, bundle=code,
    ...                  alarms=alarms_to_email("oncall@example.com"))  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jsii
from aws_cdk import CfnOutput, Duration, NestedStack, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct, IValidation

from jobguard.definitions import JobDefinition
from jobguard.errors import ConfigError
from jobguard.observability import FLEET_DIMENSION, NAMESPACE, TRIGGERS_MET_ACTIVE_RUN
from jobguard.runbook_fleet import fleet_alarms, paused_windows

from ._function import seconds
from ._queues import dead_letter_queue
from ._text import pascal
from .alarms import SERVICE, dlq_alarm, from_text, runbook_alarm
from .bundle import LambdaBundle
from .destination import AlarmDestination, require
from .guarded_job import FleetWiring, GuardedJob
from .table import JobTable

__all__ = ["DEFAULT_JOBS_PER_STACK", "JobFleet"]

DEFAULT_JOBS_PER_STACK = 25
"""Jobs per nested stack: a job of a fleet takes 8-13 resources, so 25 stay well under
CloudFormation's 500 (``make bench``: ``fleet_100_resources_max_per_stack``)."""
_MAX_JOBS_PER_STACK = 35
_BUSY_HOURS = 3
_ALARMS_PER_WIDGET = 100  # CloudWatch's limit for an alarm status widget
_MAX_OUTPUTS = 200  # CloudFormation's limit per template (the CDK only warns)


def _outputs(stack: Stack) -> int:
    return sum(1 for c in stack.node.find_all()
               if isinstance(c, CfnOutput) and Stack.of(c) is stack)


@jsii.implements(IValidation)
class _OutputLimit:
    """Refuses the synthesis of a fleet whose stack (or a nested stack of it) has more
    outputs than CloudFormation takes: the deployment would fail after the upload."""

    def __init__(self, stacks: list[Stack]) -> None:
        self.stacks = stacks

    def validate(self) -> list[str]:
        return [f"jobs: stack {stack.stack_name!r} has {count} outputs and CloudFormation "
                f"takes at most {_MAX_OUTPUTS} (each job of a fleet is one): split the jobs "
                "over two stacks" for stack in self.stacks
                if (count := _outputs(stack)) > _MAX_OUTPUTS]


class JobFleet(Construct):
    """Many guarded jobs: each in a nested stack, watched by fleet-wide alarms.

    Args:
        jobs: the job definitions (distinct names).
        table: the stack's :class:`JobTable`.
        bundle: the stack's :class:`LambdaBundle` (with every job's handler).
        alarms: where the alarms go (required), as for :class:`GuardedJob`.
        name: the fleet's name: the ``fleet`` dimension of its metrics (default: the
            stack's name). Two fleets of one account need two names.
        jobs_per_stack: jobs in each nested stack (1-35).
        encryption_key: as for :class:`GuardedJob`, for every job.
        log_retention: as for :class:`GuardedJob`, for every job.
        tracing: as for :class:`GuardedJob`, for every job.
        trigger_max_concurrency: as for :class:`GuardedJob`, for every job.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        jobs: Sequence[JobDefinition],
        table: JobTable,
        bundle: LambdaBundle,
        alarms: AlarmDestination | None = None,
        name: str | None = None,
        jobs_per_stack: int = DEFAULT_JOBS_PER_STACK,
        encryption_key: kms.IKey | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        tracing: bool = False,
        trigger_max_concurrency: int | None = None,
    ) -> None:
        destination = require(alarms, f"JobFleet {construct_id!r}")
        jobs = list(jobs)
        names = [job.name for job in jobs]
        if not jobs:
            raise ConfigError("jobs", "a fleet needs at least one job")
        if len(set(names)) != len(names) or len({pascal(n) for n in names}) != len(names):
            raise ConfigError("jobs", "job names must be distinct (one lease per job)")
        if (isinstance(jobs_per_stack, bool) or not isinstance(jobs_per_stack, int)
                or not 1 <= jobs_per_stack <= _MAX_JOBS_PER_STACK):
            raise ConfigError("jobs_per_stack", f"must be an integer 1-{_MAX_JOBS_PER_STACK} "
                              f"(a nested stack holds at most 500 resources), got "
                              f"{jobs_per_stack!r}")
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        if stack.nested:
            raise ConfigError("scope", "put the JobFleet in a stack, not in a nested stack: "
                              "its jobs' outputs belong to the stack the operator names")
        self.name = name or stack.stack_name
        free = _MAX_OUTPUTS - _outputs(stack)
        if len(jobs) > free:
            raise ConfigError("jobs", f"{len(jobs)} jobs need {len(jobs)} outputs of stack "
                              f"{stack.stack_name!r} (one each), which has room for {free} "
                              f"(CloudFormation takes {_MAX_OUTPUTS}): split the jobs over "
                              "two stacks")
        for other in scope.node.root.node.find_all():
            if (isinstance(other, JobFleet) and other is not self and other.name == self.name
                    and (Stack.of(other).account, Stack.of(other).region)
                    == (stack.account, stack.region)):
                raise ConfigError("name", f"JobFleet {construct_id!r}: fleet {self.name!r} "
                                  f"is {other.node.path!r} already (same account and "
                                  "region): its metrics and alarms would mix with this "
                                  "fleet's; give each fleet its own name=")
        self.destination = destination
        action = destination.bind(self)
        queues = any(job.config().needs_queue for job in jobs)
        self.schedule_dlq = dead_letter_queue(
            self, "ScheduleDlq", fifo=False, for_queue=False,
            holds="ticks EventBridge Scheduler could not deliver, of every job of the fleet",
            encryption_key=encryption_key)
        self.failed_ticks = dead_letter_queue(
            self, "FailedTicks", fifo=False, for_queue=False,
            holds="ticks that failed every attempt Lambda made, of every job of the fleet",
            of="the fleet's functions' asynchronous invocations (on-failure destination)",
            encryption_key=encryption_key)
        self.trigger_dlq = dead_letter_queue(
            self, "TriggerDlq", fifo=True, for_queue=False,
            holds="trigger messages that never ran, of every QUEUE and COALESCE job",
            of="the fleet's trigger queues (in its nested stacks)",
            encryption_key=encryption_key) if queues else None
        wiring = FleetWiring(
            name=self.name, schedule_dlq=self.schedule_dlq, failed_ticks=self.failed_ticks,
            trigger_dlq=self.trigger_dlq, action=action, runbook=destination.runbook,
            output_stack=stack)
        self.stacks: list[NestedStack] = []
        self.jobs: dict[str, GuardedJob] = {}
        count = math.ceil(len(jobs) / jobs_per_stack)
        for index in range(count):
            chunk = jobs[index * jobs_per_stack:(index + 1) * jobs_per_stack]
            nested = NestedStack(
                self, f"Jobs{index + 1}",
                description=f"jobguard fleet {self.name}: jobs {index * jobs_per_stack + 1}-"
                            f"{index * jobs_per_stack + len(chunk)} of {len(jobs)}")
            self.stacks.append(nested)
            for job in chunk:
                self.jobs[job.name] = GuardedJob(
                    nested, pascal(job.name), job=job, table=table, bundle=bundle,
                    encryption_key=encryption_key, log_retention=log_retention,
                    tracing=tracing, trigger_max_concurrency=trigger_max_concurrency,
                    fleet=wiring)
        self.alarms = self._alarms(action, queues=queues,
                                  jobs=[job.job for job in self.jobs.values()])
        self.dashboard = self._dashboard()
        self.node.add_validation(_OutputLimit([stack, *self.stacks]))

    # -- alarms ----------------------------------------------------------------------------

    def metric(self, name: str, *, statistic: str = "Sum",
               period: Duration | None = None) -> cloudwatch.Metric:
        """One of the fleet's shared EMF metrics."""
        return cloudwatch.Metric(
            namespace=NAMESPACE, metric_name=name,
            dimensions_map={FLEET_DIMENSION: self.name, "service": SERVICE},
            statistic=statistic, period=period or Duration.minutes(5))

    def _alarms(self, action: object, *, queues: bool, jobs: Sequence[JobDefinition]
                ) -> dict[str, cloudwatch.Alarm]:
        from .destination import BoundAlarms

        assert isinstance(action, BoundAlarms)
        paused = paused_windows(jobs)
        texts = fleet_alarms(self.name, queues=queues, paused=paused)
        found: dict[str, cloudwatch.Alarm] = {}
        for key, alarm in texts.items():
            runbook = from_text(alarm.text)
            construct_id = f"{pascal(key.replace('_', '-'))}Alarm"
            if key == "busy":
                found[key] = runbook_alarm(
                    self, construct_id,
                    metric=self.metric(TRIGGERS_MET_ACTIVE_RUN, period=Duration.hours(1)),
                    threshold=1, evaluation_periods=_BUSY_HOURS, action=action,
                    runbook=runbook)
            elif key in paused:
                window = paused[key]
                found[key] = runbook_alarm(
                    self, construct_id,
                    metric=self.metric("TriggersPaused", period=seconds(window.period)),
                    threshold=1, evaluation_periods=window.periods, action=action,
                    runbook=runbook)
            elif key in ("schedule_dlq", "failed_ticks", "trigger_dlq"):
                queue = {"schedule_dlq": self.schedule_dlq, "failed_ticks": self.failed_ticks,
                         "trigger_dlq": self.trigger_dlq}[key]
                assert queue is not None
                found[key] = dlq_alarm(self, construct_id, queue, action=action,
                                       runbook=runbook)
            elif key == "throttles":
                found[key] = runbook_alarm(
                    self, construct_id, threshold=1, action=action, runbook=runbook,
                    metric=cloudwatch.Metric(namespace="AWS/Lambda", metric_name="Throttles",
                                             statistic="Sum", period=Duration.minutes(5)))
            else:
                assert alarm.metric is not None
                found[key] = runbook_alarm(self, construct_id, metric=self.metric(alarm.metric),
                                           threshold=1, action=action, runbook=runbook)
        return found

    @property
    def all_alarms(self) -> dict[str, cloudwatch.Alarm]:
        """Every alarm of the fleet: ``fleet/<kind>`` and ``job:<name>/<kind>``."""
        found = {f"fleet/{kind}": alarm for kind, alarm in self.alarms.items()}
        found |= {f"job:{name}/{kind}": alarm for name, job in self.jobs.items()
                  for kind, alarm in job.alarms.items()}
        return found

    # -- dashboard -------------------------------------------------------------------------

    def _dashboard(self) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(self, "Dashboard")
        alarms = list(self.all_alarms.values())
        for start in range(0, len(alarms), _ALARMS_PER_WIDGET):
            chunk = alarms[start:start + _ALARMS_PER_WIDGET]
            dashboard.add_widgets(cloudwatch.AlarmStatusWidget(
                title=f"fleet {self.name}: alarms (each description says what to decide)",
                alarms=chunk, width=24, height=max(2, 1 + (len(chunk) + 3) // 4)))

        def graph(title: str, *names: str, statistic: str = "Sum") -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(
                title=title, width=8,
                left=[self.metric(n, statistic=statistic) for n in names])

        queues = [self.schedule_dlq, self.failed_ticks]
        if self.trigger_dlq is not None:
            queues.append(self.trigger_dlq)
        dashboard.add_widgets(
            graph("Run duration (ms, max over the fleet)", "RunDuration", statistic="Maximum"),
            graph("Runs", "RunSucceeded", "RunsIncomplete", "LeaseLost", "RunsNearInterval"),
            graph("Trigger decisions", "TriggersSkipped", "TriggersQueued",
                  "TriggersCoalesced", "TriggersDropped", "TriggersPaused", "TriggersStale"))
        dashboard.add_widgets(
            graph("Work items", "ItemsCompleted", "ItemsFailed", "UncertainOutcomes",
                  "ReconciliationFindings", "ItemsRejected"),
            cloudwatch.GraphWidget(
                title="Dead-letter queues", width=8,
                left=[q.metric_approximate_number_of_messages_visible(statistic="Maximum")
                      for q in queues]),
            cloudwatch.GraphWidget(
                title="Lambda (account)", width=8,
                left=[cloudwatch.Metric(namespace="AWS/Lambda", metric_name=m,
                                        statistic="Sum") for m in ("Errors", "Throttles")]))
        return dashboard
