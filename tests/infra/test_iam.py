"""Least privilege, derived from the code: every role grants exactly what its function's
code paths call, on the narrowest resource, and nothing else but written-down extras.

The expectation is computed from the call sites (``jobguard.callsites``: each call's IAM
actions, one per action type inside a transaction, its target and its code paths) and
from the paths each function runs (``job_paths``, ``reconciler_paths``,
``RECOVERY_PATHS``); it is compared with the synthesized roles both ways. A grant the
code needs and the role lacks fails as *missing*; a grant no call needs fails as *extra*
unless it is one of the acknowledged ones (``LOG_ACTIONS``, ``MAPPING_ACTIONS``: what
Lambda does with the role) or the example job's own data.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from infra.crm_sync import FEED_ACTIONS, NOTES_RECONCILE_ACTIONS, NOTES_WRITE_ACTIONS
from infra.report_export import BUCKET_ACTIONS, OBJECT_ACTIONS
from jobguard.callsites import Path, Target, all_sites, required_actions
from jobguard.cdk._function import LOG_ACTIONS
from jobguard.cdk.guarded_job import FAILED_EVENT_ACTIONS, MAPPING_ACTIONS, job_paths
from jobguard.cdk.reconciler import reconciler_paths
from jobguard.cdk.recovery import PLAN_PATHS, RECOVERY_PATHS
from jobguard.cdk.table import index_leading_keys, leading_keys

from .conftest import EXPORT, INVOKER, NIGHTLY, PLANNER, PRICES, Synth

Grant = set[tuple[str, str, str]]
"""(action, resource, condition) triples, resource and condition as canonical JSON."""


def _json(value: Any) -> str:
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
            assert "NotAction" not in statement and "NotResource" not in statement
            actions = statement["Action"]
            resources = statement["Resource"]
            condition = _json(statement.get("Condition"))
            for action in actions if isinstance(actions, list) else [actions]:
                for resource in resources if isinstance(resources, list) else [resources]:
                    grants.add((action, _json(resource), condition))
    return grants


def _on(actions: Any, resource: Any, condition: Any = None) -> Grant:
    return {(action, _json(resource), _json(condition)) for action in actions}


def _arn(synth: Synth, construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [synth.logical_id(construct), "Arn"]}


def _code_paths(synth: Synth, function: lambda_.Function, *, jobs: list[str],
                paths: frozenset[Path], queue: Any = None) -> Grant:
    """What the call sites of ``paths`` need, on this stack's resources: the table
    (keys scoped to ``jobs``), the ``unresolved`` index (its keys scoped to ``jobs``,
    a key required), the job's own trigger queue."""
    table = synth.stack.table.table
    index = {"Fn::Join": ["", [_arn(synth, table), "/index/unresolved"]]}
    keys = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": leading_keys(jobs)}}
    index_keys = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": index_leading_keys(jobs)},
                  "Null": {"dynamodb:LeadingKeys": "false"}}
    expected = (_on(required_actions(paths, Target.TABLE), _arn(synth, table), keys)
                | _on(required_actions(paths, Target.INDEX), index, index_keys))
    # a chain's link invokes its own function (and nothing else)
    expected |= _on(required_actions(paths, Target.FUNCTION), _arn(synth, function))
    queue_actions = required_actions(paths, Target.TRIGGER_QUEUE)
    if queue is not None:
        expected |= _on(queue_actions, _arn(synth, queue))
    else:
        assert not queue_actions, f"{function.node.path}: paths {paths} need a queue"
    return expected


def _lambda_itself(synth: Synth, function: lambda_.Function) -> Grant:
    """Acknowledged extras: the runtime writes the function's logs with its role."""
    log_group = {"Fn::GetAtt": [synth.properties(function)["LoggingConfig"]["LogGroup"]["Ref"],
                                "Arn"]}
    return _on(LOG_ACTIONS, log_group)


def _failed_events(synth: Synth, queue: Any) -> Grant:
    """Lambda puts an asynchronous event that failed every attempt on this queue, with
    the function's role (its on-failure destination)."""
    return _on(FAILED_EVENT_ACTIONS, _arn(synth, queue))


