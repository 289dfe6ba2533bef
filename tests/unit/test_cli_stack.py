"""Issue 29 rows 2, 4 and 8, the operator's side: every ``jobguard`` command finds its
table (and the jobs, their functions, the recovery function) from the stack ``--stack``
or ``JOBGUARD_STACK`` names, read through CloudFormation's DescribeStacks from the
outputs every stack built with jobguard.cdk has (:mod:`jobguard.deployment`); ``--table``
overrides; ``runbook`` renders what is deployed, with the stack author's runbook link;
``drill`` takes its jobs from the outputs and refuses a stack that is not drillable.

In process, against the in-process emulator: real CloudFormation API calls on stacks
whose outputs follow the contract (tests/_cli_table.py: create_jobguard_stack)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobguard import OverlapPolicy
from jobguard.cli import NO_TABLE, build_parser, main
from jobguard.definitions import JobDefinition
from jobguard.deployment import Deployment
from jobguard.drill.runner import NOT_DRILLABLE, connect
from jobguard.drill.stack import DeployedStack
from jobguard.dynamodb import DynamoJobStore, create_table
from jobguard.local.emulator import in_process
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import Take
from jobguard.triggers import Trigger, TriggerKind
from tests._cli_table import create_jobguard_stack

ROOT = Path(__file__).resolve().parents[2]
JOB = "invoice-mailer"
RUN_ID = "01M8K455D5SMBCC61XNCBKW1C4"
LINK = "https://wiki.example/runbooks/invoice-mailer"
MAILER = JobDefinition(
    name=JOB, handler="myjobs.invoice_mailer.lambda_handler", schedule="rate(5 minutes)",
    policy=OverlapPolicy.SKIP, timeout=timedelta(minutes=5), lease=timedelta(minutes=2))
"""A job of a user's own project: defined nowhere in this repository's jobs modules."""
DEPLOYED = MAILER.for_drills()
"""As a drills deployment deploys it: a 12 s lease, a 60 s timeout."""


def _table(ddb: Any, run_id: str = RUN_ID) -> str:
    """A new jobguard table where the job ran once: its lease held by ``run_id``."""
    name = f"jobguard-{uuid.uuid4().hex[:8]}"
    create_table(ddb, name)
    store = DynamoJobStore(name, client=ddb)
    store.take(Take(Trigger(JOB, f"{JOB}@manual:1", TriggerKind.MANUAL), run_id=run_id, owner="w",
                    now_ms=1_700_000_000_000, lease_ms=10**12))
    store.put_run(RunRecord(job=JOB, run_id=run_id, trigger_id=f"{JOB}@manual:1",
                            trigger_kind="manual", policy="SKIP", decision=Decision.RAN,
                            status=RunStatus.FAILED, started_at_ms=1_700_000_000_000,
                            ended_at_ms=1_700_000_001_000), ttl_epoch_s=2_000_000_000)
    return name


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The emulator, a table where the job ran, and the stack ``Mine`` (not drillable,
    with a runbook link) whose outputs name them; nothing names a table or stack in the
    environment, and no jobs module is named."""
    for name in ("JOBGUARD_TABLE", "JOBGUARD_STACK", "JOBGUARD_JOBS_MODULE",
                 "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    with in_process() as emu:
        ddb, cfn = emu.client("dynamodb"), emu.client("cloudformation")
        table = _table(ddb)
        create_jobguard_stack(cfn, "Mine", table=table, jobs=[DEPLOYED], drills=False,
                              runbook=LINK)
        yield {"emu": emu, "ddb": ddb, "cfn": cfn, "table": table}


def _count(ddb: Any, table: str) -> int:
    return int(ddb.scan(TableName=table, Select="COUNT")["Count"])


def _commands() -> list[str]:
    import argparse

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


COMMANDS: dict[str, tuple[list[str], int, str]] = {
    # command: (its arguments, exit status, what its output shows it read from the stack)
    "status": ([JOB, "--json"], 0, f'"holder_run_id": "{RUN_ID}"'),
    "runs": ([JOB], 0, RUN_ID),
    "run": ([RUN_ID], 0, "failed"),
    "items": ([JOB], 0, "(none)"),
    "pause": ([JOB, "--reason", "maintenance"], 0, f"job {JOB} paused"),
    "resume": ([JOB], 0, f"job {JOB} is not paused"),
    "release": ([JOB, "--force", "--yes"], 0, f"run {RUN_ID} can write nothing more"),
    "repair": ([JOB, "--yes"], 0, "the lease row is healthy"),
    "runbook": ([JOB], 0, "lease 12 s"),
    "recover": ([JOB, "--from", "0", "--to", "5"], 1, "inv-recovery"),
    "timeline": ([JOB, "--from", "2023-11-14T00:00:00Z", "--to", "2023-11-15T00:00:00Z"], 0,
                 JOB),
    "resolve": ([JOB, "c-1@1:x", "--not-found", "--reason", "checked", "--wait", "0"], 1,
                f"no work item 'c-1@1:x' in job {JOB}'s ledger"),
    "drill": ([], 2, NOT_DRILLABLE.format(stack="Mine")),
    "local": ([], 2, "error: --stack: local runs its own embedded emulator and table"),
}
"""Every command, run with the stack named and nothing else: what it prints proves it
read the stack's table, jobs or functions. A command added to the CLI without a line here
fails ``test_every_command_is_in_the_table``."""


def test_every_command_is_in_the_table():
    assert sorted(COMMANDS) == _commands()


@pytest.mark.parametrize(("command", "where"), [
    (command, where) for command in sorted(COMMANDS)
    for where in ("--stack before", "--stack after", "JOBGUARD_STACK")
    # `local` runs a load of its own: the variable is not its business (not run here)
    if (command, where) != ("local", "JOBGUARD_STACK")])
def test_every_command_finds_its_table_and_jobs_from_the_stack(aws, capsys, monkeypatch,
                                                               command, where):
    """GIVEN a stack built with jobguard.cdk (its outputs) and no table named anywhere
    WHEN any command is run with --stack before or after the command, or JOBGUARD_STACK
    THEN it works on the stack's table and jobs (the job is defined nowhere but in the
    stack's outputs)."""
    args, code, shown = COMMANDS[command]
    if where == "JOBGUARD_STACK":
        monkeypatch.setenv("JOBGUARD_STACK", "Mine")
        argv = [command, *args]
    elif where == "--stack before":
        argv = ["--stack", "Mine", command, *args]
    else:
        argv = [command, *args, "--stack", "Mine"]
    assert main(argv) == code
    out = capsys.readouterr()
    assert shown in (out.out + out.err), (out.out, out.err)
    if code == 2:
        assert len(out.err.splitlines()) == 1, out.err


def test_table_precedence(aws, capsys, monkeypatch):
    """--table, else --stack's table, else JOBGUARD_TABLE, else JOBGUARD_STACK's table
    (both variables set must agree); none: one line saying both ways, exit 2."""
    ddb, cfn = aws["ddb"], aws["cfn"]
    tables = {who: _table(ddb, run_id=RUN_ID[:-1] + digit)
              for who, digit in (("--table", "1"), ("--stack", "2"), ("JOBGUARD_TABLE", "3"),
                                 ("JOBGUARD_STACK", "5"))}
    create_jobguard_stack(cfn, "Flag", table=tables["--stack"], jobs=[DEPLOYED])
    create_jobguard_stack(cfn, "Env", table=tables["JOBGUARD_STACK"], jobs=[DEPLOYED])

    def holder(*argv: str) -> str:
        assert main([*argv, "status", JOB, "--json"]) == 0, capsys.readouterr().err
        return str(json.loads(capsys.readouterr().out)["holder_run_id"])

    monkeypatch.setenv("JOBGUARD_STACK", "Env")
    assert holder() == RUN_ID[:-1] + "5"
    monkeypatch.setenv("JOBGUARD_TABLE", tables["JOBGUARD_TABLE"])
    # both variables set and disagreeing: a leftover export does not win silently
    assert main(["status", JOB]) == 2
    assert capsys.readouterr().err == (
        f"error: JOBGUARD_TABLE: {tables['JOBGUARD_TABLE']!r}, but JOBGUARD_STACK 'Env' has "
        f"table {tables['JOBGUARD_STACK']!r}: unset one of them, or pass --table or --stack "
        "to choose\n")
    monkeypatch.delenv("JOBGUARD_STACK")
    assert holder() == RUN_ID[:-1] + "3"
    monkeypatch.setenv("JOBGUARD_STACK", "Env")
    assert holder("--stack", "Flag") == RUN_ID[:-1] + "2"
    assert holder("--stack", "Flag", "--table", tables["--table"]) == RUN_ID[:-1] + "1"
    # --table overrides: the stack is not even read (one that does not exist is not asked)
    assert holder("--stack", "NoSuchStack", "--table", tables["--table"]) == RUN_ID[:-1] + "1"
    monkeypatch.delenv("JOBGUARD_TABLE")
    monkeypatch.delenv("JOBGUARD_STACK")
    assert main(["status", JOB]) == 2
    assert capsys.readouterr().err == f"error: --table: {NO_TABLE}\n"
    assert NO_TABLE == ("no table: pass --stack STACK or --table TABLE (or set "
                        "JOBGUARD_STACK / JOBGUARD_TABLE)")


def test_the_stack_is_read_once_per_command(aws, capsys, monkeypatch):
    """GIVEN a command that needs the stack's table and then its recovery function WHEN it
    runs THEN CloudFormation is asked once."""
    import botocore.client

    calls: list[str] = []
    real = botocore.client.BaseClient._make_api_call

    def counted(self: Any, operation: str, params: Any) -> Any:
        calls.append(operation)
        return real(self, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", counted)
    assert main(["--stack", "Mine", "recover", JOB, "--from", "0", "--to", "5"]) == 1
    assert "inv-recovery" in capsys.readouterr().err
    assert calls.count("DescribeStacks") == 1, calls


@pytest.mark.parametrize("command", [["status", JOB], ["runbook", JOB], ["drill"],
                                     ["recover", JOB, "--from", "0", "--to", "5"]])
def test_a_stack_that_does_not_exist_is_one_line_naming_it_and_its_source(
        aws, capsys, monkeypatch, command):
    ddb, table = aws["ddb"], aws["table"]
    before = _count(ddb, table)
    assert main([*command, "--stack", "Nope"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --stack: there is no stack 'Nope' (--stack; "), line
    assert line.endswith("name the deployed one with --stack STACK or JOBGUARD_STACK"), line
    monkeypatch.setenv("JOBGUARD_STACK", "Nope")
    assert main(command) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "there is no stack 'Nope' (JOBGUARD_STACK; " in line, line
    assert _count(ddb, table) == before


def test_a_stack_that_is_not_jobguards_is_one_line(aws, capsys):
    """GIVEN a stack without a TableName output (not built with jobguard.cdk), and one
    whose job output does not parse WHEN a command names it THEN one line names the stack,
    what named it and the output, exit 2."""
    cfn = aws["cfn"]
    cfn.create_stack(StackName="Other", TemplateBody=json.dumps({
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"BucketName": {"Value": "b"}}}))
    assert main(["status", JOB, "--stack", "Other"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --stack: stack 'Other' (--stack) is not one jobguard can "
                           "read: TableName: stack 'Other' has no TableName output"), line
    value = json.loads(create_jobguard_stack(cfn, "Broken", table=aws["table"],
                                             jobs=[DEPLOYED])["InvoiceMailerJob"])
    value["definition"]["lease"] = "two minutes"
    cfn.delete_stack(StackName="Broken")
    create_jobguard_stack(cfn, "Broken2", table=aws["table"],
                          extra={"InvoiceMailerJob": json.dumps(value)})
    assert main(["runbook", JOB, "--stack", "Broken2"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --stack: stack 'Broken2' (--stack) is not one jobguard "
                           "can read: InvoiceMailerJob: not a job definition"), line


def test_runbook_of_the_stack_is_what_is_deployed_with_its_authors_link(aws, capsys):
    """Row 8: GIVEN a drills deployment of the job (12 s lease, 60 s timeout) whose
    author set a runbook link WHEN `jobguard runbook JOB --stack S` THEN the link comes
    first, then the runbook of the deployed definition, not the source's 2 minutes."""
    assert main(["runbook", JOB, "--stack", "Mine"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == f"Runbook: {LINK}"
    assert "function timeout 1 min" in text or "function timeout 60 s" in text, text
    assert "lease 12 s, renewed every 3 s" in text, text
    assert "2 min" not in text.split("## ")[0], text
    assert main(["--json", "runbook", JOB, "--stack", "Mine"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["stack"], data["link"]) == ("Mine", LINK)


def test_runbook_without_a_link_prints_none(aws, capsys):
    create_jobguard_stack(aws["cfn"], "NoLink", table=aws["table"], jobs=[MAILER])
    assert main(["runbook", JOB, "--stack", "NoLink"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"# Runbook: {JOB}") and "lease 2 min" in text, text


def test_runbook_of_a_drillable_stack_says_it_is_a_drill_deployment(aws, capsys):
    """A drill deployment has no running schedule and no dead-man alarm: the operator
    reading its runbook is told first, never left to think it is production's."""
    create_jobguard_stack(aws["cfn"], "Drillable", table=aws["table"], jobs=[DEPLOYED],
                          drills=True)
    assert main(["runbook", JOB, "--stack", "Drillable"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"# Runbook: {JOB}" and lines[2].startswith("A drill deployment"), lines
    assert "no dead-man alarm" in lines[2]
    assert main(["--json", "runbook", JOB, "--stack", "Drillable"]) == 0
    assert json.loads(capsys.readouterr().out)["drills"] is True
    assert main(["runbook", JOB, "--stack", "Mine"]) == 0  # built without the option
    assert "drill deployment" not in capsys.readouterr().out
    assert main(["--json", "runbook", JOB, "--stack", "Mine"]) == 0
    assert json.loads(capsys.readouterr().out)["drills"] is False


def test_runbook_of_a_fleet_job_lists_the_alarms_the_fleet_gives_it(aws, capsys):
    """GIVEN the job deployed in a JobFleet (its output names the fleet) WHEN `jobguard
    runbook JOB --stack S` THEN it lists the alarms that really page for it: its own
    liveness, then the fleet's with the query that finds the job; none of the per-job
    alarms a fleet never creates."""
    from jobguard.deployment import job_output, job_output_key
    from jobguard.runbook_fleet import logs_query

    output = job_output(job=MAILER, function="InvoiceMailerFunction", queue_url=None,
                        drills=False, runbook=None)
    output["fleet"] = "ops"  # as JobFleet writes it
    create_jobguard_stack(aws["cfn"], "Fleet", table=aws["table"],
                          extra={job_output_key(JOB): json.dumps(output)})
    assert main(["runbook", JOB, "--stack", "Fleet"]) == 0
    alarms = capsys.readouterr().out.split("## Alarms", 1)[1].split("## Recovery")[0]
    titles = [line.split("**")[1] for line in alarms.splitlines() if line.startswith("- **")]
    assert titles[0] == "no tick arrived", alarms  # liveness: the job's own
    for title in ("lease lost", "stale ticks", "a job paused too long", "failed ticks",
                  "a tick was dead-lettered", "functions throttled"):
        assert title in titles, (title, alarms)
    for never in ("no successful run", "function errors", "function throttled",
                  "ticks dropped", "paused too long"):  # a job alone's, not a fleet job's
        assert never not in titles, (never, alarms)
    assert "trigger dropped" not in titles  # SKIP: no queue, nothing dropped
    assert f"`{logs_query('LeaseLost')}`" in alarms and "fleet ops" in alarms
    # the paused alarm that pages for it is the one of its own window
    assert f"last {MAILER.paused_window().periods} periods" in alarms, alarms
    assert main(["--json", "runbook", JOB, "--stack", "Fleet"]) == 0
    assert json.loads(capsys.readouterr().out)["fleet"] == "ops"
    assert main(["--json", "runbook", JOB, "--stack", "Mine"]) == 0  # a job alone
    data = json.loads(capsys.readouterr().out)
    assert data["fleet"] is None and "no successful run" in data["runbook"]


def test_runbook_of_a_job_not_in_the_stack_says_did_you_mean(aws, capsys):
    assert main(["runbook", "invoice-mailr", "--stack", "Mine"]) == 2
    assert capsys.readouterr().err == (
        "error: JOB: no job 'invoice-mailr' in stack 'Mine' (--stack; its jobs: "
        f"{JOB}); did you mean {JOB!r}?\n")


def test_runbook_flags_before_variables(aws, capsys, monkeypatch):
    """--stack over --jobs-module; --jobs-module over JOBGUARD_STACK; JOBGUARD_STACK over
    JOBGUARD_JOBS_MODULE (flags first, then variables)."""
    monkeypatch.setenv("JOBGUARD_JOBS_MODULE", "handlers.jobs")
    monkeypatch.setenv("JOBGUARD_STACK", "Mine")
    assert main(["runbook", JOB]) == 0  # JOBGUARD_STACK over JOBGUARD_JOBS_MODULE
    assert capsys.readouterr().out.startswith(f"Runbook: {LINK}")
    assert main(["runbook", "crm-sync", "--jobs-module", "handlers.jobs"]) == 0
    assert "crm-sync" in capsys.readouterr().out
    assert main(["runbook", JOB, "--jobs-module", "handlers.jobs", "--stack", "Mine"]) == 0
    assert capsys.readouterr().out.startswith(f"Runbook: {LINK}")


@pytest.mark.process
def test_runbook_from_a_stack_imports_no_jobs_module(aws, tmp_path):
    """GIVEN JOBGUARD_STACK and JOBGUARD_JOBS_MODULE both set (as `make demo --keep`
    exports them) WHEN `jobguard runbook JOB` runs in a fresh interpreter THEN it renders
    the deployed job and imports no jobs module (nothing of handlers, nothing of the
    named module)."""
    script = textwrap.dedent(f"""
        import json, os, sys, uuid
        from datetime import timedelta
        sys.path[:0] = [{str(ROOT / "lib")!r}, {str(ROOT)!r}]
        from jobguard.local.emulator import in_process
        from jobguard.dynamodb import create_table
        from jobguard.definitions import JobDefinition
        from jobguard import OverlapPolicy
        from tests._cli_table import create_jobguard_stack
        from jobguard.cli import main
        job = JobDefinition(name="weekly-digest", handler="mine.digest.handler",
                            schedule="rate(1 hour)", policy=OverlapPolicy.SKIP,
                            timeout=timedelta(minutes=10), lease=timedelta(minutes=3))
        os.environ.update(JOBGUARD_STACK="Theirs", JOBGUARD_JOBS_MODULE="handlers.jobs")
        with in_process() as emu:
            create_table(emu.client("dynamodb"), "jobguard-x")
            create_jobguard_stack(emu.client("cloudformation"), "Theirs",
                                  table="jobguard-x", jobs=[job.for_drills()])
            code = main(["runbook", "weekly-digest"])
        print(json.dumps({{"code": code, "imported": sorted(
            m for m in sys.modules if m.split(".")[0] in ("handlers", "mine"))}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBGUARD_")}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "lease 12 s" in done.stdout
    assert result == {"code": 0, "imported": []}, result


def test_drill_refuses_a_stack_that_is_not_drillable(aws, capsys):
    """Row 4: GIVEN a stack whose job outputs say "drills": false WHEN `jobguard drill
    --stack S --job J` (or the example drills) THEN one line says how to make it
    drillable, before anything is armed or ticked."""
    ddb, table = aws["ddb"], aws["table"]
    before = _count(ddb, table)
    assert main(["drill", "--stack", "Mine", "--job", JOB]) == 2
    assert capsys.readouterr().err == (
        "error: --stack: Mine is not drillable: build it with LambdaBundle(..., drills=True) "
        "(one option; see the README's \"Drill your own stack\")\n")
    assert _count(ddb, table) == before


def test_drill_takes_its_jobs_from_the_stack(aws, capsys):
    """GIVEN a drillable stack WHEN `jobguard drill --job` names a job it does not have
    THEN the stack's jobs are listed with the nearest; the examples missing: said."""
    create_jobguard_stack(aws["cfn"], "Drillable", table=aws["table"], jobs=[DEPLOYED])
    assert main(["drill", "--stack", "Drillable", "--job", "invoice-mailr"]) == 2
    assert capsys.readouterr().err == (
        "error: --job: no job 'invoice-mailr' in stack 'Drillable' (its jobs: "
        f"{JOB}); did you mean {JOB!r}?\n")
    assert main(["drill", "--stack", "Drillable"]) == 2
    assert capsys.readouterr().err == (
        "error: --job: stack 'Drillable' has none of jobguard's example jobs, whose drills "
        f"run without --job; drill one of its jobs with --job NAME (its jobs: {JOB})\n")
    assert main(["drill", "--stack", "Drillable", "--table", "jobguard-other"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --table: drill uses stack 'Drillable''s own table")


def test_connect_reads_the_jobs_from_the_outputs(aws):
    """connect() / DeployedStack: each job's function, queue, policy and whether it is
    drillable come from its output; the table and the recovery function too."""
    outputs = create_jobguard_stack(
        aws["cfn"], "Drillable", table=aws["table"], jobs=[DEPLOYED],
        extra={"InvoiceMailerReconcilerFunctionName": "mailer-reconciler"})
    stack = connect(stack="Drillable")
    assert stack.table == aws["table"] and stack.name == "Drillable"
    handle = stack.jobs[JOB]
    assert (handle.name, handle.policy, handle.function, handle.queue_url, handle.drills) == (
        JOB, "SKIP", "InvoiceMailerFunction", None, True)
    assert stack.recovery_function == "inv-recovery"
    assert stack.reconciler(JOB) == "mailer-reconciler"
    import boto3

    same = DeployedStack(boto3.session.Session(), Deployment.from_outputs("X", outputs))
    assert same.jobs == stack.jobs
    with pytest.raises(LookupError, match="no reconciler function for nobody"):
        stack.reconciler("nobody")


def test_recover_invokes_the_functions_the_stack_names(aws, capsys):
    """A plan invokes RecoveryFunctionName; --execute the alias RecoveryExecuteArn."""
    assert main(["recover", JOB, "--from", "0", "--to", "5", "--stack", "Mine"]) == 1
    err = capsys.readouterr().err
    assert "inv-recovery" in err and "inv-recovery:execute" not in err, err
    assert main(["recover", JOB, "--from", "0", "--to", "5", "--execute",
                 "--stack", "Mine"]) == 1
    assert "function:inv-recovery:execute" in capsys.readouterr().err


@pytest.mark.parametrize("command", _commands())
def test_every_commands_help_says_how_the_table_is_found(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--stack STACK" in text and ("The table is --table, else --stack's, else "
                                        "JOBGUARD_TABLE, else JOBGUARD_STACK's") in text, text


def test_a_mistyped_job_is_refused_naming_the_stacks_jobs(aws, capsys):
    """GIVEN the stack's job has never run in a fresh table WHEN the operator types it
    right THEN the stack knows it; mistyped THEN refused naming the stack and the
    nearest, nothing written."""
    ddb = aws["ddb"]
    fresh = f"jobguard-{uuid.uuid4().hex[:8]}"
    create_table(ddb, fresh)
    create_jobguard_stack(aws["cfn"], "Fresh", table=fresh, jobs=[DEPLOYED])
    assert main(["pause", "invoice-mailr", "--reason", "x", "--stack", "Fresh"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: JOB: no job 'invoice-mailr': not a job of stack 'Fresh'")
    assert line.endswith(f"did you mean {JOB!r}?"), line
    assert _count(ddb, fresh) == 0
    assert main(["pause", JOB, "--reason", "x", "--stack", "Fresh"]) == 0


@pytest.mark.parametrize("named", ["--table", "JOBGUARD_TABLE"])
def test_recover_never_invokes_a_stack_whose_table_is_not_the_one_named(
        aws, capsys, monkeypatch, named):
    """GIVEN the production stack JobGuard (recover's default) and the operator working on
    another table (--table, or JOBGUARD_TABLE left in the shell) WHEN they recover
    --execute THEN nothing is invoked: the function would recover production's table, not
    the one every check ran against (it invoked JobGuard's execute alias before)."""
    ddb, cfn = aws["ddb"], aws["cfn"]
    create_jobguard_stack(cfn, "JobGuard", table=_table(ddb), jobs=[DEPLOYED],
                          recovery="prod-recovery")
    argv = ["recover", JOB, "--from", "0", "--to", "5", "--execute"]
    if named == "--table":
        argv += ["--table", aws["table"]]
    else:
        monkeypatch.setenv("JOBGUARD_TABLE", aws["table"])
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {named}: recover runs the recovery function of stack "
                           "'JobGuard' (the default: no --stack or JOBGUARD_STACK), which "
                           "recovers its own table"), line
    assert "prod-recovery" not in line and "--stack" in line and "--direct" in line
    # the stack named too, its own table: recovered through its function as before
    assert main(["recover", JOB, "--from", "0", "--to", "5", "--stack", "Mine",
                 "--table", aws["table"]]) == 1
    assert "inv-recovery" in capsys.readouterr().err


@pytest.mark.parametrize("deployed", ["plain function", "no function"])
def test_drill_refuses_a_function_the_outputs_call_drillable_but_is_not(aws, capsys,
                                                                        deployed):
    """GIVEN a stack whose output says its job is drillable (outputs are data whoever
    deploys the stack writes) but whose function has no JOBGUARD_DRILLS=1 (or does not
    exist) WHEN `jobguard drill --stack S --job J` THEN one line says so, and nothing is
    armed or ticked: no switch row, no run, no invoke."""
    emu, ddb, table = aws["emu"], aws["ddb"], aws["table"]
    create_jobguard_stack(aws["cfn"], "Claims", table=table, jobs=[DEPLOYED])
    lam = emu.client("lambda")
    if deployed == "plain function":
        role = emu.client("iam").create_role(
            RoleName="fn", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17",
                                                                "Statement": []}))["Role"]
        import io
        import zipfile

        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("m.py", "def handler(event, context):\n    return 1\n")
        lam.create_function(FunctionName="InvoiceMailerFunction", Runtime="python3.12",
                            Role=role["Arn"], Handler="m.handler",
                            Code={"ZipFile": code.getvalue()},
                            Environment={"Variables": {"JOBGUARD_TABLE": table}})
    before = _count(ddb, table)
    assert main(["drill", "--stack", "Claims", "--job", JOB]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    if deployed == "plain function":
        assert err == ("error: --stack: Claims's output says invoice-mailer is drillable, but "
                       "its function 'InvoiceMailerFunction' has no JOBGUARD_DRILLS=1: it "
                       "would run the real job for every tick a drill sends; nothing was "
                       "armed or ticked\n")
    else:
        assert err.startswith("error: --job: invoice-mailer's function "
                              "'InvoiceMailerFunction' (from stack 'Claims''s outputs) could "
                              "not be read: ")
    assert _count(ddb, table) == before
