"""The recovery Lambda (never scheduled) and the reconciler (scheduled where a job asks)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from handlers.jobs import CRM_SYNC
from infra.stack import HANDLER_PACKAGES
from jobguard.cdk import JobTable, LambdaBundle, RecoveryFunction, alarms_off
from jobguard.cdk.reconciler import RECONCILER_HANDLER
from jobguard.cdk.recovery import (
    EXECUTE_ALIAS,
    EXECUTE_OUTPUT_NAME,
    OUTPUT_NAME,
    RECOVERY_HANDLER,
)

from .conftest import EXTRA_JOBS, INVOKER, PLANNER, Synth


def test_recovery_runs_the_recovery_handler_long_enough_for_every_jobs_claims(
        synth: Synth) -> None:
    function = synth.properties(synth.stack.recovery.function)
    assert function["Handler"] == RECOVERY_HANDLER
    # a claim lasts at most its job's timeout; recovery outlives every one of them
    longest = max(j.timeout for j in (CRM_SYNC, *EXTRA_JOBS))
    assert function["Timeout"] == longest.total_seconds()


def test_recovery_is_not_scheduled(synth: Synth) -> None:
    recovery = {"Fn::GetAtt": [synth.logical_id(synth.stack.recovery.function), "Arn"]}
    targets = [s["Properties"]["Target"]["Arn"]
               for s in synth.of_type("AWS::Scheduler::Schedule").values()]
    assert recovery not in targets


def test_a_reconciler_exists_only_for_the_job_that_asks_for_one(synth: Synth) -> None:
    [reconciler] = synth.stack.reconcilers
    assert reconciler.job.name == CRM_SYNC.name and CRM_SYNC.reconciler_schedule
    assert all(job.reconciler_schedule is None for job in EXTRA_JOBS)
    function = synth.properties(reconciler.function)
    assert function["Handler"] == RECONCILER_HANDLER
    assert function["Timeout"] == CRM_SYNC.timeout.total_seconds()
    schedule = synth.properties(reconciler.schedule)
    assert schedule["ScheduleExpression"] == CRM_SYNC.reconciler_schedule
    assert json.loads(schedule["Target"]["Input"]) == {"job": "crm-sync"}
    # undeliverable sweeps go to its own DLQ (tests/infra/test_alarms.py: its alarm)
    dlq = reconciler.schedule_dlq
    assert schedule["Target"]["DeadLetterConfig"] == {
        "Arn": {"Fn::GetAtt": [synth.logical_id(dlq), "Arn"]}}
    assert schedule["Target"]["RetryPolicy"]["MaximumRetryAttempts"] == 3


# -- who may execute: the execute alias ------------------------------------------------

def _is(value: Any, construct: Any, synth: Synth) -> bool:
    """Whether a template value refers to ``construct`` (its Ref or its ARN)."""
    logical_id = synth.logical_id(construct)
    return value in ({"Ref": logical_id}, {"Fn::GetAtt": [logical_id, "Arn"]})


def test_an_execute_alias_runs_what_the_function_runs(synth: Synth) -> None:
    recovery = synth.stack.recovery
    alias = synth.properties(recovery.execute_alias)
    assert alias["Name"] == EXECUTE_ALIAS
    assert alias["FunctionVersion"] == "$LATEST"  # a plan and its execution: the same code
    assert _is(alias["FunctionName"], recovery.function, synth)
    outputs = synth.template.to_json()["Outputs"]
    assert _is(outputs[EXECUTE_OUTPUT_NAME]["Value"], recovery.execute_alias, synth)
    assert _is(outputs[OUTPUT_NAME]["Value"], recovery.function, synth)


def test_planners_may_invoke_the_function_and_only_invokers_its_execute_alias(
        synth: Synth) -> None:
    # GIVEN a stack whose recovery invokers are the on-call role and whose planners are
    # the support role
    recovery = synth.stack.recovery
    grants = set()
    for permission in synth.of_type("AWS::Lambda::Permission").values():
        target = permission["Properties"]["FunctionName"]
        kind = ("function" if _is(target, recovery.function, synth)
                else "execute alias" if _is(target, recovery.execute_alias, synth)
                else json.dumps(target))
        grants.add((permission["Properties"]["Principal"], kind))
    # THEN the planner may invoke the function (which plans) and not its execute alias
    # (which alone executes); the invoker may do both
    assert grants == {(PLANNER, "function"), (INVOKER, "function"),
                      (INVOKER, "execute alias")}
    # and no policy statement of the stack lets anyone else invoke either: no job's
    # role, no schedule's role, no wildcard
    refs = {synth.logical_id(recovery.function), synth.logical_id(recovery.execute_alias)}
    for logical_id, policy in synth.of_type("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) \
                else [statement["Action"]]
            if any(a.startswith("lambda:") for a in actions):
                assert not any(r in json.dumps(statement["Resource"]) for r in refs), \
                    f"{logical_id} grants {actions} on the recovery function"


ALARMS = alarms_off(reason="a test stack, never deployed")


def test_a_role_of_the_app_that_may_plan_is_granted_no_qualified_arn_but_latest() -> None:
    # GIVEN a recovery function in an app whose own roles plan and execute
    stack = cdk.Stack(cdk.App(), "Own", env=cdk.Environment(account="123456789012",
                                                              region="eu-west-1"))
    planner = iam.Role(stack, "Planner", assumed_by=iam.AccountRootPrincipal())
    executor = iam.Role(stack, "Executor", assumed_by=iam.AccountRootPrincipal())
    bundle = LambdaBundle(stack, "Code", packages=HANDLER_PACKAGES)
    recovery = RecoveryFunction(stack, "Recovery", jobs=[CRM_SYNC],
                                table=JobTable(stack, "Table", alarms=ALARMS), bundle=bundle,
                                alarms=ALARMS,
                                invokers=[executor], planners=[planner])
    template = Template.from_stack(stack).to_json()

    def invoke_resources(role: iam.Role) -> list[Any]:
        role_id = stack.resolve(stack.get_logical_id(role.node.default_child))
        found = []
        for policy in template["Resources"].values():
            if policy["Type"] != "AWS::IAM::Policy" or \
                    {"Ref": role_id} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if statement["Action"] == "lambda:InvokeFunction":
                    found += statement["Resource"] if isinstance(statement["Resource"], list) \
                        else [statement["Resource"]]
        return found

    function_id = stack.resolve(stack.get_logical_id(recovery.function.node.default_child))
    alias_id = stack.resolve(stack.get_logical_id(recovery.execute_alias.node.default_child))
    arn = {"Fn::GetAtt": [function_id, "Arn"]}
    # THEN the planner's identity policy names the function's ARN and its $LATEST: never
    # ":*", which would cover the execute alias too
    planned = invoke_resources(planner)
    assert sorted(map(json.dumps, planned)) == sorted(map(json.dumps, [
        arn, {"Fn::Join": ["", [arn, ":$LATEST"]]}]))
    # and the executor's adds the alias
    assert {"Ref": alias_id} in invoke_resources(executor)
    assert "*" not in json.dumps([planned, invoke_resources(executor)])
    assert not [r for r in template["Resources"].values()
                if r["Type"] == "AWS::Lambda::Permission"]  # identity policies only
