"""What a production team sets on a deployment (``infra.settings.OperationsSettings``):
alarms that reach a person without any setting, a customer-managed key, X-Ray tracing,
the trigger mappings' concurrency, protection against deletion, log retention. The
defaults are read from the session's production synth; the options from one synth with
every option set (and no alarm topic given, so the stack makes its own)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from handlers.jobs import JOBS
from infra.app import build_app
from infra.settings import StackSettings
from infra.stack import JobGuardStack
from jobguard import environment
from jobguard.cdk.alarm_topic import CLOUDWATCH
from jobguard.errors import ConfigError

from .conftest import DRILLS_ACCOUNT, INVOKER, Synth

OPTIONS = {"jobguard:kmsKey": "create", "jobguard:tracing": "true",
           "jobguard:triggerMaxConcurrency": "5", "jobguard:logRetentionDays": "90",
           "jobguard:recoveryInvokers": INVOKER, "jobguard:alarmEmail": "oncall@example.com"}


@pytest.fixture(scope="module")
def options(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JobGuardStack, Any]]:
    outdir = tmp_path_factory.mktemp("cdk.out.options")
    app = build_app(OPTIONS, outdir=str(outdir), jobs=JOBS)
    stack = next(c for c in app.node.children if isinstance(c, JobGuardStack))
    app.synth()  # cdk-nag included: an unacknowledged finding fails here
    template = json.loads((outdir / f"{stack.artifact_id}.template.json").read_text())
    yield stack, template


def _of_type(template: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _id(stack: JobGuardStack, construct: Any) -> str:
    child = construct.node.default_child or construct
    return str(stack.resolve(stack.get_logical_id(child)))


def test_production_defaults_protect_the_table_and_the_stack(synth: Synth) -> None:
    assert synth.properties(synth.stack.table.table)["DeletionProtectionEnabled"] is True
    assert synth.stack.termination_protection is True
    for group in synth.of_type("AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == 30
        assert "KmsKeyId" not in group["Properties"]
    for function in synth.of_type("AWS::Lambda::Function").values():
        assert "TracingConfig" not in function["Properties"]
        assert function["Properties"]["Environment"]["Variables"][environment.TRACING] == "0"
    for mapping in synth.of_type("AWS::Lambda::EventSourceMapping").values():
        assert "ScalingConfig" not in mapping["Properties"]


def test_without_a_topic_the_stack_makes_an_encrypted_tls_only_one_every_alarm_notifies(
        options: tuple[JobGuardStack, Any]) -> None:
    stack, template = options
    assert stack.alarm_topic is not None
    topic_id = _id(stack, stack.alarm_topic.topic)
    topic = template["Resources"][topic_id]["Properties"]
    assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [_id(stack, stack.key), "Arn"]}
    [policy] = _of_type(template, "AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    deny = [s for s in statements if s["Effect"] == "Deny"]
    assert [s["Condition"] for s in deny] == [{"Bool": {"aws:SecureTransport": "false"}}]
    [publish] = [s for s in statements if s["Effect"] == "Allow"]
    assert publish["Principal"] == {"Service": CLOUDWATCH} and publish["Action"] == "sns:Publish"
    key_policy = template["Resources"][_id(stack, stack.key)]["Properties"]["KeyPolicy"]
    assert any(s.get("Principal") == {"Service": CLOUDWATCH}
               for s in key_policy["Statement"])  # CloudWatch may use the topic's key
    alarms = _of_type(template, "AWS::CloudWatch::Alarm")
    assert len(alarms) == len(stack.alarms) > 0
    for logical_id, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}], logical_id
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic_id}], logical_id


def test_a_customer_managed_key_encrypts_the_table_queues_and_logs(
        options: tuple[JobGuardStack, Any]) -> None:
    stack, template = options
    key = {"Fn::GetAtt": [_id(stack, stack.key), "Arn"]}
    assert template["Resources"][_id(stack, stack.key)]["Properties"]["EnableKeyRotation"]
    table = template["Resources"][_id(stack, stack.table.table)]["Properties"]
    assert table["SSESpecification"]["KMSMasterKeyId"] == key
    queues = _of_type(template, "AWS::SQS::Queue")
    assert queues and all(q["Properties"]["KmsMasterKeyId"] == key for q in queues.values())
    groups = _of_type(template, "AWS::Logs::LogGroup")
    assert groups and all(g["Properties"]["KmsKeyId"] == key for g in groups.values())
    assert all(g["Properties"]["RetentionInDays"] == 90 for g in groups.values())


def test_tracing_is_active_and_jobguard_traces_runs(options: tuple[JobGuardStack, Any]) -> None:
    _, template = options
    functions = _of_type(template, "AWS::Lambda::Function")
    for function in functions.values():
        assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}
        assert function["Properties"]["Environment"]["Variables"][environment.TRACING] == "1"
    assert environment.tracing({environment.TRACING: "1"}) is True
    assert environment.tracing({}) is False


def test_the_trigger_mappings_concurrency_is_capped(options: tuple[JobGuardStack, Any]) -> None:
    _, template = options
    mappings = _of_type(template, "AWS::Lambda::EventSourceMapping")
    assert len(mappings) == 2
    for mapping in mappings.values():
        assert mapping["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 5}


@pytest.mark.parametrize(("context", "field"), [
    ({"jobguard:kmsKey": "alias/aws/dynamodb"}, "kms_key"),
    ({"jobguard:triggerMaxConcurrency": "1"}, "trigger_max_concurrency"),
    ({"jobguard:triggerMaxConcurrency": "many"}, "jobguard:triggerMaxConcurrency"),
    ({"jobguard:logRetentionDays": "45"}, "log_retention_days"),
    ({"jobguard:tracing": "sometimes"}, "jobguard:tracing"),
    ({"jobguard:deletionProtection": "maybe"}, "jobguard:deletionProtection"),
])
def test_an_operations_setting_that_is_not_one_is_refused_naming_it(
        context: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as refused:
        StackSettings.from_context(context)
    assert refused.value.field == field


def test_protection_is_off_for_local_and_drills_unless_asked_for() -> None:
    drills = {"jobguard:drills": "true", "jobguard:drillsAccounts": DRILLS_ACCOUNT}
    for disposable, account in (({"jobguard:local": "true"}, None), (drills, DRILLS_ACCOUNT)):
        operations = StackSettings.from_context(disposable, account=account).operations
        assert not operations.deletion_protection and not operations.termination_protection
    asked = StackSettings.from_context(
        {**drills, "jobguard:deletionProtection": "true"}, account=DRILLS_ACCOUNT).operations
    assert asked.deletion_protection and not asked.termination_protection


def test_every_log_retention_offered_is_one_cloudwatch_logs_takes(tmp_path: Path) -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_logs as logs
    from aws_cdk.assertions import Template

    from infra.settings import LOG_RETENTION

    stack = cdk.Stack(cdk.App(outdir=str(tmp_path)), "Retention")
    for days, retention in LOG_RETENTION.items():
        logs.LogGroup(stack, f"Group{days}", retention=retention)
    groups = Template.from_stack(stack).find_resources("AWS::Logs::LogGroup")
    assert sorted(g["Properties"]["RetentionInDays"] for g in groups.values()) == sorted(
        LOG_RETENTION)