def _crm_data(synth: Synth, *, runs: bool) -> Grant:
    """crm-sync's own data: a run reads the feed (its handler's own query), writes and
    looks up notes (the DynamoDBDestination call sites); a sweep only looks notes up."""
    data = synth.stack.crm_sync_data
    assert data is not None
    notes = _on(NOTES_RECONCILE_ACTIONS, _arn(synth, data.notes))
    if not runs:
        return notes
    return (notes | _on(NOTES_WRITE_ACTIONS, _arn(synth, data.notes))
            | _on(FEED_ACTIONS, _arn(synth, data.feed)))


def _report_data(synth: Synth) -> Grant:
    """report-export's own bucket (the S3Destination call sites): put and look up objects
    under its prefix, and list the bucket for keys under that prefix only."""
    data = synth.stack.report_export_data
    assert data is not None
    bucket = _arn(synth, data.bucket)
    return (_on(OBJECT_ACTIONS, {"Fn::Join": ["", [bucket, "/reports/*"]]})
            | _on(BUCKET_ACTIONS, bucket, {"StringLike": {"s3:prefix": ["reports/*"]}}))


def _compare(function: lambda_.Function, granted: Grant, expected: Grant) -> None:
    missing = sorted(expected - granted)
    extra = sorted(granted - expected)
    assert not missing, f"{function.node.path} lacks what its code calls: {missing}"
    assert not extra, f"{function.node.path} may do what no code path needs: {extra}"


# -- the call sites themselves ------------------------------------------------------------

def test_every_transaction_part_is_authorized_by_its_own_action() -> None:
    sites = {s.name: s for s in all_sites()}
    # failed / uncertain rows are Puts beside the job row's Update (a leading chunk's
    # Update drops its rows' items from the claim: no ConditionCheck any more)
    assert sites["items.commit_rows"].iam_actions() == (
        "dynamodb:PutItem", "dynamodb:UpdateItem")
    # taking back a queued decision deletes its record inside TransactWriteItems
    assert "dynamodb:DeleteItem" in sites["dynamodb.undo_queued"].iam_actions()
    # the claim and the checkpoint: one UpdateItem; completions: BatchWriteItem
    assert sites["items.commit"].iam_actions() == ("dynamodb:UpdateItem",)
    assert sites["items.write_facts"].iam_actions() == ("dynamodb:BatchWriteItem",)
    for site in sites.values():
        assert site.iam_actions(), site.name
        assert "dynamodb:TransactWriteItems" not in site.iam_actions()  # not an IAM action


def test_a_job_run_needs_no_query_of_the_table() -> None:
    run = required_actions({Path.RUN, Path.QUEUE}, Target.TABLE)
    # a page's lookup and its completions are batch calls, key-scoped like the rest
    assert run == ("dynamodb:BatchGetItem", "dynamodb:BatchWriteItem",
                   "dynamodb:ConditionCheckItem", "dynamodb:GetItem",
                   "dynamodb:PutItem", "dynamodb:UpdateItem")
    # the one delete a run makes: a QUEUE job taking back a decision it could not send
    assert set(required_actions({Path.RUN, Path.QUEUE, Path.QUEUED}, Target.TABLE)) - set(
        run) == {"dynamodb:DeleteItem"}
    assert required_actions({Path.RUN, Path.QUEUE}, Target.INDEX) == ()
    # only operators (CLI, drills) query the table itself
    assert "dynamodb:Query" in required_actions({Path.OPERATOR}, Target.TABLE)
    assert required_actions({Path.SWEEP}, Target.TABLE) == ("dynamodb:BatchGetItem",)


# -- every function of the stack ----------------------------------------------------------

@pytest.mark.parametrize(
    "name", ["crm-sync", "report-export", NIGHTLY.name, EXPORT.name, PRICES.name])
def test_a_jobs_function_grants_exactly_what_its_code_paths_call(
        synth: Synth, name: str) -> None:
    job = synth.stack.jobs[name]
    function = job.function
    expected = (_code_paths(synth, function, jobs=[name], paths=job_paths(job.job),
                            queue=job.trigger_queue)
                | _lambda_itself(synth, function) | _failed_events(synth, job.failed_ticks))
    if job.trigger_queue is not None:  # acknowledged: the event source mapping polls
        expected |= _on(MAPPING_ACTIONS, _arn(synth, job.trigger_queue))
    if name == "crm-sync":
        expected |= _crm_data(synth, runs=True)
    if name == "report-export":
        expected |= _report_data(synth)
    _compare(function, _grants(synth, function.role), expected)  # type: ignore[arg-type]


