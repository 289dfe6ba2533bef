"""A stack built from jobguard.cdk by someone else (their app, their jobs) is as operable
and drillable as ours: its alarms reach a person or say in writing why not, each names
the runbook, its outputs are what ``Deployment.from_outputs`` reads, and one bundle option
makes it drillable (issue 29 rows 1, 2, 4 and 8, construct side)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from handlers.jobs import CRM_SYNC
from infra.settings import StackSettings
from infra.stack import HANDLER_PACKAGES
from jobguard.cdk import (
    AlarmDestination,
    GuardedJob,
    JobTable,
    LambdaBundle,
    Reconciler,
    RecoveryFunction,
    alarms_off,
    alarms_to_email,
    alarms_to_topic,
)
from jobguard.cdk.bundle import Dependencies
from jobguard.deployment import Deployment
from jobguard.drill.switches import DRILLS
from jobguard.errors import ConfigError

from .conftest import NIGHTLY, ROOT, TOPIC, Synth

RUNBOOK = "https://wiki.example.com/billing/jobs"
TEST_ACCOUNT = "444455556666"
JOBS = (CRM_SYNC, NIGHTLY)


def _fake_pip(command: list[str]) -> None:
    Path(command[command.index("--target") + 1]).mkdir(parents=True)


def user_stack(tmp: Path, alarms: Callable[[cdk.Stack], AlarmDestination], *,
               drills: bool = False, context: dict[str, Any] | None = None,
               account: str | None = None) -> tuple[cdk.Stack, dict[str, Any]]:
    """A user's stack: two jobs of theirs, a reconciler, recovery; one ``alarms``."""
    app = cdk.App(context=context or {})
    stack = cdk.Stack(app, "Billing", env=cdk.Environment(account=account) if account else None)
    destination = alarms(stack)
    table = JobTable(stack, "Jobs", alarms=destination)
    code = LambdaBundle(stack, "Code", packages=HANDLER_PACKAGES, drills=drills,
                        build_dir=tmp, run=_fake_pip)
    jobs = {job.name: GuardedJob(stack, job.name.title().replace("-", ""), job=job,
                                 table=table, bundle=code, alarms=destination)
            for job in JOBS}
    Reconciler(stack, "CrmSyncReconciler", job=CRM_SYNC, table=table, bundle=code,
               alarms=destination, trigger_queue=jobs[CRM_SYNC.name].trigger_queue)
    RecoveryFunction(stack, "Recovery", jobs=JOBS, table=table, bundle=code,
                     alarms=destination)
    return stack, Template.from_stack(stack).to_json()


def _of_type(template: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == kind}


