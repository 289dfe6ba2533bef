"""The sandbox sees what the Lambda sees: a wired job's ``JobDefinition.environment``,
which the stack sets on its function, is in ``os.environ`` for the test, and gone when
the sandbox closes."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest

from jobguard import ConfigError, OverlapPolicy, guarded
from jobguard.definitions import JobDefinition
from jobguard.testing import Sandbox

pytest_plugins = ["pytester"]


def _definition(name: str, **environment: str) -> JobDefinition:
    return JobDefinition(name=name, handler="kit.env.lambda_handler",
                         schedule="rate(5 minutes)", policy=OverlapPolicy.SKIP,
                         timeout=timedelta(minutes=5), lease=timedelta(minutes=2),
                         environment=environment)


def _reads_env(definition: JobDefinition) -> Any:
    @guarded(definition.config())
    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        return {"crm": os.environ["KIT_CRM_URL"], "region": os.environ.get("KIT_CRM_REGION")}

    return lambda_handler


@pytest.fixture(autouse=True)
def _unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KIT_CRM_URL", "KIT_CRM_REGION"):
        monkeypatch.delenv(name, raising=False)


def test_a_handler_reads_its_definitions_environment_and_it_is_gone_after() -> None:
    # GIVEN a handler reading a variable its definition names, and no monkeypatch
    crm_sync = _definition("kit-env", KIT_CRM_URL="https://crm.example", KIT_CRM_REGION="eu")
    with Sandbox.start() as sandbox:
        # WHEN it is wired and ticked
        result = sandbox.wire(_reads_env(crm_sync)).tick()
        # THEN it ran with the definition's values, which the test sees too
        assert result == {"crm": "https://crm.example", "region": "eu"}
        assert os.environ["KIT_CRM_URL"] == "https://crm.example"
    # AND once the sandbox closed, they are gone
    assert "KIT_CRM_URL" not in os.environ and "KIT_CRM_REGION" not in os.environ


def test_a_batch_jobs_definition_environment_is_applied_too(jobguard_sandbox) -> None:
    from jobguard import BatchJob, Page

    seen: list[str | None] = []

    class Reads(BatchJob[str]):
        def select(self, cursor: str | None, limit: int) -> Page[str]:
            seen.append(os.environ.get("KIT_CRM_URL"))
            return Page([], None)

    job = jobguard_sandbox.wire(Reads(_definition("kit-env-batch",
                                                  KIT_CRM_URL="https://crm.example").config()))
    job.tick()
    assert seen == ["https://crm.example"]
    assert [r.status.value for r in job.runs()] == ["succeeded"]


def test_a_value_set_before_wire_that_differs_is_refused_and_nothing_is_set(
        jobguard_sandbox, monkeypatch) -> None:
    # GIVEN the test (or the shell) already set one of the definition's variables otherwise
    monkeypatch.setenv("KIT_CRM_URL", "http://localhost:9")
    handler = _reads_env(_definition("kit-env", KIT_CRM_URL="https://crm.example",
                                     KIT_CRM_REGION="eu"))
    # WHEN the job is wired THEN it is refused, naming the variable and both values
    with pytest.raises(ConfigError) as refused:
        jobguard_sandbox.wire(handler)
    assert refused.value.field == "environment"
    assert "KIT_CRM_URL" in str(refused.value) and "http://localhost:9" in str(refused.value)
    assert "https://crm.example" in str(refused.value) and "after wire()" in str(refused.value)
    # AND nothing of the definition was applied
    assert os.environ["KIT_CRM_URL"] == "http://localhost:9" and "KIT_CRM_REGION" not in os.environ


def test_a_tests_own_value_set_after_wire_is_what_the_handler_reads(
        jobguard_sandbox, monkeypatch) -> None:
    job = jobguard_sandbox.wire(_reads_env(_definition("kit-env",
                                                       KIT_CRM_URL="https://crm.example")))
    monkeypatch.setenv("KIT_CRM_URL", "http://localhost:9")
    assert job.tick()["crm"] == "http://localhost:9"
    # the same job wired again (the value now the test's) is refused, naming the test
    with pytest.raises(ConfigError, match="this process"):
        jobguard_sandbox.wire(_reads_env(_definition("kit-env",
                                                     KIT_CRM_URL="https://crm.example")))


def test_two_wired_jobs_that_set_one_variable_differently_are_refused(jobguard_sandbox) -> None:
    jobguard_sandbox.wire(_reads_env(_definition("kit-env-a", KIT_CRM_URL="https://a.example")))
    jobguard_sandbox.wire(_reads_env(_definition("kit-env-b", KIT_CRM_URL="https://a.example")))
    with pytest.raises(ConfigError, match="the definition of 'kit-env-a'"):
        jobguard_sandbox.wire(_reads_env(_definition("kit-env-c",
                                                     KIT_CRM_URL="https://c.example")))


@pytest.mark.parametrize("name", ["AWS_ENDPOINT_URL", "AWS_PROFILE", "JOBGUARD_TABLE"])
def test_a_definition_may_not_set_what_steers_the_sandbox_or_what_the_stack_sets(
        name: str) -> None:
    # GIVEN a definition whose environment names a variable Lambda or the stack sets, or
    # one that steers boto3 off the emulator (the stack refuses it at synth: too late, a
    # wired job would already have set it in the sealed test session)
    # WHEN it is defined THEN it is refused, naming the field and the variable
    with pytest.raises(ConfigError) as refused:
        _definition("kit-env-reserved", **{name: "http://127.0.0.1:9"})
    assert refused.value.field == "environment" and name in str(refused.value)


_AFTER_WIRE = """
import os
from datetime import timedelta

from jobguard import OverlapPolicy, guarded
from jobguard.definitions import JobDefinition

CRM_SYNC = JobDefinition(name="kit-env-after", handler="kit.env.lambda_handler",
                         schedule="rate(5 minutes)", policy=OverlapPolicy.SKIP,
                         timeout=timedelta(minutes=5), lease=timedelta(minutes=2),
                         environment={"KIT_CRM_URL": "https://crm.example"})


@guarded(CRM_SYNC.config())
def lambda_handler(event, context):
    return os.environ["KIT_CRM_URL"]


def test_own_value(monkeypatch, jobguard_sandbox):
    job = jobguard_sandbox.wire(lambda_handler)
    monkeypatch.setenv("KIT_CRM_URL", "http://localhost:9")
    assert job.tick() == "http://localhost:9"


def test_next():
    assert "KIT_CRM_URL" not in os.environ
"""


def test_a_tests_own_value_set_after_wire_does_not_outlive_the_test(
        pytester: pytest.Pytester) -> None:
    # GIVEN a user's test that sets its own value after wire(), as wire() tells it, with
    # pytest's monkeypatch requested before the sandbox (so torn down after it)
    pytester.makepyfile(test_user=_AFTER_WIRE)
    # WHEN it runs, then the next test
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-n", "0", "-rf")
    # THEN the next test does not see the definition's value left behind
    result.assert_outcomes(passed=2)


def test_a_definitions_environment_changed_after_it_was_defined_is_checked_again() -> None:
    # GIVEN a definition whose (mutable) environment dict is changed after it was defined,
    # before its handler's config is made
    crm_sync = _definition("kit-env-changed", KIT_CRM_URL="https://crm.example")
    crm_sync.environment["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
    # WHEN the handler's config is made THEN it is refused, naming the field, so no
    # sandbox ever sets it
    with pytest.raises(ConfigError) as refused:
        crm_sync.config()
    assert refused.value.field == "environment" and "AWS_ENDPOINT_URL" in str(refused.value)
