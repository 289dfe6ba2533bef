"""Configuration that cannot be safe is refused when the stack is built, naming the field.

(The job definition refuses most unsafe jobs itself: a lease not longer than two
heartbeats, a claim longer than the timeout. These are the stack's own rules.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from handlers.jobs import CRM_SYNC
from infra.settings import StackSettings
from infra.stack import HANDLER_PACKAGES, JobGuardStack
from jobguard import OverlapPolicy
from jobguard.cdk import (
    GuardedJob,
    JobTable,
    LambdaBundle,
    Reconciler,
    RecoveryFunction,
    alarms_off,
)
from jobguard.definitions import JobDefinition
from jobguard.errors import ConfigError

from .conftest import NIGHTLY

ALARMS = alarms_off(reason="a test stack, never deployed")


@dataclasses.dataclass
class Parts:
    stack: cdk.Stack
    table: JobTable
    bundle: LambdaBundle
    built: int = 0

    def job(self, **options: Any) -> GuardedJob:
        options.setdefault("job", CRM_SYNC)
        self.built += 1
        options.setdefault("alarms", ALARMS)
        return GuardedJob(self.stack, f"Job{self.built}", table=self.table, bundle=self.bundle,
                          **options)


@pytest.fixture
def parts() -> Iterator[Parts]:
    stack = cdk.Stack(cdk.App(), "Refusals")
    yield Parts(stack, JobTable(stack, "Table", alarms=ALARMS),
                LambdaBundle(stack, "Bundle", packages=HANDLER_PACKAGES))


def _refused(field: str) -> Any:
    return pytest.raises(ConfigError, match=f"^{field}: ")


def test_a_visibility_timeout_shorter_than_six_function_timeouts(parts: Parts) -> None:
    # crm-sync's timeout is 4 minutes: a visibility of 23 minutes would let SQS hand the
    # trigger to a second invocation while the first is still running it
    with _refused("queue_visibility_timeout"):
        parts.job(queue_visibility_timeout=timedelta(minutes=23))


def test_a_visibility_timeout_longer_than_sqs_allows(parts: Parts) -> None:
    with _refused("queue_visibility_timeout"):
        parts.job(queue_visibility_timeout=timedelta(hours=13))


def test_a_longer_visibility_timeout_is_taken(parts: Parts) -> None:
    job = parts.job(queue_visibility_timeout=timedelta(hours=1))
    assert job.trigger_queue is not None


def test_unbounded_or_negative_schedule_retries(parts: Parts) -> None:
    with _refused("schedule_retry_attempts"):
        parts.job(schedule_retry_attempts=186)
    with _refused("schedule_retry_attempts"):
        parts.job(schedule_retry_attempts=-1)


@pytest.mark.parametrize("name", ["JOBGUARD_TABLE", "JOBGUARD_TRIGGER_QUEUE_URL", "AWS_REGION"])
def test_a_job_environment_that_would_override_what_the_stack_or_lambda_sets(
        parts: Parts, name: str) -> None:
    with _refused("environment"):  # when defined, and by the stack for one changed after
        parts.job(job=dataclasses.replace(CRM_SYNC, environment={name: "elsewhere"}))


def test_a_handler_that_is_not_in_the_code_asset(parts: Parts) -> None:
    job = dataclasses.replace(CRM_SYNC, handler="handlers.no_such_module.lambda_handler")
    with _refused("handler"):
        parts.job(job=job)


def test_a_reconciler_for_a_job_that_asks_for_none(parts: Parts) -> None:
    with _refused("reconciler_schedule"):
        Reconciler(parts.stack, "Sweep", job=NIGHTLY, table=parts.table, bundle=parts.bundle,
                   alarms=ALARMS)


def test_a_reconciler_for_a_plain_guarded_job(parts: Parts) -> None:
    # report-export is a plain @guarded handler: no registered BatchJob, no reconcile to
    # sweep with (every sweep would be refused at runtime)
    from handlers.jobs import REPORT_EXPORT

    job = dataclasses.replace(REPORT_EXPORT, reconciler_schedule="rate(1 hour)")
    with _refused("reconciler_schedule"):
        Reconciler(parts.stack, "PlainSweep", job=job, table=parts.table,
                   bundle=parts.bundle, alarms=ALARMS)


@pytest.mark.parametrize("principal", [iam.AnyPrincipal(), iam.ArnPrincipal("*"),
                                       iam.StarPrincipal()])
def test_a_publicly_invokable_recovery_function(parts: Parts, principal: iam.IPrincipal) -> None:
    with _refused("invokers"):
        RecoveryFunction(parts.stack, "Recovery", jobs=[CRM_SYNC], table=parts.table, alarms=ALARMS,
                         bundle=parts.bundle, invokers=[principal])


def test_a_confirmation_threshold_below_one(parts: Parts) -> None:
    with _refused("confirm_above"):
        RecoveryFunction(parts.stack, "Recovery", jobs=[CRM_SYNC], table=parts.table, alarms=ALARMS,
                         bundle=parts.bundle, confirm_above=0)


def test_two_jobs_with_one_name() -> None:
    with _refused("jobs"):
        JobGuardStack(cdk.App(), "Twice", jobs=[CRM_SYNC, CRM_SYNC],
                      settings=StackSettings(alarms_off="a test"))


@pytest.mark.parametrize(("context", "field"), [
    ({"jobguard:recoveryInvokers": "*"}, "recovery_invokers"),
    ({"jobguard:recoveryInvokers": "arn:aws:iam::123456789012:role/a,oncall"},
     "recovery_invokers"),
    ({"jobguard:alarmTopicArn": "alarms"}, "alarm_topic_arn"),
    ({"jobguard:powertoolsLayerVersion": "latest"}, "jobguard:powertoolsLayerVersion"),
    ({"jobguard:powertoolsLayerVersion": 0}, "powertools_layer_version"),
    ({"jobguard:dependencies": "docker"}, "dependencies"),
    ({"jobguard:local": "true", "jobguard:dependencies": "wheels"}, "jobguard:dependencies"),
    ({"jobguard:local": "maybe"}, "jobguard:local"),
])
def test_context_values_that_cannot_be_right(context: dict[str, Any], field: str) -> None:
    with _refused(field):
        StackSettings.from_context(context)


def test_context_values_that_are_taken() -> None:
    settings = StackSettings.from_context({
        "jobguard:local": "true",
        "jobguard:recoveryInvokers": "arn:aws:iam::123456789012:role/oncall, 210987654321",
        "jobguard:powertoolsLayerVersion": "40"})
    assert settings.dependencies.value == "host"
    assert settings.recovery_invokers == ("arn:aws:iam::123456789012:role/oncall",
                                          "210987654321")
    assert settings.powertools_layer_version == 40
    assert [type(p).__name__ for p in settings.invoker_principals()] == [
        "ArnPrincipal", "AccountPrincipal"]


def test_an_overlap_alarm_no_run_can_reach_is_refused(parts: Parts) -> None:
    # 80% of crm-sync's 5-minute interval is its 4-minute timeout: RunDuration never gets there
    with _refused("overlap_alarm_share"):
        parts.job(job=dataclasses.replace(CRM_SYNC, overlap_alarm_share=0.8))
    # and a timeout cut below the alarm when the function is deployed: refused at synth
    shorter_claims = dataclasses.replace(CRM_SYNC, claim_for=timedelta(minutes=2))
    with _refused("overlap_alarm_share"):
        shorter_claims.check_deployment(function_timeout=timedelta(minutes=3))


def test_a_trigger_mapping_concurrency_lambda_does_not_take_is_refused(parts: Parts) -> None:
    with _refused("trigger_max_concurrency"):
        parts.job(trigger_max_concurrency=1)


def test_the_default_overlap_alarm_fits_a_schedule_longer_than_the_timeout(parts: Parts) -> None:
    # GIVEN a first definition: every 10 minutes, 5-minute timeout, no share given
    slow_tick = JobDefinition(name="first-job", handler=CRM_SYNC.handler,
                              schedule="rate(10 minutes)", policy=OverlapPolicy.SKIP,
                              timeout=timedelta(minutes=5), lease=timedelta(minutes=2))
    # WHEN its stack is built THEN it is, with no overlap alarm: no run reaches the next tick
    job = parts.job(job=slow_tick)
    assert "overlap" not in job.alarms and "no_success" in job.alarms
    # AND a job whose runs can reach the next tick gets the overlap alarm at 80% of it
    tight = parts.job(job=dataclasses.replace(slow_tick, name="tight-job",
                                              schedule="rate(5 minutes)"))
    template = Template.from_stack(parts.stack).to_json()["Resources"]
    overlap = parts.stack.resolve(parts.stack.get_logical_id(
        tight.alarms["overlap"].node.default_child))  # type: ignore[arg-type]
    assert template[overlap]["Properties"]["Threshold"] == 0.8 * 5 * 60 * 1000
    # AND the same share given explicitly where no run can reach it is refused, naming it
    with _refused("overlap_alarm_share"):
        dataclasses.replace(slow_tick, overlap_alarm_share=0.8)