def _text(value: Any) -> str:
    """A template value as the deployed string, roughly: a Ref or GetAtt becomes the
    logical id it names, an Fn::Join its joined parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_text(part) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    raise AssertionError(f"unexpected template value {value!r}")


def _outputs(template: dict[str, Any]) -> dict[str, str]:
    return {key: _text(output["Value"]) for key, output in template["Outputs"].items()}


@pytest.fixture(scope="module")
def emailed(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, dict[str, Any]]:
    return user_stack(tmp_path_factory.mktemp("build"), lambda _: alarms_to_email(
        "oncall@example.com", "billing@example.com", runbook=RUNBOOK))


@pytest.fixture(scope="module")
def silenced(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, dict[str, Any]]:
    return user_stack(tmp_path_factory.mktemp("build"),
                      lambda _: alarms_off(reason="a sandbox account, no on-call yet"))


@pytest.fixture(scope="module")
def drillable(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, dict[str, Any]]:
    return user_stack(tmp_path_factory.mktemp("build"), lambda stack: alarms_to_topic(
        sns.Topic.from_topic_arn(stack, "Pager", TOPIC)), drills=True,
        context={"jobguard:drillsAccounts": f"111122223333,{TEST_ACCOUNT}"}, account=TEST_ACCOUNT)


# -- alarms reach a person -------------------------------------------------------------


def test_every_alarm_of_our_stack_notifies_its_destination_on_alarm_and_ok(
        synth: Synth) -> None:
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    assert len(alarms) > 40
    for logical_id, alarm in alarms.items():
        assert alarm["Properties"].get("AlarmActions") == [TOPIC], logical_id
        assert alarm["Properties"].get("OKActions") == [TOPIC], logical_id
    assert synth.template.to_json()["Outputs"]["AlarmTopicArn"]["Value"] == TOPIC


def test_e_mail_alarms_subscribe_each_address_to_one_encrypted_topic_every_alarm_notifies(
        emailed: tuple[cdk.Stack, dict[str, Any]]) -> None:
    _, template = emailed
    [(topic_id, topic)] = _of_type(template, "AWS::SNS::Topic").items()
    assert "KmsMasterKeyId" in topic
    subscriptions = _of_type(template, "AWS::SNS::Subscription").values()
    assert sorted((s["Protocol"], s["Endpoint"], s["TopicArn"]["Ref"]) for s in subscriptions) \
        == [("email", "billing@example.com", topic_id), ("email", "oncall@example.com", topic_id)]
    alarms = _of_type(template, "AWS::CloudWatch::Alarm").values()
    assert len(alarms) > 20
    for alarm in alarms:
        assert alarm["AlarmActions"] == alarm["OKActions"] == [{"Ref": topic_id}]
    assert template["Outputs"]["AlarmTopicArn"]["Value"] == {"Ref": topic_id}


@pytest.mark.parametrize("addresses", [
    (), ("oncall",), ("a@example.com, b@example.com",),
    # twice: a jsii traceback at synth (SubscriptionAlreadyExistsUnder), or two mails each
    ("a@example.com", " a@example.com"), ("a@example.com", "A@Example.com"),
    ("a@example.com\x1b[2J",)])
def test_an_e_mail_destination_that_is_no_address_is_refused_when_defined(
        addresses: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="^alarms: "):
        alarms_to_email(*addresses)


@pytest.mark.parametrize("reason", [
    "", "   ", "...", "line\nbreak",
    # one line of text: it is in every alarm's description, its e-mails and the output
    "carriage\rreturn", "escape\x1b[2Jcleared", "tab\there", "line\u2028separator"])
def test_alarms_off_without_a_reason_in_words_is_refused_naming_reason(reason: str) -> None:
    with pytest.raises(ConfigError, match="^reason: "):
        alarms_off(reason=reason)


def test_alarms_off_pages_nobody_and_says_why_in_every_description_and_the_output(
        silenced: tuple[cdk.Stack, dict[str, Any]]) -> None:
    _, template = silenced
    alarms = _of_type(template, "AWS::CloudWatch::Alarm").values()
    assert alarms
    for alarm in alarms:
        assert "AlarmActions" not in alarm and "OKActions" not in alarm
        assert "nobody is paged: a sandbox account, no on-call yet." in \
            _text(alarm["AlarmDescription"])
    assert not _of_type(template, "AWS::SNS::Topic")
    found = Deployment.from_outputs("Billing", _outputs(template))
    assert (found.alarm_topic, found.alarms_off_reason) == (
        None, "a sandbox account, no on-call yet")


def test_every_description_ends_with_the_users_runbook_link(
        emailed: tuple[cdk.Stack, dict[str, Any]]) -> None:
    _, template = emailed
    for alarm in _of_type(template, "AWS::CloudWatch::Alarm").values():
        description = _text(alarm["AlarmDescription"])
        assert description.endswith(f"Runbook: {RUNBOOK}"), description
        assert "README" not in description and len(description) <= 1024


def test_without_a_link_a_description_names_the_command_that_prints_the_runbook(
        silenced: tuple[cdk.Stack, dict[str, Any]]) -> None:
    stack, template = silenced
    endings = {_text(a["AlarmDescription"]).rsplit("Runbook: ", 1)[1]
               for a in _of_type(template, "AWS::CloudWatch::Alarm").values()}
    assert endings == {f"jobguard runbook {CRM_SYNC.name} --stack Billing",
                       f"jobguard runbook {NIGHTLY.name} --stack Billing",
                       "jobguard runbook JOB --stack Billing (each job of the stack)"}
    assert stack.stack_name == "Billing"


@pytest.mark.parametrize("construct", ["GuardedJob", "Reconciler", "RecoveryFunction"])
def test_a_construct_without_a_destination_is_refused_naming_the_option(
        construct: str) -> None:
    stack = cdk.Stack(cdk.App(), "NoAlarms")
    off = alarms_off(reason="only to build the parts")
    table = JobTable(stack, "Jobs", alarms=off)
    code = LambdaBundle(stack, "Code", packages=HANDLER_PACKAGES)
    build = {
        "GuardedJob": lambda: GuardedJob(stack, "Mailer", job=CRM_SYNC, table=table,
                                         bundle=code),
        "Reconciler": lambda: Reconciler(stack, "Mailer", job=CRM_SYNC, table=table,
                                         bundle=code),
        "RecoveryFunction": lambda: RecoveryFunction(stack, "Mailer", jobs=[CRM_SYNC],
                                                     table=table, bundle=code),
    }
    with pytest.raises(ConfigError) as info:
        build[construct]()
    assert str(info.value) == (
        f"alarms: {construct} 'Mailer' has no alarm destination: pass "
        'alarms=alarms_to_email("oncall@example.com"), alarms_to_topic(topic) or '
        'alarms_off(reason="...")')


def test_a_table_without_a_destination_is_refused_naming_the_option() -> None:
    with pytest.raises(ConfigError, match="^alarms: JobTable 'Jobs' has no alarm destination"):
        JobTable(cdk.Stack(cdk.App(), "NoAlarms"), "Jobs")


def test_one_stack_sends_its_alarms_to_one_destination() -> None:
    stack = cdk.Stack(cdk.App(), "Two")
    table = JobTable(stack, "Jobs", alarms=alarms_off(reason="a first destination"))
    code = LambdaBundle(stack, "Code", packages=HANDLER_PACKAGES)
    with pytest.raises(ConfigError, match="^alarms: .*another destination"):
        GuardedJob(stack, "Mailer", job=CRM_SYNC, table=table, bundle=code,
                   alarms=alarms_to_email("oncall@example.com"))


@pytest.mark.parametrize("second", ["crm-sync", "crm_sync", "crm.sync"])
def test_two_jobs_with_one_output_key_are_refused_in_one_line(second: str) -> None:
    """``crm-sync`` twice, or beside ``crm_sync``: both would be output ``CrmSyncJob``
    (a jsii traceback, "There is already a Construct with name", before)."""
    import dataclasses

    stack = cdk.Stack(cdk.App(), "Twice")
    off = alarms_off(reason="only to build the parts")
    table = JobTable(stack, "Jobs", alarms=off)
    code = LambdaBundle(stack, "Code", packages=HANDLER_PACKAGES)
    GuardedJob(stack, "First", job=CRM_SYNC, table=table, bundle=code, alarms=off)
    with pytest.raises(ConfigError, match=rf"^job: job '{second}' .*: its stack output "
                                          r"CrmSyncJob is one per stack 'Twice', and job "
                                          r"'crm-sync' has it already$"):
        GuardedJob(stack, "Second", job=dataclasses.replace(CRM_SYNC, name=second),
                   table=table, bundle=code, alarms=off)


def test_a_second_reconciler_or_recovery_function_is_refused_in_one_line() -> None:
    """Their outputs are one per job / per stack: a jsii traceback before."""
    stack = cdk.Stack(cdk.App(), "Twice")
    off = alarms_off(reason="only to build the parts")
    table = JobTable(stack, "Jobs", alarms=off)
    code = LambdaBundle(stack, "Code", packages=HANDLER_PACKAGES)
    Reconciler(stack, "One", job=CRM_SYNC, table=table, bundle=code, alarms=off)
    with pytest.raises(ConfigError, match=r"^job: Reconciler 'Two' of job 'crm-sync': its "
                                          r"stack output CrmSyncReconcilerFunctionName is one "
                                          r"per stack 'Twice', and Reconciler 'One' of job "
                                          r"'crm-sync' has it already$"):
        Reconciler(stack, "Two", job=CRM_SYNC, table=table, bundle=code, alarms=off)
    RecoveryFunction(stack, "Recovery", jobs=[CRM_SYNC], table=table, bundle=code, alarms=off)
    with pytest.raises(ConfigError, match=r"^output_name: RecoveryFunction 'Again': its stack "
                                          r"output RecoveryFunctionName .* RecoveryFunction "
                                          r"'Recovery' has it already$"):
        RecoveryFunction(stack, "Again", jobs=[CRM_SYNC], table=table, bundle=code,
                         alarms=off)
    # with outputs of its own names, a second one is fine
    RecoveryFunction(stack, "Again", jobs=[CRM_SYNC], table=table, bundle=code, alarms=off,
                     output_name="SecondRecovery", execute_output_name=None)


USER_APP = '''
import aws_cdk as cdk
from handlers.jobs import CRM_SYNC
from jobguard.cdk import GuardedJob, JobTable, LambdaBundle, alarms_off

app = cdk.App()
stack = cdk.Stack(app, "Billing")
table = JobTable(stack, "Jobs", alarms=alarms_off(reason="the table only"))
code = LambdaBundle(stack, "Code", packages=["handlers"])
GuardedJob(stack, "InvoiceMailer", job=CRM_SYNC, table=table, bundle=code)
app.synth()
'''


def test_synthesis_without_a_destination_ends_with_one_line_and_no_traceback(
        tmp_path: Path) -> None:
    # GIVEN a user's app.py whose GuardedJob has no alarms=
    (tmp_path / "app.py").write_text(USER_APP)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "lib"), str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "JOBGUARD_CDK_BUILD_DIR": str(tmp_path / "build")}
    # WHEN they run `python app.py` from the folder their handlers are in
    done = subprocess.run([sys.executable, str(tmp_path / "app.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    # THEN one line on stderr says what to pass, and the exit is non-zero
    assert done.returncode != 0
    assert done.stderr.splitlines() == [
        "jobguard: alarms: GuardedJob 'InvoiceMailer' has no alarm destination: pass "
        'alarms=alarms_to_email("oncall@example.com"), alarms_to_topic(topic) or '
        'alarms_off(reason="...")'], done.stderr


# -- this repository's stacks take it from context ------------------------------------


def test_a_production_deployment_without_a_destination_names_the_context_keys() -> None:
    settings = StackSettings.from_context({})
    with pytest.raises(ConfigError) as info:
        settings.alarm_destination(cdk.Stack(cdk.App(), "JobGuard"))
    message = str(info.value)
    assert message.startswith("alarms: ")
    for key in ("jobguard:alarmEmail", "jobguard:alarmTopicArn", "jobguard:alarmsOff"):
        assert key in message


@pytest.mark.parametrize(("context", "field"), [
    ({"jobguard:alarmEmail": "oncall"}, "jobguard:alarmEmail"),
    ({"jobguard:alarmsOff": " "}, "jobguard:alarmsOff"),
    ({"jobguard:alarmsOff": "testing", "jobguard:alarmEmail": "a@example.com"}, "alarms"),
    ({"jobguard:alarmsOff": "testing", "jobguard:runbookUrl": "a\nb"}, "jobguard:runbookUrl"),
])
def test_alarm_context_that_cannot_be_right(context: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=f"^{field}: "):
        StackSettings.from_context(context)


def test_a_local_deployment_pages_nobody_unless_told() -> None:
    local = StackSettings.from_context({"jobguard:local": "true"})
    destination = local.alarm_destination(cdk.Stack(cdk.App(), "JobGuard-local"))
    assert destination.off_reason == "a local/drills deployment: nobody is paged"
    told = StackSettings.from_context({"jobguard:local": "true",
                                       "jobguard:alarmEmail": "oncall@example.com"})
    assert told.alarm_destination(cdk.Stack(cdk.App(), "S")).addresses == (
        "oncall@example.com",)


# -- outputs ------------------------------------------------------------------------------


def test_the_outputs_are_what_deployment_from_outputs_reads(
        emailed: tuple[cdk.Stack, dict[str, Any]]) -> None:
    stack, template = emailed
    found = Deployment.from_outputs("Billing", _outputs(template))
    assert set(found.jobs) == {CRM_SYNC.name, NIGHTLY.name}
    crm = found.jobs[CRM_SYNC.name]
    assert crm.definition == CRM_SYNC.__class__(**{**CRM_SYNC.__dict__, "environment": {}})
    assert crm.queue_url is not None and found.jobs[NIGHTLY.name].queue_url is None
    assert (crm.drills, crm.runbook) == (False, RUNBOOK)
    assert set(found.reconcilers) == {CRM_SYNC.name}
    assert found.recovery_function and found.recovery_execute and found.alarm_topic
    functions = _of_type(template, "AWS::Lambda::Function")
    assert {crm.function, found.jobs[NIGHTLY.name].function, found.reconcilers[CRM_SYNC.name],
            found.recovery_function} <= set(functions)
    assert found.table in _of_type(template, "AWS::DynamoDB::Table")


# -- drills: one bundle option ------------------------------------------------------------


def _drill_queries(template: dict[str, Any]) -> dict[str, list[str]]:
    """Per role: the drill switch Query statements' leading keys."""
    found: dict[str, list[str]] = {}
    for policy in _of_type(template, "AWS::IAM::Policy").values():
        for statement in policy["PolicyDocument"]["Statement"]:
            keys = statement.get("Condition", {}).get("ForAllValues:StringLike", {}).get(
                "dynamodb:LeadingKeys", [])
            if statement["Action"] == "dynamodb:Query" and "Null" not in statement.get(
                    "Condition", {}) and all(k.startswith("JOB#") and "*" not in k
                                             for k in keys):
                for role in policy["Roles"]:
                    found.setdefault(role["Ref"], []).extend(keys)
    return found


