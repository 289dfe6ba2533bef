"""The docs as written work (the README and every page of the site in docs/): every
Python snippet compiles and runs here (on the testing kit's sandbox where it touches AWS,
with the names it leaves to you, such as ``changed_contacts()``, given by the test), and
every shell command is run by a named test or marked as needing an AWS account. A snippet
or command added without one fails here."""

from __future__ import annotations

import re
import shlex
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobguard.destinations import DynamoDBDestination
from jobguard.testing import Sandbox
from tests._docs import pages

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```", re.S | re.M)
FOUND = [(path, kind, body) for path in pages() for kind, body in BLOCK.findall(path.read_text())]
PYTHON = [body for _, kind, body in FOUND if kind == "python"]
CHECKED_ELSEWHERE = {"docs/tutorial.md": "tests/ship/test_tutorial.py"}
"""Pages whose shell lines a test of their own maps, each to the test that runs it."""
SHELL = [body for path, kind, body in FOUND
         if kind == "sh" and path.relative_to(ROOT).as_posix() not in CHECKED_ELSEWHERE]

FILES = {"myjobs/jobs.py", "myjobs/invoice_mailer.py", "app.py", "tests/conftest.py",
         "tests/test_invoice_mailer.py", "tests/test_failures.py"}
"""The ``# file:`` snippets: a user's project, run by tests/ship/test_as_a_user.py."""


def snippet(first_line: str) -> str:
    """The one Python snippet that has ``first_line`` among its lines."""
    (found,) = [s for s in PYTHON if first_line in s.splitlines()]
    return found


WRAP = snippet("    for page in pages_to_sync():")
CLAIM = snippet("            note_id = notes.put(item.key, {\"text\": item.record[\"change\"]})")
BATCH = snippet("class CrmSync(BatchJob[dict]):")
DRILLABLE = snippet('        code = LambdaBundle(self, "Code", packages=["myjobs"],')
"""The tutorial's one-line change to the README's app.py (test_as_a_user synthesizes it)."""
OWN_STACK = snippet("class ReportsStack(cdk.Stack):  # your existing stack")
"""docs/deploying.md's stack: the end of infra/examples/own_stack.py, which the infra tests
synthesize (test_the_deployment_guides_stack_is_the_example_file)."""


def test_the_deployment_guides_stack_is_the_example_file() -> None:
    example = (ROOT / "infra" / "examples" / "own_stack.py").read_text()
    assert example.endswith(OWN_STACK), "docs/deploying.md's stack differs from the example"


def test_every_python_snippet_compiles_and_is_run_by_a_test() -> None:
    files = [s.splitlines()[0].removeprefix("# file: ") for s in PYTHON
             if s.startswith("# file: ")]
    assert sorted(files) == sorted(FILES)  # each file once, in one page
    for path, kind, code in FOUND:
        if kind == "python":
            compile(textwrap.dedent(code), str(path.relative_to(ROOT)), "exec")
    run_here = [WRAP, CLAIM, BATCH, OWN_STACK, DRILLABLE]
    assert len(PYTHON) == len(FILES) + len(run_here), "a docs snippet no test runs"


def _run(code: str, **given: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "readme_snippet", **given}
    exec(compile(code, "docs", "exec"), namespace)  # noqa: S102 - the docs' code
    return namespace


def test_wrap_an_existing_handler(jobguard_sandbox: Sandbox) -> None:
    synced: list[int] = []
    snippet_ns = _run(WRAP, pages_to_sync=lambda: [1, 2, 3], sync=synced.append)
    job = jobguard_sandbox.wire(snippet_ns["lambda_handler"])
    assert job.tick() == {"synced": True} and synced == [1, 2, 3]
    assert job.decisions() == ["ran"] and job.lease().fence == 1


def _changes(n: int) -> list[dict[str, str]]:
    return [{"id": f"contact-{i:03d}", "change": f"email changed #{i}"} for i in range(n)]


def _notes(sandbox: Sandbox) -> list[str]:
    items = sandbox.client("dynamodb").scan(TableName="crm-notes")["Items"]
    return sorted(i["work_id"]["S"] for i in items)


def _lose_first_answer(notes: Any) -> dict[str, str]:
    """``notes.put`` writes the first note, then its answer is lost (a timeout): that item
    is uncertain, and only the snippet's ``reconcile`` can complete it."""
    put, lost = notes.put, {}

    def put_once_lost(key: str, item: dict[str, Any]) -> str:
        note_id: str = put(key, item)
        if not lost:
            lost[key] = note_id
            raise TimeoutError("the destination wrote the note; its answer was lost")
        return note_id

    notes.put = put_once_lost
    return lost


def test_claim_every_work_item(jobguard_sandbox: Sandbox) -> None:
    DynamoDBDestination.create_table(jobguard_sandbox.client("dynamodb"), "crm-notes")
    snippet_ns = _run(CLAIM, changed_contacts=lambda: _changes(4))
    lost = _lose_first_answer(snippet_ns["notes"])
    job = jobguard_sandbox.wire(snippet_ns["lambda_handler"])
    first = job.tick()
    assert (first["selected"], first["completed"], first["uncertain"]) == (4, 3, 1)
    jobguard_sandbox.clock.advance(timedelta(minutes=5))  # the next tick is due
    second = job.tick()
    # the uncertain item is reconciled (found at the destination), the rest skipped
    assert (second["reconciled"], second["already_done"]) == (1, 3), second
    assert _notes(jobguard_sandbox) == [f"contact-{i:03d}:create-note" for i in range(4)]
    (key, note_id), = lost.items()
    assert job.item(key).destination_id == note_id  # the proof of the lost answer's note


def test_write_the_job_as_four_functions(jobguard_sandbox: Sandbox) -> None:
    DynamoDBDestination.create_table(jobguard_sandbox.client("dynamodb"), "crm-notes")
    feed = _changes(5)

    class Crm:  # the CRM the snippet pages through: changes after a cursor, by id
        @staticmethod
        def changed_contacts(*, after: str | None, limit: int) -> list[dict[str, str]]:
            return [c for c in feed if after is None or c["id"] > after][:limit]

    snippet_ns = _run(BATCH, crm=Crm())
    lost = _lose_first_answer(snippet_ns["notes"])
    job = jobguard_sandbox.wire(snippet_ns["lambda_handler"])
    first = job.tick()
    assert (first["completed"], first["uncertain"]) == (4, 1), first
    feed.append({"id": "contact-005", "change": "new"})
    jobguard_sandbox.clock.advance(timedelta(minutes=5))  # the next tick is due
    second = job.tick()
    # the uncertain item is reconciled (the checkpoint waited for it), then the new one
    assert (second["reconciled"], second["completed"]) == (1, 1), second
    assert len(_notes(jobguard_sandbox)) == 6
    (key, note_id), = lost.items()
    assert job.item(key).destination_id == note_id


EXERCISED = {
    # command (its start): the test that runs it as written
    "make demo   #": "tests/local/test_demo.py",
    "make test   #": "the suite itself (CI runs `make test`)",
    "python3 -m pip wheel --no-deps -w dist .": "tests/ship/test_as_a_user.py",
    "python3 -m venv .venv": "tests/ship/test_as_a_user.py",
    "pip install 'path/to/dist/": "tests/ship/test_as_a_user.py",
    "CDK_OUTDIR=cdk.out python app.py": "tests/ship/test_as_a_user.py",
    "python -m pytest -q": "tests/ship/test_as_a_user.py",
    "make synth": "tests/infra/conftest.py (the app's synth) and tests/local (cdk deploy)",
    'make demo DEMO_ARGS="--job': "tests/local/test_job_drills.py",
    # the local deployment's three steps (docs/deploying.md), as jobguard.local.deploy
    # runs them for make demo
    "export AWS_ENDPOINT_URL=http://127.0.0.1:": "tests/local/test_demo.py (jobguard.local.deploy)",
    "npx cdk bootstrap aws://000000000000/": "tests/local/test_demo.py (jobguard.local.deploy)",
    "npx cdk deploy -c jobguard:local=true": "tests/local/test_demo.py (jobguard.local.deploy)",
}
"""Commands other than ``jobguard``'s, by their start."""
AWS_ACCOUNT = "needs an AWS account"


def _jobguard_commands_run() -> dict[str, str]:
    """Each README ``jobguard`` command a test runs as written (comment dropped), and the
    test that runs it: the "Operating a job" block against the deployed stack, its
    ``resolve`` line here, the recovery transcript by test_job_drills' recover test."""
    from tests.local import test_job_drills as drills

    runs = {c: "tests/local/test_job_drills.py"
            for c in drills.operator_commands() + drills.timeline_commands()}
    for command in drills.readme_commands():
        if command.split()[1] in drills.RUN_ELSEWHERE:
            runs[command] = drills.RUN_ELSEWHERE[command.split()[1]]
    for command in _commands():
        if command.startswith("$ jobguard recover "):
            runs[command] = (f"tests/local/test_job_drills.py "
                             f"({drills.RECOVER_TRANSCRIPT_RUN_AS})")
    return runs


def _bare(command: str) -> str:
    return re.sub(r"\s+#.*$", "", command).strip()


def _commands() -> list[str]:
    """Each command of the README's shell blocks (a continued line joined; a transcript's
    output lines, which follow a ``$ `` line, left out)."""
    commands: list[str] = []
    for block in SHELL:
        transcript = block.lstrip().startswith("$ ")
        lines = iter(block.splitlines())
        for line in lines:
            while line.endswith("\\"):
                line = line[:-1] + next(lines).strip()
            if line.strip() and (not transcript or line.startswith("$ ")):
                commands.append(line)
    return commands


def test_every_shell_command_is_run_by_a_test_or_needs_an_aws_account() -> None:
    commands = _commands()
    assert len(commands) >= 20
    jobguard_runs = _jobguard_commands_run()
    for command in commands:
        if AWS_ACCOUNT in command:
            continue
        if command.startswith(("jobguard ", "$ jobguard ")):
            # a jobguard command counts only if a test runs that very line
            where = jobguard_runs.get(_bare(command))
            assert where is not None, f"no test runs this README command: {command}"
        else:
            (prefix,) = [p for p in EXERCISED if command.startswith(p)] or [None]
            assert prefix is not None, f"no test runs this README command: {command}"
            where = EXERCISED[prefix]
        where = where.split(" ")[0]
        if where.startswith("tests/"):
            assert (ROOT / where).is_file(), where


RESOLVE = next(_bare(c) for c in _commands() if c.startswith("jobguard resolve "))


def test_the_readmes_resolve_line_records_what_the_operator_found(
        jobguard_sandbox: Sandbox) -> None:
    from jobguard import ItemState, OverlapPolicy, WorkId, current_run, guarded
    from jobguard.cli import main

    # GIVEN the README's job crm-sync, whose note for contact c-42 (cursor 17) got no
    # answer: uncertain
    @guarded("crm-sync", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))
    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(["c-42@17"], work_id=lambda r: WorkId(r, "create-note")):
            with item:
                raise TimeoutError("the CRM did not answer")
        return dict(run.stats)

    job = jobguard_sandbox.wire(lambda_handler)
    job.tick()
    before = job.item("c-42@17:create-note")
    assert before is not None and before.state is ItemState.UNCERTAIN
    # WHEN the operator runs the README's line as written
    assert main([*shlex.split(RESOLVE)[1:], "--table", jobguard_sandbox.table]) == 0
    # THEN the item is completed with the message id they found, and nothing was redone
    after = job.item("c-42@17:create-note")
    assert after is not None and after.state is ItemState.COMPLETED
    assert after.destination_id == "NOTE-9"


@pytest.mark.parametrize("path", sorted(EXERCISED.values()))
def test_the_tests_named_exist(path: str) -> None:
    where = path.split(" ")[0]
    if where.startswith("tests/"):
        assert (ROOT / where).is_file()


def test_the_readme_is_a_front_door_of_at_most_250_lines() -> None:
    """The README says what jobguard is, why, how to install and start, and sends the
    reader to the site for the rest: at most 250 lines, each link into the docs alive."""
    text = (ROOT / "README.md").read_text()
    assert text.count("\n") <= 250, text.count("\n")
    for target in re.findall(r"\]\((docs/[^)#\s]+)", text):
        assert (ROOT / target).is_file(), target
