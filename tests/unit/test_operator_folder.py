"""The operator's folder (issue 34, finding 2): ``jobguard`` run in a folder someone else
can write (a shared temp folder, an untrusted checkout, a CI workspace) runs none of that
folder's code: no ``handlers/jobs.py`` unless a jobs module is named, and never a
``boto3.py``, ``botocore/`` or ``json.py`` in place of the installed package, even when
one is named. A named module in the project's folder is still found.

In process against the in-process emulator (the commands that read the table), and in
real interpreters (``python -m jobguard.cli`` and the installed ``jobguard`` script),
where boto3 and json are not yet imported and the folder could shadow them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobguard._launch import drop_implicit_cwd, python_m_target
from jobguard.cli import main
from jobguard.dynamodb import DynamoJobStore
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import Take
from jobguard.triggers import Trigger, TriggerKind
from tests._cli_table import cli_table

JOB = "nightly"
RUN_ID = "01M8K455D5SMBCC61XNCBKW1C4"


def _hostile(code_for: dict[str, str], folder: Path, marker: Path) -> None:
    """Files that append their module's name to ``marker`` when imported."""
    ran = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for path, extra in code_for.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(ran + extra)


USERS_JOBS = textwrap.dedent("""
    from datetime import timedelta

    import boto3  # the installed one: a boto3.py in this folder must not answer

    from jobguard import OverlapPolicy
    from jobguard.definitions import JobDefinition

    assert hasattr(boto3, "Session"), boto3
    INVOICE_MAILER = JobDefinition(
        name="invoice-mailer", handler="myjobs.invoice_mailer.lambda_handler",
        schedule="rate(5 minutes)", policy=OverlapPolicy.SKIP,
        timeout=timedelta(minutes=5), lease=timedelta(minutes=2))
    JOBS = (INVOICE_MAILER,)
""")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """The working folder, written by someone else: a ``handlers`` package whose import
    leaves a mark, beside the user's own ``myjobs`` package. The command runs there."""
    work, marker = tmp_path / "shared", tmp_path / "ran.txt"
    _hostile({"handlers/__init__.py": "", "handlers/jobs.py": "JOBS = ()\n"}, work, marker)
    (work / "myjobs").mkdir()
    (work / "myjobs/__init__.py").write_text("")
    (work / "myjobs/jobs.py").write_text(USERS_JOBS)
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "path", list(sys.path))  # whatever the command adds, undone
    # this repository's own handlers package may be imported already: gone for the test,
    # so a command that imported handlers.jobs would find the folder's
    for name in [m for m in sys.modules if m.split(".")[0] in ("handlers", "myjobs")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delenv("JOBGUARD_JOBS_MODULE", raising=False)
    yield work, marker
    for name, module in list(sys.modules.items()):  # nothing of the folder's stays loaded
        if str(getattr(module, "__file__", None) or "").startswith(str(work)):
            del sys.modules[name]


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    """A table where ``nightly`` ran once (its lease row and one run record)."""
    with cli_table(monkeypatch) as (ddb, name):
        store = DynamoJobStore(name, client=ddb)
        store.take(Take(Trigger(JOB, f"{JOB}@manual:1", TriggerKind.MANUAL), run_id=RUN_ID,
                        owner="w", now_ms=1_700_000_000_000, lease_ms=60_000))
        store.put_run(RunRecord(job=JOB, run_id=RUN_ID, trigger_id=f"{JOB}@manual:1",
                                trigger_kind="manual", policy="SKIP", decision=Decision.RAN,
                                status=RunStatus.FAILED, started_at_ms=1_700_000_000_000,
                                ended_at_ms=1_700_000_001_000),
                      ttl_epoch_s=2_000_000_000)
        yield ddb, name


TABLE_ONLY = [
    ["status", JOB],
    ["runs", JOB],
    ["run", RUN_ID],
    ["items", JOB],
    ["pause", JOB, "--reason", "maintenance"],
    ["resume", JOB],
    ["release", JOB, "--force", "--yes"],
    ["repair", JOB, "--yes"],
    ["timeline", JOB, "--from", "2023-11-14T00:00:00Z", "--to", "2023-11-15T00:00:00Z"],
    ["resolve", JOB, "c-1@1:create-note", "--not-found", "--reason", "checked", "--wait", "0"],
    ["recover", JOB, "--from", "0", "--to", "5", "--function-name", "no-such-function"],
]


@pytest.mark.parametrize("argv", TABLE_ONLY, ids=[a[0] for a in TABLE_ONLY])
def test_a_command_that_reads_the_table_runs_nothing_from_the_folder(folder, table, capsys,
                                                                     argv):
    """GIVEN a handlers/jobs.py in the working folder (and no jobs module named) WHEN an
    operator runs a command that needs only the table THEN it does its work and the
    folder's code never runs: nothing of it is imported, the folder is not on sys.path."""
    work, marker = folder
    code = main(argv)
    out = capsys.readouterr()
    assert not marker.exists(), marker.read_text()
    assert "handlers" not in sys.modules
    assert str(work) not in sys.path and "" not in sys.path[:1]
    if argv[0] == "recover":  # planned against a function that does not exist: said
        assert code == 1 and "no-such-function" in out.err
    elif argv[0] == "resolve":  # an item the ledger does not hold: said, nothing written
        assert code == 1 and "no work item 'c-1@1:create-note'" in out.err
    else:
        assert code == 0, out.err
        assert out.out.strip()


def test_the_typo_check_works_from_the_table_alone(folder, table, capsys):
    """GIVEN no jobs module named, and `nightly` known to the table WHEN an operator types
    `nightyl` THEN the command is refused naming the nearest job from the table, nothing
    imported from the folder, nothing written."""
    _, marker = folder
    ddb, name = table
    before = ddb.scan(TableName=name, Select="COUNT")["Count"]
    assert main(["pause", "nightyl", "--reason", "x"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: JOB: no job 'nightyl'") and "did you mean 'nightly'?" in error
    assert "no jobs module named (--jobs-module)" in error
    assert ddb.scan(TableName=name, Select="COUNT")["Count"] == before
    assert not marker.exists()


def test_a_command_that_needs_definitions_says_how_to_name_them(folder, capsys,
                                                                 monkeypatch):
    """GIVEN a handlers/jobs.py in the folder, no stack and no jobs module named WHEN
    runbook is run THEN one line names --stack and --jobs-module (and their variables),
    and the folder's handlers/jobs.py is not taken for the definitions."""
    _, marker = folder
    monkeypatch.delenv("JOBGUARD_STACK", raising=False)
    assert main(["runbook", JOB]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --jobs-module: runbook needs the job definitions")
    assert "--stack STACK (or JOBGUARD_STACK)" in line and "JOBGUARD_JOBS_MODULE" in line
    assert not marker.exists()


def test_drill_reads_its_jobs_from_the_stack_not_the_folder(folder, capsys, monkeypatch):
    """GIVEN a handlers/jobs.py in the folder and no jobs module named WHEN drill is run
    THEN its jobs come from the stack's outputs (here: no such stack, said in one line),
    and nothing of the folder is imported."""
    _, marker = folder
    monkeypatch.delenv("JOBGUARD_STACK", raising=False)
    with cli_table(monkeypatch):
        assert main(["drill"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --stack: there is no stack 'JobGuard-drills'"), line
    assert not marker.exists() and "handlers" not in sys.modules


@pytest.mark.parametrize("how", ["--jobs-module", "JOBGUARD_JOBS_MODULE"])
def test_a_named_jobs_module_in_the_project_folder_is_found_and_used(folder, table, capsys,
                                                                     monkeypatch, how):
    """GIVEN the user's myjobs/jobs.py in the working folder WHEN it is named with
    --jobs-module or JOBGUARD_JOBS_MODULE THEN runbook renders its job, a job it defines
    that never ran is accepted, and the folder is on sys.path only after the installed
    packages (last), so the user's `import boto3` gets the installed boto3."""
    work, marker = folder
    if how == "--jobs-module":
        named = ["--jobs-module", "myjobs.jobs"]
    else:
        named = []
        monkeypatch.setenv("JOBGUARD_JOBS_MODULE", "myjobs.jobs")
    assert main([*named, "runbook", "invoice-mailer"]) == 0, capsys.readouterr().err
    assert "invoice-mailer" in capsys.readouterr().out
    assert sys.path[-1] == str(work)
    assert main([*named, "--json", "status", "invoice-mailer"]) == 0  # defined, never run
    assert main([*named, "status", "invoice-mialer"]) == 2
    assert "did you mean 'invoice-mailer'?" in capsys.readouterr().err
    assert not marker.exists()  # the folder's handlers package: never named, never run


# -- python -m: the working folder Python puts first ------------------------------------


@pytest.mark.parametrize(("argv", "module"), [
    (["python", "-m", "jobguard.cli", "status"], "jobguard.cli"),
    (["python", "-mjobguard.cli"], "jobguard.cli"),
    (["python", "-X", "importtime", "-W", "error", "-Bm", "jobguard.cli"], "jobguard.cli"),
    (["python", "--check-hash-based-pycs", "never", "-m", "jobguard"], "jobguard"),
    (["python", "-c", "import jobguard", "-m", "jobguard.cli"], None),
    (["python", "script.py", "-m", "jobguard.cli"], None),
    (["jobguard", "status", "nightly"], None),
])
def test_the_module_python_m_runs_is_read_as_the_interpreter_reads_it(argv, module):
    assert python_m_target(argv) == module


def test_python_m_jobguard_cli_loses_the_folder_python_put_first(tmp_path, monkeypatch):
    """GIVEN `python -m jobguard.cli` in a folder (sys.path[0] is that folder) THEN the
    entry is removed; under -P (safe_path), for another module, or when sys.path[0] is
    something else, nothing changes."""
    monkeypatch.chdir(tmp_path)
    cli = ["python", "-m", "jobguard.cli", "status"]
    path = [str(tmp_path), "/lib/python3.11", "/venv/site-packages"]
    assert drop_implicit_cwd(path, orig_argv=cli, safe_path=False)
    assert path == ["/lib/python3.11", "/venv/site-packages"]
    for argv, safe in ((cli, True), (["python", "-m", "myapp"], False),
                       (["python", "app.py"], False)):
        path = [str(tmp_path), "/venv/site-packages"]
        assert not drop_implicit_cwd(path, orig_argv=argv, safe_path=safe)
        assert path == [str(tmp_path), "/venv/site-packages"]
    path = ["/venv/bin", str(tmp_path)]
    assert not drop_implicit_cwd(path, orig_argv=cli, safe_path=False)
    assert path == ["/venv/bin", str(tmp_path)]


# -- real interpreters: the installed packages win --------------------------------------

SHADOWS = {"boto3.py": "", "botocore/__init__.py": "", "json.py": "", "typing.py": "",
           "handlers/__init__.py": "", "handlers/jobs.py": "JOBS = ()\n"}
"""What a hostile folder holds: each writes the marker when imported."""


def _launchers() -> list[tuple[str, list[str]]]:
    script = Path(sys.executable).parent / "jobguard"
    return [("python -m jobguard.cli", [sys.executable, "-m", "jobguard.cli"]),
            ("console script", [str(script)])]


@pytest.mark.process
@pytest.mark.parametrize(("launcher", "argv"), _launchers(), ids=["python-m", "script"])
def test_a_real_jobguard_in_a_hostile_folder_imports_the_installed_packages(
        tmp_path, launcher, argv):
    """GIVEN a folder holding boto3.py, botocore/, json.py, typing.py and handlers/jobs.py
    beside the user's myjobs/jobs.py WHEN jobguard is run there (python -m jobguard.cli,
    and the installed script) THEN boto3 answers from the installed package (an unknown
    --profile is botocore's ProfileNotFound, named), runbook without a module says how to
    name one, and with --jobs-module myjobs.jobs the user's module is found and its
    `import boto3` gets the real one: the folder's files never run."""
    work, marker = tmp_path / "shared", tmp_path / "ran.txt"
    _hostile(SHADOWS, work, marker)
    (work / "myjobs").mkdir()
    (work / "myjobs/__init__.py").write_text("")
    (work / "myjobs/jobs.py").write_text(USERS_JOBS)
    (tmp_path / "aws-config").write_text("")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "JOBGUARD_", "PYTHON"))}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "aws-config"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "aws-config"),
               AWS_EC2_METADATA_DISABLED="true", JOBGUARD_TABLE="jobguard-t")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*argv, *args], cwd=work, env=env, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)

    status = run("--profile", "no-such-profile-7f3", "status", JOB)
    assert status.returncode == 2 and status.stderr.startswith(
        "error: --profile: no AWS profile 'no-such-profile-7f3'"), (launcher, status.stderr)
    runbook = run("runbook", JOB)
    assert runbook.returncode == 2 and runbook.stderr.startswith(
        "error: --jobs-module: runbook needs the job definitions"), (launcher, runbook.stderr)
    named = run("--jobs-module", "myjobs.jobs", "runbook", "invoice-mailer")
    assert named.returncode == 0 and "invoice-mailer" in named.stdout, (launcher, named.stderr)
    assert not marker.exists(), (launcher, marker.read_text())
