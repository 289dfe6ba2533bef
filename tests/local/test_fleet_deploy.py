"""A fleet of 100 jobs deploys into the local AWS as one stack with four nested stacks
(``infra.fleet``, :class:`jobguard.cdk.JobFleet`), every job reachable by the stack's
outputs, and a few of its jobs, in the first and the last nested stack, run from ticks:
each leaves a succeeded run record in the shared table.

Slow (it deploys about 1,100 resources): run it alone,
``python -m pytest -p no:cacheprovider tests/local/test_fleet_deploy.py``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jobguard.deployment import Deployment
from jobguard.local.ministack import REGION, LocalStack

pytestmark = [pytest.mark.local_aws, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
STACK = "JobGuardFleet-local"
JOBS = 100
TICKED = ("fleet-job-001", "fleet-job-003", "fleet-job-004", "fleet-job-100")
"""A COALESCE, a QUEUE, a SKIP job (first nested stack) and the last (the fourth)."""


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[LocalStack, Deployment]]:
    from jobguard.local.deploy import deploy

    logs = tmp_path_factory.mktemp("fleet-logs")
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), str(ROOT)])}
    with LocalStack.start(log_path=logs / "ministack.log") as aws:
        outputs = deploy(aws.endpoint, stack=STACK, app=f"{sys.executable} -m infra.fleet",
                         cwd=ROOT, env=env, log=logs / "deploy.log",
                         context=["-c", f"jobguard:stackName={STACK}",
                                  "-c", f"jobguard:fleetJobs={JOBS}"],
                         say=lambda _: None)
        yield aws, Deployment.from_outputs(STACK, outputs)


def _client(aws: LocalStack, service: str) -> Any:
    import boto3

    return boto3.client(service, endpoint_url=aws.endpoint, region_name=REGION,
                        aws_access_key_id="test", aws_secret_access_key="test")


def test_every_job_of_the_fleet_is_deployed_and_reachable(deployed: Any) -> None:
    aws, found = deployed
    assert len(found.jobs) == JOBS
    assert found.jobs["fleet-job-003"].queue_url  # a QUEUE job's trigger queue
    lambdas = _client(aws, "lambda")
    for job in found.jobs.values():
        lambdas.get_function(FunctionName=job.function)  # exists, by its output's name
    nested = [s for s in _client(aws, "cloudformation").list_stacks()["StackSummaries"]
              if s["StackName"].startswith(f"{STACK}-")]
    assert len(nested) == 4


def test_ticked_jobs_run_and_leave_their_records(deployed: Any) -> None:
    aws, found = deployed
    lambdas, ddb = _client(aws, "lambda"), _client(aws, "dynamodb")
    at = datetime.now(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    for name in TICKED:
        answer = lambdas.invoke(FunctionName=found.jobs[name].function,
                                Payload=json.dumps({"job": name, "scheduled_at": at}))
        body = answer["Payload"].read()
        assert "FunctionError" not in answer, body
    from jobguard.dynamodb import DynamoJobStore

    store = DynamoJobStore(found.table, client=ddb)
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    for name in TICKED:
        log = store.runs_between(name, from_ms=now_ms - 600_000, to_ms=now_ms + 60_000)
        statuses = [record.status.value for record in log.records]
        assert statuses == ["succeeded"], (name, statuses)