def test_only_a_job_that_continues_may_invoke_itself(synth: Synth) -> None:
    """``max_chain`` above 1 (crm-sync drains its backlog in a chain): its own function,
    ``lambda:InvokeFunction`` on its own ARN only; a job without chains may not."""
    for name, job in synth.stack.jobs.items():
        invokes = {(a, r) for a, r, _ in _grants(synth, job.function.role)  # type: ignore[arg-type]
                   if a.startswith("lambda:")}
        if job.job.max_chain > 1:
            assert invokes == {("lambda:InvokeFunction", _json(_arn(synth, job.function)))}
        else:
            assert invokes == set(), name
    assert synth.stack.jobs["crm-sync"].job.max_chain > 1


def _may(synth: Synth, function: lambda_.Function, action: str, key: str) -> bool:
    """Whether ``function``'s role may call ``action`` on the table's rows of ``key``."""
    table = _json(_arn(synth, synth.stack.table.table))
    return any(a == action and r == table and key in json.loads(c)[
        "ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
        for a, r, c in _grants(synth, function.role))  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "deletes"), [
    ("crm-sync", False), (PRICES.name, False), (NIGHTLY.name, False),  # COALESCE, REPLACE, SKIP
    ("report-export", True), (EXPORT.name, True)])                     # QUEUE
def test_only_a_queue_job_may_delete_an_item(synth: Synth, name: str, deletes: bool) -> None:
    """Taking back a queued decision whose message could not be sent deletes its record
    (``dynamodb.undo_queued``): only ``QUEUE`` jobs make that call. A ``COALESCE`` job
    has a trigger queue too, but never takes a decision back."""
    function = synth.stack.jobs[name].function
    assert _may(synth, function, "dynamodb:DeleteItem", f"JOB#{name}") is deletes
    others = [synth.stack.recovery.function, *(r.function for r in synth.stack.reconcilers)]
    assert not any(_may(synth, f, "dynamodb:DeleteItem", f"JOB#{name}") for f in others)


def test_recovery_writes_only_the_rows_of_jobs_it_can_recover(synth: Synth) -> None:
    """report-export is a plain @guarded handler: recovery plans its unresolved items
    (reads) and refuses to execute, so it may not write that job's rows; crm-sync is a
    registered BatchJob, which it recovers."""
    recovery = synth.stack.recovery
    function = recovery.function
    assert "report-export" in recovery.plan_only and "crm-sync" not in recovery.plan_only
    for action in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem"):
        assert _may(synth, function, action, "JOB#crm-sync")
        assert not _may(synth, function, action, "JOB#report-export"), action
        assert not _may(synth, function, action, "ITEM#report-export#*"), action
    assert _may(synth, function, "dynamodb:BatchGetItem", "ITEM#report-export#*")  # its plan


@pytest.mark.parametrize("owner", ["job", "reconciler"])
def test_an_on_failure_queue_is_granted_send_message_only(synth: Synth, owner: str) -> None:
    """Lambda puts a failed asynchronous event on the queue with the function's role: it
    sends, and reads nothing of that queue (CDK's SqsDestination would also grant
    GetQueueAttributes and GetQueueUrl)."""
    assert FAILED_EVENT_ACTIONS == ("sqs:SendMessage",)
    if owner == "job":
        job = synth.stack.jobs["crm-sync"]
        function, queue = job.function, job.failed_ticks
    else:
        [reconciler] = synth.stack.reconcilers
        function, queue = reconciler.function, reconciler.failed_sweeps
    on_queue = {a for a, r, _ in _grants(synth, function.role)  # type: ignore[arg-type]
                if r == _json(_arn(synth, queue))}
    assert on_queue == {"sqs:SendMessage"}


def test_only_a_job_that_reads_unresolved_items_may_query_the_index(synth: Synth) -> None:
    def may_query_index(name: str) -> bool:
        role = synth.stack.jobs[name].function.role
        return any(a == "dynamodb:Query" and "/index/unresolved" in r
                   for a, r, _ in _grants(synth, role))  # type: ignore[arg-type]

    assert may_query_index("report-export")  # it takes up earlier unfinished periods
    assert not may_query_index("crm-sync")


