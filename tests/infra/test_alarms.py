"""Alarms exist for every decision an operator must make, each with its runbook text,
on the metrics jobguard emits; one dashboard shows them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobguard.cdk.alarms import DECIDE
from jobguard.observability import NAMESPACE

from .conftest import EXPORT, NIGHTLY, PRICES, TOPIC, Synth

EVERY_JOB = {"no_success", "paused", "uncertain", "records_rejected", "incomplete",
             "reconciled",
             "schedule_dlq", "errors",
             "throttles", "async_dropped", "failed_ticks"}
BUSY = {"busy", "lease_lost"}  # not REPLACE: there lease_lost is the policy
QUEUED = {"trigger_dlq", "trigger_queue_age", "messages_rejected"}  # QUEUE and COALESCE
EXPECTED_KINDS = {
    "crm-sync": EVERY_JOB | BUSY | QUEUED | {"overlap"},          # COALESCE
    "report-export": EVERY_JOB | BUSY | QUEUED | {"dropped"},     # QUEUE, 2-min runs, hourly
    NIGHTLY.name: EVERY_JOB | BUSY | {"overlap"},                 # SKIP, cron
    EXPORT.name: EVERY_JOB | BUSY | QUEUED | {"dropped"},         # QUEUE, 2-min runs
    PRICES.name: EVERY_JOB | {"overlap"},                         # REPLACE
}
RECONCILER_KINDS = {"no_sweep", "schedule_dlq", "errors", "throttles", "async_dropped",
                    "failed_sweeps"}
RECOVERY_KINDS = {"errors", "throttles"}
TABLE_KINDS = {"read_throttles", "write_throttles"}


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


def test_the_reconciler_recovery_and_table_have_their_alarms(synth: Synth) -> None:
    [reconciler] = synth.stack.reconcilers
    assert set(reconciler.alarms) == RECONCILER_KINDS  # its own DLQ and dead-man alarm
    assert set(synth.stack.recovery.alarms) == RECOVERY_KINDS
    assert set(synth.stack.table_alarms) == TABLE_KINDS


def test_every_alarm_carries_runbook_text_and_notifies_the_topic_when_it_fires_and_ends(
        synth: Synth) -> None:
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    assert len(alarms) == (sum(len(k) for k in EXPECTED_KINDS.values()) + len(RECONCILER_KINDS)
                           + len(RECOVERY_KINDS) + len(TABLE_KINDS))
    assert set(alarms) == {synth.logical_id(a) for a in synth.stack.alarms.values()}
    dead_men = {synth.logical_id(j.alarms["no_success"]) for j in synth.stack.jobs.values()}
    dead_men |= {synth.logical_id(r.alarms["no_sweep"]) for r in synth.stack.reconcilers}
    for logical_id, alarm in alarms.items():
        properties = alarm["Properties"]
        description = properties["AlarmDescription"]
        what, _, decide = description.partition(DECIDE)
        assert what.strip() and decide.strip(), f"{logical_id}: {description}"
        assert "Runbook" in description
        assert properties["AlarmActions"] == [TOPIC], logical_id
        assert properties["OKActions"] == [TOPIC], logical_id
        # only the dead-man alarm counts silence as a breach: its symptom is silence
        expected = "breaching" if logical_id in dead_men else "notBreaching"
        assert properties["TreatMissingData"] == expected, logical_id


@pytest.mark.parametrize(("kind", "metric"), [
    ("lease_lost", "LeaseLost"), ("uncertain", "UncertainOutcomes"),
    ("records_rejected", "ItemsRejected"), ("incomplete", "RunsIncomplete"),
    ("reconciled", "ReconciliationFindings")])
def test_lease_lost_uncertain_and_findings_alarm_on_the_first_one(synth: Synth, kind: str,
                                                                 metric: str) -> None:
    alarm = _alarm(synth, "crm-sync", kind)
    assert _jobguard_metric(alarm, "crm-sync") == metric
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert "crm-sync" in alarm["AlarmDescription"]


def test_overlap_ahead_is_run_duration_above_a_share_of_the_interval_a_run_can_reach(
        synth: Synth) -> None:
    alarm = _alarm(synth, "crm-sync", "overlap")
    assert _jobguard_metric(alarm, "crm-sync") == "RunDuration"
    assert alarm["Statistic"] == "Maximum"
    assert alarm["Threshold"] == 0.75 * 5 * 60 * 1000  # 75% of rate(5 minutes), in ms
    # below what a run can report: 4-minute timeout, less the 10 s time margin
    assert alarm["Threshold"] < (4 * 60 - 10) * 1000
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert "Overlap ahead" in alarm["AlarmDescription"]
    # a cron job has no interval: its timeout is the yardstick
    cron = _alarm(synth, NIGHTLY.name, "overlap")
    assert cron["Threshold"] == 0.8 * 10 * 60 * 1000
    for job in synth.stack.jobs.values():
        if "overlap" in job.alarms:
            threshold = synth.properties(job.alarms["overlap"])["Threshold"]
            assert threshold < (job.job.timeout - job.config.time_margin).total_seconds() * 1000


@pytest.mark.parametrize(("name", "period", "periods"), [
    ("crm-sync", 300, 3),          # rate(5 minutes): 3 intervals
    ("report-export", 3600, 3),    # rate(1 hour)
    (NIGHTLY.name, 86400, 3),      # cron(0 2 * * ? *): a day, derived from the expression
    (PRICES.name, 60, 3),          # rate(1 minute), 50 s runs
])
def test_the_dead_man_alarm_fires_when_no_run_succeeded_for_n_intervals(
        synth: Synth, name: str, period: int, periods: int) -> None:
    alarm = _alarm(synth, name, "no_success")
    assert _jobguard_metric(alarm, name) == "RunSucceeded"
    assert (alarm["Statistic"], alarm["Period"]) == ("Sum", period)
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == periods
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanThreshold", 1)
    assert alarm["TreatMissingData"] == "breaching"  # a disabled schedule sends nothing


def test_a_job_paused_for_a_day_alarms(synth: Synth) -> None:
    # every hour of a day held a tick that found crm-sync paused
    alarm = _alarm(synth, "crm-sync", "paused")
    assert _jobguard_metric(alarm, "crm-sync") == "TriggersPaused"
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 3600, 1)
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == 24
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    # hourly report-export: two-hour periods, so each holds a tick whatever its minute
    hourly = _alarm(synth, "report-export", "paused")
    assert (hourly["Period"], hourly["EvaluationPeriods"]) == (7200, 12)


@pytest.mark.parametrize(("name", "seconds"), [
    ("crm-sync", 2 * (240 + 120)),          # COALESCE: the active run, then the follow-up
    ("report-export", 11 * (120 + 60)),     # QUEUE: max_queued 10 ahead, then its own
])
def test_a_trigger_waiting_longer_than_a_backlog_drains_alarms(
        synth: Synth, name: str, seconds: int) -> None:
    job = synth.stack.jobs[name]
    alarm = _alarm(synth, name, "trigger_queue_age")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateAgeOfOldestMessage")
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {
        "Fn::GetAtt": [synth.logical_id(job.trigger_queue), "QueueName"]}}]
    assert (alarm["Statistic"], alarm["Threshold"]) == ("Maximum", seconds)


@pytest.mark.parametrize("name", ["crm-sync", "report-export"])
def test_a_trigger_message_rejected_alarms_on_the_first_one_naming_the_decision(
        synth: Synth, name: str) -> None:
    """A message that is no trigger is deleted at once (the triggers behind it run), so
    nothing but this alarm says that something else writes to the job's trigger queue."""
    alarm = _alarm(synth, name, "messages_rejected")
    assert _jobguard_metric(alarm, name) == "TriggerMessagesRejected"
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 300, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    description = alarm["AlarmDescription"]
    assert f"jobguard runs {name} --status rejected" in description
    assert "start a manual run" in description.partition(DECIDE)[2]


