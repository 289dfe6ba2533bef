"""A user's own stack, first class (issue 29's "done when"): a billing team's project
outside this repository (tests/ship/own_project: two jobs of its own, its app.py built
from jobguard.cdk), with jobguard installed from the wheel, is synthesized clean (every
alarm reaches a person, the outputs exist, cdk-nag, cfn-lint and checkov report nothing
unacknowledged), deployed into the local AWS with one option making it drillable (by
`python -m jobguard.local.up`, the line docs/tutorial.md gives), then operated and drilled
by its stack's name alone with the installed `jobguard` command: no jobs module, no
checkout of this repository, no table name; the tutorial's operator lines run as written."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobguard.deployment import Deployment
from jobguard.local.node import pinned_node

from ._user import ROOT, _run, _user_env

pytestmark = [pytest.mark.local_aws, pytest.mark.timeout(1500)]

OWN = Path(__file__).resolve().parent / "own_project"
STACK = "Billing"
JOBS = ("invoice-mailer", "statement-export")
TUTORIAL = ROOT / "docs" / "tutorial.md"


def tutorial_commands() -> list[str]:
    """Each command of docs/tutorial.md's shell blocks, its comment dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", TUTORIAL.read_text(), re.S)
    return [re.sub(r"\s+#.*$", "", line).strip() for block in blocks
            for line in block.splitlines() if line.strip()]


def _tutorial(start: str) -> list[str]:
    """The tutorial's command that starts with ``start``, as argv."""
    (command,) = [c for c in tutorial_commands() if c.startswith(start)]
    return shlex.split(command)


UP = _tutorial("python -m jobguard.local.up --app")
STOP = _tutorial("python -m jobguard.local.up --stop")
TUTORIAL_MODULES = {"myjobs.invoice_mailer": "billing.mailer"}
"""The tutorial's job module, and the one of this project that defines the same job."""


