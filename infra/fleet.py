"""The example fleet: ``count`` jobs (``handlers.fleet``) in one stack, as a team with a
hundred scheduled integrations would deploy them with :class:`jobguard.cdk.JobFleet`.

``python -m infra.fleet`` synthesizes it (``-c jobguard:fleetJobs=100``, the default; ``-c
jobguard:local=true`` for the local AWS). The bench (``bench.fleet``) and the fleet tests
(``tests/infra/test_fleet.py``, ``tests/local/test_fleet_deploy.py``) build it.

Example:
    >>> app = build_fleet_app(100)  # doctest: +SKIP
    >>> app.synth()  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on sys.path
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import aws_cdk as cdk  # noqa: E402
from aws_cdk import CfnOutput, NestedStack, Stack  # noqa: E402
from aws_cdk import aws_iam as iam  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402
from constructs import Construct  # noqa: E402

from handlers.fleet import fleet_jobs  # noqa: E402
from jobguard.cdk import (  # noqa: E402
    GuardedJob,
    JobFleet,
    JobGuardDashboard,
    JobTable,
    LambdaBundle,
    RecoveryFunction,
    alarms_to_email,
    alarms_to_topic,
)
from jobguard.cdk._text import pascal  # noqa: E402
from jobguard.cdk.alarm_topic import AlarmTopic  # noqa: E402
from jobguard.cdk.fleet import DEFAULT_JOBS_PER_STACK  # noqa: E402

__all__ = ["FLEET_STACK", "FleetStack", "build_fleet_app"]

FLEET_STACK = "JobGuardFleet"
ROOT = Path(__file__).resolve().parents[1]


PER_JOB_STACK = 10
"""Jobs per nested stack when each job has its own alarms (about 35 resources a job)."""


class FleetStack(Stack):
    """The table, the code, ``count`` jobs and the recovery function: a
    :class:`JobFleet`, or (``per_job_alarms``, the comparison) one :class:`GuardedJob`
    per job with its own alarms, ten to a nested stack, and the per-job dashboard."""

    def __init__(self, scope: Construct, construct_id: str, *, count: int,
                 jobs_per_stack: int = DEFAULT_JOBS_PER_STACK, per_job_alarms: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        jobs = fleet_jobs(count)
        alarms = alarms_to_email("oncall@example.com")
        if per_job_alarms:  # one topic for every nested stack's alarms
            alarms = alarms_to_topic(AlarmTopic(self, "Alarms").topic)
        self.table = JobTable(self, "Table", alarms=alarms)
        self.bundle = LambdaBundle(self, "Bundle", packages=[ROOT / "handlers"])
        self.recovery = RecoveryFunction(self, "Recovery", jobs=jobs, table=self.table,
                                         bundle=self.bundle, alarms=alarms,
                                         invokers=[iam.AccountRootPrincipal()])
        if not per_job_alarms:
            self.fleet = JobFleet(self, "Fleet", jobs=jobs, table=self.table,
                                  bundle=self.bundle, alarms=alarms,
                                  jobs_per_stack=jobs_per_stack)
            CfnOutput(self, "DashboardName", value=self.fleet.dashboard.dashboard_name)
            return
        guarded: list[GuardedJob] = []
        for start in range(0, count, PER_JOB_STACK):
            nested = NestedStack(self, f"Jobs{start // PER_JOB_STACK + 1}")
            guarded += [GuardedJob(nested, pascal(job.name), job=job, table=self.table,
                                   bundle=self.bundle, alarms=alarms)
                        for job in jobs[start:start + PER_JOB_STACK]]
        dashboard = JobGuardDashboard(self, "Dashboard", jobs=guarded, recovery=self.recovery,
                                      others=list(self.table.alarms.values()))
        CfnOutput(self, "DashboardName", value=dashboard.dashboard.dashboard_name)


def build_fleet_app(count: int = 100, context: Mapping[str, Any] | None = None, *,
                    outdir: str | None = None, stack: str = FLEET_STACK,
                    jobs_per_stack: int = DEFAULT_JOBS_PER_STACK,
                    per_job_alarms: bool = False) -> cdk.App:
    """The app with the fleet stack and cdk-nag's AWS Solutions checks."""
    from infra.app import cdk_json_context

    app = cdk.App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    FleetStack(app, stack, count=count, jobs_per_stack=jobs_per_stack,
               per_job_alarms=per_job_alarms)
    cdk.Tags.of(app).add("project", "jobguard")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def main() -> None:
    probe = cdk.App()
    count = int(probe.node.try_get_context("jobguard:fleetJobs") or 100)
    stack = probe.node.try_get_context("jobguard:stackName") or FLEET_STACK
    build_fleet_app(count, stack=stack).synth()


if __name__ == "__main__":
    main()
