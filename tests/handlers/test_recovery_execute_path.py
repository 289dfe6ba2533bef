"""Who may execute a recovery: whoever may invoke the recovery function's ``execute``
alias, not whoever holds a plan's token.

The token confirms a plan against mistakes; anyone who may plan gets one. The deployed
function therefore executes only when invoked through its alias ``execute``, which Lambda
authorizes on its own ARN (a grant of the function's ARN does not cover it): the handler
reads the qualifier from the ARN Lambda invoked it by (``context.invoked_function_arn``).
The grants themselves are checked on the synthesized stack
(``tests/infra/test_recovery.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from typing import Any

import pytest

from jobguard import environment
from jobguard.functions.recovery import invoked_qualifier
from jobguard.recovery import EXECUTE_ALIAS

from .conftest import RECOVERY_ARN, LambdaContext

REQUEST = {"job": "crm-sync", "cursor_from": "000000", "cursor_to": "000003",
           "requested_by": "planner@example.com"}


@pytest.fixture
def recovery(aws, crm, monkeypatch):
    from jobguard.functions import recovery

    monkeypatch.setenv(environment.TABLE, aws.table)
    monkeypatch.setenv(environment.RECOVERY_MODULES, "handlers.crm_sync")
    # a token is required above 1 item: the planner's plan (3 items) needs one
    monkeypatch.setenv(environment.RECOVERY_CONFIRM_ABOVE, "1")
    monkeypatch.setattr(crm.crm_sync, "_guard_options", {"store": aws.store})
    return recovery


def _table(aws: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = aws.ddb.scan(TableName=aws.table, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


def _notes(aws: Any) -> int:
    return int(aws.ddb.scan(TableName="crm-notes", Select="COUNT")["Count"])


@pytest.mark.parametrize("qualifier", [None, "$LATEST", "1", "plan"],
                         ids=["the function itself", "$LATEST", "a version", "another alias"])
def test_a_planners_token_replayed_as_an_execution_is_refused(aws, crm, recovery, qualifier):
    # GIVEN a planner, who may invoke the recovery function but not its execute alias,
    # and its dry run of 3 never-attempted changes, with the plan's token
    as_planner = LambdaContext(qualifier=qualifier)
    plan = recovery.lambda_handler(REQUEST, as_planner)
    assert plan["result"] == "planned" and plan["needs_confirmation"], plan
    token = plan["plan"]["token"]
    before = _table(aws)

    # WHEN the planner sends the execution, token and all, the way it may invoke
    answer = recovery.lambda_handler({**REQUEST, "dry_run": False, "confirm": token},
                                     as_planner)

    # THEN it is refused naming dry_run (the token permits nothing), and nothing is
    # written: no run record, no claim, no note at the destination
    assert (answer["result"], answer["field"]) == ("refused", "dry_run"), answer
    assert f"{EXECUTE_ALIAS!r} alias" in answer["error"]
    assert _table(aws) == before
    assert aws.runs("crm-sync") == [] and _notes(aws) == 0


def test_an_execution_without_a_lambda_context_is_refused(aws, crm, recovery):
    # GIVEN a wrapper that calls the handler with no Lambda context (its ARN unknown)
    token = recovery.lambda_handler(REQUEST, None)["plan"]["token"]
    # WHEN it asks for an execution THEN it is refused: no ARN, no execute alias
    answer = recovery.lambda_handler({**REQUEST, "dry_run": False, "confirm": token}, None)
    assert (answer["result"], answer["field"]) == ("refused", "dry_run"), answer
    assert aws.runs("crm-sync") == [] and _notes(aws) == 0


def test_the_same_execution_through_the_execute_alias_runs(aws, crm, recovery):
    # GIVEN the planner's plan and token
    token = recovery.lambda_handler(REQUEST, LambdaContext())["plan"]["token"]
    # WHEN an executor sends the execution through the execute alias
    answer = recovery.lambda_handler({**REQUEST, "dry_run": False, "confirm": token},
                                     LambdaContext(qualifier=EXECUTE_ALIAS))
    # THEN it runs: 3 replayed, one recovery run, 3 notes
    assert answer["result"] == "executed", answer
    assert answer["summary"]["replayed"] == 3
    [run] = aws.runs("crm-sync")
    assert run.trigger_kind == "recovery" and _notes(aws) == 3
    # and the token is still checked there: a plan above the threshold needs it
    again = recovery.lambda_handler({**REQUEST, "cursor_to": "000002", "dry_run": False,
                                     "confirm": token}, LambdaContext(qualifier=EXECUTE_ALIAS))
    assert (again["result"], again["field"]) == ("refused", "confirm"), again


@pytest.mark.parametrize(("arn", "qualifier"), [
    (RECOVERY_ARN, None),
    (f"{RECOVERY_ARN}:{EXECUTE_ALIAS}", EXECUTE_ALIAS),
    (f"{RECOVERY_ARN}:$LATEST", "$LATEST"),
    (f"{RECOVERY_ARN}:", None),
    ("JobGuard-RecoveryFunction:execute", None),  # not an ARN: Lambda always gives one
    (None, None),
])
def test_the_qualifier_is_read_from_the_invoked_arn_only(arn, qualifier):
    class Context:
        invoked_function_arn = arn

    assert invoked_qualifier(Context()) == qualifier


FUNCTION = "jobguard-recovery"


@pytest.fixture
def deployed(aws, recovery, monkeypatch):
    """The recovery function and its execute alias on the emulator, whose Lambda runs no
    code: an invoke runs the real handler in-process, with the ARN the request named
    (the function's, or ``FUNCTION:QUALIFIER``), as Lambda hands it over."""
    from urllib.parse import unquote

    from moto.awslambda.responses import LambdaResponse

    lam, iam = aws.sandbox.client("lambda"), aws.sandbox.client("iam")
    role = iam.create_role(RoleName="recovery", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("recovery.py", "def lambda_handler(event, context): pass\n")
    lam.create_function(FunctionName=FUNCTION, Runtime="python3.12", Role=role,
                        Handler="recovery.lambda_handler", Code={"ZipFile": code.getvalue()})
    lam.create_alias(FunctionName=FUNCTION, Name=EXECUTE_ALIAS, FunctionVersion="$LATEST")
    invoked: list[str] = []

    def invoke(self: Any) -> tuple[int, dict[str, str], bytes]:
        # (the emulator's own invoke reads no Qualifier: it reads a lowercase parameter)
        name = unquote(self.path.rsplit("/", 2)[-2])
        qualifier = (self.querystring.get("Qualifier") or [None])[0]
        self.backend.get_function(name, qualifier)  # an unknown alias: not found
        context = LambdaContext()
        context.invoked_function_arn = self.backend.get_function(name).function_arn + (
            f":{qualifier}" if qualifier else "")
        invoked.append(context.invoked_function_arn)
        with contextlib.redirect_stdout(io.StringIO()):  # its logs: CloudWatch's
            answer = recovery.lambda_handler(json.loads(self.body), context)
        return 200, {"content-type": "application/json"}, json.dumps(answer).encode()

    monkeypatch.setattr(LambdaResponse, "invoke", invoke)
    return invoked


def test_jobguard_recover_plans_through_the_function_and_executes_through_its_alias(
        aws, crm, deployed, capsys):
    from jobguard.cli import main

    recover = ["--json", "--jobs-module", "handlers.jobs", "recover", "crm-sync",
               "--from", "000000", "--to", "000003", "--function-name", FUNCTION]
    # GIVEN an operator's plan, through the function itself (what a planner may invoke)
    assert main(recover) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["result"] == "planned"
    # WHEN the operator executes it with its token
    assert main([*recover, "--execute", "--confirm", plan["plan"]["token"]]) == 0
    done = json.loads(capsys.readouterr().out)
    # THEN the execution went through the execute alias, and ran
    assert [arn.rsplit(":", 2)[-2:] for arn in deployed] == [
        ["function", FUNCTION], [FUNCTION, EXECUTE_ALIAS]]
    assert done["result"] == "executed" and done["summary"]["replayed"] == 3
    assert _notes(aws) == 3
