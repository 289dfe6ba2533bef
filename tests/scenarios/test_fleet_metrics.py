"""A job of a fleet (``JOBGUARD_FLEET`` set, as :class:`jobguard.cdk.JobFleet` sets it)
emits its metrics with the ``fleet`` dimension and its name as a property, so the fleet
is billed one metric per name; a healthy run emits exactly the at-rest metrics the cost
model counts (``bench.cost``); a run past the job's overlap threshold counts
``RunsNearInterval``, which the fleet's overlap alarm watches."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from jobguard import WorkId, current_run, environment
from jobguard.errors import ConfigError
from jobguard.observability import (
    AT_REST_METRICS,
    METRICS,
    RUNS_NEAR_INTERVAL,
    TRIGGERS_MET_ACTIVE_RUN,
    JobTelemetry,
)
from tests.conftest import emf_totals

from ._support import make_job, tick

LIB = Path(__file__).resolve().parents[2] / "lib" / "jobguard"


def _completes_two(event: Any, context: Any) -> None:
    run = current_run()
    for item in run.claim([{"id": "a"}, {"id": "b"}], work_id=lambda r: WorkId(r["id"], "x")):
        with item:
            item.complete(destination_id=item.key)


def _blobs(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()
            if line.startswith("{") and '"_aws"' in line]


def test_a_fleet_job_emits_fleet_metrics_naming_the_job(aws, clock, capsys, monkeypatch):
    # GIVEN a job deployed in fleet "ops", whose overlap threshold is 1 ms
    monkeypatch.setenv(environment.FLEET, "ops")
    monkeypatch.setenv(environment.OVERLAP_AFTER_MS, "1")
    job = make_job(aws, clock, _completes_two)
    # WHEN a tick runs it to success
    job(tick("crm-sync", clock.now()), None)
    out = capsys.readouterr().out
    # THEN every blob has the fleet dimension, not the job's, and names the job
    blobs = _blobs(out)
    assert blobs
    for blob in blobs:
        assert blob["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["fleet", "service"]]
        assert blob["fleet"] == "ops" and blob["job"] == "crm-sync"
    # AND the run counted as near its interval, beside the at-rest metrics
    assert set(emf_totals(out)) == {*AT_REST_METRICS, RUNS_NEAR_INTERVAL}


def test_a_healthy_run_emits_the_at_rest_metrics_per_job(aws, clock, capsys):
    job = make_job(aws, clock, _completes_two)
    job(tick("crm-sync", clock.now()), None)
    out = capsys.readouterr().out
    assert set(emf_totals(out)) == set(AT_REST_METRICS)
    assert all(b["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["job", "service"]]
               for b in _blobs(out))


def test_a_bad_overlap_threshold_is_refused_naming_the_variable():
    with pytest.raises(ConfigError, match=environment.OVERLAP_AFTER_MS):
        JobTelemetry("crm-sync", {environment.FLEET: "ops", environment.OVERLAP_AFTER_MS: "x"})


def test_metrics_lists_every_metric_name_the_sources_emit():
    # what the cost model may be billed for: every count/milliseconds call's name, the
    # decision metrics and the reconciler's sweep
    emitted = {RUNS_NEAR_INTERVAL, TRIGGERS_MET_ACTIVE_RUN}
    for path in LIB.rglob("*.py"):
        text = path.read_text()
        emitted |= set(re.findall(r'(?:count|milliseconds)\(\s*"([A-Za-z]+)"', text))
        emitted |= set(re.findall(r'Decision\.[A-Z]+: "([A-Za-z]+)"', text))
        emitted |= set(re.findall(r'^SWEEP_SUCCEEDED = "([A-Za-z]+)"', text, re.M))
    assert emitted == set(METRICS)


def test_a_fleet_counts_every_busy_trigger_once_for_its_busy_alarm(capsys):
    telemetry = JobTelemetry("crm-sync", {environment.FLEET: "ops"})
    for name in ("TriggersSkipped", "TriggersCoalesced", "TriggersStale"):
        telemetry.count(name)
    telemetry.flush()
    assert emf_totals(capsys.readouterr().out)[TRIGGERS_MET_ACTIVE_RUN] == 2
