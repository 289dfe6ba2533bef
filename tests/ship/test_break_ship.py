"""Review of issue 16 (ship it to outsiders): each test here is a defect found by using
the package as someone outside this repository would, written as the test that should
pass once it is fixed. GIVEN / WHEN / THEN in each.

The subprocess tests run the installed plugin (this repository's venv, an editable
install) in a temporary folder outside the repository, so that nothing of the repo is
on the path and moto is imported only when the plugin imports it, as in a user's
session."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobguard import BatchJob, OverlapPolicy, Page, WorkId, guarded
from jobguard.cli import main
from jobguard.testing import Sandbox

from . import test_readme
from .test_as_a_user import readme_files

ROOT = Path(__file__).resolve().parents[2]
CLOSED = "http://127.0.0.1:9"
"""A proxy nobody listens on: a request that escapes the sandbox fails at once, here and
on a machine with a network (it never reaches AWS)."""


def _user_env(**extra: str) -> dict[str, str]:
    """A user's shell: nothing of this repository, a region and their own credentials
    (fake ones here), every HTTP(S) request sent to a closed port."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "JOBGUARD_", "AWS_", "PYTEST_"))}
    env.update(AWS_DEFAULT_REGION="eu-west-1", AWS_ACCESS_KEY_ID="AKIAUSERSOWNKEY0000",
               AWS_SECRET_ACCESS_KEY="the-users-own-secret", AWS_MAX_ATTEMPTS="1",
               AWS_RETRY_MODE="standard", HTTPS_PROXY=CLOSED, HTTP_PROXY=CLOSED,
               https_proxy=CLOSED, http_proxy=CLOSED, NO_PROXY="", no_proxy="", **extra)
    return env


def _pytest(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:timeout"],
        cwd=project, env=_user_env(), capture_output=True, text=True, timeout=300,
        check=False)


def _write(root: Path, files: dict[str, str]) -> Path:
    for path, body in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(body))
    return root


# -- the sandbox ------------------------------------------------------------------------


def test_a_client_made_when_the_handler_module_is_imported_goes_to_the_sandbox(
        tmp_path: Path) -> None:
    """The README: "every AWS client your code makes in the test goes to it". Its own
    "Claim every work item" snippet makes its client when the module is imported
    (``notes = DynamoDBDestination("crm-notes", client=boto3.client("dynamodb"))``), and
    a test module imports the handler at collection, before any fixture has started the
    emulator (the plugin imports moto lazily): that client has no moto hook, and sends
    the handler's writes to the real endpoint signed with the user's own credentials."""
    # GIVEN the README's snippet as a module of a user's project, and their test
    module = test_readme.CLAIM + textwrap.dedent("""

        def changed_contacts():
            return [{"id": "c1", "change": "email"}, {"id": "c2", "change": "phone"}]
    """)
    project = _write(tmp_path, {
        "crmjobs/__init__.py": "",
        "crmjobs/sync.py": module,
        "tests/test_sync.py": """
            from jobguard.destinations import DynamoDBDestination

            from crmjobs import sync


            def test_each_change_is_noted_once(jobguard_sandbox):
                ddb = jobguard_sandbox.client("dynamodb")
                DynamoDBDestination.create_table(ddb, "crm-notes")
                result = jobguard_sandbox.wire(sync.lambda_handler).tick()
                # THEN the notes are in the sandbox's table, not sent anywhere else
                assert ddb.scan(TableName="crm-notes")["Count"] == 2, result
                assert result["completed"] == 2, result
        """,
    })
    # WHEN they run their tests
    done = _pytest(project)
    assert done.returncode == 0, done.stdout[-2500:]


# -- the README's snippet tests ---------------------------------------------------------


