"""The scheduled reconciler: sweeps one job's unresolved items against the destination.

Takes the job's lease like any run (it never overlaps the job's own runs), so a SKIP of
the sweep while the job runs is expected. ``JOBGUARD_JOB`` names the job; the job's
module is listed in ``JOBGUARD_RECOVERY_MODULES``.

A sweep that ran to its end counts ``SweepSucceeded`` (with the job's dimension): the
reconciler's dead-man alarm, whose silence means no sweep did (a skipped or failed sweep
counts nothing).
"""

from __future__ import annotations

from typing import Any

from .. import environment, registry
from ..batch import sweep
from ..guard import GuardedJob
from ..run import current_run

SWEEP_SUCCEEDED = "SweepSucceeded"
"""The metric a completed sweep counts: the reconciler's dead-man alarm reads it."""

_guards: dict[str, GuardedJob] = {}


def lambda_handler(event: Any, context: Any) -> Any:
    name = environment.job_name()  # a ConfigError naming JOBGUARD_JOB if missing or malformed
    if name not in _guards:
        registry.load_from_environment()
        job = registry.get(name)
        # The sweep is a run of the job (same lease), skipped while the job runs. With
        # the job's queue (the stack sets it for a queued job), its release sends a
        # pending follow-up again and wakes a deferred trigger.
        config = job.config.__class__(**{**_fields(job.config), "policy": "SKIP",
                                         "trigger_queue_url": environment.optional(
                                             environment.TRIGGER_QUEUE_URL)})
        # A sweep serves no trigger: it never absorbs the job's pending follow-up.
        _guards[name] = GuardedJob(
            config, lambda e, c: _sweep(job),
            serves_triggers=False,
            **job._guard_options,  # noqa: SLF001 - the job's own wiring (tests, local)
        )
    return _guards[name]({"job": name, "manual": True,
                          "trigger_id": f"reconcile-{getattr(context, 'aws_request_id', 'local')}"},
                         context)


def _sweep(job: Any) -> dict[str, Any]:
    run = current_run()
    report = sweep(run, job.reconcile).as_dict()
    run.telemetry_count(SWEEP_SUCCEEDED)
    return report


def _fields(config: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}
