"""The jobguard stack: composes the constructs for a deployment's jobs and wires grants.

The jobs come from ``handlers.jobs.JOBS`` (the definitions the handlers, ``jobguard
runbook`` and ``jobguard drill`` read too). Per job: a :class:`GuardedJob`, and a
:class:`Reconciler` where the job asks for one. Per stack: the table, the code bundle,
the recovery function and the dashboard. The example jobs also get their own data:
crm-sync the change feed it reads and the notes it writes
(:class:`infra.crm_sync.CrmSyncData`), report-export the bucket it writes
(:class:`infra.report_export.ReportExportData`).

A drill deployment (``settings.drills``) deploys every job with its drill timings and
sets ``JOBGUARD_DRILLS=1`` on every function; a local one (``settings.local``) creates
every schedule disabled (see :class:`infra.settings.StackSettings`). The outputs name
everything ``jobguard drill`` drives and inspects.

Example:
    >>> JobGuardStack(app, "JobGuard", jobs=JOBS, settings=StackSettings())
    ... # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Acknowledgment, CfnOutput, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
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
from jobguard.cdk.alarms import table_throttle_alarms
from jobguard.definitions import JobDefinition
from jobguard.drill.switches import DRILLS
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
        if settings.drills:  # seconds, not minutes: a drill waits out leases
            jobs = [job.for_drills() for job in jobs]
        # Locally, Scheduler would deliver its placeholders literally; in a drill
        # deployment (local or a test account) the drills deliver every tick, so that
        # what they count is exactly what they sent.
        enabled = not (settings.local or settings.drills)

        # a customer-managed key (jobguard:kmsKey) for the table, queues, logs and topic
        self.key = operations.key(self)
        self.table = JobTable(self, "Table", encryption_key=self.key,
                              deletion_protection=operations.deletion_protection)
        self.bundle = LambdaBundle(
            self, "Bundle", packages=packages, dependencies=settings.dependencies,
            powertools_layer_version=settings.powertools_layer_version,
            drills=settings.drills)
        # Every alarm reaches a person: the topic given, or one made here.
        self.alarm_topic: AlarmTopic | None = None
        if settings.alarm_topic_arn:
            topic: sns.ITopic = sns.Topic.from_topic_arn(
                self, "AlarmTopic", settings.alarm_topic_arn)
        else:
            self.alarm_topic = AlarmTopic(self, "Alarms", key=self.key)
            topic = self.alarm_topic.topic
        action = cw_actions.SnsAction(topic)
        common: dict[str, Any] = {
            "table": self.table, "bundle": self.bundle, "alarm_action": action,
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
            job.name: GuardedJob(self, pascal(job.name), job=job, schedule_enabled=enabled,
                                 trigger_max_concurrency=operations.trigger_max_concurrency,
                                 **common)
            for job in jobs
        }
        self.reconcilers = [
            Reconciler(self, f"{pascal(job.name)}Reconciler", job=job,
                       schedule_enabled=enabled,
                       trigger_queue=self.jobs[job.name].trigger_queue, **common)
            for job in jobs if job.reconciler_schedule
        ]
        self.recovery = RecoveryFunction(
            self, "Recovery", jobs=jobs, invokers=settings.invoker_principals(),
            planners=settings.planner_principals(), **common)
        self.table_alarms: dict[str, cloudwatch.Alarm] = table_throttle_alarms(
            self.table, self.table.table, action=action)
        if self.crm_sync_data is not None:  # the example job's grants on its own data
            reconcilers = [r.function for r in self.reconcilers if r.job.name == CRM_SYNC.name]
            self.crm_sync_data.wire(
                runs=[self.jobs[CRM_SYNC.name].function, self.recovery.function],
                reconciles=reconcilers)
        self.report_export_data: ReportExportData | None = None
        if REPORT_EXPORT.name in self.jobs:
            self.report_export_data = ReportExportData(self, "ReportExportData")
            self.report_export_data.wire(runs=[self.jobs[REPORT_EXPORT.name].function])
        if settings.drills:
            for function in self.functions:
                function.add_environment(DRILLS, "1")
            # A drill deployment's functions read their job's drill switches (a Query of
            # the job's own DRILL# rows, jobguard.drill.switches) at every hook point:
            # only here, scoped to the job's keys, like every other table grant.
            for name, guarded in self.jobs.items():
                self.table.grant_drill_switches(guarded.function, jobs=[name])
            for reconciler in self.reconcilers:
                self.table.grant_drill_switches(reconciler.function, jobs=[reconciler.job.name])
            self.table.grant_drill_switches(self.recovery.function, jobs=list(self.jobs))
        if self.key is not None:
            self._acknowledge_key_grants()
        self.dashboard = JobGuardDashboard(
            self, "Dashboard", jobs=list(self.jobs.values()), reconcilers=self.reconcilers,
            recovery=self.recovery, others=list(self.table_alarms.values()))
        acknowledge(self.dashboard.dashboard, "E3002",
                    "CloudFormation takes Tags on AWS::CloudWatch::Dashboard (the CDK tags it "
                    "from the registry schema); the schema bundled with the pinned cfn-lint "
                    "predates that")

        CfnOutput(self, "TableName", value=self.table.table_name)
        CfnOutput(self, "DashboardName", value=self.dashboard.dashboard.dashboard_name)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
        if self.crm_sync_data is not None:
            CfnOutput(self, "CrmContactChangesTable", value=self.crm_sync_data.feed.table_name)
            CfnOutput(self, "CrmNotesTable", value=self.crm_sync_data.notes.table_name)
        if self.report_export_data is not None:
            CfnOutput(self, "ReportBucketName", value=self.report_export_data.bucket.bucket_name)
        for name, guarded in self.jobs.items():
            CfnOutput(self, f"{pascal(name)}FunctionName",
                      value=guarded.function.function_name)
            if guarded.trigger_queue is not None:
                CfnOutput(self, f"{pascal(name)}TriggerQueueUrl",
                          value=guarded.trigger_queue.queue_url)
        for reconciler in self.reconcilers:
            CfnOutput(self, f"{pascal(reconciler.job.name)}ReconcilerFunctionName",
                      value=reconciler.function.function_name)

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
