"""Every environment variable jobguard reads is set by the stack, on the right function,
to the right resource. Both sides are read: ``jobguard.environment`` (what each kind of
function reads) and the synthesized template (what each function gets)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Template

from handlers.jobs import CRM_SYNC
from infra.stack import HANDLER_PACKAGES
from jobguard import environment
from jobguard.cdk import JobTable, LambdaBundle, RecoveryFunction, alarms_off
from jobguard.cdk.recovery import OPTIONAL_ENVIRONMENT

from .conftest import EXPORT, NIGHTLY, PRICES, Synth


def _variables(synth: Synth, function: Any) -> dict[str, Any]:
    variables: dict[str, Any] = synth.properties(function)["Environment"]["Variables"]
    return variables


def test_every_variable_jobguard_defines_is_known_to_the_stack() -> None:
    # a variable added to jobguard.environment is either read by a kind of function (the
    # three lists) or optional with a construct argument that sets it; anything else
    # would be set by nobody
    defined = {getattr(environment, name) for name in environment.__all__
               if isinstance(getattr(environment, name), str)}
    listed = {*environment.JOB_FUNCTION, *environment.RECOVERY_FUNCTION,
              *environment.RECONCILER_FUNCTION, *environment.FLEET_JOB_FUNCTION,
              environment.DRILLS}  # on every function of a drills bundle (test_drills)
    assert defined == listed | OPTIONAL_ENVIRONMENT.keys()
    assert not listed & OPTIONAL_ENVIRONMENT.keys()


ALARMS = alarms_off(reason="a test stack, never deployed")


def test_an_optional_recovery_variable_is_set_when_asked_for() -> None:
    stack = Stack()
    RecoveryFunction(stack, "Recovery", jobs=[CRM_SYNC],
                     table=JobTable(stack, "Table", alarms=ALARMS),
                     bundle=LambdaBundle(stack, "Bundle", packages=HANDLER_PACKAGES),
                     confirm_above=250, alarms=ALARMS)
    [function] = Template.from_stack(stack).find_resources("AWS::Lambda::Function").values()
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables[environment.RECOVERY_CONFIRM_ABOVE] == "250"


@pytest.mark.parametrize(
    "name", ["crm-sync", "report-export", NIGHTLY.name, EXPORT.name, PRICES.name])
def test_a_job_function_gets_every_variable_a_job_function_reads(synth: Synth, name: str) -> None:
    job = synth.stack.jobs[name]
    variables = _variables(synth, job.function)
    needed = set(environment.JOB_FUNCTION)
    if not job.config.needs_queue:  # SKIP and REPLACE never touch a trigger queue
        needed.discard(environment.TRIGGER_QUEUE_URL)
        assert environment.TRIGGER_QUEUE_URL not in variables
    assert needed <= variables.keys()
    assert variables[environment.TABLE] == {"Ref": synth.logical_id(synth.stack.table.table)}
    if job.trigger_queue is not None:
        assert variables[environment.TRIGGER_QUEUE_URL] == {
            "Ref": synth.logical_id(job.trigger_queue)}


def test_a_jobs_own_environment_is_passed_through(synth: Synth) -> None:
    variables = _variables(synth, synth.stack.jobs[EXPORT.name].function)
    assert variables["EXPORT_BUCKET"] == "invoices"


def test_crm_sync_functions_get_the_tables_the_job_reads(synth: Synth) -> None:
    # the example job's own variables, named in its module
    from handlers import crm_sync

    data = synth.stack.crm_sync_data
    assert data is not None
    feed = {"Ref": synth.logical_id(data.feed)}
    notes = {"Ref": synth.logical_id(data.notes)}
    for function in (synth.stack.jobs["crm-sync"].function, synth.stack.recovery.function):
        variables = _variables(synth, function)
        assert variables[crm_sync.CONTACTS_TABLE] == feed
        assert variables[crm_sync.NOTES_TABLE] == notes
    # the reconciler runs the job's code too: the job's environment, from its definition
    # (what it may do with the feed is its grant: tests/infra/test_iam.py)
    [reconciler] = synth.stack.reconcilers
    variables = _variables(synth, reconciler.function)
    assert variables[crm_sync.NOTES_TABLE] == notes
    assert variables[crm_sync.CONTACTS_TABLE] == feed
    for name in (NIGHTLY.name, EXPORT.name, PRICES.name):
        assert crm_sync.NOTES_TABLE not in _variables(synth, synth.stack.jobs[name].function)


def test_recovery_gets_every_variable_recovery_reads(synth: Synth) -> None:
    variables = _variables(synth, synth.stack.recovery.function)
    assert set(environment.RECOVERY_FUNCTION) <= variables.keys()
    assert variables[environment.TABLE] == {"Ref": synth.logical_id(synth.stack.table.table)}
    # each job's handler module (a BatchJob's registers it); the extra jobs of this
    # suite share crm-sync's module
    assert variables[environment.RECOVERY_MODULES] == "handlers.crm_sync,handlers.report_export"


def test_the_reconciler_gets_every_variable_a_reconciler_reads(synth: Synth) -> None:
    [reconciler] = synth.stack.reconcilers
    variables = _variables(synth, reconciler.function)
    assert set(environment.RECONCILER_FUNCTION) <= variables.keys()
    assert variables[environment.JOB_NAME] == "crm-sync"
    assert variables[environment.RECOVERY_MODULES] == "handlers.crm_sync"
    assert variables[environment.TABLE] == {"Ref": synth.logical_id(synth.stack.table.table)}
    # crm-sync is COALESCE: the sweep's release sends a pending follow-up to its queue
    queue = synth.stack.jobs["crm-sync"].trigger_queue
    assert variables[environment.TRIGGER_QUEUE_URL] == {"Ref": synth.logical_id(queue)}
