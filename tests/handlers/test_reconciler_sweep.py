"""The reconciler Lambda's heartbeat: a sweep that ran counts ``SweepSucceeded``, which
the reconciler's dead-man alarm reads; a sweep skipped while the job runs counts nothing,
and neither counts as the job's own ``RunSucceeded``."""

from __future__ import annotations

import time
from types import SimpleNamespace

from jobguard.lease import Acquired
from jobguard.requests import Take
from jobguard.triggers import Trigger, TriggerKind


def test_a_completed_sweep_counts_for_the_dead_man_alarm_and_a_skipped_one_does_not(
        aws, crm, monkeypatch, metrics):
    from jobguard.functions import reconciler

    # GIVEN the reconciler of crm-sync wired as the stack wires it, on this emulator
    monkeypatch.setenv("JOBGUARD_TABLE", aws.table)
    monkeypatch.setenv("JOBGUARD_RECOVERY_MODULES", "handlers.crm_sync")
    monkeypatch.setenv("JOBGUARD_JOB", "crm-sync")
    monkeypatch.setattr(crm.crm_sync, "_guard_options", {"store": aws.store})
    monkeypatch.setattr(reconciler, "_guards", {})
    metrics()  # what the fixtures emitted

    # WHEN a sweep runs THEN it counts SweepSucceeded, never the job's RunSucceeded
    reconciler.lambda_handler({"job": "crm-sync"}, SimpleNamespace(aws_request_id="sweep-1"))
    swept = metrics()
    assert swept.get(reconciler.SWEEP_SUCCEEDED) == 1
    assert "RunSucceeded" not in swept

    # WHEN a sweep arrives while a run of the job holds the lease THEN it is skipped and
    # counts nothing: a reconciler that is always skipped is a silent one
    taken = aws.store.take(Take(Trigger("crm-sync", "crm-sync@manual:R0", TriggerKind.MANUAL),
                                run_id="R0", owner="worker-R0", now_ms=int(time.time() * 1000),
                                lease_ms=60_000, skew_ms=5_000))
    assert isinstance(taken, Acquired)
    reconciler.lambda_handler({"job": "crm-sync"}, SimpleNamespace(aws_request_id="sweep-2"))
    skipped = metrics()
    assert skipped.get("TriggersSkipped") == 1
    assert reconciler.SWEEP_SUCCEEDED not in skipped
