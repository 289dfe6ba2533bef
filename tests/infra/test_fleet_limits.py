"""A fleet at its edges (small fleets, fast to synthesize): a paused job pages whatever
its schedule, two fleets never share their metrics, and a fleet that would not deploy
(more outputs than CloudFormation takes) is refused at synthesis, not after the upload."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import CfnOutput, Stack
from aws_cdk.assertions import Template

from jobguard import OverlapPolicy
from jobguard.cdk import JobFleet, JobTable, LambdaBundle, alarms_to_email
from jobguard.definitions import JobDefinition
from jobguard.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _job(name: str, schedule: str, **options: object) -> JobDefinition:
    return JobDefinition(name=name, handler="handlers.fleet.job_001", schedule=schedule,
                         policy=OverlapPolicy.SKIP, timeout=timedelta(minutes=2),
                         lease=timedelta(minutes=1), **options)  # type: ignore[arg-type]


def _stack() -> tuple[cdk.App, Stack, dict[str, object]]:
    app = cdk.App()
    stack = Stack(app, "Edges")
    alarms = alarms_to_email("oncall@example.com")
    kit = {"table": JobTable(stack, "Table", alarms=alarms),
           "bundle": LambdaBundle(stack, "Bundle", packages=[ROOT / "handlers"]),
           "alarms": alarms}
    return app, stack, kit


def test_a_paused_job_pages_in_its_own_window_whatever_its_schedule() -> None:
    # one paused tick a day never fills "each of 6 hours"; a job meant to stay paused
    # three days must not page after six hours
    jobs = [_job("daily", "rate(1 day)"), _job("fast", "rate(5 minutes)"),
            _job("long-pause", "rate(5 minutes)", paused_alarm_after=timedelta(days=3))]
    _, stack, kit = _stack()
    fleet = JobFleet(stack, "Fleet", jobs=jobs, **kit)  # type: ignore[arg-type]
    template = Template.from_stack(stack).to_json()
    watched = set()
    for key, alarm in fleet.alarms.items():
        props = template["Resources"][stack.get_logical_id(
            alarm.node.default_child)]["Properties"]  # type: ignore[arg-type]
        if props.get("MetricName") == "TriggersPaused":
            assert props["Threshold"] == 1 and "Decide:" in props["AlarmDescription"], key
            watched.add((props["Period"], props["EvaluationPeriods"]))
    for job in jobs:
        window = job.paused_window()
        assert (window.period.total_seconds(), window.periods) in watched, job.name


def test_two_fleets_of_one_name_are_refused() -> None:
    _, stack, kit = _stack()
    JobFleet(stack, "Fleet", jobs=[_job("a", "rate(5 minutes)")], **kit)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="^name: .*'Edges'.*own name="):
        JobFleet(stack, "Other", jobs=[_job("b", "rate(5 minutes)")],
                 **kit)  # type: ignore[arg-type]
    JobFleet(stack, "Named", jobs=[_job("c", "rate(5 minutes)")], name="second",
             **kit)  # type: ignore[arg-type]


def test_a_fleet_with_more_jobs_than_the_stack_has_outputs_for_is_refused() -> None:
    _, stack, kit = _stack()
    taken = sum(1 for c in stack.node.find_all() if isinstance(c, CfnOutput))
    for index in range(199 - taken):  # room for one more
        CfnOutput(stack, f"Other{index}", value="x")
    with pytest.raises(ConfigError, match=r"^jobs: 2 jobs need 2 outputs .* room for 1"):
        JobFleet(stack, "Fleet", jobs=[_job("a", "rate(5 minutes)"),
                                       _job("b", "rate(5 minutes)")],
                 **kit)  # type: ignore[arg-type]


def test_outputs_added_after_the_fleet_past_the_limit_fail_the_synthesis() -> None:
    app, stack, kit = _stack()
    JobFleet(stack, "Fleet", jobs=[_job("a", "rate(5 minutes)")], **kit)  # type: ignore[arg-type]
    for index in range(200):
        CfnOutput(stack, f"Later{index}", value="x")
    with pytest.raises(Exception, match="outputs and CloudFormation takes at most 200"):
        app.synth()
