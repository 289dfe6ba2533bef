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

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from handlers.jobs import CRM_SYNC, REPORT_EXPORT
from jobguard.definitions import JobDefinition
from jobguard.drill.switches import DRILLS
from jobguard.errors import ConfigError

from .constructs import (
    GuardedJob,
    JobGuardDashboard,
    JobTable,
    LambdaBundle,
    Reconciler,
    RecoveryFunction,
)
from .constructs._lint import acknowledge
from .constructs._text import pascal
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
        super().__init__(scope, construct_id, **kwargs)
        if settings.drills:  # seconds, not minutes: a drill waits out leases
            jobs = [job.for_drills() for job in jobs]
        # Locally, Scheduler would deliver its placeholders literally; in a drill
        # deployment (local or a test account) the drills deliver every tick, so that
        # what they count is exactly what they sent.
        enabled = not (settings.local or settings.drills)

        self.table = JobTable(self, "Table")
        self.bundle = LambdaBundle(
            self, "Bundle", packages=packages, dependencies=settings.dependencies,
            powertools_layer_version=settings.powertools_layer_version,
            drills=settings.drills)
        action = None
        if settings.alarm_topic_arn:
            action = cw_actions.SnsAction(
                sns.Topic.from_topic_arn(self, "AlarmTopic", settings.alarm_topic_arn))

        self.jobs = {
            job.name: GuardedJob(self, pascal(job.name), job=job, table=self.table,
                                 bundle=self.bundle, alarm_action=action,
                                 schedule_enabled=enabled)
            for job in jobs
        }
        self.reconcilers = [
            Reconciler(self, f"{pascal(job.name)}Reconciler", job=job, table=self.table,
                       bundle=self.bundle, alarm_action=action,
                       dead_letter_queue=self.jobs[job.name].schedule_dlq,
                       schedule_enabled=enabled,
                       trigger_queue=self.jobs[job.name].trigger_queue)
            for job in jobs if job.reconciler_schedule
        ]
        self.recovery = RecoveryFunction(
            self, "Recovery", jobs=jobs, table=self.table, bundle=self.bundle,
            invokers=settings.invoker_principals(), alarm_action=action)
        if CRM_SYNC.name in self.jobs:  # this deployment's example job and its own data
            reconcilers = [r.function for r in self.reconcilers if r.job.name == CRM_SYNC.name]
            self.crm_sync_data: CrmSyncData | None = CrmSyncData(self, "CrmSyncData")
            self.crm_sync_data.wire(
                runs=[self.jobs[CRM_SYNC.name].function, self.recovery.function],
                reconciles=reconcilers)
        else:
            self.crm_sync_data = None
        self.report_export_data: ReportExportData | None = None
        if REPORT_EXPORT.name in self.jobs:
            self.report_export_data = ReportExportData(self, "ReportExportData")
            self.report_export_data.wire(runs=[self.jobs[REPORT_EXPORT.name].function])
        if settings.drills:
            for function in self.functions:
                function.add_environment(DRILLS, "1")
        self.dashboard = JobGuardDashboard(
            self, "Dashboard", jobs=list(self.jobs.values()), reconcilers=self.reconcilers,
            recovery=self.recovery)
        acknowledge(self.dashboard.dashboard, "E3002",
                    "CloudFormation takes Tags on AWS::CloudWatch::Dashboard (the CDK tags it "
                    "from the registry schema); the schema bundled with the pinned cfn-lint "
                    "predates that")

        CfnOutput(self, "TableName", value=self.table.table_name)
        CfnOutput(self, "RecoveryFunctionName", value=self.recovery.function.function_name)
        CfnOutput(self, "DashboardName", value=self.dashboard.dashboard.dashboard_name)
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

    @property
    def functions(self) -> list[lambda_.Function]:
        """Every function this stack creates: the jobs', the reconcilers', recovery's."""
        return [*(j.function for j in self.jobs.values()),
                *(r.function for r in self.reconcilers), self.recovery.function]
