"""The jobguard stack: composes the constructs for a deployment's jobs and wires grants.

The jobs come from ``handlers.jobs.JOBS`` (the definitions the handlers, ``jobguard
runbook`` and ``jobguard drill`` read too). Per job: a :class:`GuardedJob`, and a
:class:`Reconciler` where the job asks for one. Per stack: the table, the code bundle,
the recovery function and the dashboard. The example jobs also get their own data:
crm-sync the change feed it reads and the notes it writes
(:class:`infra.crm_sync.CrmSyncData`), report-export the bucket it writes
(:class:`infra.report_export.ReportExportData`).

A drill deployment (``settings.drills``) builds a drills bundle, so the constructs
deploy every job with its drill timings, set ``JOBGUARD_DRILLS=1`` on every function and
disable the schedules; a local one (``-c jobguard:local=true``, which the constructs read
themselves) creates every schedule disabled (see :class:`infra.settings.StackSettings`).
The constructs' outputs (:mod:`jobguard.deployment`) name everything ``jobguard drill``
drives and inspects; the alarms go where the context says
(:meth:`StackSettings.alarm_destination`).

Example:
    >>> JobGuardStack(app, "JobGuard", jobs=JOBS,
    ...               settings=StackSettings(alarm_emails=("oncall@example.com",)))
    ... # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Acknowledgment, CfnOutput, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from handlers.jobs import CRM_SYNC, REPORT_EXPORT
from jobguard.cdk import (
    GuardedJob,
    JobGuardDashboard,
    JobTable,
    LambdaBundle,
    Reconciler,
    RecoveryFunction,
)
from jobguard.cdk._lint import acknowledge
from jobguard.cdk._text import pascal
from jobguard.cdk.alarm_topic import AlarmTopic
from jobguard.cdk.destination import TOPIC_ID
from jobguard.definitions import JobDefinition
from jobguard.errors import ConfigError

from .crm_sync import CrmSyncData
from .report_export import ReportExportData
from .settings import StackSettings

__all__ = ["HANDLER_PACKAGES", "JobGuardStack"]

ROOT = Path(__file__).resolve().parents[1]
HANDLER_PACKAGES = (ROOT / "handlers",)
"""This repository's handler packages (the jobs, recovery and the reconciler)."""


