"""Scenario fixtures: the emulator server in a process of its own."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def server() -> Iterator[dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobguard.local.emulator", "--port", "0"],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("JOBGUARD_EMULATOR endpoint="), line
    endpoint = line.strip().split("=", 1)[1]
    env = {
        "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
    }
    yield env
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)


@pytest.fixture(scope="session")
def ministack() -> Iterator[dict[str, str]]:
    """MiniStack, the local AWS the stack is deployed into (DynamoDB atomic per request)."""
    from jobguard.local.ministack import LocalStack

    with LocalStack.start() as aws:
        yield aws.env


def _table_on(env: dict[str, str]) -> Iterator[str]:
    import boto3

    from jobguard.dynamodb import create_table
    from jobguard.local.ministack import environment

    with environment(env):
        name = f"proc-{uuid.uuid4().hex[:8]}"
        create_table(boto3.client("dynamodb"), name)
        yield name


@pytest.fixture
def table(server: dict[str, str]) -> Iterator[str]:
    yield from _table_on(server)


@pytest.fixture(params=["emulator", pytest.param("ministack", marks=pytest.mark.local_aws)])
def any_table(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh table on the embedded emulator, then on MiniStack."""
    yield from _table_on(request.getfixturevalue(
        "server" if request.param == "emulator" else "ministack"))
