"""Issue 29, row 11: the operator's habits, as the AWS CLI and kubectl taught them. Each
test types the command the issue quotes, through ``jobguard.cli.main`` against the
sandbox's table (stdin replaced where the command reads it): a piped answer confirms, a
no-op says so and writes nothing, a second pause keeps the first, a healthy row is not
rewritten.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from jobguard.cli import main
from jobguard.requests import Take
from jobguard.triggers import Trigger, TriggerKind

JOB = "nightly-export"


@pytest.fixture
def sandbox(jobguard_sandbox, monkeypatch):
    """GIVEN a job of the operator's own project that has run in the sandbox's table (no
    jobs module named: the table knows it)."""
    monkeypatch.delenv("JOBGUARD_JOBS_MODULE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("LOGNAME", "alice")
    jobguard_sandbox.store.pause(JOB, reason="first", now_ms=1_800_000_000_000)
    jobguard_sandbox.store.resume(JOB)  # a row the table knows, neither held nor paused
    return jobguard_sandbox


def _rows(sandbox: Any) -> list[dict[str, Any]]:
    """Every row of the table, as stored (what "nothing written" compares)."""
    ddb = sandbox.client("dynamodb")
    items = ddb.scan(TableName=sandbox.table, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))


def _hold(sandbox: Any, run_id: str = "01M8K455D5SMBCC61XNCBKW1C4") -> None:
    acquired = sandbox.store.take(Take(Trigger(JOB, f"{JOB}@manual:1", TriggerKind.MANUAL),
                                       run_id=run_id, owner="w", now_ms=1_800_000_000_000,
                                       lease_ms=3_600_000))
    assert acquired.__class__.__name__ == "Acquired"


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """stdin a pipe holding ``text`` (``echo y | jobguard ...``): not a terminal."""
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


def _run(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    got = main(list(argv))
    out, err = capsys.readouterr()
    assert got == code, (got, out, err)
    return out, err


# -- 1. a piped answer confirms ----------------------------------------------------------


def test_echo_y_into_release_force_confirms_it(sandbox, capsys, monkeypatch):
    """GIVEN a job held by a run WHEN `echo y | jobguard release JOB --force` (stdin a
    pipe, not a terminal) THEN the piped y confirms it, as `rm -i` reads one: released,
    the fence moved on."""
    _hold(sandbox)
    _stdin(monkeypatch, "y\n")
    out, err = _run(capsys, "release", JOB, "--force")
    assert "released; fence is now 2" in out, (out, err)
    assert sandbox.store.read_lease(JOB).run_id is None


@pytest.mark.parametrize("piped", ["", "\n", "n\n"], ids=["eof", "empty-line", "no"])
def test_release_without_a_yes_on_stdin_is_refused_naming_yes(sandbox, capsys, monkeypatch,
                                                               piped):
    """GIVEN a held job WHEN `jobguard release JOB --force` reads nothing, an empty line
    or n from its stdin THEN it is refused naming --yes (exit 2), the lease still held."""
    _hold(sandbox)
    before = _rows(sandbox)
    _stdin(monkeypatch, piped)
    _, err = _run(capsys, "release", JOB, "--force", code=2)
    assert err.splitlines()[-1].startswith("error: --yes: not confirmed"), err
    if not piped.strip():
        assert "pass --yes" in err
    assert _rows(sandbox) == before


def test_echo_y_into_repair_confirms_it(sandbox, capsys, monkeypatch):
    """GIVEN a lease row whose queued count a dead-lettered trigger left at 2 WHEN `echo y
    | jobguard repair JOB` THEN the piped y confirms it: the count is recounted (0)."""
    _count_left_at(sandbox, 2)
    _stdin(monkeypatch, "y\n")
    out, err = _run(capsys, "repair", JOB)
    assert "its queued count is 2, its trigger items say 0" in err
    assert out.strip().endswith("0 queued"), out
    assert sandbox.store.read_lease(JOB).queued_n == 0


def test_repair_with_nothing_on_stdin_is_refused(sandbox, capsys, monkeypatch):
    _count_left_at(sandbox, 2)
    before = _rows(sandbox)
    _stdin(monkeypatch, "")
    _, err = _run(capsys, "repair", JOB, code=2)
    assert "error: --yes: not confirmed: stdin gave no answer" in err
    assert _rows(sandbox) == before


# -- 2. resume of a job not paused ---------------------------------------------------------


def test_resume_of_a_job_not_paused_says_so_and_writes_nothing(sandbox, capsys):
    """GIVEN a job that is not paused WHEN `jobguard resume JOB` THEN it says the job is
    not paused (exit 0) and writes nothing; JSON says changed false."""
    before = _rows(sandbox)
    out, _ = _run(capsys, "resume", JOB)
    assert out.strip() == f"job {JOB} is not paused; nothing to resume"
    out, _ = _run(capsys, "resume", JOB, "--output", "json")
    assert json.loads(out) == {"job": JOB, "paused": None, "changed": False, "was": None}
    assert _rows(sandbox) == before


def test_resume_of_a_defined_job_that_never_ran_makes_no_row(sandbox, capsys, monkeypatch):
    """GIVEN a job defined in the named jobs module that never ran here WHEN it is
    resumed THEN no lease row is made for it (the old resume wrote one)."""
    monkeypatch.setenv("JOBGUARD_JOBS_MODULE", "handlers.jobs")
    before = _rows(sandbox)
    out, _ = _run(capsys, "resume", "crm-sync")
    assert "is not paused" in out
    assert _rows(sandbox) == before


def test_resume_of_a_paused_job_says_what_it_undid(sandbox, capsys):
    _run(capsys, "pause", JOB, "--reason", "vendor outage")
    out, _ = _run(capsys, "resume", JOB)
    assert out.startswith(f"job {JOB} resumed (it was paused since ") and \
        out.rstrip().endswith("by alice: vendor outage)"), out
    assert sandbox.store.read_lease(JOB).paused_at_ms is None


# -- 3. a second pause ---------------------------------------------------------------------


def test_a_second_pause_keeps_the_first_and_names_it(sandbox, capsys):
    """GIVEN a job paused for "vendor outage" WHEN `jobguard pause JOB --reason
    "upgrade"` THEN it is refused (exit 1) naming the pause (since when, by whom, its
    reason) and --replace; the first reason is kept, nothing written."""
    _run(capsys, "pause", JOB, "--reason", "vendor outage")
    before = _rows(sandbox)
    _, err = _run(capsys, "pause", JOB, "--reason", "upgrade", code=1)
    (line,) = err.splitlines()
    assert line.startswith(f"error: JOB: job {JOB} is already paused (since "), line
    assert "by alice): 'vendor outage'" in line and "--replace" in line
    assert "resume it first" in line
    assert _rows(sandbox) == before
    assert sandbox.store.read_lease(JOB).paused_reason == "vendor outage"


def test_the_same_pause_again_changes_nothing(sandbox, capsys):
    """GIVEN a paused job WHEN the same pause is typed again (a script that retries)
    THEN exit 0, it says already paused, nothing written."""
    _run(capsys, "pause", JOB, "--reason", "vendor outage")
    before = _rows(sandbox)
    out, _ = _run(capsys, "pause", JOB, "--reason", "vendor outage")
    assert "is already paused (since " in out and "nothing changed" in out
    assert _rows(sandbox) == before


def test_pause_replace_replaces_the_reason_and_says_the_old_one(sandbox, capsys):
    """GIVEN a paused job WHEN `pause JOB --reason upgrade --replace` THEN the reason is
    replaced, the old one said; the pause keeps its time."""
    _run(capsys, "pause", JOB, "--reason", "vendor outage")
    since = sandbox.store.read_lease(JOB).paused_at_ms
    out, _ = _run(capsys, "pause", JOB, "--reason", "upgrade", "--replace")
    assert "reason replaced; was: vendor outage" in out, out
    lease = sandbox.store.read_lease(JOB)
    assert (lease.paused_reason, lease.paused_at_ms, lease.paused_by) == (
        "upgrade", since, "alice")


# -- 4. repair of a healthy row ------------------------------------------------------------


def _count_left_at(sandbox: Any, n: int) -> None:
    """The lease row's queued count left at ``n`` with no queued trigger behind it (a
    queued trigger dead-lettered: its decrement never came)."""
    sandbox.client("dynamodb").update_item(
        TableName=sandbox.table, Key={"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "LEASE"}},
        UpdateExpression="SET queued_n = :n", ExpressionAttributeValues={":n": {"N": str(n)}})


@pytest.mark.parametrize("held", [False, True], ids=["free", "held"])
def test_repair_of_a_healthy_row_says_so_and_asks_nothing(sandbox, capsys, monkeypatch,
                                                          held):
    """GIVEN a readable lease row whose queued count its trigger items bear out WHEN
    `jobguard repair JOB` (stdin empty: a question would be refused) THEN it says the row
    is healthy, exit 0, nothing written; a held one names `release --force`."""
    if held:
        _hold(sandbox)
    before = _rows(sandbox)
    _stdin(monkeypatch, "")
    out, err = _run(capsys, "repair", JOB)
    assert "the lease row is healthy" in out and "nothing written" in out, (out, err)
    assert (f"jobguard release {JOB} --force" in out) == held
    assert _rows(sandbox) == before


def test_repair_force_rewrites_a_healthy_row(sandbox, capsys):
    fence = sandbox.store.read_lease(JOB).fence
    out, _ = _run(capsys, "repair", JOB, "--force", "--yes")
    assert out.startswith(f"repaired; fence is now {fence + 1}")


# -- 5. resolve of an item that does not exist ---------------------------------------------


@pytest.fixture
def failed_item(sandbox, monkeypatch) -> str:
    """GIVEN a run of the job that claimed one item and failed on it (a failed item in
    the ledger)."""
    from jobguard import OverlapPolicy, WorkId, current_run, guarded

    @guarded(JOB, policy=OverlapPolicy.SKIP)
    def handler(event: Any, context: Any) -> Any:
        for item in current_run().claim(["r-1"], work_id=lambda r: WorkId(r, "copy")):
            with item:
                raise RuntimeError("the destination said 500")

    job = sandbox.wire(handler)
    job({"job": JOB, "manual": True, "requested_by": "alice"})  # the run: incomplete
    return str(WorkId("r-1", "copy"))


def _powertools_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith("{")
            and '"level"' in line]


def test_resolve_of_an_item_not_in_the_ledger_writes_nothing(sandbox, failed_item, capsys):
    """GIVEN a job with one failed item WHEN `jobguard resolve JOB r-9:copy --not-found
    --reason typo` names an item the ledger does not hold THEN exit 1 naming it, no
    lease taken, no run record, nothing written, no log line."""
    before = _rows(sandbox)
    runs = len(sandbox.store.list_runs(JOB, limit=50))
    out, err = _run(capsys, "resolve", JOB, "r-9:copy", failed_item, "--not-found",
                    "--reason", "typo", code=1)
    (line,) = err.splitlines()
    assert line.startswith("error: WORK_ID: no work item 'r-9:copy' in job "), line
    assert failed_item not in line and f"jobguard items {JOB}" in line
    assert out == ""
    assert _rows(sandbox) == before
    assert len(sandbox.store.list_runs(JOB, limit=50)) == runs


def test_resolve_prints_its_answer_and_no_library_log_line(sandbox, failed_item, capsys,
                                                            monkeypatch):
    """GIVEN a failed item WHEN `jobguard resolve JOB ITEM --not-found --reason ...` THEN
    stdout is the answer alone, and no Powertools JSON log line reaches the terminal
    (stdout or stderr)."""
    import logging
    import sys

    # as in a fresh `jobguard` process: Powertools' handler writes to this stdout
    for handler in logging.getLogger("jobguard").handlers:
        monkeypatch.setattr(handler, "stream", sys.stdout)
    out, err = _run(capsys, "resolve", JOB, failed_item, "--not-found", "--reason",
                    "not in the bucket", "--wait", "0")
    assert out.startswith("resolved in run "), out
    assert not _powertools_lines(out) and not _powertools_lines(err), (out, err)
    assert err == "", err
    out, _ = _run(capsys, "--json", "resolve", JOB, failed_item, "--not-found", "--reason",
                  "again", "--wait", "0")
    assert json.loads(out)["result"] == "resolved"


# -- 6. unknown commands and options -------------------------------------------------------


@pytest.mark.parametrize("argv,said", [
    (["stauts", JOB], "jobguard: error: unknown command 'stauts'; did you mean 'status'?"),
    (["runs", JOB, "--lsat", "5"],
     "jobguard runs: error: unrecognized arguments: --lsat 5; did you mean '--last'?"),
    (["items", JOB, "--status", "uncertian"],
     "jobguard items: error: unknown --status value 'uncertian'; did you mean 'uncertain'?"),
    (["status", JOB, "--ouptut", "json"], "did you mean '--output'?"),
])
def test_a_mistyped_command_or_option_is_one_line_with_the_nearest(sandbox, capsys, argv,
                                                                    said):
    """WHEN a command or an option is mistyped THEN one line names it and the nearest
    (argparse in Python 3.11 suggests nothing), then where the help is; exit 2, no usage
    dump, nothing written."""
    before = _rows(sandbox)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert said in line and line.endswith("--help`)"), line
    assert _rows(sandbox) == before


# -- 7. no credentials, no region ----------------------------------------------------------


@pytest.fixture
def no_aws_config(monkeypatch, tmp_path):
    """A shell with no AWS credentials and no region anywhere (no profile files, no
    instance metadata)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_no_region_names_what_to_set(sandbox, no_aws_config, capsys):
    """GIVEN no region anywhere WHEN `jobguard status JOB` THEN one line naming --region,
    AWS_REGION and --endpoint-url (botocore's "You must specify a region" names none),
    exit 2."""
    _, err = _run(capsys, "status", JOB, code=2)
    (line,) = err.splitlines()
    assert line.startswith("error: --region: status: no AWS region: pass --region (or set "
                           "AWS_REGION)"), line
    assert "--endpoint-url" in line


