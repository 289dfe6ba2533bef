"""The jobs of the example fleet (``infra.fleet``): one handler for every job.

Job ``fleet-job-007``'s function runs ``handlers.fleet.job_007``, made on first use (a
module ``__getattr__``, which Lambda's ``getattr`` calls); a run claims the trigger's one
work item and completes it: enough to show the lease, the run records and the ledger per
job.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from jobguard import OverlapPolicy, WorkId, current_run, guarded
from jobguard.definitions import JobDefinition

__all__ = ["fleet_jobs"]

MODULE = "handlers.fleet"
_POLICIES = (OverlapPolicy.SKIP, OverlapPolicy.COALESCE, OverlapPolicy.SKIP,
             OverlapPolicy.QUEUE, OverlapPolicy.SKIP, OverlapPolicy.REPLACE)
"""Half the fleet SKIP, the rest the other policies (a third with a trigger queue)."""


def fleet_jobs(count: int) -> tuple[JobDefinition, ...]:
    """``count`` jobs, ``fleet-job-001``..., every 5 minutes to every hour, policies mixed."""
    jobs = []
    for number in range(1, count + 1):
        name = f"fleet-job-{number:03d}"
        handler = f"{MODULE}.job_{number:03d}"
        minutes = (5, 10, 15, 30, 60)[number % 5]
        jobs.append(JobDefinition(
            name=name, handler=handler, schedule=f"rate({minutes} minutes)",
            policy=_POLICIES[number % len(_POLICIES)], timeout=timedelta(minutes=2),
            lease=timedelta(minutes=1),
            description=f"example fleet job {number} of {count}"))
    return tuple(jobs)


_guarded: dict[str, Callable[[Any, Any], Any]] = {}


def _work(event: Any, context: Any) -> None:
    run = current_run()
    records = [{"id": run.trigger.trigger_id}]
    for item in run.claim(records, work_id=lambda r: WorkId(r["id"], "tick")):
        with item:
            item.complete(destination_id=item.key)


def __getattr__(attribute: str) -> Callable[[Any, Any], Any]:
    if not attribute.startswith("job_") or not attribute[4:].isdigit():
        raise AttributeError(attribute)
    handler = _guarded.get(attribute)
    if handler is None:
        job = fleet_jobs(int(attribute[4:]))[-1]
        handler = _guarded[attribute] = guarded(job.as_deployed().config())(_work)
    return handler
