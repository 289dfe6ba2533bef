"""A user's own stack, first class (issue 29's "done when"): a billing team's project
outside this repository (tests/ship/own_project: two jobs of its own, its app.py built
from jobguard.cdk), with jobguard installed from the wheel, is synthesized clean (every
alarm reaches a person, the outputs exist, cdk-nag, cfn-lint and checkov report nothing
unacknowledged), deployed into the local AWS with one option making it drillable, then
operated and drilled by its stack's name alone with the installed `jobguard` command:
no jobs module, no checkout of this repository, no table name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobguard.deployment import Deployment
from jobguard.local.ministack import LocalStack
from jobguard.local.node import pinned_node

from ._user import _run, _user_env

pytestmark = [pytest.mark.local_aws, pytest.mark.timeout(1500)]

OWN = Path(__file__).resolve().parent / "own_project"
STACK = "Billing-local"
JOBS = ("invoice-mailer", "statement-export")


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
def deployed(installed: Path, project: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[LocalStack, Deployment, dict[str, str]]]:
    """The user's app deployed into the local AWS as `cdk deploy --app "python app.py"
    -c drills=true -c jobguard:local=true` deploys it: drillable by its one option."""
    from jobguard.local.deploy import deploy

    logs = tmp_path_factory.mktemp("own-logs")
    with LocalStack.start(log_path=logs / "ministack.log") as aws:
        outputs = deploy(aws.endpoint, stack=STACK, app=f"{installed / 'python'} app.py",
                         cwd=project, env=_env(installed, project), log=logs / "deploy.log",
                         context=["-c", "drills=true", "-c", f"stack={STACK}"],
                         say=lambda _: None)
        shell = {**_env(installed, project), **aws.env}
        yield aws, Deployment.from_outputs(STACK, outputs), shell


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
    aws, _, shell = deployed
    done = _jobguard(installed, project, shell, "--endpoint-url", aws.endpoint, "drill",
                     "--job", job, "--json", ok=False)
    (tmp_path / "drills.json").write_text(done.stdout)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    summary = json.loads(done.stdout)
    assert summary["held"] is True
    assert sorted(d["name"] for d in summary["drills"]) == sorted(
        f"{job}:{name}" for name in ("overlap", "duplicate-deliveries", "lease-expiry"))