def _function_alarms(synth: Synth, metric: str) -> set[str]:
    return {a["Properties"]["Dimensions"][0]["Value"]["Ref"]
            for a in synth.of_type("AWS::CloudWatch::Alarm").values()
            if a["Properties"].get("MetricName") == metric
            and a["Properties"].get("Namespace") == "AWS/Lambda"}


def _async_functions(synth: Synth) -> set[str]:
    return {synth.logical_id(f) for f in [
        *(j.function for j in synth.stack.jobs.values()),
        *(r.function for r in synth.stack.reconcilers)]}


def test_throttles_alarm_for_every_function_and_dropped_events_for_every_async_one(
        synth: Synth) -> None:
    functions = _async_functions(synth) | {synth.logical_id(synth.stack.recovery.function)}
    assert _function_alarms(synth, "Throttles") == functions
    # recovery is invoked by an operator for its answer, never asynchronously
    assert _function_alarms(synth, "AsyncEventsDropped") == _async_functions(synth)


def test_every_async_function_keeps_a_failed_event_on_an_encrypted_alarmed_queue(
        synth: Synth) -> None:
    configs = synth.of_type("AWS::Lambda::EventInvokeConfig")
    destinations = {}
    for config in configs.values():
        properties = config["Properties"]
        assert properties["MaximumRetryAttempts"] == 2
        queue_arn = properties["DestinationConfig"]["OnFailure"]["Destination"]
        destinations[properties["FunctionName"]["Ref"]] = queue_arn["Fn::GetAtt"][0]
    assert set(destinations) == _async_functions(synth)
    queues = {**{synth.logical_id(j.function): j.failed_ticks
                 for j in synth.stack.jobs.values()},
              **{synth.logical_id(r.function): r.failed_sweeps for r in synth.stack.reconcilers}}
    alarmed = {a["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
               for a in synth.of_type("AWS::CloudWatch::Alarm").values()
               if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"}
    for function, queue_id in destinations.items():
        assert queue_id == synth.logical_id(queues[function])  # its own queue
        queue = synth.resources[queue_id]["Properties"]
        assert queue.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in queue
        assert queue["MessageRetentionPeriod"] == 14 * 86400
        assert queue_id in alarmed


def test_dynamodb_throttles_on_the_table_alarm(synth: Synth) -> None:
    table = synth.logical_id(synth.stack.table.table)
    for kind, metric in (("read_throttles", "ReadThrottleEvents"),
                         ("write_throttles", "WriteThrottleEvents")):
        alarm = synth.properties(synth.stack.table_alarms[kind])
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/DynamoDB", metric)
        assert alarm["Dimensions"] == [{"Name": "TableName", "Value": {"Ref": table}}]
        assert (alarm["Statistic"], alarm["Threshold"]) == ("Sum", 1)


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
    assert _function_alarms(synth, "Errors") == functions


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


def test_the_reconciler_recovery_and_table_alarms_say_the_runbook_words(synth: Synth) -> None:
    from jobguard.runbook import reconciler_alarms, recovery_alarms, table_alarms

    [reconciler] = synth.stack.reconcilers
    for alarms, texts in (
            (reconciler.alarms, reconciler_alarms(reconciler.job, own_dead_letter_queue=True)),
            (synth.stack.recovery.alarms, recovery_alarms()),
            (synth.stack.table_alarms, table_alarms())):
        assert set(alarms) == set(texts)
        for kind, text in texts.items():
            description = synth.properties(alarms[kind])["AlarmDescription"]
            assert text.means in description and text.decide in description


def test_the_reconcilers_dead_man_alarm_fires_when_no_sweep_completed_for_3_sweeps(
        synth: Synth) -> None:
    """crm-sync's reconciler sweeps every hour: three hours without a completed sweep
    (skipped while the job ran, failed, never delivered, or no data at all) alarm."""
    [reconciler] = synth.stack.reconcilers
    alarm = synth.properties(reconciler.alarms["no_sweep"])
    assert _jobguard_metric(alarm, "crm-sync") == "SweepSucceeded"  # not the job's RunSucceeded
    assert (alarm["Statistic"], alarm["Period"]) == ("Sum", 3600)
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == 3
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanThreshold", 1)
    assert alarm["TreatMissingData"] == "breaching"
    assert "crm-sync" in alarm["AlarmDescription"]


def test_the_reconcilers_sweeps_dead_letter_to_its_own_queue_with_reconciler_words(
        synth: Synth) -> None:
    """An undeliverable sweep goes to the reconciler's own DLQ, never to the job's tick
    DLQ (whose alarm asks for a manual run of the job); no reconciler alarm asks for one."""
    [reconciler] = synth.stack.reconcilers
    job = synth.stack.jobs["crm-sync"]
    target = synth.properties(reconciler.schedule)["Target"]
    own = {"Fn::GetAtt": [synth.logical_id(reconciler.schedule_dlq), "Arn"]}
    assert target["DeadLetterConfig"]["Arn"] == own
    assert reconciler.schedule_dlq is not job.schedule_dlq
    alarm = synth.properties(reconciler.alarms["schedule_dlq"])
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {
        "Fn::GetAtt": [synth.logical_id(reconciler.schedule_dlq), "QueueName"]}}]
    for kind, made in reconciler.alarms.items():
        description = synth.properties(made)["AlarmDescription"]
        assert "manual run" not in description, kind
        assert "reconciler" in description, kind  # words about the reconciler


def test_a_reconciler_whose_schedule_is_disabled_has_no_dead_man_alarm(drill) -> None:
    # local and drill deployments: only the drills deliver sweeps, silence is normal
    stack, _, _ = drill
    assert stack.reconcilers
    for reconciler in stack.reconcilers:
        assert "no_sweep" not in reconciler.alarms
        assert "failed_sweeps" in reconciler.alarms
