"""A job's runbook, generated from its definition (the same one the stack deploys).

The alarm texts here are the descriptions the CDK stack puts on the alarms, so what
the pager says and what ``jobguard runbook`` says cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import OverlapPolicy
from .definitions import JobDefinition

__all__ = ["ALARMS", "Alarm", "render"]


@dataclass(frozen=True)
class Alarm:
    """One alarm of a guarded job: what fires it, and the decision it asks for."""

    key: str
    title: str
    fires_when: str
    decision: str

    def description(self, job: JobDefinition) -> str:
        """The alarm description (CloudWatch allows 1024 characters)."""
        text = (f"[{job.name}] {self.title}: {self.fires_when.format(job=job, **_facts(job))} "
                f"Decide: {self.decision.format(job=job, **_facts(job))} "
                f"Runbook: jobguard runbook {job.name}")
        return text[:1024]


def _facts(job: JobDefinition) -> dict[str, str]:
    interval = job.interval
    return {
        "interval": str(interval) if interval else job.schedule,
        "share": f"{job.overlap_alarm_share:.0%}",
        "threshold_s": str(int(interval.total_seconds() * job.overlap_alarm_share))
        if interval else "n/a",
        "policy": job.policy.value,
    }


ALARMS: tuple[Alarm, ...] = (
    Alarm("overlap-ahead", "run duration nearing the schedule interval",
          "the longest run took more than {share} of the {interval} interval ({threshold_s} s).",
          "the next runs will overlap and be handled by the {policy} policy; shrink the batch, "
          "speed up the destination, or lengthen the schedule before triggers pile up."),
    Alarm("skipped-in-a-row", "triggers skipped repeatedly",
          "{job.skipped_alarm_count} or more triggers were skipped, queued past the bound or "
          "found stale in a row.",
          "a run is stuck or too slow: check `jobguard status {job.name}`; if the holder is "
          "dead and its lease will not expire soon, `jobguard release {job.name} --force`."),
    Alarm("lease-lost", "a run lost its lease",
          "a run stopped because it could not renew its lease, or was replaced.",
          "check DynamoDB throttling and the run's duration against the lease; its items "
          "are reconciled by the next run; confirm with `jobguard items {job.name} --status "
          "uncertain`."),
    Alarm("uncertain-items", "work items with an unknown outcome",
          "an item's outcome could not be known (a timeout, a lost response, a dead worker).",
          "nothing is redone blindly: the next run or the reconciler looks each one up at "
          "the destination; if they persist, run `jobguard recover {job.name} --mode "
          "uncertain` for the affected range."),
    Alarm("reconciliation-findings", "uncertain items found at the destination",
          "reconciliation found results at the destination that the ledger did not know.",
          "expected after crashes and timeouts; a steady stream means the destination "
          "answers too slowly for the client's timeout."),
    Alarm("dlq-not-empty", "a trigger or a scheduled delivery was dead-lettered",
          "a message sits in the job's dead-letter queue (a trigger the function could not "
          "take, or a delivery the Scheduler could not make).",
          "inspect the message; once the cause is fixed, redrive it or run the job by hand "
          "(`aws lambda invoke` with a manual trigger)."),
    Alarm("errors", "the function failed",
          "the job's function returned errors.",
          "read the run records (`jobguard runs {job.name} --status failed`) and the "
          "function's logs by run id."),
)

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


def render(job: JobDefinition) -> str:
    """The runbook of ``job`` as Markdown."""
    heartbeat = job.config().heartbeat
    lines = [
        f"# Runbook: {job.name}",
        "",
        job.description or "(no description)",
        "",
        f"- schedule: `{job.schedule}`; function timeout {job.timeout}; batch size "
        f"{job.batch_size}",
        f"- policy: **{job.policy.value}**",
        f"- lease {job.lease}, renewed every {heartbeat}; a dead run's lease is taken over "
        f"{job.config().skew_margin} after it expires",
        "",
        "## When a trigger meets an active run",
        "",
        _POLICY_MEANING[job.policy].format(job=job),
        "",
        "A `stale` trigger arrived more than "
        f"{job.stale_after} after its scheduled time; `duplicate` is another delivery of a "
        "trigger that already ran; `paused` means the job is paused "
        f"(`jobguard resume {job.name}`).",
        "",
        "## Alarms",
        "",
    ]
    for alarm in ALARMS:
        facts = _facts(job)
        lines.append(f"- **{job.name}-{alarm.key}** ({alarm.title}): "
                     f"{alarm.fires_when.format(job=job, **facts)} "
                     f"Decide: {alarm.decision.format(job=job, **facts)}")
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
        f"jobguard pause {job.name} --reason '...'  /  jobguard resume {job.name}",
        f"jobguard release {job.name} --force              # a stuck lease: bumps the fence",
        "```",
        "",
        "Recovery never replays completed items; it reconciles uncertain ones against the "
        "destination first, takes the job's lease (it never overlaps a scheduled run) and "
        "never moves the job's checkpoint.",
    ]
    return "\n".join(lines) + "\n"