def test_a_drills_bundle_makes_the_whole_deployment_drillable(
        drillable: tuple[cdk.Stack, dict[str, Any]]) -> None:
    _, template = drillable
    functions = _of_type(template, "AWS::Lambda::Function")
    assert len(functions) == 4
    for function in functions.values():
        assert function["Environment"]["Variables"][DRILLS] == "1"
        assert function["Timeout"] == int(CRM_SYNC.for_drills().timeout.total_seconds())
    grants = _drill_queries(template)
    assert sorted(map(sorted, grants.values())) == sorted([
        [f"JOB#{CRM_SYNC.name}"], [f"JOB#{NIGHTLY.name}"], [f"JOB#{CRM_SYNC.name}"],
        sorted(f"JOB#{job.name}" for job in JOBS)])
    for schedule in _of_type(template, "AWS::Scheduler::Schedule").values():
        assert schedule["State"] == "DISABLED"
    found = Deployment.from_outputs("Billing", _outputs(template))
    for job in JOBS:
        deployed = found.jobs[job.name]
        assert deployed.drills is True
        assert (deployed.definition.lease, deployed.definition.timeout) == (
            job.for_drills().lease, job.for_drills().timeout)


def test_a_drillable_stack_says_so_on_every_resource(
        drillable: tuple[cdk.Stack, dict[str, Any]]) -> None:
    _, template = drillable
    tagged = [r["Properties"]["Tags"] for r in template["Resources"].values()
              if r["Type"] == "AWS::Lambda::Function"]
    assert tagged and all({"Key": "jobguard:drills", "Value": "true"} in tags
                          for tags in tagged)


