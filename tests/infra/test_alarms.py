"""Alarms exist for every decision an operator must make, each with its runbook text,
on the metrics jobguard emits; one dashboard shows them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.constructs.alarms import DECIDE
from jobguard.observability import NAMESPACE

from .conftest import EXPORT, NIGHTLY, PRICES, TOPIC, Synth

ALL_KINDS = {"overlap", "busy", "lease_lost", "uncertain", "reconciled", "schedule_dlq",
             "errors"}
EXPECTED_KINDS = {
    "crm-sync": ALL_KINDS | {"trigger_dlq"},                  # COALESCE
    "report-export": ALL_KINDS | {"trigger_dlq", "dropped"},    # QUEUE
    NIGHTLY.name: ALL_KINDS,                                    # SKIP
    EXPORT.name: ALL_KINDS | {"trigger_dlq", "dropped"},        # QUEUE
    PRICES.name: ALL_KINDS - {"busy", "lease_lost"},            # REPLACE: lease_lost is the policy
}


def _alarm(synth: Synth, name: str, kind: str) -> dict[str, Any]:
    return synth.properties(synth.stack.jobs[name].alarms[kind])


def _jobguard_metric(alarm: dict[str, Any], job: str) -> str:
    assert alarm["Namespace"] == NAMESPACE
    assert sorted(alarm["Dimensions"], key=lambda d: d["Name"]) == [
        {"Name": "job", "Value": job}, {"Name": "service", "Value": "jobguard"}]
    return str(alarm["MetricName"])


@pytest.mark.parametrize("name", sorted(EXPECTED_KINDS))
def test_each_job_has_the_alarms_its_policy_needs(synth: Synth, name: str) -> None:
    assert set(synth.stack.jobs[name].alarms) == EXPECTED_KINDS[name]


def test_every_alarm_carries_runbook_text_and_notifies_the_topic(synth: Synth) -> None:
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    assert len(alarms) == sum(len(k) for k in EXPECTED_KINDS.values()) + 2  # + reconciler, recovery
    for logical_id, alarm in alarms.items():
        properties = alarm["Properties"]
        description = properties["AlarmDescription"]
        what, _, decide = description.partition(DECIDE)
        assert what.strip() and decide.strip(), f"{logical_id}: {description}"
        assert "Runbook" in description
        assert properties["AlarmActions"] == [TOPIC], logical_id
        assert properties["TreatMissingData"] == "notBreaching", logical_id


@pytest.mark.parametrize(("kind", "metric"), [
    ("lease_lost", "LeaseLost"), ("uncertain", "UncertainOutcomes"),
    ("reconciled", "ReconciliationFindings")])
def test_lease_lost_uncertain_and_findings_alarm_on_the_first_one(synth: Synth, kind: str,
                                                                 metric: str) -> None:
    alarm = _alarm(synth, "crm-sync", kind)
    assert _jobguard_metric(alarm, "crm-sync") == metric
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "crm-sync" in alarm["AlarmDescription"]


def test_overlap_ahead_is_run_duration_above_a_share_of_the_interval(synth: Synth) -> None:
    alarm = _alarm(synth, "crm-sync", "overlap")
    assert _jobguard_metric(alarm, "crm-sync") == "RunDuration"
    assert alarm["Statistic"] == "Maximum"
    assert alarm["Threshold"] == 0.8 * 5 * 60 * 1000  # 80% of rate(5 minutes), in ms
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert "Overlap ahead" in alarm["AlarmDescription"]
    # a cron job has no interval: its timeout is the yardstick
    cron = _alarm(synth, NIGHTLY.name, "overlap")
    assert cron["Threshold"] == 0.8 * 10 * 60 * 1000


def test_busy_triggers_in_a_row_use_the_policys_metric_one_period_per_tick(synth: Synth) -> None:
    coalesce = _alarm(synth, "crm-sync", "busy")
    assert _jobguard_metric(coalesce, "crm-sync") == "TriggersCoalesced"
    assert coalesce["Period"] == 300 and coalesce["Threshold"] == 1
    assert coalesce["EvaluationPeriods"] == coalesce["DatapointsToAlarm"] == 3
    queue = _alarm(synth, EXPORT.name, "busy")
    assert _jobguard_metric(queue, EXPORT.name) == "TriggersQueued"
    assert queue["Period"] == 900
    # cron: "in a row" cannot be a period, so: that many within a day
    skip = _alarm(synth, NIGHTLY.name, "busy")
    assert _jobguard_metric(skip, NIGHTLY.name) == "TriggersSkipped"
    assert skip["Period"] == 86400 and skip["Threshold"] == 3
    assert skip["EvaluationPeriods"] == 1


def test_a_dropped_trigger_alarms_for_queue_jobs(synth: Synth) -> None:
    alarm = _alarm(synth, EXPORT.name, "dropped")
    assert _jobguard_metric(alarm, EXPORT.name) == "TriggersDropped"
    assert "max_queued" in alarm["AlarmDescription"]


@pytest.mark.parametrize("kind", ["schedule_dlq", "trigger_dlq"])
def test_a_dead_letter_queue_that_is_not_empty_alarms(synth: Synth, kind: str) -> None:
    job = synth.stack.jobs["crm-sync"]
    queue = job.schedule_dlq if kind == "schedule_dlq" else job.trigger_dlq
    assert queue is not None
    alarm = _alarm(synth, "crm-sync", kind)
    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {
        "Fn::GetAtt": [synth.logical_id(queue), "QueueName"]}}]
    assert alarm["Threshold"] == 1


def test_function_errors_alarm_for_every_function(synth: Synth) -> None:
    functions = {synth.logical_id(f) for f in [
        *(j.function for j in synth.stack.jobs.values()), synth.stack.recovery.function,
        *(r.function for r in synth.stack.reconcilers)]}
    alarmed = {a["Properties"]["Dimensions"][0]["Value"]["Ref"]
               for a in synth.of_type("AWS::CloudWatch::Alarm").values()
               if a["Properties"].get("MetricName") == "Errors"}
    assert alarmed == functions


def test_one_dashboard_shows_every_alarm_and_every_job(synth: Synth) -> None:
    [dashboard] = synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for name in EXPECTED_KINDS:
        assert f"### {name}" in body
    assert NAMESPACE in body
    for logical_id in synth.of_type("AWS::CloudWatch::Alarm"):
        assert logical_id in body, f"alarm {logical_id} is not on the dashboard"


@pytest.mark.parametrize("name", sorted(EXPECTED_KINDS))
def test_the_pager_and_the_runbook_say_the_same_words(synth: Synth, name: str) -> None:
    from jobguard.runbook import job_alarms, render

    job = synth.stack.jobs[name].job
    texts = job_alarms(job)
    assert set(texts) == EXPECTED_KINDS[name]  # one list decides which alarms exist
    runbook = render(job)
    for kind, text in texts.items():
        description = _alarm(synth, name, kind)["AlarmDescription"]
        assert text.means in description and text.decide in description
        assert text.means in runbook and text.decide in runbook
