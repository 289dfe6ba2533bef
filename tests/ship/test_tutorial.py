"""docs/tutorial.md works as written: every shell command of it is run by a named test
(or marked as needing an AWS account), the versions it installs are the ones this
repository pins, and the project files it shows are the README's (included by snippet
markers, never copied)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jobguard.local.ministack import VERSION

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = (ROOT / "docs" / "tutorial.md").read_text()
SHELL = re.findall(r"```sh\n(.*?)```", TUTORIAL, re.S)
AWS_ACCOUNT = "needs an AWS account"
OWN = "tests/ship/test_own_stack.py"
RUN_BY = {
    "python3 -m pip wheel --no-deps -w dist .": "tests/ship/_user.py (build_installed)",
    "mkdir billing && cd billing": "tests/ship/test_as_a_user.py (project: an empty folder)",
    "python3 -m venv .venv && . .venv/bin/activate": "tests/ship/_user.py (build_installed)",
    "pip install '../jobguard/dist/jobguard-0.1.0-py3-none-any.whl[cdk,testing]'":
        "tests/ship/_user.py (build_installed)",
    # the two installs below: the project links node_modules (npm ci of package-lock.json)
    # and .venv-ministack (requirements/ministack.lock); their versions are checked here
    "npm install aws-cdk@": f"{OWN} (deployed) + tests/ship/test_tutorial.py (versions)",
    "python3 -m venv .venv-ministack && .venv-ministack/bin/pip install ministack==":
        f"{OWN} (deployed) + tests/ship/test_tutorial.py (versions)",
    "mkdir myjobs && touch myjobs/__init__.py": "tests/ship/test_as_a_user.py (project)",
    "mkdir tests": "tests/ship/test_as_a_user.py (project)",
    "python -m pytest -q": "tests/ship/test_as_a_user.py",
    "python -m jobguard.local.up --app": f"{OWN} (deployed: this very line)",
    ". .jobguard-local/env": f"{OWN} (test_the_tutorials_commands_work_as_written)",
    "jobguard status ": f"{OWN} (test_the_tutorials_commands_work_as_written)",
    "jobguard drill --job invoice-mailer": f"{OWN} (test_the_drills_hold_on_the_users_own_jobs)",
    "jobguard timeline ": f"{OWN} (test_the_tutorials_commands_work_as_written)",
    "jobguard recover ": f"{OWN} (test_the_tutorials_commands_work_as_written)",
    "python -m jobguard.local.up --stop": f"{OWN} (deployed, when it ends: this very line)",
}
"""Each tutorial command, by its start, and the test that runs it."""
SNIPPETS = ("jobs", "handler", "conftest", "tests", "app")


REBUILT = {"jobguard drill --job invoice-mailer"}
"""Lines a test runs in its own words, not as written (test_own_stack's drill test adds
``--json`` to read the verdict): the tutorial's line must be exactly this, not start so."""


def _run_by(command: str) -> list[str]:
    """The RUN_BY entries that account for ``command``: by its start, or, for a line
    no test runs as written, by the whole line (its comment dropped)."""
    bare = re.sub(r"\s+#.*$", "", command).strip()
    return [p for p in RUN_BY if (bare == p if p in REBUILT else command.startswith(p))]


def _commands() -> list[str]:
    return [line.strip() for block in SHELL for line in block.splitlines() if line.strip()]


def test_every_shell_command_is_run_by_a_test_or_needs_an_aws_account() -> None:
    commands = _commands()
    assert len(commands) >= 15
    for command in commands:
        if AWS_ACCOUNT in command:
            continue
        assert _run_by(command), f"no test runs this tutorial command: {command}"
    for where in RUN_BY.values():
        for path in re.findall(r"tests/\S+\.py", where):
            assert (ROOT / path).is_file(), path


def test_what_it_installs_is_what_this_repository_pins() -> None:
    cdk = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert f"npm install aws-cdk@{cdk}" in _commands()
    assert any(c.endswith(f"pip install ministack=={VERSION}") for c in _commands())


@pytest.mark.parametrize("name", SNIPPETS)
def test_the_project_files_are_the_readmes_included_not_copied(name: str) -> None:
    readme = (ROOT / "README.md").read_text()
    start, end = f"<!-- --8<-- [start:{name}] -->", f"<!-- --8<-- [end:{name}] -->"
    assert start in readme and end in readme
    body = readme.split(start, 1)[1].split(end, 1)[0].strip()
    assert body.startswith("```python\n# file: ") and body.endswith("```")
    assert f'--8<-- "README.md:{name}"' in TUTORIAL
    assert body.splitlines()[1] not in TUTORIAL  # its "# file:" line: not copied


@pytest.mark.parametrize("changed", [
    "jobguard drill --job invoice-mailer --only overlap",
    "jobguard drill --job invoice-mailer --endpoint-url http://localhost:1",
])
def test_the_drill_line_no_test_runs_as_written_must_be_the_one_the_test_runs(
        changed: str) -> None:
    """GIVEN the tutorial's drill line, which test_own_stack runs in its own words
    (``drill --job invoice-mailer --json``), not as written WHEN the line gains an option
    THEN no test accounts for it (a prefix would accept any such line unrun)."""
    assert _run_by("jobguard drill --job invoice-mailer") != []
    assert _run_by(changed) == [], changed
