"""The CDK app, synthesized once per test session; every infra test asserts on it.

Synthesis costs ~7 s warm and ~19 s cold (jsii starts Node and loads aws-cdk-lib), so
the app is built once with the deployment's jobs plus one job per remaining policy and
schedule kind, cdk-nag included. Resources are found through the constructs that made
them (``stack.get_logical_id``), never through hashed logical ids written in a test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Before aws_cdk is imported: jsii's package cache survives between runs (jsii runs on
# the pinned Node: tests/conftest.py).
os.environ.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".jsii-cache"))

import aws_cdk as cdk  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402
from constructs import IConstruct  # noqa: E402

import infra.stack  # noqa: E402
from handlers.jobs import JOBS  # noqa: E402
from infra.app import build_app  # noqa: E402
from infra.stack import JobGuardStack  # noqa: E402
from jobguard import OverlapPolicy  # noqa: E402
from jobguard.cdk.bundle import LambdaBundle  # noqa: E402
from jobguard.definitions import JobDefinition  # noqa: E402

INVOKER = "arn:aws:iam::123456789012:role/oncall"
PLANNER = "arn:aws:iam::123456789012:role/support"
"""May plan recoveries, not execute them (``jobguard:recoveryPlanners``)."""
TOPIC = "arn:aws:sns:eu-west-1:123456789012:jobguard-alarms"
DRILLS_ACCOUNT = "111122223333"
"""The test account a drills deployment is allowed to go to in this suite."""
HANDLER = "handlers.crm_sync.lambda_handler"  # the stack only names it; any module will do

NIGHTLY = JobDefinition(
    name="nightly-report", handler=HANDLER, schedule="cron(0 2 * * ? *)",
    policy=OverlapPolicy.SKIP, timeout=timedelta(minutes=10), lease=timedelta(minutes=5),
    description="A SKIP job on a cron schedule (no interval).")
EXPORT = JobDefinition(
    name="invoice-export", handler=HANDLER, schedule="rate(15 minutes)",
    policy=OverlapPolicy.QUEUE, timeout=timedelta(minutes=2), lease=timedelta(minutes=1),
    max_queued=5, memory_mb=512, environment={"EXPORT_BUCKET": "invoices"},
    overlap_alarm_share=None, description="A QUEUE job (its runs cannot reach the next tick).")
PRICES = JobDefinition(
    name="price-refresh", handler=HANDLER, schedule="rate(1 minute)",
    policy=OverlapPolicy.REPLACE, timeout=timedelta(seconds=50),
    lease=timedelta(seconds=30), overlap_alarm_share=0.6, description="A REPLACE job.")
EXTRA_JOBS = (NIGHTLY, EXPORT, PRICES)


@dataclass
class Synth:
    """One synthesized app: the stack object, its template, and what cdk-nag said."""

    app: cdk.App
    stack: JobGuardStack
    template: Template
    outdir: Path
    validation_error: str | None

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.template.to_json()["Resources"]
        return resources

    def logical_id(self, construct: IConstruct) -> str:
        """The logical id of ``construct`` (or of its default CloudFormation child)."""
        element = (construct if isinstance(construct, cdk.CfnElement)
                   else construct.node.default_child)
        assert isinstance(element, cdk.CfnElement), construct.node.path
        return str(self.stack.resolve(self.stack.get_logical_id(element)))

    def resource(self, construct: IConstruct) -> dict[str, Any]:
        resource: dict[str, Any] = self.resources[self.logical_id(construct)]
        return resource

    def properties(self, construct: IConstruct) -> dict[str, Any]:
        properties: dict[str, Any] = self.resource(construct)["Properties"]
        return properties

    def of_type(self, kind: str) -> dict[str, Any]:
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = build_app({"jobguard:recoveryInvokers": INVOKER,
                     "jobguard:recoveryPlanners": PLANNER, "jobguard:alarmTopicArn": TOPIC},
                    outdir=str(outdir), jobs=(*JOBS, *EXTRA_JOBS))
    stack = next(c for c in app.node.children if isinstance(c, JobGuardStack))
    error = None
    try:
        app.synth()  # runs cdk-nag: an unacknowledged finding fails here
    except RuntimeError as exc:
        error = str(exc)
    template_file = outdir / f"{stack.artifact_id}.template.json"
    if not template_file.exists():
        pytest.fail(f"synthesis wrote no template: {error}")
    template = Template.from_json(json.loads(template_file.read_text()))
    yield Synth(app=app, stack=stack, template=template, outdir=outdir,
                validation_error=error)


@pytest.fixture(scope="session")
def drill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JobGuardStack, Any, Path]]:
    """The app as ``make demo`` deploys it (``-c jobguard:local=true -c
    jobguard:drills=true``), cdk-nag included; pip is replaced, the host layer's contents
    are not the point."""
    build_dir = tmp_path_factory.mktemp("cdk-build")
    outdir = tmp_path_factory.mktemp("cdk.out.local")

    def fake_pip(command: list[str]) -> None:
        Path(command[command.index("--target") + 1]).mkdir(parents=True)

    def bundle(*args: Any, **kwargs: Any) -> LambdaBundle:
        return LambdaBundle(*args, build_dir=build_dir, run=fake_pip, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(infra.stack, "LambdaBundle", bundle)
        app = build_app({"jobguard:local": "true", "jobguard:drills": "true",
                         "jobguard:recoveryInvokers": INVOKER}, outdir=str(outdir),
                        account="000000000000")
        stack = next(c for c in app.node.children if isinstance(c, JobGuardStack))
        app.synth()  # an unacknowledged cdk-nag finding fails here
    template = json.loads((outdir / f"{stack.artifact_id}.template.json").read_text())
    yield stack, template, outdir


@pytest.fixture(scope="session")
def drills_in_account(tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[tuple[JobGuardStack, Any, Path]]:
    """A drills deployment into a real test account on the allow-list."""
    outdir = tmp_path_factory.mktemp("cdk.out.drills")
    app = build_app({"jobguard:drills": "true", "jobguard:drillsAccounts": DRILLS_ACCOUNT,
                     "jobguard:recoveryInvokers": INVOKER}, outdir=str(outdir),
                    account=DRILLS_ACCOUNT)
    stack = next(c for c in app.node.children if isinstance(c, JobGuardStack))
    app.synth()
    template = json.loads((outdir / f"{stack.artifact_id}.template.json").read_text())
    yield stack, template, outdir