@pytest.mark.parametrize(("name", "test"), [
    ("CLAIM", test_readme.test_claim_every_work_item),
    ("BATCH", test_readme.test_write_the_job_as_four_functions),
])
def test_a_readme_snippet_that_reconciles_with_a_method_that_does_not_exist_fails_its_test(
        name: str, test: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16 item 11 found ``notes.find(...)`` in the README (the helpers have
    ``reconcile``). tests/ship/test_readme.py runs each snippet, but only on the happy
    path: no item is ever uncertain, so ``reconcile`` is never called and the very slip
    the issue found passes again."""
    # GIVEN the README's snippet with the slip the issue found put back
    broken = getattr(test_readme, name).replace("notes.reconcile(", "notes.find(")
    assert broken != getattr(test_readme, name)
    monkeypatch.setattr(test_readme, name, broken)
    # WHEN the README test for that snippet runs
    with Sandbox.start() as sandbox:
        try:
            test(sandbox)
        except Exception:  # noqa: BLE001 - THEN it fails: the slip is caught
            return
    pytest.fail(f"tests/ship/test_readme.py passed with the README's {name} snippet calling "
                "notes.find(), which does not exist")


def test_the_readme_user_tests_fail_when_the_handler_reconciles_with_a_missing_method(
        tmp_path: Path) -> None:
    """The same for the user's project of "Install it in your own project": its three
    tests (run by test_as_a_user) never leave an invoice uncertain, so a handler whose
    ``reconcile=`` calls a method that does not exist passes them."""
    # GIVEN the README's project with the slip in the handler's reconcile
    files = readme_files()
    files["myjobs/invoice_mailer.py"] = files["myjobs/invoice_mailer.py"].replace(
        "sent.reconcile(", "sent.find(")
    files.pop("app.py")
    project = _write(tmp_path, {**files, "myjobs/__init__.py": ""})
    # WHEN the README's tests run (python -m pytest -q)
    done = _pytest(project)
    # THEN they fail
    assert done.returncode != 0, ("the README's tests passed with reconcile calling "
                                  f"sent.find(), which does not exist:\n{done.stdout[-800:]}")


# -- the CLI for a project outside this repository -------------------------------------------


def test_jobguard_run_as_printed_works_in_the_readmes_own_project(tmp_path: Path) -> None:
    """"Operating a job" prints ``jobguard run 01M8K455CTTK6J3JQ50YRKYJS2`` (no
    ``--job``). In the README's own project (outside this repository) it fails with
    ``--jobs-module: cannot import 'handlers.jobs'``: ``run`` looks only in the jobs
    module's JOBS, which the README's project does not have (nor is it told to), while
    ``status``, ``runs`` and ``items`` find the job in the table."""
    # GIVEN the README's project, and a run of its job in the table
    files = {**readme_files(), "myjobs/__init__.py": ""}
    files.pop("app.py")
    project = _write(tmp_path, {**files, "operate.py": """
        import os
        import sys

        from jobguard.cli import main
        from jobguard.destinations import DynamoDBDestination
        from jobguard.testing import Sandbox

        from myjobs import invoice_mailer
        from myjobs.jobs import INVOICE_MAILER

        with Sandbox.start() as sandbox:
            DynamoDBDestination.create_table(sandbox.client("dynamodb"),
                                             INVOICE_MAILER.environment["SENT_TABLE"])
            job = sandbox.wire(invoice_mailer.lambda_handler)  # sets SENT_TABLE
            job.tick()
            (run,) = job.runs()
            assert main(["status", "invoice-mailer"]) == 0  # found in the table
            # WHEN the operator looks at the run as the README prints it
            sys.exit(main(["run", run.run_id]))
    """})
    done = subprocess.run([sys.executable, "operate.py"], cwd=project, env=_user_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    # THEN it shows the run
    assert done.returncode == 0, done.stderr[-600:]
    assert "invoice-mailer" in done.stdout


class _NoTimes(BatchJob[dict[str, str]]):
    """A BatchJob that does not map times to cursors (no ``cursor_at``)."""

    def select(self, cursor: str | None, limit: int) -> Page[dict[str, str]]:
        return Page([], cursor)

    def work_id(self, record: dict[str, str]) -> WorkId:
        return WorkId(record["id"], "op")

    def process(self, record: dict[str, str], item: Any) -> str:
        return "x"


def test_recover_direct_names_the_option_not_the_request_field(
        jobguard_sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 8: "internal names instead of option names". ``recover --direct``
    with ``--from-time`` for a job that does not map times says ``error: time_from:
    ...`` (the recovery request's field), where the same refusal before invoking says
    ``--from-time``."""
    # GIVEN a registered BatchJob without cursor_at, which has run
    (tmp_path / "notimes_job.py").write_text(textwrap.dedent("""
        from jobguard import JobConfig
        from jobguard.registry import register
        from tests.ship.test_break_ship import _NoTimes

        job = register(_NoTimes(JobConfig(name="no-times")))
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("JOBGUARD_RECOVERY_MODULES", "notimes_job")
    import notimes_job  # type: ignore[import-not-found]

    jobguard_sandbox.wire(notimes_job.job).tick()
    # WHEN the operator recovers a time range in their shell
    code = main(["recover", "no-times", "--from-time", "2026-11-01T00:00:00Z",
                 "--to-time", "2026-11-02T00:00:00Z", "--direct", "--modules", "notimes_job",
                 "--table", jobguard_sandbox.table])
    err = capsys.readouterr().err
    # THEN the refusal names the option they typed
    assert code == 2, err
    assert err.startswith("error: --from-time: "), err


def test_json_output_has_null_for_a_time_that_is_not_set(
        jobguard_sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    """``--output json`` is "for scripts", but a time that is not set is the string
    ``"-"`` (the table's placeholder): ``status``'s ``acquired_at`` of a free lease,
    ``items``' ``completed_at`` and ``ttl_at``. A script's ``if row["completed_at"]`` is
    true, and ``datetime.fromisoformat`` of it raises."""
    # GIVEN a job that ran and released its lease
    @guarded("json-times", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))
    def handler(event: Any, context: Any) -> dict[str, bool]:
        return {"ok": True}

    jobguard_sandbox.wire(handler).tick()
    capsys.readouterr()
    # WHEN a script reads its status as JSON
    assert main(["status", "json-times", "--output", "json",
                 "--table", jobguard_sandbox.table]) == 0
    status = json.loads(capsys.readouterr().out)
    # THEN the lease is free and its acquisition time is null, not "-"
    assert status["held"] is False
    assert status["acquired_at"] is None, status["acquired_at"]


# -- the testing kit: what a user sees --------------------------------------------------


@guarded("alpha", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))
def _alpha(event: Any, context: Any) -> dict[str, bool]:
    return {"ok": True}


@guarded("beta", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))
def _beta(event: Any, context: Any) -> dict[str, bool]:
    return {"ok": True}


@pytest.fixture
def jobguard_log() -> Iterator[io.StringIO]:
    """jobguard's JSON log lines, as Lambda would ship them."""
    from jobguard.observability import _logger

    handler = _logger().registered_handler
    buffer = io.StringIO()
    old = handler.setStream(buffer)
    try:
        yield buffer
    finally:
        handler.setStream(old)


def _decisions(log: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.getvalue().splitlines() if line.strip()]
    return [line for line in lines if line.get("message") == "trigger not run"]


def test_a_decision_log_line_names_its_own_job(jobguard_sandbox: Sandbox,
                                               jobguard_log: io.StringIO) -> None:
    """The README: "Logs (Powertools Logger, JSON) carry job, run_id, trigger_id and
    fence". The "trigger not run" line (skipped, queued, coalesced, ...) carries
    whatever ``job`` the thread's last run left behind: none in a fresh container, or
    another job's name (the recovery function serves every job; a test runs several)."""
    alpha, beta = jobguard_sandbox.wire(_alpha), jobguard_sandbox.wire(_beta)
    # GIVEN alpha ran in this thread, and beta's run holds its lease
    alpha.tick()
    with beta.holding(jobguard_sandbox.minute() - timedelta(minutes=5)):
        # WHEN a tick of beta arrives (skipped)
        assert beta.tick()["decision"] == "skipped"
    # THEN its log line names beta
    (line,) = _decisions(jobguard_log)
    assert line["trigger_id"].startswith("beta@")
    assert line.get("job") == "beta", line


def test_a_first_decision_in_a_fresh_container_names_its_job(
        jobguard_sandbox: Sandbox, jobguard_log: io.StringIO) -> None:
    """The same on a cold start: a container whose first invocation is skipped logs the
    decision without any ``job`` (a log search by job misses it)."""
    beta = jobguard_sandbox.wire(_beta)
    answers: list[Any] = []
    with beta.holding(jobguard_sandbox.minute() - timedelta(minutes=5)):
        # GIVEN a new thread (a new container) whose first trigger meets the held lease
        worker = threading.Thread(target=lambda: answers.append(beta.tick()))
        worker.start()
        worker.join(60)
    assert answers and answers[0]["decision"] == "skipped"
    # THEN the decision's log line names the job
    (line,) = _decisions(jobguard_log)
    assert line.get("job") == "beta", line


def test_a_batch_job_that_never_runs_out_of_records_does_not_hang_the_users_test(
        jobguard_sandbox: Sandbox) -> None:
    """On Lambda a BatchJob whose ``select`` never returns an empty page (a cursor it
    ignores, a feed that always has "changes") stops when the invocation runs out of
    time. The kit's context counts time on the ManualClock, which never moves by itself:
    the same run never ends, and the user's test hangs for ever ([testing] brings no
    pytest-timeout)."""
    stop = threading.Event()

    class IgnoresItsCursor(BatchJob[dict[str, str]]):
        def select(self, cursor: str | None, limit: int) -> Page[dict[str, str]]:
            if stop.is_set():  # (how this test ends the run it started)
                return Page([], cursor)
            return Page([{"id": "same"}], "same")  # the bug: the same page for ever

        def work_id(self, record: dict[str, str]) -> WorkId:
            return WorkId(record["id"], "op")

        def process(self, record: dict[str, str], item: Any) -> str:
            return "done"

    from jobguard import JobConfig

    # GIVEN the user's buggy job, wired
    job = jobguard_sandbox.wire(IgnoresItsCursor(JobConfig(name="endless")))
    answers: list[Any] = []
    runner = threading.Thread(target=lambda: answers.append(job.tick()), daemon=True)
    # WHEN their test delivers a tick
    runner.start()
    runner.join(20)
    ended = not runner.is_alive()
    stop.set()
    runner.join(60)
    # THEN the run ends (out of time, as on Lambda) instead of running for ever
    assert ended, "the run was still going after 20 s: the user's test hangs"


def test_wire_takes_a_guarded_handler_under_a_powertools_decorator() -> None:
    """Powertools' decorators go outermost (``@logger.inject_lambda_context`` above
    ``@guarded``), and the README says jobguard composes with them; ``wire()`` of that
    handler raises ``TypeError: ... got function``, so none of the kit's deliveries can
    be used on it."""
    from aws_lambda_powertools import Logger

    logger = Logger(service="users-own")

    # GIVEN a guarded handler under a Powertools decorator
    @logger.inject_lambda_context
    @guarded("with-powertools", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))
    def handler(event: Any, context: Any) -> dict[str, bool]:
        return {"ok": True}

    with Sandbox.start() as sandbox:
        # WHEN the user wires it
        job = sandbox.wire(handler)
        # THEN it runs as any wired handler
        assert job.tick() == {"ok": True}


# -- recovery for the README's kind of job -----------------------------------------------


def test_the_runbooks_recover_step_works_for_the_readmes_own_job(
        tmp_path: Path) -> None:
    """The README's job (a plain ``@guarded`` handler that claims items) gets the
    runbook and alarm text of every job: an ``incomplete`` run's items are to be
    recovered with ``jobguard recover JOB ...``. For that job the recovery refuses:
    "'invoice-mailer' is not a registered BatchJob", so the operator has no step."""
    files = {**readme_files(), "myjobs/__init__.py": ""}
    files.pop("app.py")
    project = _write(tmp_path, {**files, "operate.py": """
        import os
        import sys

        from jobguard.cli import main
        from jobguard.runbook import render
        from jobguard.testing import Sandbox

        from myjobs import invoice_mailer
        from myjobs.jobs import INVOICE_MAILER

        with Sandbox.start() as sandbox:
            # GIVEN the README's job whose destination refused both invoices
            job = sandbox.wire(invoice_mailer.lambda_handler)
            os.environ["SENT_TABLE"] = "no-such-table"  # the test's own, after wire()
            assert job.tick()["failed"] == 2
            # its runbook says what to do about failed items
            assert "jobguard recover invoice-mailer" in render(INVOICE_MAILER)
            # WHEN the operator plans the recovery (in their shell, the job's module)
            sys.exit(main(["recover", "invoice-mailer", "--from-time",
                           "2026-01-01T00:00:00Z", "--to-time", "2026-01-02T00:00:00Z",
                           "--direct", "--modules", "myjobs.invoice_mailer"]))
    """})
    done = subprocess.run([sys.executable, "operate.py"], cwd=project, env=_user_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    # THEN there is a plan (or the runbook would not send them there)
    assert "Traceback" not in done.stderr, done.stderr[-1500:]
    assert done.returncode == 0, done.stderr[-600:]


class _Flaky(BatchJob[dict[str, str]]):
    """Two records; the destination times out on the first run, and the job's
    ``reconcile`` reads a variable its function does not have (as a recovery function
    without the job's environment: test_break_ship_cdk)."""

    records = [{"id": "r1"}, {"id": "r2"}]

    def select(self, cursor: str | None, limit: int) -> Page[dict[str, str]]:
        rows = [r for r in self.records if cursor is None or r["id"] > cursor][:limit]
        return Page(rows, rows[-1]["id"] if rows else cursor)

    def work_id(self, record: dict[str, str]) -> WorkId:
        return WorkId(record["id"], "note")

    def process(self, record: dict[str, str], item: Any) -> str:
        raise TimeoutError("the destination did not answer")

    def reconcile(self, record: Any, item: Any) -> str | None:
        return os.environ["NOTES_TABLE"]  # KeyError: the variable is not set


@pytest.fixture
def flaky_recovered(jobguard_sandbox: Sandbox, jobguard_log: io.StringIO
                    ) -> dict[str, Any]:
    """GIVEN a registered BatchJob whose run left both items uncertain, WHEN the
    recovery executes the range and the job's reconcile raises."""
    from jobguard import JobConfig
    from jobguard.recovery import recover
    from jobguard.registry import register

    job = register(_Flaky(JobConfig(name="flaky-notes")))
    wired = jobguard_sandbox.wire(job)
    assert wired.tick()["uncertain"] == 2
    answer = recover({"job": "flaky-notes", "cursor_from": "r0", "cursor_to": "r9",
                      "dry_run": False})
    recovery = [r for r in wired.runs() if r.trigger_kind == "recovery"]
    return {"answer": answer, "runs": recovery, "log": jobguard_log.getvalue()}


def test_a_recovery_that_leaves_items_uncertain_is_not_recorded_succeeded(
        flaky_recovered: dict[str, Any]) -> None:
    """Issue 16 "run status that tells the truth" (item 7: a run with uncertain items
    recorded ``succeeded``). The recovery's own run is still recorded ``succeeded`` when
    it leaves items uncertain: recovery.py counts a reconcile that raised in its summary
    (``still_uncertain``) but not in the run's figures, so neither ``runs --status
    incomplete`` nor the RunsIncomplete alarm sees it."""
    assert flaky_recovered["answer"]["summary"]["still_uncertain"] == 2
    (run,) = flaky_recovered["runs"]
    # THEN the recovery's run record says its items are not done
    assert run.status.value == "incomplete", run.status


def test_a_recovery_whose_reconcile_raises_says_why(flaky_recovered: dict[str, Any]) -> None:
    """A run's ``reconcile`` that raises is logged ("reconcile failed", the work id and
    the error: claims.py); the recovery's copy of the same step (recovery._execute)
    swallows the exception and says nothing, so an operator whose recovery answered
    "executed ... still_uncertain 2" has no trace of the KeyError anywhere."""
    # THEN the log names the item and the error
    assert "reconcile failed" in flaky_recovered["log"], flaky_recovered["log"][-1500:]
    assert "NOTES_TABLE" in flaky_recovered["log"]


class _ByTime(BatchJob[dict[str, str]]):
    """A BatchJob that maps times to cursors (an empty feed)."""

    def select(self, cursor: str | None, limit: int) -> Page[dict[str, str]]:
        return Page([], cursor)

    def work_id(self, record: dict[str, str]) -> WorkId:
        return WorkId(record["id"], "op")

    def process(self, record: dict[str, str], item: Any) -> str:
        return "x"

    def cursor_at(self, at: Any) -> str:
        return str(at.strftime("%Y%m%d%H%M%S"))


def test_recover_prints_its_time_range_in_utc_with_z(
        jobguard_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """"Every time is UTC, in ISO 8601 with its Z" (jobguard.cli, README "Operating a job").
    A recovery's range is printed as given: ``2026-11-01T02:00:00+02:00``, and a
    ``...Z`` given comes back ``+00:00`` (in the table, the JSON and the recovery's run
    record)."""
    from jobguard import JobConfig
    from jobguard.registry import register

    # GIVEN a job that maps times to cursors, which has run
    jobguard_sandbox.wire(register(_ByTime(JobConfig(name="by-time")))).tick()
    monkeypatch.setenv("JOBGUARD_RECOVERY_MODULES", "json")  # (registered above)
    capsys.readouterr()
    # WHEN the operator plans a time range given in their own zone, as JSON
    assert main(["recover", "by-time", "--from-time", "2026-11-01T02:00:00+02:00",
                 "--to-time", "2026-11-01T05:00:00Z", "--direct", "--modules", "json",
                 "--output", "json", "--table", jobguard_sandbox.table]) == 0
    answer = json.loads(capsys.readouterr().out)
    # THEN the range is in UTC with its Z
    assert answer["range"] == {"time_from": "2026-11-01T00:00:00Z",
                               "time_to": "2026-11-01T05:00:00Z"}, answer["range"]


def test_a_readme_jobguard_command_that_no_test_runs_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/ship/test_readme.py maps every README shell command to the test that runs
    it; any line starting ``jobguard `` maps to tests/local/test_job_drills.py, which
    runs only the "Operating a job" block. A ``jobguard`` command anywhere else in the
    README (a new section's walk-through, a typo'd option) counts as exercised and is
    never run."""
    # GIVEN a README with one more shell block, outside "Operating a job", whose
    # command does not even exist
    monkeypatch.setattr(test_readme, "SHELL",
                        [*test_readme.SHELL, "jobguard frobnicate crm-sync --now\n"])
    # WHEN the README-commands check runs
    try:
        test_readme.test_every_shell_command_is_run_by_a_test_or_needs_an_aws_account()
    except AssertionError:
        return  # THEN it names the command no test runs
    pytest.fail("`jobguard frobnicate crm-sync --now` in the README passed as exercised by "
                "tests/local/test_job_drills.py, which never runs it")


def test_a_job_wired_with_its_own_clock_ticks_on_that_clock(jobguard_sandbox: Sandbox) -> None:
    """``Sandbox.wire(handler, clock=...)`` binds the job to ``clock``, but ``tick()``,
    ``duplicates()`` and ``holding()`` default to the *sandbox's* minute (and its Lambda
    contexts count the sandbox's time): a job wired with a clock set to a date of the
    test's choosing refuses its own default tick as "more than 0:15:00 ahead of this
    worker's clock"."""
    from datetime import UTC, datetime

    from jobguard.testing import ManualClock

    # GIVEN a job on a clock set to 1 January, 09:00
    clock = ManualClock(datetime(2026, 1, 1, 9, 0, tzinfo=UTC))
    job = jobguard_sandbox.wire(_alpha, clock=clock)
    # WHEN the test delivers "a Scheduler tick scheduled at the clock's minute"
    answer = job.tick()
    # THEN it runs, as the tick of 09:00 on that clock
    assert answer == {"ok": True}
    (run,) = job.runs()
    assert run.trigger_id == "alpha@2026-01-01T09:00:00Z"


@guarded("gamma", policy=OverlapPolicy.COALESCE, lease=timedelta(minutes=2))
def _gamma(event: Any, context: Any) -> dict[str, bool]:
    return {"ok": True}


def test_a_follow_up_deferred_behind_a_dead_holder_is_delivered_once_its_lease_expired(
        jobguard_sandbox: Sandbox) -> None:
    """COALESCE: "exactly one follow-up run, started when the run releases its lease (or
    once its lease expires if it crashed)". The follow-up's first delivery meets the
    holder and is deferred on the queue for the lease's remaining time, which SQS counts
    in real seconds; the test's ManualClock expires the lease, but ``deliver_queued()``
    finds nothing visible until two real minutes have passed: the kit cannot show the
    crashed-holder case without a sleep."""
    job = jobguard_sandbox.wire(_gamma)
    # GIVEN a run that holds the lease and will never release it
    with job.holding(jobguard_sandbox.minute() - timedelta(minutes=1)):
        assert job.tick()["decision"] == "coalesced"
        assert job.deliver_queued() == 1  # the follow-up meets the holder: deferred
        # WHEN the holder's lease expires (it died) and the queue is delivered again
        jobguard_sandbox.clock.advance(timedelta(minutes=3))
        delivered = job.deliver_queued()
        # THEN the follow-up runs, taking over the dead run's lease
        assert delivered == 1, f"nothing delivered; {job.queued()} message(s) still hidden"
        assert [r.trigger_kind for r in job.runs()].count("follow_up") == 1


def test_jobguard_local_prints_no_python_dicts(capsys: pytest.CaptureFixture[str]) -> None:
    """The README documents ``jobguard local --faults SPEC --seed N [--json]``; its table
    output prints Python reprs: ``decisions {'duplicate': 6, 'error': 5, ...}``, ``runs
    {...}``, ``faults injected 22 {'5xx': 6, ...}``, ``invariant checks {'CKPT': 4, ...}``
    and ``faults 'any=0.1'`` (issue 16: "no Python dicts in output")."""
    # WHEN the operator runs a small load
    code = main(["local", "--triggers", "12", "--jobs", "2", "--threads", "2"])
    out = capsys.readouterr().out
    # THEN the human output has no Python dict or repr in it
    assert code == 0, out
    assert "{'" not in out and "'any=0.1'" not in out, out


def test_a_pause_reason_is_bounded_like_every_other_text_jobguard_writes(
        jobguard_sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    """README "How it holds": the lease row "holds a fixed set of attributes", and
    "Bounded writes. Error text and details are cut at 1,000 UTF-8 bytes". ``jobguard
    pause JOB --reason TEXT`` writes TEXT whole onto the lease row (100,000 bytes here;
    a shell passes up to 128 KiB), which every later decision and acquisition of the job
    then reads and rewrites (a write unit per KB)."""
    # GIVEN a job that has run
    jobguard_sandbox.wire(_alpha).tick()
    # WHEN an operator pastes a long text as the reason
    assert main(["pause", "alpha", "--reason", "x" * 100_000,
                 "--table", jobguard_sandbox.table]) == 0
    row = jobguard_sandbox.client("dynamodb").get_item(
        TableName=jobguard_sandbox.table,
        Key={"pk": {"S": "JOB#alpha"}, "sk": {"S": "LEASE"}})["Item"]
    # THEN what lands on the lease row is cut as every other text is
    assert len(row["paused_reason"]["S"].encode()) <= 1_000, len(row["paused_reason"]["S"])


def test_the_sandbox_works_in_a_project_that_has_its_own_manual_clock_fixture(
        tmp_path: Path) -> None:
    """The plugin's fixtures have generic names, and ``jobguard_sandbox`` takes its clock
    from the fixture *named* ``manual_clock``: in a project whose conftest already has a
    ``manual_clock`` (or any fixture of that name), pytest hands that one to the sandbox,
    which fails inside the kit (``'datetime.datetime' object has no attribute
    'monotonic'``) on the first tick."""
    # GIVEN a project whose conftest has its own manual_clock fixture
    project = _write(tmp_path, {
        "tests/conftest.py": """
            from datetime import UTC, datetime

            import pytest


            @pytest.fixture
            def manual_clock():  # the project's own, from before jobguard
                return datetime(2026, 1, 1, tzinfo=UTC)
        """,
        "tests/test_job.py": """
            from datetime import timedelta

            from jobguard import OverlapPolicy, guarded


            @guarded("x", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))
            def handler(event, context):
                return {"ok": True}


            def test_a_tick_runs(jobguard_sandbox):
                assert jobguard_sandbox.wire(handler).tick() == {"ok": True}
        """,
    })
    # WHEN its tests use jobguard_sandbox
    done = _pytest(project)
    # THEN the sandbox works with its own clock
    assert done.returncode == 0, done.stdout[-1500:]
