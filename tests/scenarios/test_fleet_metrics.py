"""A job of a fleet (``JOBGUARD_FLEET`` set, as :class:`jobguard.cdk.JobFleet` sets it)
emits its metrics with the ``fleet`` dimension and its name as a property, so the fleet
is billed one metric per name; a healthy run emits exactly the at-rest metrics the cost
model counts (``bench.cost``); a run past the job's overlap threshold counts
``RunsNearInterval``, which the fleet's overlap alarm watches."""

from __future__ import annotations

import json
import re
from datetime import timedelta
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
    # GIVEN a job deployed in fleet "ops", whose overlap threshold is 30 s
    monkeypatch.setenv(environment.FLEET, "ops")
    monkeypatch.setenv(environment.OVERLAP_AFTER_MS, "30000")

    def takes(seconds: int) -> Any:
        def lambda_handler(event: Any, context: Any) -> None:
            clock.advance(timedelta(seconds=seconds))
            _completes_two(event, context)
        return lambda_handler

    # a run of 30 s is not past the threshold: not counted near its interval
    make_job(aws, clock, takes(30), name="short-job")(tick("short-job", clock.now()), None)
    assert RUNS_NEAR_INTERVAL not in emf_totals(capsys.readouterr().out)
    job = make_job(aws, clock, takes(31))
    # WHEN a tick runs it to success in 31 s
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


def _insights_fields(line: str) -> dict[str, Any]:
    """The fields CloudWatch Logs Insights discovers in a JSON log line: nested objects
    and lists are flattened with dots (``{"a": [1.0]}`` is ``a.0``), as its CloudTrail
    examples show (``items.0.instanceId``)."""
    found: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}{key}.", inner)
        elif isinstance(value, list):
            for index, inner in enumerate(value):
                walk(f"{prefix}{index}.", inner)
        else:
            found[prefix[:-1]] = value

    walk("", json.loads(line))
    return found


def _run_query(query: str, lines: list[str]) -> dict[str, int]:
    """The two shapes of query the fleet's alarm texts may name, run over ``lines``."""
    like = re.fullmatch(r"filter @message like /(.+)/ \| stats count\(\*\) by (\w+)", query)
    present = re.fullmatch(r"filter ispresent\((\w+)\) \| stats sum\(\1\) by (\w+)", query)
    assert like or present, query
    rows: dict[str, int] = {}
    for line in lines:
        fields = _insights_fields(line)
        if like and re.search(like.group(1), line) and like.group(2) in fields:
            key = fields[like.group(2)]
            rows[key] = rows.get(key, 0) + 1
        elif present and present.group(1) in fields and present.group(2) in fields:
            key = fields[present.group(2)]
            rows[key] = rows.get(key, 0) + int(fields[present.group(1)])
    return rows


def test_each_fleet_alarms_query_names_the_job_from_the_lines_the_code_emits(capsys):
    from jobguard.runbook_fleet import fleet_alarms, logs_query

    # GIVEN two jobs of fleet "ops", one losing its lease, the other healthy, and the
    # Powertools log line every job's logger writes beside the EMF blob
    for job, name in (("crm-sync", "LeaseLost"), ("report-export", "RunSucceeded")):
        telemetry = JobTelemetry(job, {environment.FLEET: "ops"})
        telemetry.logger.info(f"{name} happened")
        telemetry.count(name)
        telemetry.flush()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    # THEN the lease-lost alarm's query names the job that lost it, and only that one
    assert _run_query(logs_query("LeaseLost"), lines) == {"crm-sync": 1}
    # AND every counted fleet alarm names its query in its text
    for key, alarm in fleet_alarms("ops", queues=True).items():
        if alarm.metric is not None:
            assert logs_query(alarm.metric) in alarm.text.decide, key


def test_a_fleet_job_whose_every_tick_is_stale_pages(aws, clock, capsys, monkeypatch):
    from datetime import timedelta

    from jobguard.runbook_fleet import fleet_alarms, logs_query

    # GIVEN a job of fleet "ops" whose ticks all arrive past its stale_after (1 hour):
    # its function is invoked (the liveness alarm stays quiet) but it never runs
    monkeypatch.setenv(environment.FLEET, "ops")
    ran: list[Any] = []
    job = make_job(aws, clock, lambda event, context: ran.append(event))
    for late in (2, 3, 4):
        job(tick("crm-sync", clock.now() - timedelta(hours=late)), None)
    out = capsys.readouterr().out
    assert not ran
    emitted = emf_totals(out)
    # THEN a fleet alarm watches a metric those ticks emitted, with the fleet dimension
    paging = {key: alarm for key, alarm in fleet_alarms("ops", queues=False).items()
              if alarm.metric is not None and emitted.get(alarm.metric, 0) >= 1}
    assert set(paging) == {"stale"}, emitted
    assert all(b["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["fleet", "service"]]
               for b in _blobs(out))
    # AND its text names the query, which finds the job in those lines
    alarm = paging["stale"]
    assert logs_query(alarm.metric) in alarm.text.decide  # type: ignore[arg-type]
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert _run_query(logs_query(alarm.metric), lines) == {"crm-sync": 3}  # type: ignore[arg-type]