@pytest.mark.parametrize(("context", "account", "said"), [
    ({}, None, "stack 'Billing' is bound to no account"),
    ({"jobguard:drillsAccounts": TEST_ACCOUNT}, None, "stack 'Billing' is bound to no account"),
    ({"jobguard:drillsAccounts": TEST_ACCOUNT}, "999988887777",
     "account 999988887777 of stack 'Billing' is not on it"),
    ({}, TEST_ACCOUNT, f"account {TEST_ACCOUNT} of stack 'Billing' is not on it"),
], ids=["no-list", "unbound", "other-account", "bound-no-list"])
def test_a_drills_bundle_outside_a_listed_test_account_is_refused_when_defined(
        tmp_path: Path, context: dict[str, Any], account: str | None, said: str) -> None:
    """A user's app that reads its drills flag from the environment (DRILLS=1 leaked into
    a production pipeline) deployed with schedules disabled, fault switches on and no
    dead-man alarm, silently, before: now one line names the allow-list."""
    with pytest.raises(ConfigError) as info:
        user_stack(tmp_path, lambda _: alarms_off(reason="a drill"), drills=True,
                   context=context, account=account)
    assert info.value.field == "jobguard:drillsAccounts"
    assert said in str(info.value) and "-c jobguard:local=true" in str(info.value)


