"""cdk-nag (AWS Solutions rules) runs on the app in this suite: any finding that is not
acknowledged fails it, and every acknowledgment is a known one with a written reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_sqs as sqs

from infra.app import build_app
from infra.stack import JobGuardStack

from .conftest import NIGHTLY, Synth

ACKNOWLEDGED = "aws:cdk:acknowledged-rules"


def _violations(outdir: Path) -> list[str]:
    report: dict[str, Any] = json.loads((outdir / "validation-report.json").read_text())
    return [f"{v['ruleName']} at {c['constructPath']}: {v['description']}"
            for plugin in report["pluginReports"] for v in plugin["violations"]
            for c in v["violatingConstructs"]]


def test_cdk_nag_found_nothing_unacknowledged(synth: Synth) -> None:
    violations = _violations(synth.outdir)
    assert synth.validation_error is None and not violations, "\n".join(violations)


def test_a_new_finding_fails_the_synthesis(tmp_path: Path) -> None:
    # GIVEN the same app with one queue that has no DLQ and accepts plain HTTP
    app = build_app({"jobguard:alarmEmail": "oncall@example.com"}, outdir=str(tmp_path),
                    jobs=(NIGHTLY,))
    stack = next(c for c in app.node.children if isinstance(c, JobGuardStack))
    sqs.Queue(stack, "Careless")
    # WHEN it is synthesized THEN cdk-nag fails it, naming the findings
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    findings = _violations(tmp_path)
    assert any(f.startswith("AwsSolutions-SQS3 at JobGuard/Careless/") for f in findings)
    assert any(f.startswith("AwsSolutions-SQS4 at JobGuard/Careless/") for f in findings)
    assert all("/Careless/" in f for f in findings), findings


def test_each_acknowledgment_is_a_known_one_with_a_reason(synth: Synth) -> None:
    metadata = json.loads(
        (synth.outdir / f"{synth.stack.artifact_id}.metadata.json").read_text())
    acknowledged = {
        (path, rule.removeprefix("Annotation::")): reason
        for path, entries in metadata.items() for entry in entries
        if entry["type"] == ACKNOWLEDGED for rule, reason in entry["data"].items()}
    # the schedules' dead-letter queues and the functions' failed-ticks (failed-sweeps)
    # queues, their on-failure destinations: cdk-nag's SQS3 recognizes a queue as a DLQ
    # only when another queue redrives to it; and report-export's bucket (no access logs) and
    # its one wildcard, the job's key prefix in that bucket
    data = synth.stack.report_export_data
    assert data is not None
    bucket = synth.logical_id(data.bucket)
    kinds = {(path.rsplit("/", 1)[-1], rule) for path, rule in acknowledged}
    assert kinds == {("ScheduleDlq", "AwsSolutions-SQS3"), ("FailedTicks", "AwsSolutions-SQS3"),
                     ("FailedSweeps", "AwsSolutions-SQS3"), ("Bucket", "AwsSolutions-S1"),
                     ("FunctionRole", f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/reports/*]")}
    # per job: schedule DLQ, failed ticks; per reconciler: its own schedule DLQ, failed sweeps
    assert len(acknowledged) == 2 * len(synth.stack.jobs) + 2 * len(synth.stack.reconcilers) + 2
    assert {path for path, rule in acknowledged if rule.startswith("AwsSolutions-IAM5")} == {
        "/JobGuard/ReportExport/FunctionRole"}
    for (path, rule), reason in acknowledged.items():
        assert len(reason) >= 80, (path, rule, reason)
        if rule == "AwsSolutions-SQS3":
            assert "dead-letter queue" in reason, (path, rule, reason)