class JobGuardStack(Stack):
    """Guarded jobs, their queues, schedules and alarms, the recovery Lambda, a dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        jobs: Sequence[JobDefinition],
        settings: StackSettings,
        packages: Sequence[Path] = HANDLER_PACKAGES,
        **kwargs: Any,
    ) -> None:
        names = [job.name for job in jobs]
        if not jobs:
            raise ConfigError("jobs", "the stack needs at least one job")
        if len(set(names)) != len(names) or len({pascal(n) for n in names}) != len(names):
            raise ConfigError("jobs", f"job names must be distinct (one lease per job): {names}")
        kwargs.setdefault("description", f"jobguard: guarded scheduled jobs ({', '.join(names)}), "
                          "their queues, schedules and alarms, and the recovery Lambda")
        operations = settings.operations
        kwargs.setdefault("termination_protection", operations.termination_protection)
        super().__init__(scope, construct_id, **kwargs)
        # The drills bundle makes the constructs deploy the drill timings, and disable the
        # schedules (as -c jobguard:local=true does): the drills deliver every tick, so
        # that what they count is exactly what they sent.

        # a customer-managed key (jobguard:kmsKey) for the table, queues, logs and topic
        self.key = operations.key(self)
        # Every alarm reaches a person, or the context says in writing why not.
        self.alarm_destination = settings.alarm_destination(self, key=self.key)
        self.table = JobTable(self, "Table", alarms=self.alarm_destination,
                              encryption_key=self.key,
                              deletion_protection=operations.deletion_protection)
        self.bundle = LambdaBundle(
            self, "Bundle", packages=packages, dependencies=settings.dependencies,
            powertools_layer_version=settings.powertools_layer_version,
            drills=settings.drills)
        common: dict[str, Any] = {
            "table": self.table, "bundle": self.bundle, "alarms": self.alarm_destination,
            "encryption_key": self.key, "tracing": operations.tracing,
            "log_retention": operations.log_retention}

        # The example job's own data: its tables are named in its definition's
        # environment, which every function running its code gets (the job's, its
        # reconciler's, the recovery's); the grants are wired below.
        self.crm_sync_data: CrmSyncData | None = None
        if CRM_SYNC.name in names:
            self.crm_sync_data = CrmSyncData(self, "CrmSyncData")
            jobs = [self.crm_sync_data.told(job) if job.name == CRM_SYNC.name else job
                    for job in jobs]
        self.jobs = {
            job.name: GuardedJob(self, pascal(job.name), job=job,
                                 trigger_max_concurrency=operations.trigger_max_concurrency,
                                 **common)
            for job in jobs
        }
        self.reconcilers = [
            Reconciler(self, f"{pascal(job.name)}Reconciler", job=job,
                       trigger_queue=self.jobs[job.name].trigger_queue, **common)
            for job in jobs if job.reconciler_schedule
        ]
        self.recovery = RecoveryFunction(
            self, "Recovery", jobs=jobs, invokers=settings.invoker_principals(),
            planners=settings.planner_principals(), **common)
        self.table_alarms: dict[str, cloudwatch.Alarm] = self.table.alarms
        if self.crm_sync_data is not None:  # the example job's grants on its own data
            reconcilers = [r.function for r in self.reconcilers if r.job.name == CRM_SYNC.name]
            self.crm_sync_data.wire(
                runs=[self.jobs[CRM_SYNC.name].function, self.recovery.function],
                reconciles=reconcilers)
        self.report_export_data: ReportExportData | None = None
        if REPORT_EXPORT.name in self.jobs:
            self.report_export_data = ReportExportData(self, "ReportExportData")
            self.report_export_data.wire(runs=[self.jobs[REPORT_EXPORT.name].function])
        if self.key is not None:
            self._acknowledge_key_grants()
        self.dashboard = JobGuardDashboard(
            self, "Dashboard", jobs=list(self.jobs.values()), reconcilers=self.reconcilers,
            recovery=self.recovery, others=list(self.table_alarms.values()))
        acknowledge(self.dashboard.dashboard, "E3002",
                    "CloudFormation takes Tags on AWS::CloudWatch::Dashboard (the CDK tags it "
                    "from the registry schema); the schema bundled with the pinned cfn-lint "
                    "predates that")

        # TableName, AlarmTopicArn, <Job>Job, <Job>ReconcilerFunctionName and the
        # recovery's come from the constructs (jobguard.deployment); these are this
        # repository's own.
        CfnOutput(self, "DashboardName", value=self.dashboard.dashboard.dashboard_name)
        if self.crm_sync_data is not None:
            CfnOutput(self, "CrmContactChangesTable", value=self.crm_sync_data.feed.table_name)
            CfnOutput(self, "CrmNotesTable", value=self.crm_sync_data.notes.table_name)
        if self.report_export_data is not None:
            CfnOutput(self, "ReportBucketName", value=self.report_export_data.bucket.bucket_name)

    def _acknowledge_key_grants(self) -> None:
        """CDK's grants on the customer-managed key (table, queues, failed-event
        destinations) name two KMS action families; the resource is that one key."""
        for function in self.functions:
            if function.role is None:
                continue
            for family in ("kms:GenerateDataKey*", "kms:ReEncrypt*"):
                Validations.of(function.role).acknowledge(Acknowledgment(
                    id=f"AwsSolutions-IAM5[Action::{family}]",
                    reason="jobguard:kmsKey: the function reads and writes the table and "
                           "queues encrypted with the deployment's customer-managed key; "
                           f"CDK's encrypt/decrypt grant names the {family} family (the data "
                           "key variants the services request on the caller's behalf) on "
                           "that one key's ARN only.",
                ))

    @property
    def alarm_topic(self) -> AlarmTopic | None:
        """The stack's own alarm topic (``jobguard:alarmEmail``), if it made one."""
        found = self.node.try_find_child(TOPIC_ID)
        return found if isinstance(found, AlarmTopic) else None

    @property
    def alarms(self) -> dict[str, cloudwatch.Alarm]:
        """Every alarm of the stack, by ``<owner>/<kind>``: ``job:<name>``,
        ``reconciler:<name>``, ``recovery`` or ``table`` as the owner."""
        found = {f"job:{name}/{kind}": alarm
                 for name, guarded in self.jobs.items() for kind, alarm in guarded.alarms.items()}
        found |= {f"reconciler:{r.job.name}/{kind}": alarm
                  for r in self.reconcilers for kind, alarm in r.alarms.items()}
        found |= {f"recovery/{kind}": alarm for kind, alarm in self.recovery.alarms.items()}
        found |= {f"table/{kind}": alarm for kind, alarm in self.table_alarms.items()}
        return found

    @property
    def functions(self) -> list[lambda_.Function]:
        """Every function this stack creates: the jobs', the reconcilers', recovery's."""
        return [*(j.function for j in self.jobs.values()),
                *(r.function for r in self.reconcilers), self.recovery.function]