def test_a_drills_bundle_for_the_local_aws_needs_no_account(tmp_path: Path) -> None:
    _, template = user_stack(tmp_path, lambda _: alarms_off(reason="a drill"), drills=True,
                             context={"jobguard:local": "true"})
    assert Deployment.from_outputs("Billing", _outputs(template)).jobs[CRM_SYNC.name].drills


def test_the_local_context_for_a_stack_bound_to_a_real_account_is_refused(
        tmp_path: Path) -> None:
    """-c jobguard:local=true left in a cdk.json deployed a real account's stack with
    every schedule disabled and nobody subscribed, silently, before."""
    with pytest.raises(ConfigError, match=r"^jobguard:local: stack 'Billing' is bound to "
                                          r"account 444455556666, and jobguard:local=true "
                                          r"builds for the local AWS"):
        user_stack(tmp_path, lambda _: alarms_to_email("oncall@example.com"),
                   context={"jobguard:local": "true"}, account=TEST_ACCOUNT)
    user_stack(tmp_path, lambda _: alarms_to_email("oncall@example.com"),
               context={"jobguard:local": "true"}, account="000000000000")


def test_without_drills_no_function_honours_switches_and_none_may_read_them(
        emailed: tuple[cdk.Stack, dict[str, Any]]) -> None:
    _, template = emailed
    for function in _of_type(template, "AWS::Lambda::Function").values():
        assert DRILLS not in function["Environment"]["Variables"]
        assert function["Timeout"] != int(CRM_SYNC.for_drills().timeout.total_seconds())
    assert _drill_queries(template) == {}
    for schedule in _of_type(template, "AWS::Scheduler::Schedule").values():
        assert schedule.get("State", "ENABLED") == "ENABLED"


