"""One CloudWatch dashboard per stack: every alarm's state, then a few rows per job.

Example:
    >>> JobGuardDashboard(self, "Dashboard", jobs=guarded_jobs, recovery=recovery)
    ... # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from ._job_widgets import function_widget
from .guarded_job import GuardedJob
from .reconciler import Reconciler
from .recovery import RecoveryFunction

__all__ = ["JobGuardDashboard"]


class JobGuardDashboard(Construct):
    """Alarm states, then per job: run duration against the interval, trigger decisions,
    the lease, work items, queue depths and the function; then recovery and reconcilers."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        jobs: Sequence[GuardedJob],
        reconcilers: Sequence[Reconciler] = (),
        recovery: RecoveryFunction | None = None,
        others: Sequence[cloudwatch.IAlarm] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        alarms: list[cloudwatch.IAlarm] = [a for j in jobs for a in j.alarms.values()]
        alarms += list(others)
        alarms += [a for r in reconcilers for a in r.alarms.values()]
        if recovery is not None:
            alarms += list(recovery.alarms.values())
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard")
        self.dashboard.add_widgets(cloudwatch.AlarmStatusWidget(
            title="jobguard alarms (each description says what to decide)",
            alarms=alarms, width=24,
            height=max(2, 1 + (len(alarms) + 3) // 4)))
        for job in jobs:
            for row in job.widgets():
                self.dashboard.add_widgets(*row)
        functions = [function_widget(r.function, f"{r.job.name} reconciler")
                     for r in reconcilers]
        if recovery is not None:
            functions.append(function_widget(recovery.function, "recovery"))
        if functions:
            self.dashboard.add_widgets(*functions)
