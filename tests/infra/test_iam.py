"""Least privilege: every role's permissions, enumerated exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from infra.constructs.guarded_job import FAILED_EVENT_ACTIONS, MAPPING_ACTIONS, QUEUE_ACTIONS
from infra.constructs.table import INDEX_ACTIONS, TABLE_ACTIONS
from infra.crm_sync import FEED_ACTIONS, NOTES_RECONCILE_ACTIONS, NOTES_WRITE_ACTIONS
from infra.report_export import BUCKET_ACTIONS, OBJECT_ACTIONS

from .conftest import EXPORT, INVOKER, NIGHTLY, PRICES, Synth

Grant = set[tuple[str, str]]
"""(action, resource as canonical JSON) pairs."""

LOGS = ("logs:CreateLogStream", "logs:PutLogEvents")


def _resource(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _grants(synth: Synth, role: iam.IRole) -> Grant:
    """Everything ``role`` is allowed, from every policy attached to it."""
    role_id = synth.logical_id(role)
    assert "ManagedPolicyArns" not in synth.resources[role_id]["Properties"]
    assert "Policies" not in synth.resources[role_id]["Properties"]
    grants: Grant = set()
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"]
            resources = statement["Resource"]
            for action in actions if isinstance(actions, list) else [actions]:
                for resource in resources if isinstance(resources, list) else [resources]:
                    grants.add((action, _resource(resource)))
    return grants


def _pairs(actions: tuple[str, ...], resource: Any) -> Grant:
    return {(action, _resource(resource)) for action in actions}


def _arn(synth: Synth, construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [synth.logical_id(construct), "Arn"]}


def _function_base(synth: Synth, function: lambda_.Function) -> Grant:
    """Its own log group, the table and the unresolved index: what every function has."""
    table = synth.stack.table.table
    log_group = {"Fn::GetAtt": [synth.properties(function)["LoggingConfig"]["LogGroup"]["Ref"],
                                "Arn"]}
    index = {"Fn::Join": ["", [_arn(synth, table), "/index/unresolved"]]}
    return (_pairs(LOGS, log_group) | _pairs(TABLE_ACTIONS, _arn(synth, table))
            | _pairs(INDEX_ACTIONS, index))


def _failed_events(synth: Synth, queue: Any) -> Grant:
    """Lambda puts an asynchronous event that failed every attempt on this queue, with
    the function's role (its on-failure destination)."""
    return _pairs(FAILED_EVENT_ACTIONS, _arn(synth, queue))


def _crm_data(synth: Synth, *, runs: bool) -> Grant:
    """crm-sync's own data: a run reads the feed, writes and looks up notes; a sweep
    only looks notes up."""
    data = synth.stack.crm_sync_data
    assert data is not None
    notes = _pairs(NOTES_RECONCILE_ACTIONS, _arn(synth, data.notes))
    if not runs:
        return notes
    return (notes | _pairs(NOTES_WRITE_ACTIONS, _arn(synth, data.notes))
            | _pairs(FEED_ACTIONS, _arn(synth, data.feed)))


def test_table_actions_are_exactly_the_ones_the_stores_call() -> None:
    assert sorted(TABLE_ACTIONS) == [
        "dynamodb:BatchGetItem", "dynamodb:ConditionCheckItem", "dynamodb:GetItem",
        "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"]
    assert INDEX_ACTIONS == ("dynamodb:Query",)


def _report_data(synth: Synth) -> Grant:
    """report-export's own bucket: put and look up objects under its prefix, and list
    the bucket (a lookup of a missing object is then a 404, not a 403)."""
    data = synth.stack.report_export_data
    assert data is not None
    bucket = _arn(synth, data.bucket)
    return (_pairs(OBJECT_ACTIONS, {"Fn::Join": ["", [bucket, "/reports/*"]]})
            | _pairs(BUCKET_ACTIONS, bucket))


