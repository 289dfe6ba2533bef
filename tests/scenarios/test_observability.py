"""Operators see decisions as metrics (EMF) and logs keyed by run id, trigger id, fence."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from jobguard.clock import to_ms
from tests.conftest import emf_totals

from ._support import Gate, Recorder, in_thread, make_job, tick


def test_a_skip_and_a_run_emit_their_metrics_and_keyed_logs(aws, clock, capsys, log_lines):
    gate, rec = Gate(), Recorder()
    job = make_job(aws, clock, rec.handler(lambda t: gate))
    thread, _ = in_thread(lambda: job(tick("crm-sync", clock.now() - timedelta(seconds=10)),
                                      None))
    assert gate.entered.wait(10)
    gate.entered.clear()
    skipped = job(tick("crm-sync", clock.now()), None)
    gate.release.set()
    thread.join(120)  # a loaded 2-core machine can take seconds; the run must have ended
    assert not thread.is_alive()

    out = capsys.readouterr().out
    metrics = emf_totals(out)
    assert metrics["TriggersSkipped"] == 1
    # the run's acquisition; the skip decided from its read of the lease row, sending none
    assert metrics["LeaseAcquireAttempts"] == 1
    assert "RunDuration" in metrics
    assert metrics["RunSucceeded"] == 1  # the dead-man alarm's heartbeat: one run, one
    logs = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    ended = [entry for entry in logs if entry["message"] == "run ended"]
    assert ended and ended[0]["fence"] == 1 and ended[0]["status"] == "succeeded"
    not_run = [entry for entry in logs if entry["message"] == "trigger not run"]
    assert not_run[0]["decision"] == "skipped"
    assert not_run[0]["holder_run_id"] == skipped["holder_run_id"]
    assert "fence" not in not_run[0]  # the holder's keys never leak into another thread


def test_only_a_run_that_succeeded_feeds_the_dead_man_alarm(aws, clock, capsys):
    # GIVEN a job whose handler raises
    def fail(event, context):
        raise RuntimeError("destination down")

    job = make_job(aws, clock, fail)
    # WHEN a tick runs it THEN the run ends (RunDuration) but reports no success
    with pytest.raises(RuntimeError):
        job(tick("crm-sync", clock.now()), None)
    metrics = emf_totals(capsys.readouterr().out)
    assert "RunDuration" in metrics and "RunSucceeded" not in metrics


def test_a_tick_that_finds_the_job_paused_is_counted_for_the_paused_alarm(aws, clock, capsys):
    # GIVEN a paused job
    ran = []
    job = make_job(aws, clock, lambda event, context: ran.append(event))
    aws.store.pause("crm-sync", reason="destination maintenance", now_ms=to_ms(clock.now()))
    # WHEN two ticks arrive THEN each is counted paused, nothing ran, nothing succeeded
    for minutes in (0, 5):
        outcome = job(tick("crm-sync", clock.now() - timedelta(minutes=minutes)), None)
        assert outcome["decision"] == "paused"
    metrics = emf_totals(capsys.readouterr().out)
    assert metrics["TriggersPaused"] == 2
    assert "RunSucceeded" not in metrics and not ran
