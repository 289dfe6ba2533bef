"""The `jobguard` command as an AWS user expects it (issue 16): global options anywhere,
``--output json|table|text``, ``--version``, help on every option, job names checked,
times with their timezone, the recovery function found from the stack, and no traceback
for a reader that stops early. In process, against the in-process emulator.
"""

from __future__ import annotations

import argparse
import io
import json
import uuid
from typing import Any

import pytest

from jobguard.cli import build_parser, main
from jobguard.dynamodb import DynamoJobStore, create_table
from jobguard.local.emulator import in_process
from jobguard.requests import Take
from jobguard.triggers import Trigger, TriggerKind
from tests._cli_table import create_jobguard_stack


@pytest.fixture
def env(monkeypatch):
    with in_process() as emu:
        ddb = emu.client("dynamodb")
        name = f"jobguard-{uuid.uuid4().hex[:8]}"
        create_table(ddb, name)
        monkeypatch.setenv("JOBGUARD_TABLE", name)
        monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
        # the example jobs (crm-sync, report-export) are defined: named, as `make demo`'s
        # export line names them (nothing is imported from the folder unless named)
        monkeypatch.setenv("JOBGUARD_JOBS_MODULE", "handlers.jobs")
        monkeypatch.delenv("JOBGUARD_STACK", raising=False)
        yield emu, ddb, name


def _count(ddb: Any, table: str) -> int:
    return ddb.scan(TableName=table, Select="COUNT")["Count"]


def _take(ddb: Any, table: str, job: str, run_id: str = "R1") -> None:
    store = DynamoJobStore(table, client=ddb)
    store.take(Take(Trigger(job, f"{job}@manual:1", TriggerKind.MANUAL), run_id=run_id, owner="w",
                    now_ms=1_800_000_000_000, lease_ms=60_000))


@pytest.mark.parametrize("argv", [
    ["--json", "status", "crm-sync"],
    ["status", "crm-sync", "--json"],
    ["status", "--output", "json", "crm-sync"],
    ["--output", "table", "status", "crm-sync", "--output", "json"],
])
def test_global_options_go_before_or_after_the_command(env, capsys, argv):
    """GIVEN a job that ran WHEN its status is asked for with the output option before,
    after or inside the command THEN the answer is the same JSON (the last one given
    wins, as in the AWS CLI)."""
    _, ddb, table = env
    _take(ddb, table, "crm-sync")
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["job"] == "crm-sync" and data["holder_run_id"] == "R1"


def test_an_option_given_before_the_command_is_not_undone_by_the_commands_default(
        env, capsys, monkeypatch):
    """GIVEN JOBGUARD_TABLE names no table WHEN --table names the real one before the
    command THEN the command uses it (the command's own copy of --table is unset)."""
    _, ddb, table = env
    _take(ddb, table, "crm-sync")
    monkeypatch.setenv("JOBGUARD_TABLE", "no-such-table")
    assert main(["--table", table, "--json", "status", "crm-sync"]) == 0
    assert json.loads(capsys.readouterr().out)["fence"] == 1