def test_aws_region_is_read_as_the_aws_cli_reads_it(sandbox, no_aws_config, capsys,
                                                    monkeypatch):
    """GIVEN AWS_REGION alone (the AWS CLI v2's and Lambda's variable; botocore reads
    only AWS_DEFAULT_REGION) WHEN a command runs THEN it has its region: what is missing
    now is the credentials, and the line names --profile, AWS_PROFILE, AWS_ACCESS_KEY_ID
    and --endpoint-url (botocore's "Unable to locate credentials" names none)."""
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    _, err = _run(capsys, "status", JOB, code=2)
    (line,) = err.splitlines()
    assert line.startswith("error: --profile: status: no AWS credentials found"), line
    for named in ("--profile", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "--endpoint-url"):
        assert named in line, (named, line)


# -- 8. runs --last out of bounds ----------------------------------------------------------


@pytest.mark.parametrize("last", ["99999999999999999999", "10001", "0", "-3"])
def test_runs_last_out_of_bounds_is_refused_naming_last(sandbox, capsys, last):
    """WHEN `jobguard runs JOB --last 99999999999999999999` (or 0) THEN exit 2 with one
    line naming --last and its bounds; 10000 is still taken."""
    _, err = _run(capsys, "runs", JOB, "--last", last, code=2)
    (line,) = err.splitlines()
    assert line.startswith("error: --last: give 1 to 10,000 runs, got "), line
    _run(capsys, "runs", JOB, "--last", "10000")


