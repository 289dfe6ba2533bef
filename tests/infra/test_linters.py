"""cfn-lint and checkov on every template a deployment makes: production, drills (a test
account) and local (``make demo``). Zero findings that are not acknowledged on their
resource with a reason (``jobguard.cdk._lint.acknowledge``), and no acknowledgement
without one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobguard.cdk._lint import acknowledgements

from .conftest import Synth

CHECKOV = ("import sys; from checkov.main import Checkov; "
           "sys.argv = ['checkov', *sys.argv[1:]]; sys.exit(Checkov().run())")
CFN_LINT = ("import sys; from cfnlint.runner import main; "
            "sys.argv = ['cfn-lint', *sys.argv[1:]]; sys.exit(main())")


def _env(home: Path) -> dict[str, str]:
    """No credentials, no network look-ups: checkov's guideline download is skipped."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "ERROR"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


@pytest.fixture(scope="session")
def templates(synth: Synth, drill: Any, drills_in_account: Any) -> dict[str, Path]:
    _, _, local_out = drill
    _, _, drills_out = drills_in_account
    found = {"production": synth.outdir / f"{synth.stack.artifact_id}.template.json",
             "local": next(local_out.glob("*.template.json")),
             "drills": next(drills_out.glob("*.template.json"))}
    assert all(p.is_file() for p in found.values()), found
    return found


def _cfn_lint(template: Path) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, "-c", CFN_LINT, "--format", "json", str(template)],
                          capture_output=True, text=True, check=False, env=_env(template.parent))
    assert done.stdout.strip().startswith("["), done.stderr[-2000:]
    findings: list[dict[str, Any]] = json.loads(done.stdout or "[]")
    return findings


def _checkov(template: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHECKOV, "--file", str(template), "--framework",
         "cloudformation", "--output", "json", "--compact", "--skip-download"],
        capture_output=True, text=True, check=False, env=_env(template.parent))
    assert done.stdout.strip(), done.stderr[-2000:]
    report = json.loads(done.stdout)
    results: dict[str, Any] = (report[0] if isinstance(report, list) else report)
    return results


@pytest.mark.parametrize("deployment", ["production", "drills", "local"])
def test_cfn_lint_finds_nothing_unacknowledged(templates: dict[str, Path],
                                               deployment: str) -> None:
    findings = _cfn_lint(templates[deployment])
    assert [(f["Rule"]["Id"], "/".join(map(str, f["Location"]["Path"][:2])), f["Message"])
            for f in findings] == []


@pytest.mark.parametrize("deployment", ["production", "drills", "local"])
def test_checkov_finds_nothing_unacknowledged(templates: dict[str, Path],
                                              deployment: str) -> None:
    results = _checkov(templates[deployment])
    failed = results["results"]["failed_checks"]
    assert [(c["check_id"], c["resource"]) for c in failed] == []
    summary = results["summary"]
    assert summary["passed"] > 100 and summary["parsing_errors"] == 0, summary
    skipped = results["results"]["skipped_checks"]
    assert skipped and all(c["check_result"].get("suppress_comment") for c in skipped), \
        skipped[0]


@pytest.mark.parametrize("deployment", ["production", "drills", "local"])
def test_every_acknowledgement_says_why(templates: dict[str, Path], deployment: str) -> None:
    template = json.loads(templates[deployment].read_text())
    for logical_id, resource in template["Resources"].items():
        for rule, reason in acknowledgements(resource).items():
            assert len(reason) > 30, f"{logical_id}: {rule} has no reason"
