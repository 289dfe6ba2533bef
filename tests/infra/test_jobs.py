"""Each guarded job: function, schedule, trigger queue and event source, as jobguard
expects them (and as the job definition says)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from jobguard import OverlapPolicy
from jobguard.cdk.bundle import POWERTOOLS_LAYER_VERSION
from jobguard.cdk.guarded_job import GuardedJob, receive_budget
from jobguard.triggers import TriggerKind, parse_event

from .conftest import EXPORT, NIGHTLY, PRICES, Synth

JOB_NAMES = ["crm-sync", "report-export", NIGHTLY.name, EXPORT.name, PRICES.name]


def _job(synth: Synth, name: str) -> GuardedJob:
    return synth.stack.jobs[name]


def _getatt(synth: Synth, construct: Any, attribute: str = "Arn") -> dict[str, Any]:
    return {"Fn::GetAtt": [synth.logical_id(construct), attribute]}


def _ref(synth: Synth, construct: Any) -> dict[str, Any]:
    return {"Ref": synth.logical_id(construct)}


@pytest.mark.parametrize("name", JOB_NAMES)
def test_function_runs_the_jobs_handler_with_its_timeout_and_memory(synth: Synth,
                                                                    name: str) -> None:
    job = _job(synth, name)
    function = synth.properties(job.function)
    assert function["Handler"] == job.job.handler
    assert function["Runtime"] == "python3.14"
    assert function["Architectures"] == ["arm64"]
    assert function["Timeout"] == job.job.timeout.total_seconds()
    assert function["MemorySize"] == job.job.memory_mb
    # its own log group, with a retention
    log_group = synth.resources[function["LoggingConfig"]["LogGroup"]["Ref"]]
    assert log_group["Type"] == "AWS::Logs::LogGroup"
    assert log_group["Properties"]["RetentionInDays"] == 30


def test_dependencies_come_from_the_public_powertools_layer_for_arm64(synth: Synth) -> None:
    layers = synth.properties(_job(synth, "crm-sync").function)["Layers"]
    text = json.dumps(layers)
    assert len(layers) == 1
    assert f"AWSLambdaPowertoolsPythonV3-python314-arm64:{POWERTOOLS_LAYER_VERSION}" in text
    assert "017000801446" in text and "AWS::Region" in text


def test_the_code_asset_is_the_library_and_the_handlers_only(synth: Synth) -> None:
    code_dir = synth.stack.bundle.code_dir
    files = {p.relative_to(code_dir).as_posix() for p in code_dir.rglob("*") if p.is_file()}
    assert "jobguard/guard.py" in files and "handlers/crm_sync.py" in files
    assert {"jobguard/functions/recovery.py", "jobguard/functions/reconciler.py"} <= files
    assert not any(f.startswith("jobguard/local/") for f in files)  # the emulator
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    # every function runs from the one asset
    codes = {json.dumps(f["Properties"]["Code"], sort_keys=True)
             for f in synth.of_type("AWS::Lambda::Function").values()}
    assert len(codes) == 1


@pytest.mark.parametrize("name", JOB_NAMES)
def test_schedule_input_is_a_tick_jobguard_accepts(synth: Synth, name: str) -> None:
    job = _job(synth, name)
    target = synth.properties(job.schedule)["Target"]
    tick = json.loads(target["Input"])
    assert tick == {"job": name, "scheduled_at": "<aws.scheduler.scheduled-time>",
                    "execution_id": "<aws.scheduler.execution-id>",
                    "policy": job.job.policy.value}
    # WHEN Scheduler fills the placeholders, the handler's parser takes it as a tick whose
    # identity is the job and the scheduled time (not the delivery)
    filled = json.loads(json.dumps(tick)
                        .replace("<aws.scheduler.scheduled-time>", "2026-11-29T07:35:00Z")
                        .replace("<aws.scheduler.execution-id>", str(uuid.uuid4())))
    trigger = parse_event(filled, job=name, policy=job.job.policy)
    assert trigger.kind is TriggerKind.TICK
    assert trigger.trigger_id == f"{name}@2026-11-29T07:35:00Z"


@pytest.mark.parametrize("name", JOB_NAMES)
def test_schedule_has_a_bounded_retry_policy_and_a_dead_letter_queue(synth: Synth,
                                                                     name: str) -> None:
    job = _job(synth, name)
    schedule = synth.properties(job.schedule)
    assert schedule["ScheduleExpression"] == job.job.schedule
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = schedule["Target"]
    assert target["Arn"] == _getatt(synth, job.function)
    # retries stop once a tick would be recorded stale anyway
    assert target["RetryPolicy"] == {
        "MaximumRetryAttempts": 3,
        "MaximumEventAgeInSeconds": job.job.stale_after.total_seconds()}
    assert target["DeadLetterConfig"] == {"Arn": _getatt(synth, job.schedule_dlq)}
    dlq = synth.properties(job.schedule_dlq)
    assert "FifoQueue" not in dlq  # Scheduler dead-letters to standard queues
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_async_retries_of_a_tick_also_stop_at_stale_after(synth: Synth) -> None:
    job = _job(synth, "crm-sync")
    [config] = [c["Properties"] for c in synth.of_type("AWS::Lambda::EventInvokeConfig").values()
                if c["Properties"]["FunctionName"] == _ref(synth, job.function)]
    assert config["MaximumRetryAttempts"] == 2
    assert config["MaximumEventAgeInSeconds"] == job.job.stale_after.total_seconds()


@pytest.mark.parametrize("name", ["crm-sync", EXPORT.name])
def test_queue_and_coalesce_jobs_get_a_fifo_trigger_queue_with_its_own_dlq(synth: Synth,
                                                                          name: str) -> None:
    job = _job(synth, name)
    assert job.trigger_queue is not None and job.trigger_dlq is not None
    queue = synth.properties(job.trigger_queue)
    assert queue["FifoQueue"] is True
    assert queue["ContentBasedDeduplication"] is False  # jobguard sets the dedup id
    assert queue["VisibilityTimeout"] >= 6 * job.job.timeout.total_seconds()
    assert queue["VisibilityTimeout"] == job.job.queue_visibility_timeout.total_seconds()
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": _getatt(synth, job.trigger_dlq),
        "maxReceiveCount": receive_budget(job.job)}
    dlq = synth.properties(job.trigger_dlq)
    assert dlq["FifoQueue"] is True


def test_the_receive_budget_covers_every_deferral_during_one_run() -> None:
    # crm-sync: timeout 4 min, lease 2 min, heartbeat 40 s: a deferred trigger hides for
    # at least 80 s, so at most ceil(240/80) + 1 = 4 deliveries wait; + 1 run + 3 retries
    from handlers.jobs import CRM_SYNC

    assert receive_budget(CRM_SYNC) == 8


@pytest.mark.parametrize("name", ["crm-sync", EXPORT.name])
def test_event_source_mapping_takes_one_trigger_with_partial_batch_responses(
        synth: Synth, name: str) -> None:
    job = _job(synth, name)
    assert job.trigger_mapping is not None
    mapping = synth.properties(job.trigger_mapping)
    assert mapping["BatchSize"] == 1
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["EventSourceArn"] == _getatt(synth, job.trigger_queue)
    assert mapping["FunctionName"] == _ref(synth, job.function)


@pytest.mark.parametrize("name", [NIGHTLY.name, PRICES.name])
def test_skip_and_replace_jobs_have_no_trigger_queue(synth: Synth, name: str) -> None:
    job = _job(synth, name)
    assert job.job.policy in (OverlapPolicy.SKIP, OverlapPolicy.REPLACE)
    assert job.trigger_queue is None and job.trigger_mapping is None
    mappings = synth.of_type("AWS::Lambda::EventSourceMapping").values()
    assert not [m for m in mappings if m["Properties"]["FunctionName"] == _ref(synth, job.function)]


def test_every_queue_is_encrypted_and_refuses_plain_http(synth: Synth) -> None:
    queues = synth.of_type("AWS::SQS::Queue")
    policies = synth.of_type("AWS::SQS::QueuePolicy").values()
    for logical_id, queue in queues.items():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True, logical_id
        denies = [s for p in policies if {"Ref": logical_id} in p["Properties"]["Queues"]
                  for s in p["Properties"]["PolicyDocument"]["Statement"]
                  if s["Effect"] == "Deny"
                  and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}]
        assert denies, f"{logical_id} accepts requests without TLS"