def test_the_local_context_is_honoured_by_the_constructs_themselves(tmp_path: Path) -> None:
    stack, template = user_stack(tmp_path, lambda _: alarms_to_email("oncall@example.com"),
                                 context={"jobguard:local": "true"})
    bundle = next(c for c in stack.node.children if isinstance(c, LambdaBundle))
    assert bundle.dependencies is Dependencies.HOST
    schedules = _of_type(template, "AWS::Scheduler::Schedule").values()
    assert schedules and all(s["State"] == "DISABLED" for s in schedules)
    assert not _of_type(template, "AWS::SNS::Subscription")  # a local AWS pages nobody
    with pytest.raises(ConfigError, match="^dependencies: "):
        LambdaBundle(cdk.Stack(cdk.App(context={"jobguard:local": "true"}), "L"), "Code",
                     packages=HANDLER_PACKAGES, dependencies=Dependencies.WHEELS)


def test_the_longest_reason_and_runbook_link_allowed_fit_every_description(
        tmp_path: Path) -> None:
    from jobguard.cdk.destination import MAX_REASON, MAX_RUNBOOK

    reason = ("nobody on call " * 20)[:MAX_REASON]
    link = "https://wiki.example.com/" + "r" * (MAX_RUNBOOK - 25)
    _, template = user_stack(tmp_path, lambda _: alarms_off(reason=reason, runbook=link))
    lengths = [len(_text(a["AlarmDescription"]))
               for a in _of_type(template, "AWS::CloudWatch::Alarm").values()]
    assert lengths and max(lengths) <= 1024
    with pytest.raises(ConfigError, match="^runbook: "):
        alarms_off(reason="a test", runbook=link + "r")
    for control in ("\r", "\x1b[31m", "\x07"):  # one line of text, as the reason
        with pytest.raises(ConfigError, match="^runbook: "):
            alarms_off(reason="a test", runbook=f"https://wiki.example.com/{control}x")


@pytest.mark.parametrize("body", ["raise SystemExit('SENT_TABLE is not set')",
                                  "import os\nTABLE = os.environ['SENT_TABLE_NOT_SET']"])
def test_a_handler_that_does_not_import_at_synth_is_said_not_silently_granted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """RecoveryFunction imports each handler module at synth to grant a plain @guarded
    job reads only. A module that reads its Lambda variables at import exited the synth
    (SystemExit, no message) or was granted writes silently before: now the synth goes on,
    the writes are granted, and a warning names the job and why."""
    import dataclasses

    package = tmp_path / f"userjobs_{abs(hash(body)) % 10**6}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mailer.py").write_text(body + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    job = dataclasses.replace(CRM_SYNC, name="mailer", handler=f"{package.name}.mailer.handler",
                              environment={})
    stack = cdk.Stack(cdk.App(), "Billing")
    off = alarms_off(reason="only to build the parts")
    table = JobTable(stack, "Jobs", alarms=off)
    code = LambdaBundle(stack, "Code", packages=[*HANDLER_PACKAGES, package],
                        build_dir=tmp_path / "build", run=_fake_pip)
    recovery = RecoveryFunction(stack, "Recovery", jobs=[job], table=table, bundle=code,
                                alarms=off)
    assert "mailer" not in recovery.plan_only and "mailer" in recovery.not_judged
    # the warning as the synthesized assembly carries it (its manifest, read as JSON: the
    # assertions library hands its entries back through jsii, whose lazy loading failed to
    # resolve their type on some workers, "Unknown interface: ...MetadataEntry")
    app = stack.node.root
    assert isinstance(app, cdk.App)
    out = Path(app.synth().directory)
    manifest = json.loads((out / "manifest.json").read_text())
    metadata = [artifact.get("metadata", {}) for artifact in manifest["artifacts"].values()]
    metadata += [json.loads(f.read_text()) for f in out.glob("*.metadata.json")]
    warnings = [str(entry["data"]) for found in metadata for entries in found.values()
                for entry in entries if entry["type"] == "aws:cdk:warning"
                and "job mailer: its handler module" in str(entry["data"])]
    assert len(warnings) == 1, warnings
    assert "did not import here" in warnings[0]
