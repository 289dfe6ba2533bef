"""The whole `make demo` path: MiniStack, the CDK stack deployed with the CDK CLI, every
drill. Asserts on the drills' JSON summary, not on the exit code alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# The demo deploys a stack and runs every drill: minutes on a loaded 2-core machine, far
# past the suite's 120 s per-test default, which must not cut it short.
pytestmark = [pytest.mark.local_aws, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    # drill: (job, what the drill exists to show, on that job's row)
    "second-worker": ("crm-sync", lambda t: t["coalesced"] >= 1 and t["runs"] == 2),
    "paused-after-lock": ("report-export", lambda t: t["queued"] == 2 and t["runs"] == 3),
    "lease-expiry": ("crm-sync", lambda t: t["takeovers"] == 1),
    "restart-mid-call": ("crm-sync", lambda t: t["takeovers"] == 1 and t["reconciled"] >= 4),
    "duplicate-deliveries": ("report-export", lambda t: t["runs"] == 1 and t["duplicate"] == 4),
    # the dead run's 3 notes, counted once (the recovery's run record counts them)
    "recovery-during-schedule": ("crm-sync", lambda t: t["reconciled"] == 3),
    "partial-failure": ("crm-sync", lambda t: t["runs"] >= 2 and t["failed"] == 0),
    # two links of one chain, then the coalesced tick's one follow-up
    "backlog-chain": ("crm-sync", lambda t: t["runs"] == 3 and t["coalesced"] == 1),
}


def run_demo(out: Path, *args: str) -> dict[str, Any]:
    """``python -m jobguard.local.demo ARGS --json OUT``, its JSON summary with its exit
    code and output."""
    # Its own process group: if it runs out of time, SIGTERM lets it stop the local AWS
    # and remove its files, and then nothing it started is left running.
    proc = subprocess.Popen([sys.executable, "-m", "jobguard.local.demo", *args, "--json",
                             str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=840)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        pytest.fail("the demo ran past 14 minutes and was stopped: " + stdout[-3000:])
    assert out.exists(), stdout[-4000:] + stderr[-4000:]
    summary: dict[str, Any] = json.loads(out.read_text())
    summary["exit_code"] = proc.returncode
    summary["stdout"] = stdout
    return summary


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_demo(tmp_path_factory.mktemp("demo") / "summary.json")


def test_the_deployed_stack_has_what_the_library_needs(demo: dict[str, Any]) -> None:
    # Read through the AWS APIs after `cdk deploy`: table + TTL + index, trigger queues
    # with their mappings reporting partial batch failures, the recovery function and
    # the alias through which alone it executes.
    checks = {c["what"]: c["ok"] for c in demo["deployment"]}
    assert checks and all(checks.values()), checks
    assert any(w.startswith("TTL on ttl_epoch_s") for w in checks)
    assert any(w.startswith("recovery alias execute -> $LATEST") for w in checks)
    assert sum("trigger queue" in w for w in checks) == 2  # crm-sync and report-export


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_drill_holds_and_shows_its_decision(demo: dict[str, Any], name: str) -> None:
    drills = {d["name"]: d for d in demo["drills"]}
    drill = drills[name]
    assert drill["verdict"] == "held", json.dumps(drill, indent=2)
    assert drill["error"] is None
    assert drill["checks"] and all(c["ok"] for c in drill["checks"])
    sides = {c["side"] for c in drill["checks"]}
    assert {"runs", "ledger", "destination"} <= sides, sides
    for row in drill["jobs"]:
        assert row["duplicates_at_destination"] == 0, row
    job, shows = EXPECTED[name]
    row = next(r for r in drill["jobs"] if r["job"] == job)
    assert shows(row), row


def test_the_demo_exits_zero_only_because_every_drill_held(demo: dict[str, Any]) -> None:
    assert set(EXPECTED) == {d["name"] for d in demo["drills"]}
    assert demo["held"] is True
    assert demo["exit_code"] == 0, demo["stdout"][-3000:]


def test_the_demo_ends_by_writing_the_drills_page_and_printing_its_path(
        demo: dict[str, Any]) -> None:
    """THEN its last lines name the page, and the page holds every drill: its verdict,
    what it checked, and its timeline drawn from the run log (a bar per run the drill
    read back, a mark per trigger that did not run)."""
    tail = demo["stdout"].rstrip().splitlines()[-2:]
    assert tail[0].startswith("drills page (every drill's checks and timeline): "), tail
    page = Path(tail[0].rsplit(": ", 1)[1])
    assert page == Path(demo["html"]) and page.is_file()
    html = page.read_text()
    assert f"{len(EXPECTED)} of {len(EXPECTED)} drills held" in html
    sections = html.split('<section id="d')[1:]
    assert len(sections) == len(EXPECTED)
    for section, drill in zip(sections, demo["drills"], strict=True):
        assert f">{drill['name']} <span class=\"tag t-held\">held</span>" in section
        assert section.count('<span class="ok">ok</span>') == len(drill["checks"])
        ran = {r["run_id"] for r in drill["runs"] if r["decision"] == "ran"}
        decided = {r["run_id"] for r in drill["runs"] if r["decision"] != "ran"}
        chart = section.split("</svg>", 1)[0]
        assert chart.count('data-kind="run"') >= len(ran), drill["name"]
        assert chart.count('data-kind="decision"') >= len(decided), drill["name"]
