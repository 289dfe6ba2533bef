"""The timeline is operator tooling: its public names are pinned, and nothing a Lambda
function runs imports it (the production asset does not carry it:
``tests/infra/test_bundle.py``)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import jobguard.timeline

LIB = Path(jobguard.timeline.__file__).resolve().parents[1]
TOOLS = {"cli", "timeline", "drill", "local"}  # where importing it is allowed


def test_public_names_are_pinned():
    assert sorted(jobguard.timeline.__all__) == sorted([
        "Bar", "DrillSection", "Lane", "Mark", "Marker", "RunLogReader", "Timeline", "Window",
        "WindowError", "build_lane", "build_timeline", "collect", "parse_duration",
        "render_drills_page", "render_page", "render_svg", "render_text",
        "window_from_options"])


def test_no_runtime_module_imports_the_timeline():
    for path in LIB.rglob("*.py"):
        if path.relative_to(LIB).parts[0] in TOOLS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any("timeline" in n for n in names), f"{path} imports the timeline"


@pytest.mark.process
def test_a_handler_loads_without_the_timeline():
    code = ("import sys, handlers.crm_sync, handlers.report_export, "
            "jobguard.functions.recovery, jobguard.functions.reconciler; "
            "print([m for m in sys.modules if m.startswith('jobguard.timeline')])")
    root = LIB.parents[1]
    env = {"JOBGUARD_TABLE": "t", "AWS_DEFAULT_REGION": "us-east-1",
           "CRM_CONTACTS_TABLE": "c", "CRM_NOTES_TABLE": "n", "REPORT_BUCKET": "b",
           "JOBGUARD_TRIGGER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/q.fifo",
           "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, text=True,
                         capture_output=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
