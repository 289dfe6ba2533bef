"""The jobs this deployment runs: one definition each, read by the handlers, the CDK
stack (infra/), `jobguard runbook` and `jobguard drill`, so they cannot drift."""

from __future__ import annotations

from datetime import timedelta

from jobguard import OverlapPolicy
from jobguard.definitions import JobDefinition

CRM_SYNC = JobDefinition(
    name="crm-sync",
    handler="handlers.crm_sync.lambda_handler",
    schedule="rate(5 minutes)",
    policy=OverlapPolicy.COALESCE,
    timeout=timedelta(minutes=4),
    lease=timedelta(minutes=2),
    batch_size=25,
    # 75% of the 5-minute interval is 225 s: a run can reach it (it stops taking items
    # 10 s before its 4-minute timeout); 80% would be the timeout itself, never reached.
    overlap_alarm_share=0.75,
    # a backlog larger than one run drains in a chain of up to 12 runs at once, not one
    # run a tick (README "Continuation")
    max_chain=12,
    reconciler_schedule="rate(1 hour)",
    description=(
        "Creates one note per changed CRM contact. A run can take longer than the "
        "5-minute interval; triggers during a run coalesce into one follow-up run, "
        "which picks up every contact changed meanwhile."
    ),
)

REPORT_EXPORT = JobDefinition(
    name="report-export",
    handler="handlers.report_export.lambda_handler",
    schedule="rate(1 hour)",
    policy=OverlapPolicy.QUEUE,
    timeout=timedelta(minutes=2),
    lease=timedelta(minutes=1),
    batch_size=1,
    # A 2-minute run cannot last until the next hourly tick: no overlap alarm (a backlog
    # shows as queued triggers and the trigger queue's age instead).
    overlap_alarm_share=None,
    # A period's tick still runs up to 6 hours late (a long outage, a backlog in the
    # queue): an export is worth making late, unlike a sync that the next tick covers.
    stale_after=timedelta(hours=6),
    sweeps_unresolved=True,  # each run takes up earlier periods left failed or uncertain
    description=(
        "Writes one CSV object per hourly reporting period to S3. Every tick is a "
        "distinct period, so a tick during a run waits in the queue and runs after it: "
        "each period is exported exactly once, in order."
    ),
)

JOBS: tuple[JobDefinition, ...] = (CRM_SYNC, REPORT_EXPORT)
JOBS_BY_NAME = {job.name: job for job in JOBS}


def deployed(job: JobDefinition) -> JobDefinition:
    """``job`` as this function was deployed: the drill timings
    (:meth:`JobDefinition.for_drills`) when its environment enables drills, else as is
    (:meth:`JobDefinition.as_deployed`).

    Example:
        >>> deployed(CRM_SYNC).config().lease  # JOBGUARD_DRILLS unset
        datetime.timedelta(seconds=120)
    """
    return job.as_deployed()