def test_the_reconciler_grants_exactly_a_sweep_and_its_follow_up(synth: Synth) -> None:
    [reconciler] = synth.stack.reconcilers
    function = reconciler.function
    queue = synth.stack.jobs["crm-sync"].trigger_queue
    expected = (_code_paths(synth, function, jobs=["crm-sync"],
                            paths=reconciler_paths(queued=True), queue=queue)
                | _lambda_itself(synth, function) | _crm_data(synth, runs=False)
                | _failed_events(synth, reconciler.failed_sweeps))
    _compare(function, _grants(synth, function.role), expected)  # type: ignore[arg-type]
    # on the job's queue: send the pending follow-up again, wake a deferred trigger
    assert {a for a, r, _ in expected if r == _json(_arn(synth, queue))} == {
        "sqs:SendMessage", "sqs:ChangeMessageVisibility"}


def test_recovery_grants_exactly_a_run_and_its_plan_for_every_job(synth: Synth) -> None:
    function = synth.stack.recovery.function
    jobs = sorted(synth.stack.jobs)
    plan_only = sorted(synth.stack.recovery.plan_only)
    recovers = [name for name in jobs if name not in plan_only]
    expected = (_code_paths(synth, function, jobs=recovers, paths=RECOVERY_PATHS)
                | _code_paths(synth, function, jobs=plan_only, paths=PLAN_PATHS)
                | _lambda_itself(synth, function) | _crm_data(synth, runs=True))
    _compare(function, _grants(synth, function.role), expected)  # type: ignore[arg-type]


def test_an_index_query_is_scoped_to_its_own_jobs_unresolved_keys(synth: Synth) -> None:
    """Who may write the table: a job's role may list its own failed and uncertain work
    ids on the ``unresolved`` index, never another job's. Every index grant in the stack
    names exactly its jobs' ``UNRESOLVED#<job>#*`` partitions and requires the key
    (``ForAllValues`` alone holds for a request with no key)."""
    index = "/index/unresolved"
    scoped: dict[str, list[str]] = {}
    for function in synth.stack.functions:
        for action, resource, condition in _grants(synth, function.role):  # type: ignore[arg-type]
            if index not in resource:
                continue
            parsed = json.loads(condition)
            assert parsed["Null"] == {"dynamodb:LeadingKeys": "false"}, function.node.path
            keys = parsed["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
            assert action == "dynamodb:Query" and keys, function.node.path
            scoped[function.node.path] = sorted({*scoped.get(function.node.path, []), *keys})
    jobs = synth.stack.jobs
    assert scoped[jobs["report-export"].function.node.path] == [
        "UNRESOLVED#report-export#*"]  # its own, and no other job's
    [reconciler] = synth.stack.reconcilers
    assert scoped[reconciler.function.node.path] == ["UNRESOLVED#crm-sync#*"]
    assert scoped[synth.stack.recovery.function.node.path] == sorted(
        f"UNRESOLVED#{name}#*" for name in jobs)  # recovery plans every job
    assert jobs["crm-sync"].function.node.path not in scoped  # it reads no index


def test_every_table_grant_is_scoped_to_its_jobs_keys(synth: Synth) -> None:
    table = _json(_arn(synth, synth.stack.table.table))
    for function in synth.stack.functions:
        for action, resource, condition in _grants(synth, function.role):  # type: ignore[arg-type]
            if resource == table:
                keys = json.loads(condition)["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
                assert keys and all(k.startswith(("JOB#", "ITEM#")) for k in keys), action


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
        _on(("lambda:InvokeFunction",), _arn(synth, job.function))  # no ":*" versions
        | _on(("sqs:SendMessage",), _arn(synth, job.schedule_dlq)))
    trust = synth.properties(schedule_role)["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "scheduler.amazonaws.com"}]
    assert set(trust[0]["Condition"]["StringEquals"]) == {"aws:SourceAccount", "aws:SourceArn"}


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


def test_only_the_named_principals_may_invoke_recovery_and_nothing_is_public(
        synth: Synth) -> None:
    # the invoker on the function and on its execute alias, the planner on the function
    # (tests/infra/test_recovery.py says which may execute)
    permissions = list(synth.of_type("AWS::Lambda::Permission").values())
    assert sorted(p["Properties"]["Principal"] for p in permissions) == sorted(
        [INVOKER, INVOKER, PLANNER])
    assert {p["Properties"]["Action"] for p in permissions} == {"lambda:InvokeFunction"}
    assert not synth.of_type("AWS::Lambda::Url")