@pytest.fixture(scope="module")
def project(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("own") / "billing-jobs"
    shutil.copytree(OWN, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _env(installed: Path, project: Path) -> dict[str, str]:
    """The user's shell, with the supported Node first on PATH (a folder holding only
    `node`, so that nothing else of this repository's venv is found by name)."""
    env = _user_env(installed)
    node = pinned_node()
    if node is not None:
        only_node = project.parent / "node-bin"
        only_node.mkdir(exist_ok=True)
        link = only_node / "node"
        if not link.exists():
            link.symlink_to(node)
        env["PATH"] = os.pathsep.join([env["PATH"].split(os.pathsep)[0], str(only_node),
                                       *env["PATH"].split(os.pathsep)[1:]])
    return env


def _template(installed: Path, project: Path, *context: str) -> dict[str, Any]:
    env = {**_env(installed, project), "CDK_OUTDIR": "cdk.out"}
    args = [str(installed / "python"), "app.py"]
    if context:  # the CDK CLI passes context as CDK_CONTEXT_JSON; so does this
        env["CDK_CONTEXT_JSON"] = json.dumps(dict(c.split("=", 1) for c in context))
    _run(args, cwd=project, env=env)
    return json.loads((project / "cdk.out" / "Billing.template.json").read_text())


def test_synthesis_is_clean_every_alarm_reaches_a_person_and_the_outputs_exist(
        installed: Path, project: Path) -> None:
    template = _template(installed, project)
    resources = template["Resources"]
    alarms = {k: r["Properties"] for k, r in resources.items()
              if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert len(alarms) >= 20
    assert all(p.get("AlarmActions") and p.get("OKActions") for p in alarms.values()), [
        k for k, p in alarms.items() if not p.get("AlarmActions")]
    assert all("Runbook: https://wiki.example.com/billing/jobs" in p["AlarmDescription"]
               for p in alarms.values())
    assert any(r["Type"] == "AWS::SNS::Subscription"
               and r["Properties"]["Endpoint"] == "oncall@example.com"
               for r in resources.values())
    outputs = set(template["Outputs"])
    assert {"TableName", "AlarmTopicArn", "InvoiceMailerJob", "StatementExportJob",
            "RecoveryFunctionName", "RecoveryExecuteArn"} <= outputs
    # cfn-lint and checkov, as this repository's own templates are checked
    from tests.infra.test_linters import _cfn_lint, _checkov

    path = project / "cdk.out" / "Billing.template.json"
    assert [(f["Rule"]["Id"], f["Message"]) for f in _cfn_lint(path)] == []
    results = _checkov(path)
    assert [(c["check_id"], c["resource"])
            for c in results["results"]["failed_checks"]] == []


@pytest.fixture(scope="module")
def deployed(installed: Path, project: Path) -> Iterator[tuple[str, Deployment, dict[str, str]]]:
    """The user's app deployed into the local AWS the way the tutorial (docs/tutorial.md)
    does it: the installed wheel's ``python -m jobguard.local.up --app "python app.py"
    --stack Billing -c drills=true`` in the project folder, where MiniStack
    (``.venv-ministack``) and the CDK CLI (``node_modules``) are installed; the shell then
    takes what it wrote to ``.jobguard-local/env``; ``--stop`` ends it. Yields the local
    AWS's endpoint, the deployment read back from the stack's outputs, the shell."""
    import boto3

    from jobguard.local.deploy import stack_outputs

    for name in (".venv-ministack", "node_modules"):  # what the tutorial installs there
        link = project / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    user = _env(installed, project)
    assert UP == ["python", "-m", "jobguard.local.up", "--app", "python app.py", "--stack",
                  STACK, "-c", "drills=true"]
    python = str(installed / "python")  # the user's `python`: their venv is activated
    try:
        done = _run([python, *UP[1:]], cwd=project, env=user, timeout=1200)
        exported = dict(line.removeprefix("export ").split("=", 1) for line in
                        (project / ".jobguard-local" / "env").read_text().splitlines())
        endpoint = exported["AWS_ENDPOINT_URL"]
        assert f"export JOBGUARD_STACK={STACK}" in done.stdout
        assert exported["AWS_ACCESS_KEY_ID"] == "test" and endpoint.startswith("http://127.")
        shell = {**user, **exported}
        session = boto3.session.Session(region_name=exported["AWS_DEFAULT_REGION"],
                                        aws_access_key_id="test", aws_secret_access_key="test")
        outputs = stack_outputs(session.client("cloudformation", endpoint_url=endpoint), STACK)
        yield endpoint, Deployment.from_outputs(STACK, outputs), shell
    finally:
        stopped = _run([python, *STOP[1:]], cwd=project, env=user).stdout
    assert "stopped the local AWS at http://127." in stopped and "removed" in stopped, stopped
    assert not (project / ".jobguard-local" / "env").exists()


def _jobguard(installed: Path, project: Path, shell: dict[str, str], *args: str,
              ok: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(installed / "jobguard"), "--stack", STACK, *args], cwd=project,
                          env=shell, input=stdin, capture_output=True, text=True, timeout=600,
                          check=False)
    if ok:
        assert done.returncode == 0, f"jobguard {' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done


def test_the_stack_says_what_the_tools_need(deployed: Any) -> None:
    _, found, _ = deployed
    assert set(found.jobs) == set(JOBS)
    assert all(job.drills for job in found.jobs.values())
    assert found.jobs["statement-export"].queue_url  # a QUEUE job's trigger queue
    assert found.jobs["invoice-mailer"].definition.lease.total_seconds() == 12  # drill clock
    assert found.alarm_topic and found.recovery_function and found.recovery_execute


def test_the_operator_commands_work_by_the_stacks_name(installed: Path, project: Path,
                                                       deployed: Any) -> None:
    _, _, shell = deployed
    for job in JOBS:
        status = json.loads(_jobguard(installed, project, shell, "status", job,
                                      "--json").stdout)
        assert status["job"] == job
    runbook = _jobguard(installed, project, shell, "runbook", "invoice-mailer").stdout
    assert "https://wiki.example.com/billing/jobs" in runbook
    assert "lease 12 s," in runbook  # the deployed (drill) clock, not the source's
    paused = _jobguard(installed, project, shell, "pause", "statement-export",
                       "--reason", "month-end freeze")
    assert "paused" in paused.stdout
    listed = json.loads(_jobguard(installed, project, shell, "status", "statement-export",
                                  "--json").stdout)
    assert listed.get("paused") or listed.get("paused_reason") or "month-end" in json.dumps(
        listed)
    _jobguard(installed, project, shell, "resume", "statement-export")
    runs = json.loads(_jobguard(installed, project, shell, "runs", "invoice-mailer",
                                "--json").stdout)
    assert isinstance(runs, list)
    page = project / "timeline.html"
    _jobguard(installed, project, shell, "timeline", *JOBS, "--html", str(page))
    assert page.is_file() and "invoice-mailer" in page.read_text()


@pytest.mark.parametrize("job", JOBS)
def test_the_drills_hold_on_the_users_own_jobs(installed: Path, project: Path,
                                               deployed: Any, job: str,
                                               tmp_path: Path) -> None:
    endpoint, _, shell = deployed
    done = _jobguard(installed, project, shell, "--endpoint-url", endpoint, "drill",
                     "--job", job, "--json", ok=False)
    (tmp_path / "drills.json").write_text(done.stdout)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    summary = json.loads(done.stdout)
    assert summary["held"] is True
    assert sorted(d["name"] for d in summary["drills"]) == sorted(
        f"{job}:{name}" for name in ("overlap", "duplicate-deliveries", "lease-expiry"))


def test_the_tutorials_commands_work_as_written(installed: Path, project: Path,
                                                deployed: Any) -> None:
    """docs/tutorial.md's steps 6 and 7 in the project folder, in a shell that loaded
    ``.jobguard-local/env`` as the tutorial says (its drill line is the drill test's)."""
    _, _, shell = deployed
    user = _env(installed, project)
    commands = tutorial_commands()
    start = commands.index(". .jobguard-local/env")
    script = [c for c in commands[start:] if not c.startswith(("jobguard drill ",
                                                               "python -m jobguard.local.up"))]
    assert [c.split()[1] for c in script if c.startswith("jobguard ")] == [
        "status", "timeline", "timeline", "recover"]
    (project / "timeline.html").unlink(missing_ok=True)  # the operator test's page
    text = "\n".join(["set -e", *script])
    for theirs, ours in TUTORIAL_MODULES.items():
        text = text.replace(theirs, ours)
    done = subprocess.run(["bash", "-c", text], cwd=project, env=user, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "job invoice-mailer: free" in done.stdout
    assert "invoice-mailer: " in done.stdout and " runs (" in done.stdout  # the timeline
    assert "recovery of invoice-mailer, times " in done.stdout
    assert "plan: 0 selected" in done.stdout and "plain @guarded job" in done.stdout
    assert "invoice-mailer" in (project / "timeline.html").read_text()
    assert shell["JOBGUARD_STACK"] == STACK
