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
    reconciler_schedule="rate(1 hour)",
    description=(
        "Creates one note per changed CRM contact. A run can take longer than the "
        "5-minute interval; triggers during a run coalesce into one follow-up run, "
        "which picks up every contact changed meanwhile."
    ),
)

JOBS: tuple[JobDefinition, ...] = (CRM_SYNC,)
JOBS_BY_NAME = {job.name: job for job in JOBS}