# -- 9. one schema for every run-log entry -------------------------------------------------


def test_runs_json_entries_have_the_same_keys_whatever_the_run(sandbox, failed_item, capsys):
    """GIVEN a run log holding very different entries: a run that ran (incomplete, with
    item counts), a skipped decision (a trigger while the lease is held), an operator's
    resolution (a recovery run with its own figures) and a damaged row WHEN `jobguard
    runs JOB --output json` THEN every entry has exactly the documented keys
    (jobguard.cli.RUN_KEYS), null where absent; what a run recorded beside them is under
    `extra`."""
    _run(capsys, "resolve", JOB, failed_item, "--not-found", "--reason", "checked",
         "--wait", "0")
    _hold(sandbox, "01M8K455D5SMBCC61XNCBKW1C9")
    sandbox.client("dynamodb").put_item(TableName=sandbox.table, Item={
        "pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "RUN#01M8K455D5SMBCC61XNCBKW1C5"},
        "job": {"S": JOB}, "run_id": {"S": "01M8K455D5SMBCC61XNCBKW1C5"},
        "status": {"S": "bogus"}})

    from jobguard import OverlapPolicy, guarded

    @guarded(JOB, policy=OverlapPolicy.SKIP)
    def handler(event: Any, context: Any) -> Any:
        return None

    sandbox.wire(handler).tick()  # the lease is held: skipped
    out, _ = _run(capsys, "runs", JOB, "--output", "json")
    entries = json.loads(out)
    kinds = {(e["trigger_kind"], e["decision"], e["status"], bool(e["damaged"]))
             for e in entries}
    assert {("manual", "ran", "incomplete", False), ("recovery", "ran", "succeeded", False),
            (None, None, None, True)} <= kinds, kinds
    assert any(e["decision"] == "skipped" for e in entries), kinds
    assert len({frozenset(e) for e in entries}) == 1, [sorted(e) for e in entries]
    from jobguard.cli import RUN_KEYS

    for entry in entries:
        assert tuple(entry) == RUN_KEYS, entry
    recovery = next(e for e in entries if e["trigger_kind"] == "recovery")
    assert recovery["extra"]["resolve_reason"] == "checked"
