"""A fresh jobguard table on the in-process emulator that the CLI finds through
``JOBGUARD_TABLE`` (the tests that drive ``jobguard.cli.main`` share this one setup)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from jobguard.dynamodb import create_table
from jobguard.local.emulator import in_process


@contextlib.contextmanager
def cli_table(monkeypatch: pytest.MonkeyPatch, *,
              jobs_module: str | None = None) -> Iterator[tuple[Any, str]]:
    """The emulator's DynamoDB client and the new table's name, set as
    ``JOBGUARD_TABLE`` (no endpoint: the emulator answers in process);
    ``JOBGUARD_JOBS_MODULE`` set to ``jobs_module``, or unset when None."""
    with in_process() as emu:
        ddb = emu.client("dynamodb")
        name = f"jobguard-{uuid.uuid4().hex[:8]}"
        create_table(ddb, name)
        monkeypatch.setenv("JOBGUARD_TABLE", name)
        monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
        if jobs_module is None:
            monkeypatch.delenv("JOBGUARD_JOBS_MODULE", raising=False)
        else:
            monkeypatch.setenv("JOBGUARD_JOBS_MODULE", jobs_module)
        yield ddb, name


def create_jobguard_stack(cfn: Any, name: str, *, table: str, jobs: Any = (),
                          drills: bool = True, runbook: str | None = None,
                          recovery: str | None = "inv-recovery",
                          extra: dict[str, str] | None = None) -> dict[str, str]:
    """A CloudFormation stack (through the emulator's CloudFormation API) whose outputs
    follow the contract of :mod:`jobguard.deployment`, as a stack built with jobguard.cdk
    has them: its table, ``jobs`` (definitions, as deployed) with their functions and
    queues, the recovery function and its execute alias; ``extra`` outputs beside them
    (or over them). Its one resource is an SNS topic (a stack needs one). The outputs."""
    import json

    from jobguard.deployment import job_output, job_output_key, pascal

    outputs: dict[str, str] = {"TableName": table,
                               "AlarmTopicArn": "off: a test stack pages nobody"}
    if recovery is not None:
        outputs["RecoveryFunctionName"] = recovery
        outputs["RecoveryExecuteArn"] = (f"arn:aws:lambda:us-east-1:123456789012:function:"
                                         f"{recovery}:execute")
    for job in jobs:
        outputs[job_output_key(job.name)] = json.dumps(job_output(
            job=job, function=f"{pascal(job.name)}Function",
            queue_url=None, drills=drills, runbook=runbook))
    outputs.update(extra or {})
    cfn.create_stack(StackName=name, TemplateBody=json.dumps({
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()}}))
    return outputs
