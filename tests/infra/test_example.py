"""The README's "add a guarded job to your own stack" example runs as written, passes
cdk-nag on its own, and is the code docs/deploying.md shows."""

from __future__ import annotations

import runpy
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from infra.examples import own_stack
from jobguard.cdk.bundle import POWERTOOLS_LAYER_VERSION

from .conftest import ROOT

EXAMPLE = Path(own_stack.__file__ or "")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Template:
    import os

    cwd = os.getcwd()
    os.chdir(ROOT)  # the example names its handler package relative to the app's root
    try:
        # WHEN the example runs as a program (it synthesizes, cdk-nag included)
        namespace = runpy.run_path(str(EXAMPLE), run_name="__main__")
    finally:
        os.chdir(cwd)
    app: cdk.App = namespace["app"]
    stack = app.node.find_child("Reports")
    assert isinstance(stack, cdk.Stack)
    return Template.from_stack(stack)


def test_the_example_deploys_a_guarded_job_with_its_queue_schedule_and_alarms(
        reports: Template) -> None:
    reports.resource_count_is("AWS::DynamoDB::Table", 1)
    reports.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "handlers.crm_sync.lambda_handler", "Architectures": ["arm64"]})
    reports.has_resource_properties("AWS::Scheduler::Schedule", {
        "Target": {"Input": Match.string_like_regexp(r"<aws\.scheduler\.scheduled-time>")}})
    reports.has_resource_properties("AWS::SQS::Queue", {"FifoQueue": True})
    reports.has_resource_properties("AWS::Lambda::EventSourceMapping", {
        "BatchSize": 1, "FunctionResponseTypes": ["ReportBatchItemFailures"]})
    assert len(reports.find_resources("AWS::CloudWatch::Alarm")) >= 7


def test_the_example_is_about_fifteen_lines() -> None:
    code = [line for line in _code().splitlines() if line.strip()]
    assert len(code) <= 16, len(code)


def test_docs_show_the_example_as_it_is() -> None:
    docs = (ROOT / "docs" / "deploying.md").read_text()
    assert f"```python\n{_code()}```" in docs
    assert f"| `{POWERTOOLS_LAYER_VERSION}` |" in docs  # the default layer version it names


def _code() -> str:
    """The example without its module docstring."""
    text = EXAMPLE.read_text()
    return text.split('"""\n\n', 1)[1] if text.startswith('"""') else text

