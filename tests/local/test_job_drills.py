"""README "Drill your own stack": `make demo DEMO_ARGS="--job NAME --keep"` deploys
locally and runs the three drills any guarded job gets, its table counts the ledger
(the items the drills' runs wrote), not only the run log; and the README's operator
commands, recovery included, work as written against the deployment it leaves running,
with what the demo printed (the variables to export, the path of `jobguard`)."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .test_demo import ROOT, run_demo

pytestmark = [pytest.mark.local_aws, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def job_drills(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    summary = run_demo(tmp_path_factory.mktemp("job") / "summary.json",
                       "--job", "report-export", "--keep")
    stop = re.search(r"^When done: make demo-stop \(stops pid (\d+), removes (\S+)\)$",
                     summary["stdout"], re.M)
    try:
        yield summary
    finally:
        if stop:  # as the demo said: make demo-stop (then, if another note replaced
            # this one, the pid it named: the local AWS is stopped either way)
            said = subprocess.run([sys.executable, "-m", "jobguard.local.demo", "--stop"],
                                  cwd=ROOT, check=False, timeout=60, capture_output=True,
                                  text=True).stdout
            if f"(pid {stop.group(1)} and its workers)" not in said:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(stop.group(1)), signal.SIGTERM)
                shutil.rmtree(stop.group(2), ignore_errors=True)
    assert stop, summary["stdout"][-2000:]


def _shell(summary: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The `jobguard` the demo named and the environment its export line sets."""
    out = summary["stdout"]
    (exports,) = re.findall(r"^  export (.+)$", out, re.M)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBGUARD_"))}
    env.update(dict(pair.split("=", 1) for pair in shlex.split(exports)))
    (cli,) = set(re.findall(r"^  (\S+/jobguard) status crm-sync;", out, re.M))
    return cli, env


RUN_ELSEWHERE = {
    "resolve": "tests/ship/test_readme.py",  # needs an uncertain item of crm-sync
}
"""Commands of the "Operating a job" block another test runs as written, and where."""

RECOVER_TRANSCRIPT_RUN_AS = "test_recover_as_documented_invokes_the_deployed_recovery_function"
"""The "Recovery, step by step" transcript's plan and execution, run here on crm-sync (the
transcript's job is the embedded demo's) without --function-name."""


def readme_commands() -> list[str]:
    """The commands of the README's "Operating a job" block (the section's first, before
    its subsections), comments dropped."""
    section = (ROOT / "docs" / "how-to" / "operate.md").read_text()
    (block,) = re.findall(r"```sh\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def timeline_commands() -> list[str]:
    """The commands of the README's "See what happened" block, comments dropped."""
    section = (ROOT / "docs" / "how-to" / "timeline.md").read_text()
    block = re.findall(r"```sh\n(.*?)```", section, re.S)[0]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def operator_commands() -> list[str]:
    """The commands of that block this module runs against the deployed stack."""
    return [c for c in readme_commands() if c.split()[1] not in RUN_ELSEWHERE]


def test_the_three_drills_of_any_job_hold(job_drills: dict[str, Any]) -> None:
    assert job_drills["exit_code"] == 0, job_drills["stdout"][-3000:]
    assert [d["name"] for d in job_drills["drills"]] == [
        "report-export:overlap", "report-export:duplicate-deliveries",
        "report-export:lease-expiry"]
    assert all(d["verdict"] == "held" for d in job_drills["drills"])


def test_the_drills_count_the_items_the_runs_left_in_the_ledger(
        job_drills: dict[str, Any]) -> None:
    rows = {d["name"].split(":")[1]: d["jobs"][0] for d in job_drills["drills"]}
    # the first drill's first run exported its period: one item completed in the ledger;
    # the queued runs after it found that period already done (they wrote no item)
    assert rows["overlap"]["runs"] == 3 and rows["overlap"]["completed"] >= 1
    assert all(r["failed"] == 0 and r["uncertain"] == 0 for r in rows.values())
    assert all(r["duplicates_at_destination"] == 0 for r in rows.values())


def test_the_readme_operator_commands_work_against_the_deployed_stack(
        job_drills: dict[str, Any], tmp_path: Path) -> None:
    cli, env = _shell(job_drills)
    assert (ROOT / cli).is_file() or Path(cli).is_file()
    runs = subprocess.run([cli, "runs", "report-export", "--output", "json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, check=True)
    run_id = json.loads(runs.stdout)[0]["run_id"]  # for the README's example run id
    commands = operator_commands()
    assert len(commands) == 10 and all(c.startswith("jobguard ") for c in commands)
    assert len(timeline_commands()) == 4
    commands += timeline_commands()
    # --open: a browser that opens nothing here, its page in this test's folder
    env = {**env, "BROWSER": "true", "TMPDIR": str(tmp_path)}
    for command in commands:
        argv = shlex.split(command)[1:]
        if argv[0] == "run":  # the README's example run id: one of this deployment's
            argv[1] = run_id
        page = None
        if "--html" in argv:  # the timeline's page: written here, not into the clone
            page = tmp_path / argv[argv.index("--html") + 1]
            argv[argv.index("--html") + 1] = str(page)
        # a terminal on stdin, answering "y" to the commands that ask (release, repair)
        answer, terminal = pty.openpty()
        os.write(answer, b"y\n")
        try:
            done = subprocess.run([cli, *argv], cwd=ROOT, env=env, stdin=terminal,
                                  capture_output=True, text=True, timeout=120, check=False)
        finally:
            os.close(answer)
            os.close(terminal)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr)
        assert done.stdout.strip(), command
        assert page is None or page.read_text().startswith("<!doctype html>"), command


def test_recover_as_documented_invokes_the_deployed_recovery_function(
        job_drills: dict[str, Any]) -> None:
    cli, env = _shell(job_drills)
    # WHEN the README's plan and execution are run with no --function-name: the function
    # is the one the deployed stack names (JOBGUARD_STACK, printed by the demo)
    plan = subprocess.run([cli, "recover", "crm-sync", "--from", "000000", "--to", "000012"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines()[:2] == [
        "recovery of crm-sync, cursors after 000000 up to 000012, mode unfinished",
        "plan: 0 selected, 0 completed, 0 failed, 0 uncertain, 0 never attempted -> 0 to "
        "replay (0 skipped by mode)"], plan.stdout
    done = subprocess.run([cli, "recover", "crm-sync", "--from", "000000", "--to", "000012",
                           "--execute"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "\ndone: selected 0, " in done.stdout, done.stdout


def test_the_drill_report_prints_no_python_dicts(job_drills: dict[str, Any]) -> None:
    """Review of issue 16 (item 8: "a Python dict printed"): every --job drill's check
    line interpolates a Counter as a Python dict (``SKIP: {'ran': 1, 'skipped': 2}: both
    `skipped`, one run``; drill/drills.py: ``{dict(decisions)}``), here and in the
    example drills."""
    # GIVEN the --job drills' output as `make demo` prints it
    # THEN no line carries a Python dict
    dicts = [line for line in job_drills["stdout"].splitlines() if "{'" in line]
    assert not dicts, dicts
