"""Deployments for ``jobguard drill`` (``-c jobguard:drills=true``) and for the local
emulator (``-c jobguard:local=true``), against the default one.

A drill deployment compresses every job's clock (:meth:`JobDefinition.for_drills`) and
sets ``JOBGUARD_DRILLS=1`` on every function, so the example jobs honour drill fault
switches; a default deployment does neither. A local deployment creates every schedule
disabled: the emulator would fire ticks with ``<aws.scheduler.scheduled-time>`` left
literal, which jobguard refuses, so ``jobguard drill`` delivers ticks itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from handlers.jobs import CRM_SYNC, JOBS, REPORT_EXPORT, deployed
from infra.settings import NOBODY_PAGED, StackSettings
from infra.stack import JobGuardStack
from jobguard.cdk.guarded_job import VISIBILITY_FACTOR, receive_budget
from jobguard.definitions import DRILL_HEARTBEAT, DRILL_LEASE, DRILL_TIMEOUT
from jobguard.drill.switches import DRILLS
from jobguard.errors import ConfigError

from .conftest import Synth


def _of_type(template: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def test_drills_and_local_are_read_from_context() -> None:
    settings = StackSettings.from_context({"jobguard:drills": "true", "jobguard:local": "1"})
    assert (settings.drills, settings.local, settings.dependencies.value) == (True, True, "host")
    default = StackSettings.from_context({})
    assert (default.drills, default.local) == (False, False)
    with pytest.raises(ConfigError) as refused:
        StackSettings.from_context({"jobguard:drills": "maybe"})
    assert refused.value.field == "jobguard:drills"
    with pytest.raises(ConfigError) as contradicted:
        StackSettings(local=True)  # the local emulator cannot import the Lambda layer
    assert contradicted.value.field == "dependencies"


def test_a_drill_deployment_sets_the_drill_switch_on_every_function(drill) -> None:
    stack, template, _ = drill
    functions = _of_type(template, "AWS::Lambda::Function")
    assert len(functions) == len(stack.functions) == len(JOBS) + 2  # + reconciler, recovery
    for logical_id, function in functions.items():
        assert function["Properties"]["Environment"]["Variables"][DRILLS] == "1", logical_id


def test_a_default_deployment_sets_it_nowhere(synth: Synth) -> None:
    for logical_id, function in synth.of_type("AWS::Lambda::Function").items():
        assert DRILLS not in function["Properties"]["Environment"]["Variables"], logical_id


def test_a_drill_deployment_runs_every_job_on_the_drill_clock(drill) -> None:
    stack, template, _ = drill
    resources = template["Resources"]
    for function in stack.functions:  # jobs, the reconciler, recovery
        properties = resources[stack.resolve(stack.get_logical_id(
            function.node.default_child))]["Properties"]
        assert properties["Timeout"] == DRILL_TIMEOUT.total_seconds() == 60
    for name, job in stack.jobs.items():
        assert (job.job.lease, job.job.heartbeat_every) == (DRILL_LEASE, DRILL_HEARTBEAT)
        queue = resources[stack.resolve(stack.get_logical_id(
            job.trigger_queue.node.default_child))]["Properties"]
        assert queue["VisibilityTimeout"] == 60 * VISIBILITY_FACTOR
        assert queue["RedrivePolicy"]["maxReceiveCount"] == receive_budget(job.job), name


def test_the_handlers_guard_themselves_with_the_clock_they_are_deployed_with(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for job in (CRM_SYNC, REPORT_EXPORT):
        assert deployed(job) is job
    monkeypatch.setenv(DRILLS, "1")
    for job in (CRM_SYNC, REPORT_EXPORT):
        config = deployed(job).config()
        assert (config.lease, config.heartbeat, config.function_timeout) == (
            DRILL_LEASE, DRILL_HEARTBEAT, DRILL_TIMEOUT)
        assert config.policy is job.policy


def test_a_local_or_drill_deployment_creates_every_schedule_disabled(drill) -> None:
    _, template, _ = drill
    schedules = _of_type(template, "AWS::Scheduler::Schedule")
    assert len(schedules) == len(JOBS) + 1  # the job ticks and the reconciler's sweep
    assert {s["Properties"]["State"] for s in schedules.values()} == {"DISABLED"}


def test_a_default_deployment_creates_them_enabled(synth: Synth) -> None:
    schedules = synth.of_type("AWS::Scheduler::Schedule")
    assert {s["Properties"].get("State", "ENABLED") for s in schedules.values()} == {"ENABLED"}


def test_the_drill_deployment_passes_cdk_nag(drill) -> None:
    _, _, outdir = drill
    report = json.loads((outdir / "validation-report.json").read_text())
    assert [v for plugin in report["pluginReports"] for v in plugin["violations"]] == []


def test_the_drills_deliver_the_tick_the_schedule_would_send() -> None:
    from datetime import UTC, datetime

    from jobguard.cdk.guarded_job import tick_input
    from jobguard.drill.stack import tick_payload

    for job in (CRM_SYNC, REPORT_EXPORT):
        schedule = tick_input(job)
        sent = tick_payload(job.name, job.policy.value, datetime(2026, 11, 29, tzinfo=UTC),
                            "e-1")
        assert set(sent) == set(schedule)
        assert sent["job"] == schedule["job"] and sent["policy"] == schedule["policy"]
        assert schedule["scheduled_at"].startswith("<aws.scheduler.")  # filled by the drill
        assert sent["scheduled_at"] == "2026-11-29T00:00:00Z"


def test_drill_and_local_deployments_are_not_protected_and_page_nobody_saying_why(
        drill: tuple[JobGuardStack, Any, Path]) -> None:
    stack, template, _ = drill
    assert stack.termination_protection is False
    table = template["Resources"][stack.resolve(stack.get_logical_id(
        stack.table.table.node.default_child))]["Properties"]
    assert "DeletionProtectionEnabled" not in table
    assert stack.alarm_topic is None  # no destination given: alarms off, with the reason
    assert template["Outputs"]["AlarmTopicArn"]["Value"] == f"off: {NOBODY_PAGED}"
    for alarm in _of_type(template, "AWS::CloudWatch::Alarm").values():
        assert "AlarmActions" not in alarm["Properties"]
        assert NOBODY_PAGED in json.dumps(alarm["Properties"]["AlarmDescription"])


def test_a_drill_deployments_functions_may_read_their_own_switches(
        drill: tuple[JobGuardStack, Any, Path]) -> None:
    """The drill switches are read with a Query of the job's DRILL# rows at every hook
    point (found by review: without it every run of a drills stack on AWS is denied).
    Each job function may query its own partition only."""
    stack, template, _ = drill
    for name, guarded in stack.jobs.items():
        role = stack.resolve(stack.get_logical_id(guarded.function.role.node.default_child))
        queries = [st for policy in template["Resources"].values()
                   if policy["Type"] == "AWS::IAM::Policy"
                   and {"Ref": role} in policy["Properties"]["Roles"]
                   for st in policy["Properties"]["PolicyDocument"]["Statement"]
                   if "dynamodb:Query" in (st["Action"] if isinstance(st["Action"], list)
                                           else [st["Action"]])
                   and "Condition" in st]
        keys = [st["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
                for st in queries]
        assert [f"JOB#{name}"] in keys, (name, keys)


def test_a_deployment_without_schedules_has_no_dead_man_alarm(
        drill: tuple[JobGuardStack, Any, Path]) -> None:
    """Local and drill deployments disable their schedules: a dead-man alarm there would
    be in alarm from 15 minutes after the deploy on (found by review)."""
    stack, _, _ = drill
    assert all("no_success" not in job.alarms for job in stack.jobs.values())
