"""The outputs contract between jobguard's constructs and the operator's tools
(:mod:`jobguard.deployment`): a job's output round-trips its deployed definition, and a
stack that is not jobguard's, or a job output that lies about its job, is named."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from handlers.jobs import JOBS
from jobguard.deployment import (
    Deployment,
    DeploymentError,
    definition_fields,
    definition_from_fields,
    job_output,
    job_output_key,
)


@pytest.mark.parametrize("job", JOBS, ids=lambda j: j.name)
@pytest.mark.parametrize("drills", [False, True])
def test_a_job_output_round_trips_its_deployed_definition(job, drills):
    deployed = job.for_drills() if drills else job
    text = json.dumps(job_output(job=deployed, function="fn-1", queue_url="https://q/1",
                                 drills=drills, runbook="https://wiki.example/jobs"))
    found = Deployment.from_outputs("S", {"TableName": "t", job_output_key(job.name): text,
                                          "AlarmTopicArn": "arn:aws:sns:us-east-1:1:a"})
    got = found.jobs[job.name]
    assert got.definition == definition_from_fields(definition_fields(deployed))
    assert got.definition.lease == deployed.lease and got.definition.timeout == deployed.timeout
    assert (got.function, got.queue_url, got.drills, got.runbook) == (
        "fn-1", "https://q/1", drills, "https://wiki.example/jobs")
    assert got.definition.environment == {}  # values the tools do not need stay out
    assert found.alarm_topic == "arn:aws:sns:us-east-1:1:a" and found.alarms_off_reason is None


def test_alarms_off_is_read_with_its_reason():
    found = Deployment.from_outputs("S", {"TableName": "t", "AlarmTopicArn": "off: dev sandbox"})
    assert found.alarm_topic is None and found.alarms_off_reason == "dev sandbox"


def test_a_stack_without_a_table_output_is_not_jobguards():
    with pytest.raises(DeploymentError, match=r"^TableName: stack 'Other' has no TableName"):
        Deployment.from_outputs("Other", {"BucketName": "b"})


def test_a_job_output_under_another_jobs_key_is_refused():
    job = JOBS[0]
    text = json.dumps(job_output(job=job, function="f", queue_url=None, drills=False,
                                 runbook=None))
    with pytest.raises(DeploymentError, match="^OtherJob: describes job"):
        Deployment.from_outputs("S", {"TableName": "t", "OtherJob": text})


def test_a_damaged_definition_names_its_output():
    job = JOBS[0]
    value = job_output(job=job, function="f", queue_url=None, drills=False, runbook=None)
    value["definition"]["timeout"] = -5
    with pytest.raises(DeploymentError, match=f"^{job_output_key(job.name)}: not a job"):
        Deployment.from_outputs("S", {"TableName": "t",
                                      job_output_key(job.name): json.dumps(value)})


def test_an_unrelated_output_ending_in_job_is_ignored():
    found = Deployment.from_outputs("S", {"TableName": "t", "NightlyJob": "arn:x",
                                          "BatchJob": json.dumps({"a": 1})})
    assert found.jobs == {}


def test_durations_are_seconds():
    fields = definition_fields(JOBS[0])
    assert fields["lease"] == JOBS[0].lease / timedelta(seconds=1)


@pytest.mark.parametrize("definition", ["x", [1], None, 5], ids=["text", "list", "null", "number"])
def test_a_job_output_whose_definition_is_no_object_is_named_not_a_crash(definition):
    """A stack's outputs are data anyone with deploy rights writes: the CLI says which
    output is wrong, in one line, instead of a traceback (AttributeError before)."""
    value = job_output(job=JOBS[0], function="f", queue_url=None, drills=False, runbook=None)
    value["definition"] = definition
    key = job_output_key(JOBS[0].name)
    with pytest.raises(DeploymentError, match=f"^{key}: not a job definition"):
        Deployment.from_outputs("S", {"TableName": "t", key: json.dumps(value)})


def test_a_duration_no_clock_can_hold_is_named_not_a_crash():
    value = job_output(job=JOBS[0], function="f", queue_url=None, drills=False, runbook=None)
    value["definition"]["timeout"] = 1e300  # OverflowError before
    key = job_output_key(JOBS[0].name)
    with pytest.raises(DeploymentError, match=f"^{key}: not a job definition"):
        Deployment.from_outputs("S", {"TableName": "t", key: json.dumps(value)})


def test_a_deeply_nested_output_ending_in_job_is_someone_elses_not_a_crash():
    deep = "[" * 5000 + "]" * 5000  # RecursionError before
    found = Deployment.from_outputs("S", {"TableName": "t", "NestedJob": deep})
    assert found.jobs == {}


@pytest.mark.parametrize("version", [2, None, "1"])
def test_a_job_output_in_a_format_this_jobguard_does_not_read_is_refused(version):
    """A newer jobguard's output (its "v") may give a field another meaning: refused in
    one line, never read as if it were this version's (it was not checked before)."""
    value = job_output(job=JOBS[0], function="f", queue_url=None, drills=False, runbook=None)
    value["v"] = version
    key = job_output_key(JOBS[0].name)
    with pytest.raises(DeploymentError, match=f"^{key}: is format .*this jobguard reads format 1"):
        Deployment.from_outputs("S", {"TableName": "t", key: json.dumps(value)})


def test_a_fleet_jobs_output_names_its_fleet_and_an_older_output_reads_as_a_job_alone():
    job = JOBS[0]
    key = job_output_key(job.name)

    def read(output: dict) -> object:
        return Deployment.from_outputs("S", {"TableName": "t", key: json.dumps(output)})

    alone = job_output(job=job, function="fn", queue_url=None, drills=False, runbook=None)
    assert "fleet" not in alone  # the outputs of jobs alone are as before
    assert read(alone).jobs[job.name].fleet is None  # type: ignore[attr-defined]
    fleet = job_output(job=job, function="fn", queue_url=None, drills=False, runbook=None,
                       fleet="ops")
    assert read(fleet).jobs[job.name].fleet == "ops"  # type: ignore[attr-defined]
    with pytest.raises(DeploymentError, match=rf"^{key}: fleet: not a fleet's name"):
        read({**fleet, "fleet": 7})