def test_output_text_is_tab_separated_and_times_carry_their_timezone(env, capsys):
    """GIVEN a held job WHEN status is printed as text THEN each line is key<TAB>value,
    and the acquisition time is ISO 8601 UTC with its Z (also in JSON)."""
    _, ddb, table = env
    _take(ddb, table, "crm-sync")
    assert main(["status", "crm-sync", "--output", "text"]) == 0
    lines = dict(line.split("\t", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["job"] == "crm-sync" and lines["holder_run_id"] == "R1"
    assert lines["acquired_at"] == "2027-01-15T08:00:00Z"
    assert main(["status", "crm-sync", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["last_heartbeat"].endswith("Z")


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip().startswith("jobguard 0.")


def test_every_option_of_every_command_has_help():
    """GIVEN the parser WHEN every option of the command and of each subcommand is read
    THEN each has help text (what `jobguard COMMAND --help` shows)."""
    parser = build_parser()
    missing = []

    def walk(p: argparse.ArgumentParser, where: str) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{where} {name}")
            elif not action.help:
                missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")

    walk(parser, "jobguard")
    assert not missing, missing


@pytest.mark.parametrize("argv", [
    ["pause", "crm-synk", "--reason", "maintenance"],
    ["status", "crm-synk"],
    ["runs", "crm-synk"],
    ["items", "crm-synk"],
    ["resume", "crm-synk"],
    ["release", "crm-synk", "--force", "--yes"],
    ["repair", "crm-synk", "--yes"],
    ["recover", "crm-synk", "--from", "0", "--to", "5", "--direct"],
    ["runbook", "crm-synk"],
])
def test_a_mistyped_job_is_refused_naming_the_nearest_and_writes_nothing(env, capsys, argv):
    """GIVEN the example jobs (crm-sync, report-export) WHEN a command names crm-synk
    THEN it exits 2 naming JOB, the known jobs and the nearest match; nothing is written
    (no stray lease row)."""
    _, ddb, table = env
    assert main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: JOB: ") and "did you mean 'crm-sync'?" in error, error
    assert "crm-sync" in error and "report-export" in error
    assert _count(ddb, table) == 0


def test_a_job_that_ran_in_the_table_is_known_without_its_definition(env, capsys):
    """GIVEN a job not in the jobs module that has run in this table (another team's)
    WHEN it is paused THEN the command accepts it; a typo of it names it as nearest."""
    _, ddb, table = env
    _take(ddb, table, "invoice-export")
    assert main(["pause", "invoice-export", "--reason", "month end"]) == 0
    assert main(["status", "invoice-exprot"]) == 2
    assert "did you mean 'invoice-export'?" in capsys.readouterr().err


def test_a_jobs_module_that_cannot_be_imported_is_named_only_when_asked_for(
        env, capsys, monkeypatch):
    """GIVEN a project outside this repository (no jobs module named) WHEN a job that ran
    is shown THEN it works; WHEN --jobs-module names a missing module and the table does
    not know the job THEN that is the error (a job the table knows needs no module: it is
    not imported); WHEN runbook, which needs definitions, has none THEN the error names
    --jobs-module and JOBGUARD_JOBS_MODULE."""
    _, ddb, table = env
    monkeypatch.delenv("JOBGUARD_JOBS_MODULE")
    _take(ddb, table, "nightly")
    assert main(["status", "nightly"]) == 0
    assert main(["--jobs-module", "no_such_module_7f", "status", "nightly"]) == 0
    capsys.readouterr()
    assert main(["--jobs-module", "no_such_module_7f", "status", "weekly"]) == 2
    assert capsys.readouterr().err.startswith("error: --jobs-module: ")
    monkeypatch.setenv("JOBGUARD_JOBS_MODULE", "no_such_module_7f")
    assert main(["status", "weekly"]) == 2
    assert capsys.readouterr().err.startswith("error: JOBGUARD_JOBS_MODULE: ")
    monkeypatch.delenv("JOBGUARD_JOBS_MODULE")
    assert main(["runbook", "nightly"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --jobs-module: runbook needs the job definitions")
    assert "JOBGUARD_JOBS_MODULE" in line


def test_recover_finds_the_recovery_function_from_the_stack(env, capsys, monkeypatch):
    """GIVEN a deployed stack whose RecoveryFunctionName output names the function
    WHEN `recover` is run without --function-name THEN it invokes that function (here
    it does not exist, and the error names it); WHEN the stack does not exist THEN the
    error names --function-name and how to give it."""
    emu, ddb, table = env
    create_jobguard_stack(emu.client("cloudformation"), "JobGuard", table=table,
                          recovery="jobguard-recovery-7f3a")
    assert main(["recover", "crm-sync", "--from", "0", "--to", "5"]) == 1
    assert "jobguard-recovery-7f3a" in capsys.readouterr().err
    # (JOBGUARD_TABLE names the table: the stack is asked only for the function)
    monkeypatch.setenv("JOBGUARD_STACK", "Other")
    assert main(["recover", "crm-sync", "--from", "0", "--to", "5"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --function-name: not given, and there is no stack "
                            "'Other' (JOBGUARD_STACK;"), error
    assert _count(ddb, table) == 0


def test_recover_direct_without_a_table_names_the_variable(env, capsys, monkeypatch):
    monkeypatch.delenv("JOBGUARD_TABLE")
    assert main(["recover", "crm-sync", "--from", "0", "--to", "5", "--direct"]) == 2
    assert capsys.readouterr().err == ("error: --table: no table: pass --stack STACK or "
                                       "--table TABLE (or set JOBGUARD_STACK / "
                                       "JOBGUARD_TABLE)\n")


def test_a_reader_that_stops_early_is_not_an_error(env, monkeypatch, capsys):
    """GIVEN `jobguard runbook crm-sync | head -2` (the reader closes the pipe) WHEN the
    command prints THEN it exits 0 without a traceback."""
    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("sys.stdout", Closed())
    assert main(["runbook", "crm-sync"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_a_refusal_from_the_recovery_function_names_the_options_once(env, capsys,
                                                                       monkeypatch):
    """GIVEN the recovery function refuses a time range for a job without cursor_at (its
    answer: field time_from, the error starting with that field and naming request
    fields) WHEN `recover --from-time/--to-time` prints it THEN the error names the
    option once, and the fields it mentions as this CLI's options, exit 2."""
    def refused(args: Any, request: dict[str, Any]) -> dict[str, Any]:
        return {"result": "refused", "field": "time_from",
                "error": "time_from: job 'crm-sync' does not map times to cursors "
                         "(implement cursor_at); recover by cursor_from/cursor_to"}

    monkeypatch.setattr("jobguard.cli.recover._invoke", refused)
    assert main(["recover", "crm-sync", "--from-time", "2026-11-29T01:00:00Z",
                 "--to-time", "2026-11-29T02:00:00Z", "--function-name", "f"]) == 2
    error = capsys.readouterr().err.strip()
    assert error == ("error: --from-time: job 'crm-sync' does not map times to cursors "
                     "(implement cursor_at); recover by --from/--to"), error


def test_drill_reads_its_stack_from_jobguard_stack_and_names_a_missing_one(
        env, capsys, monkeypatch):
    """Issue 29 row 3: `make demo DEMO_ARGS=--keep` exports JOBGUARD_STACK, then prints
    `jobguard drill`, which looked for JobGuard-drills instead."""
    emu, ddb, table = env
    # GIVEN JOBGUARD_STACK names a stack that does not exist
    monkeypatch.setenv("JOBGUARD_STACK", "Mine-local")
    # WHEN `jobguard drill` runs THEN one line names that stack, where its name came
    # from, and both ways to name another
    assert main(["drill"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --stack: there is no stack 'Mine-local' (JOBGUARD_STACK;")
    assert "--stack STACK or JOBGUARD_STACK" in line
    # AND --stack wins over the variable, and says so
    assert main(["drill", "--stack", "Other"]) == 2
    assert "there is no stack 'Other' (--stack;" in capsys.readouterr().err
    # AND with neither, the documented default is the one tried
    monkeypatch.delenv("JOBGUARD_STACK")
    assert main(["drill"]) == 2
    assert "there is no stack 'JobGuard-drills' (the default: no --stack or JOBGUARD_STACK;" \
        in capsys.readouterr().err
    # GIVEN the stack JOBGUARD_STACK names exists (without the example jobs' functions)
    create_jobguard_stack(emu.client("cloudformation"), "Mine-local", table=table)
    monkeypatch.setenv("JOBGUARD_STACK", "Mine-local")
    # WHEN `jobguard drill` runs THEN it read that stack: its functions are what is missing
    assert main(["drill"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --job: stack 'Mine-local' has none of jobguard's example jobs")
    assert _count(ddb, table) == 0


def test_recover_reads_its_stack_from_jobguard_stack_and_names_a_missing_one(
        env, capsys, monkeypatch):
    _, ddb, table = env
    monkeypatch.setenv("JOBGUARD_STACK", "Mine-local")
    assert main(["recover", "crm-sync", "--from", "0", "--to", "5"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --function-name: not given, and there is no stack "
                           "'Mine-local' (JOBGUARD_STACK;")
    assert "--stack STACK or JOBGUARD_STACK" in line and "--direct" in line
    assert _count(ddb, table) == 0


def test_an_empty_stack_given_is_refused_not_replaced_by_another(env, capsys, monkeypatch):
    _, ddb, table = env
    # GIVEN JOBGUARD_STACK names one stack, and the operator passes --stack "" (a variable
    # of their own that was empty: `--stack "$STACK"`)
    monkeypatch.setenv("JOBGUARD_STACK", "Mine-local")
    # WHEN drill or recover runs THEN --stack is refused, not silently JOBGUARD_STACK's
    for argv in (["drill", "--stack", ""],
                 ["recover", "crm-sync", "--from", "0", "--to", "5", "--stack", ""]):
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("error: --stack: ") and "Mine-local" not in line, line
    assert _count(ddb, table) == 0


def test_a_stack_name_with_a_newline_is_still_one_line(env, capsys, monkeypatch):
    # GIVEN JOBGUARD_STACK holds a name with a newline and a terminal escape
    monkeypatch.setenv("JOBGUARD_STACK", "Mine\n\x1b[2Jlocal")
    # WHEN drill runs THEN it is refused in one line naming the variable, the name
    # escaped (no stack can have it: nothing is asked of CloudFormation)
    assert main(["drill"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "\x1b" not in err, err
    assert err.startswith("error: --stack: ") and "JOBGUARD_STACK" in err, err
