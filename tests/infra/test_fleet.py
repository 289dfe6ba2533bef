"""A fleet of 100 jobs (``infra.fleet``, :class:`jobguard.cdk.JobFleet`): it synthesizes
within CloudFormation's limits, cdk-nag clean; the operator reaches every job from the
stack's outputs; every alarm reaches a person and says what to decide; the README's cost
table is what the templates cost (``bench.cost``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Stack

from bench.cost import fixed_monthly, inventory
from handlers.fleet import fleet_jobs
from infra.fleet import FLEET_STACK, FleetStack, build_fleet_app
from jobguard import environment
from jobguard.cdk import JobFleet, JobTable, LambdaBundle, alarms_off
from jobguard.deployment import Deployment
from jobguard.errors import ConfigError
from jobguard.observability import AT_REST_METRICS, FLEET_DIMENSION
from jobguard.runbook_fleet import fleet_alarms, paused_windows

from .test_nag import _violations

ROOT = Path(__file__).resolve().parents[2]
JOBS = 100
CFN_RESOURCES, CFN_OUTPUTS, CFN_PARAMETERS, CFN_TEMPLATE_BYTES = 500, 200, 200, 1_000_000


@dataclass
class Fleet:
    outdir: Path
    stack: FleetStack
    templates: list[dict[str, Any]]  # the stack's, then its nested stacks'


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    outdir = tmp_path_factory.mktemp("fleet")
    app = build_fleet_app(JOBS, outdir=str(outdir))
    app.synth()  # cdk-nag fails the synthesis on any unacknowledged finding
    stack = next(c for c in app.node.children if isinstance(c, FleetStack))
    paths = sorted(outdir.glob("*.template.json"), key=lambda p: (".nested." in p.name, p.name))
    yield Fleet(outdir, stack, [json.loads(p.read_text()) for p in paths])


def test_a_hundred_jobs_fit_cloudformation_in_one_stack_name(fleet: Fleet) -> None:
    root, *nested = fleet.templates
    assert len(nested) == 4  # 25 jobs each
    for template in fleet.templates:
        assert len(template["Resources"]) <= CFN_RESOURCES
        assert len(template.get("Outputs", {})) <= CFN_OUTPUTS
        assert len(template.get("Parameters", {})) <= CFN_PARAMETERS
        assert len(json.dumps(template)) <= CFN_TEMPLATE_BYTES
    functions = [r for t in nested for r in t["Resources"].values()
                 if r["Type"] == "AWS::Lambda::Function"]
    assert len(functions) == JOBS
    stacks = [r for r in root["Resources"].values() if r["Type"] == "AWS::CloudFormation::Stack"]
    assert len(stacks) == 4
    # the figures docs/deploying.md and the README give for the example fleet
    assert max(len(t["Resources"]) for t in nested) == 261
    assert len(root["Outputs"]) == 105


def test_cdk_nag_found_nothing_unacknowledged_in_the_fleet(fleet: Fleet) -> None:
    violations = _violations(fleet.outdir)
    assert not violations, "\n".join(violations)


def _resolve(value: Any) -> Any:
    """A template value as the deployed stack would give it: each reference becomes a
    stand-in naming what it references."""
    if isinstance(value, dict) and len(value) == 1:
        (key, arg), = value.items()
        if key == "Fn::Join":
            return arg[0].join(str(_resolve(part)) for part in arg[1])
        if key == "Fn::GetAtt":
            return "-".join(arg if isinstance(arg, list) else [arg])
        if key == "Ref":
            return f"ref-{arg}"
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    return value


def test_every_job_is_reachable_by_its_stack_output(fleet: Fleet) -> None:
    root = fleet.templates[0]
    outputs = {key: _resolve(output["Value"]) for key, output in root["Outputs"].items()}
    deployment = Deployment.from_outputs(FLEET_STACK, outputs)
    expected = {job.name: job for job in fleet_jobs(JOBS)}
    assert set(deployment.jobs) == set(expected)
    for name, deployed in deployment.jobs.items():
        assert deployed.definition == expected[name]
        assert deployed.function  # a nested stack's output, reached through the parent
        assert deployed.fleet == fleet.stack.fleet.name  # `jobguard runbook` lists its alarms
        assert (deployed.queue_url is not None) == expected[name].config().needs_queue
    assert deployment.recovery_function and deployment.alarm_topic


def test_every_alarm_notifies_and_says_what_to_decide(fleet: Fleet) -> None:
    alarms = [r["Properties"] for t in fleet.templates for r in t["Resources"].values()
              if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert len(alarms) > JOBS
    for alarm in alarms:
        assert alarm.get("AlarmActions") and alarm.get("OKActions"), alarm["AlarmDescription"]
        assert "Decide:" in alarm["AlarmDescription"]
    fleet_wide = fleet.stack.fleet.alarms
    texts = fleet_alarms(fleet.stack.fleet.name, queues=True,
                         paused=paused_windows(fleet_jobs(JOBS)))
    assert set(fleet_wide) == set(texts)
    # each says how to find the job: the Logs Insights query, or the message's `job`
    for key, alarm in texts.items():
        if key != "throttles":  # the account's, not a job's
            assert "Which job:" in alarm.text.decide or "`job`" in alarm.text.decide, key


def test_a_fleet_job_emits_fleet_metrics_and_watches_its_own_liveness(fleet: Fleet) -> None:
    functions = [r["Properties"] for t in fleet.templates[1:] for r in t["Resources"].values()
                 if r["Type"] == "AWS::Lambda::Function"]
    assert {f["Environment"]["Variables"][environment.FLEET] for f in functions} == {FLEET_STACK}
    for name, job in fleet.stack.fleet.jobs.items():
        # its own alarms: the dead-man (free AWS/Lambda metric) and its queue's age
        expected = {"liveness"} | ({"trigger_queue_age"} if job.trigger_queue else set())
        assert set(job.alarms) == expected, name
        # every undelivered or failed tick goes to the fleet's queues, watched once
        assert job.schedule_dlq is fleet.stack.fleet.schedule_dlq
        assert job.failed_ticks is fleet.stack.fleet.failed_ticks
    metric = fleet.stack.fleet.metric("LeaseLost")
    assert metric.dimensions == {FLEET_DIMENSION: FLEET_STACK, "service": "jobguard"}


def test_the_fleet_costs_at_most_thirty_cents_a_job(fleet: Fleet) -> None:
    counts = inventory(fleet.templates)
    assert counts["jobs"] == JOBS
    assert counts["custom_metrics"] == len(AT_REST_METRICS)  # one set for the whole fleet
    assert counts["dashboards"] == 1
    assert fixed_monthly(counts)["per_job"] <= 0.30


def test_the_readme_cost_table_is_what_the_templates_cost() -> None:
    from bench.fleet import measure

    _, table = measure()
    readme = (ROOT / "docs" / "how-to" / "deploy.md").read_text()
    shown = re.search(r"<!-- fleet costs: begin -->\n(.*?)\n<!-- fleet costs: end -->",
                      readme, re.S)
    assert shown is not None and shown.group(1) == table


def test_a_fleet_is_refused_without_jobs_or_with_too_many_a_stack() -> None:
    stack = Stack()
    alarms = alarms_off(reason="a test stack, never deployed")
    table = JobTable(stack, "Table", alarms=alarms)
    bundle = LambdaBundle(stack, "Bundle", packages=[ROOT / "handlers"])
    with pytest.raises(ConfigError, match="jobs_per_stack"):
        JobFleet(stack, "Big", jobs=fleet_jobs(2), table=table, bundle=bundle, alarms=alarms,
                 jobs_per_stack=60)
    with pytest.raises(ConfigError, match="jobs"):
        JobFleet(stack, "Empty", jobs=[], table=table, bundle=bundle, alarms=alarms)
    with pytest.raises(ConfigError, match="alarms"):
        JobFleet(stack, "Silent", jobs=fleet_jobs(1), table=table, bundle=bundle)
