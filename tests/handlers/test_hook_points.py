"""The library fires ``before_destination`` right before each destination helper's write
(a drill's fault switch can pause, crash or fail it there; the handlers fire nothing),
and the example jobs honour drill switches only when their function's environment
enables drills."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobguard import hooks
from jobguard.drill import switches

EVENTS = Path(__file__).resolve().parents[2] / "events"


def test_crm_sync_fires_before_destination_before_each_note(aws, crm_sync):
    seen: list[dict[str, Any]] = []

    def before(**ctx: Any) -> None:
        # the note for this work id is not there yet: the call has not been made
        notes = aws.ddb.scan(TableName="crm-notes")["Items"]
        assert ctx["work_id"] not in {n["work_id"]["S"] for n in notes}
        seen.append(ctx)

    with hooks.on("before_destination", before):
        result = crm_sync(json.loads((EVENTS / "scheduler-tick.json").read_text()), None)
    (run,) = aws.runs("crm-sync")
    assert result["completed"] == 3
    assert [c["work_id"] for c in seen] == [
        f"contact-{n}@{n:06d}:create-note" for n in range(1, 4)]
    assert {(c["job"], c["run_id"]) for c in seen} == {("crm-sync", run.run_id)}


def test_a_failure_at_the_hook_point_is_a_failed_item_not_a_note(aws, crm_sync):
    def refuse(**ctx: Any) -> None:
        if ctx["work_id"].startswith("contact-2@"):
            raise switches.DrillFault("drill switch refuse: refused")

    with hooks.on("before_destination", refuse):
        result = crm_sync(json.loads((EVENTS / "scheduler-tick.json").read_text()), None)
    assert (result["completed"], result["failed"]) == (2, 1)
    notes = aws.ddb.scan(TableName="crm-notes")["Items"]
    assert sorted(n["work_id"]["S"] for n in notes) == [
        "contact-1@000001:create-note", "contact-3@000003:create-note"]


def test_switches_are_not_installed_without_the_drill_environment(monkeypatch):
    import handlers.crm_sync  # noqa: F401 - the library installs switches when guarding
    import handlers.report_export  # noqa: F401

    monkeypatch.delenv(switches.DRILLS, raising=False)
    assert not switches.drills_enabled()
    assert switches.install("crm-sync") is False
    assert switches.install("report-export") is False
    assert not switches._installed  # noqa: SLF001 - nothing registered by the imports


def test_the_library_installs_a_jobs_switches_in_a_drill_deployment_only(monkeypatch):
    # the handlers carry no drill code: guarding a job installs its switches when (and
    # only when) the function's environment says it is a drill deployment's
    from jobguard import GuardedJob, JobConfig, hooks

    monkeypatch.setattr(switches, "_installed", set())
    monkeypatch.setattr(hooks, "_hooks", {})
    config = JobConfig(name="drilled-job", table_name="jobguard-table")
    monkeypatch.delenv(switches.DRILLS, raising=False)
    GuardedJob(config, lambda event, context: None)
    assert switches._installed == set() and hooks._hooks == {}  # noqa: SLF001
    monkeypatch.setenv(switches.DRILLS, "1")
    GuardedJob(config, lambda event, context: None)
    assert switches._installed == {"drilled-job"}  # noqa: SLF001
    assert set(hooks._hooks) == {*switches.POINTS, "before_renew"}  # noqa: SLF001


def test_no_handler_imports_drill_code():
    import ast

    for path in sorted((Path(__file__).resolve().parents[2] / "handlers").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [
                    a.name for a in node.names]
                assert not any(n.startswith("jobguard.drill") for n in names), path.name
