"""Review of issue 16: ``jobguard.cdk`` in a user's own stack (one job with a reconciler,
and the recovery function, as "add a Reconciler, a RecoveryFunction ... the same way" in
docs/deploying.md says), synthesized once. GIVEN / WHEN / THEN in each."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobguard import OverlapPolicy

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".jsii-cache"))

pytestmark = pytest.mark.timeout(300)

HANDLER_MODULE = '''
import os

from jobguard import BatchJob, Page, WorkId, aws_client
from jobguard.destinations import DynamoDBDestination
from jobguard.registry import register

from shop.jobs import ORDER_SYNC


def notes():  # the job's destination, named by its definition's environment
    return DynamoDBDestination(os.environ["NOTES_TABLE"], client=aws_client("dynamodb"))


class OrderSync(BatchJob[dict]):
    def select(self, cursor, limit):
        return Page([], cursor)

    def work_id(self, record):
        return WorkId(record["id"], "note")

    def process(self, record, item):
        return notes().put(item.key, {"total": record["total"]})

    def reconcile(self, record, item):
        return notes().reconcile(item.work_id)


lambda_handler = register(OrderSync(ORDER_SYNC.as_deployed().config())).handler()
'''


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A user's stack: their BatchJob (destination named in the definition's
    ``environment``), its reconciler and the recovery function."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    from jobguard.cdk import (
        GuardedJob,
        JobTable,
        LambdaBundle,
        Reconciler,
        RecoveryFunction,
        alarms_to_email,
    )
    from jobguard.definitions import JobDefinition

    root = tmp_path_factory.mktemp("shop")
    (root / "shop").mkdir()
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "jobs.py").write_text("")
    (root / "shop" / "order_sync.py").write_text(HANDLER_MODULE)
    job = JobDefinition(
        name="order-sync", handler="shop.order_sync.lambda_handler",
        schedule="rate(5 minutes)", policy=OverlapPolicy.COALESCE,
        timeout=timedelta(minutes=5), lease=timedelta(minutes=2),
        reconciler_schedule="rate(1 hour)", environment={"NOTES_TABLE": "order-notes"})
    app = cdk.App(outdir=str(root / "cdk.out"))
    stack = cdk.Stack(app, "Shop")
    alarms = alarms_to_email("oncall@example.com")
    table = JobTable(stack, "Jobs", alarms=alarms)
    code = LambdaBundle(stack, "Code", packages=[root / "shop"], build_dir=root / "build")
    guarded = GuardedJob(stack, "OrderSync", job=job, table=table, bundle=code, alarms=alarms)
    reconciler = Reconciler(stack, "OrderSyncReconciler", job=job, table=table, bundle=code,
                            trigger_queue=guarded.trigger_queue, alarms=alarms)
    recovery = RecoveryFunction(stack, "Recovery", jobs=[job], table=table, bundle=code,
                                invokers=[iam.AccountRootPrincipal()], alarms=alarms)
    template = Template.from_stack(stack).to_json()

    def variables(function: Any) -> dict[str, Any]:
        logical = stack.get_logical_id(function.node.default_child)
        props = template["Resources"][logical]["Properties"]
        return dict(props.get("Environment", {}).get("Variables", {}))

    return {"template": template, "variables": {
        "job": variables(guarded.function), "reconciler": variables(reconciler.function),
        "recovery": variables(recovery.function)}}


def test_the_job_function_gets_the_definitions_environment(shop: dict[str, Any]) -> None:
    # (what holds: the job's own function)
    assert shop["variables"]["job"].get("NOTES_TABLE") == "order-notes"


@pytest.mark.parametrize("function", ["recovery", "reconciler"])
def test_the_functions_that_run_the_jobs_code_get_its_environment(
        shop: dict[str, Any], function: str) -> None:
    """``JobDefinition.environment`` is "extra environment variables for the job's
    function (its destination, say)". The recovery function and the reconciler import
    the same module and call the same ``process`` / ``reconcile``, but only the job's
    function gets them: in a user's stack every recovery and every sweep fails on the
    variable (the repository's own stack hides it: infra/crm_sync.py adds crm-sync's
    variables to the recovery function by hand)."""
    # GIVEN the user's job, whose destination is named in its definition's environment
    # WHEN the stack is synthesized
    # THEN the functions that run the job's code have it too
    assert shop["variables"][function].get("NOTES_TABLE") == "order-notes", (
        shop["variables"][function])


def test_jobguard_recover_can_find_the_recovery_function_of_a_users_stack(
        shop: dict[str, Any]) -> None:
    """Issue 16 item 5: "the recovery function found from the deployed stack (tag or
    output) so --function-name is optional". ``jobguard recover`` reads the stack's
    ``RecoveryFunctionName`` output, which only this repository's infra/stack.py adds:
    ``RecoveryFunction`` in a user's stack has no output and no tag, its name is
    generated, and ``jobguard recover JOB --stack Shop ...`` says "stack 'Shop' has no
    RecoveryFunctionName output"."""
    # GIVEN the user's stack with RecoveryFunction
    outputs = shop["template"].get("Outputs", {})
    # THEN the output `jobguard recover` looks for is there
    assert "RecoveryFunctionName" in outputs, sorted(outputs)