@pytest.mark.parametrize("name", ["crm-sync", "report-export", EXPORT.name])
def test_a_queue_jobs_function_may_use_the_table_and_its_own_trigger_queue(
        synth: Synth, name: str) -> None:
    job = synth.stack.jobs[name]
    queue = _arn(synth, job.trigger_queue)
    expected = _function_base(synth, job.function) | _pairs(
        (*QUEUE_ACTIONS, *MAPPING_ACTIONS), queue) | _failed_events(synth, job.failed_ticks)
    if name == "crm-sync":
        expected |= _crm_data(synth, runs=True)
    if name == "report-export":
        expected |= _report_data(synth)
    assert _grants(synth, job.function.role) == expected  # type: ignore[arg-type]
    assert {a for a, r in expected if a.startswith("sqs:") and r == _resource(queue)} == {
        "sqs:SendMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes",
        "sqs:ReceiveMessage", "sqs:DeleteMessage"}


@pytest.mark.parametrize("name", [NIGHTLY.name, PRICES.name])
def test_a_skip_or_replace_jobs_function_may_use_the_table_only(synth: Synth, name: str) -> None:
    job = synth.stack.jobs[name]
    assert _grants(synth, job.function.role) == _function_base(  # type: ignore[arg-type]
        synth, job.function) | _failed_events(synth, job.failed_ticks)


@pytest.mark.parametrize(
    "name", ["crm-sync", "report-export", NIGHTLY.name, EXPORT.name, PRICES.name])
def test_a_schedule_may_invoke_its_function_and_dead_letter_a_tick_only(
        synth: Synth, name: str) -> None:
    job = synth.stack.jobs[name]
    role_arn = synth.properties(job.schedule)["Target"]["RoleArn"]
    role = synth.stack.node.find_all()
    [schedule_role] = [c for c in role if isinstance(c, iam.Role)
                       and {"Fn::GetAtt": [synth.logical_id(c), "Arn"]} == role_arn]
    assert _grants(synth, schedule_role) == (
        _pairs(("lambda:InvokeFunction",), _arn(synth, job.function))  # no ":*" versions
        | _pairs(("sqs:SendMessage",), _arn(synth, job.schedule_dlq)))
    trust = synth.properties(schedule_role)["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "scheduler.amazonaws.com"}]
    assert set(trust[0]["Condition"]["StringEquals"]) == {"aws:SourceAccount", "aws:SourceArn"}


def test_recovery_may_use_the_table_and_run_crm_sync(synth: Synth) -> None:
    recovery = synth.stack.recovery.function
    assert _grants(synth, recovery.role) == (  # type: ignore[arg-type]
        _function_base(synth, recovery) | _crm_data(synth, runs=True))


def test_the_reconciler_may_use_the_table_and_look_notes_up(synth: Synth) -> None:
    [reconciler] = synth.stack.reconcilers
    assert _grants(synth, reconciler.function.role) == (  # type: ignore[arg-type]
        _function_base(synth, reconciler.function) | _crm_data(synth, runs=False)
        | _failed_events(synth, reconciler.failed_sweeps))


def test_no_statement_anywhere_has_a_wildcard_but_the_report_prefix(synth: Synth) -> None:
    # report-export writes one object per period: its grant covers its own key prefix
    data = synth.stack.report_export_data
    assert data is not None
    prefix = {"Fn::Join": ["", [_arn(synth, data.bucket), "/reports/*"]]}
    wildcards = []
    for logical_id, policy in synth.of_type("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Resource"] == prefix:
                wildcards.append(logical_id)
                assert sorted(statement["Action"]) == ["s3:GetObject", "s3:PutObject"]
                continue
            text = json.dumps([statement["Action"], statement["Resource"]])
            assert "*" not in text, f"{logical_id}: {text}"
    report = synth.stack.jobs["report-export"].function.role
    assert report is not None
    assert wildcards == [synth.logical_id(report.node.find_child("DefaultPolicy"))]


def test_only_the_named_principal_may_invoke_recovery_and_nothing_is_public(
        synth: Synth) -> None:
    permissions = list(synth.of_type("AWS::Lambda::Permission").values())
    assert [p["Properties"]["Principal"] for p in permissions] == [INVOKER]
    [permission] = permissions
    assert permission["Properties"]["Action"] == "lambda:InvokeFunction"
    assert permission["Properties"]["FunctionName"] == _arn(synth, synth.stack.recovery.function)
    assert not synth.of_type("AWS::Lambda::Url")
