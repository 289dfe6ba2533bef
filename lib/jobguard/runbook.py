"""A job's runbook, generated from its definition (the same one the stack deploys).

:func:`render` writes the page ``jobguard runbook`` prints: what the job's policy does
with a trigger that meets an active run, its alarms, how to recover. The alarm texts are
:mod:`jobguard.runbook_alarms` (the descriptions the CDK stack puts on the alarms, so what
the pager says and what ``jobguard runbook`` says cannot drift), re-exported here, and a
fleet's are :mod:`jobguard.runbook_fleet`.
"""

from __future__ import annotations

from .config import OverlapPolicy
from .definitions import JobDefinition
from .runbook_alarms import (
    ASYNC_RETRIES,
    SWEEP_SILENCE_INTERVALS,
    AlarmText,
    _human,
    busy_metric,
    busy_window,
    job_alarms,
    queue_age_limit,
    reconciler_alarms,
    recovery_alarms,
    sweep_window,
    table_alarms,
)
from .runbook_fleet import fleet_job_alarms

__all__ = ["ASYNC_RETRIES", "SWEEP_SILENCE_INTERVALS", "AlarmText", "busy_metric",
           "busy_window", "job_alarms", "queue_age_limit", "reconciler_alarms",
           "recovery_alarms", "render", "sweep_window", "table_alarms"]


_POLICY_MEANING = {
    OverlapPolicy.SKIP: (
        "A trigger that arrives while a run is active is recorded as `skipped` (naming "
        "the run holding the lease) and dropped: the next tick covers the work. An "
        "occasional skip is expected; a skip on every tick means runs no longer fit the "
        "interval."),
    OverlapPolicy.QUEUE: (
        "A trigger that arrives while a run is active is recorded as `queued` and waits on "
        "the job's FIFO queue; queued triggers run one at a time, in order, after the active "
        "run. Past {job.max_queued} pending triggers, a trigger is `dropped` (and alarms): "
        "every dropped trigger is work that did not happen."),
    OverlapPolicy.COALESCE: (
        "Triggers that arrive while a run is active are recorded as `coalesced` and folded "
        "into exactly one follow-up run, which starts when the active run ends (or once its "
        "lease expires if it died). Many coalesced triggers are normal for a long run."),
    OverlapPolicy.REPLACE: (
        "A trigger that arrives while a run is active takes the lease over with a higher "
        "fence; the old run is refused at its next renewal and recorded `lease_lost`."),
}


def render(job: JobDefinition, *, fleet: str | None = None) -> str:
    """The runbook of ``job`` as Markdown; ``fleet``: the :class:`jobguard.cdk.JobFleet`
    it is deployed in, whose alarms page for it instead of a job's own
    (:func:`jobguard.runbook_fleet.fleet_job_alarms`)."""
    heartbeat = job.config().heartbeat
    lines = [
        f"# Runbook: {job.name}",
        "",
        job.description or "(no description)",
        "",
        f"- schedule: `{job.schedule}`; function timeout {_human(job.timeout)}; batch size "
        f"{job.batch_size}",
        f"- policy: **{job.policy.value}**",
        f"- lease {_human(job.lease)}, renewed every {_human(heartbeat)}; a dead run's lease is "
        f"taken over {_human(job.config().skew_margin)} after it expires",
        "",
        "## When a trigger meets an active run",
        "",
        _POLICY_MEANING[job.policy].format(job=job),
        "",
        "A `stale` trigger arrived more than "
        f"{_human(job.stale_after)} after its scheduled time; `duplicate` is another delivery of a "
        "trigger that already ran; `paused` means the job is paused "
        f"(`jobguard resume {job.name}`)."
        + (" `rejected` is a message on the trigger queue that was no trigger of this job: "
           "recorded with its reason and deleted, never run." if job.config().needs_queue
           else ""),
        "",
        "## Alarms",
        "",
    ]
    if fleet is None:
        alarms = job_alarms(job)
    else:
        alarms = fleet_job_alarms(fleet, job)
        lines += [f"Deployed in fleet `{fleet}`: its own alarms, then the fleet's that page "
                  "for it (`fleet/...`, shared by every job of the fleet: each says how to "
                  "find the job).", ""]
    for key, alarm in alarms.items():
        shared = f" (`{key}`)" if key.startswith("fleet/") else ""
        lines.append(f"- **{alarm.title}**{shared}: {alarm.means} Decide: {alarm.decide}")
    lines += [
        "",
        "## Recovery",
        "",
        "```sh",
        f"jobguard status {job.name}                       # who holds the lease, what is pending",
        f"jobguard runs {job.name} --last 20               # the run log",
        f"jobguard items {job.name} --status uncertain     # items whose outcome is unknown",
        f"jobguard recover {job.name} --from CURSOR --to CURSOR            # plan (dry run)",
        f"jobguard recover {job.name} --from CURSOR --to CURSOR --execute --confirm TOKEN",
        f"jobguard resolve {job.name} WORK_ID --found DEST_ID --reason '...'  # or --not-found",
        f"jobguard pause {job.name} --reason '...'  /  jobguard resume {job.name}",
        f"jobguard release {job.name} --force              # a stuck lease: bumps the fence",
        "```",
        "",
        "Recovery never replays completed items; it reconciles uncertain ones against the "
        "destination first, takes the job's lease (it never overlaps a scheduled run) and "
        "never moves the job's checkpoint. A plain `@guarded` job (not a `BatchJob`) has "
        "no cursors: `recover` plans its unresolved items by `--from-time`/`--to-time` and "
        "cannot replay them; `resolve` each uncertain item after checking the destination, "
        "and its next run retries failed, retryable ones.",
    ]
    return "\n".join(lines) + "\n"
