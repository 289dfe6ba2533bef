"""The recovery Lambda (never scheduled) and the reconciler (scheduled where a job asks)."""

from __future__ import annotations

import json

from handlers.jobs import CRM_SYNC
from jobguard.cdk.reconciler import RECONCILER_HANDLER
from jobguard.cdk.recovery import RECOVERY_HANDLER

from .conftest import EXTRA_JOBS, Synth


def test_recovery_runs_the_recovery_handler_long_enough_for_every_jobs_claims(
        synth: Synth) -> None:
    function = synth.properties(synth.stack.recovery.function)
    assert function["Handler"] == RECOVERY_HANDLER
    # a claim lasts at most its job's timeout; recovery outlives every one of them
    longest = max(j.timeout for j in (CRM_SYNC, *EXTRA_JOBS))
    assert function["Timeout"] == longest.total_seconds()


def test_recovery_is_not_scheduled(synth: Synth) -> None:
    recovery = {"Fn::GetAtt": [synth.logical_id(synth.stack.recovery.function), "Arn"]}
    targets = [s["Properties"]["Target"]["Arn"]
               for s in synth.of_type("AWS::Scheduler::Schedule").values()]
    assert recovery not in targets


def test_a_reconciler_exists_only_for_the_job_that_asks_for_one(synth: Synth) -> None:
    [reconciler] = synth.stack.reconcilers
    assert reconciler.job is CRM_SYNC and CRM_SYNC.reconciler_schedule
    assert all(job.reconciler_schedule is None for job in EXTRA_JOBS)
    function = synth.properties(reconciler.function)
    assert function["Handler"] == RECONCILER_HANDLER
    assert function["Timeout"] == CRM_SYNC.timeout.total_seconds()
    schedule = synth.properties(reconciler.schedule)
    assert schedule["ScheduleExpression"] == CRM_SYNC.reconciler_schedule
    assert json.loads(schedule["Target"]["Input"]) == {"job": "crm-sync"}
    # undeliverable sweeps share the job's schedule DLQ (and its alarm)
    dlq = synth.stack.jobs["crm-sync"].schedule_dlq
    assert schedule["Target"]["DeadLetterConfig"] == {
        "Arn": {"Fn::GetAtt": [synth.logical_id(dlq), "Arn"]}}
    assert schedule["Target"]["RetryPolicy"]["MaximumRetryAttempts"] == 3
