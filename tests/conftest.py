"""Shared fixtures: the serialized in-process emulator, a table, queues, a clock.

Built on the testing kit users get (:mod:`jobguard.testing`, whose pytest plugin also
gives these suites ``jobguard_sandbox``, ``manual_clock`` and ``lambda_context``)."""

from __future__ import annotations

import io
import json
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from jobguard.dynamodb import DynamoJobStore
from jobguard.local.node import pinned_node
from jobguard.records import RunRecord
from jobguard.testing import ManualClock, Sandbox

# jsii, in-process here (tests/infra, tests/ship) or in a child, runs the Node the
# repository pins (.venv/bin/node, make links it) whether pytest came from make or not.
if (_node := pinned_node()) is not None:
    os.environ.setdefault("JSII_NODE", str(_node))


@dataclass
class Env:
    """One emulator, one table, and helpers to look at what a test left behind."""

    ddb: Any
    sqs: Any
    table: str
    store: DynamoJobStore
    queues: dict[str, str] = field(default_factory=dict)

    sandbox: Sandbox | None = None

    def fifo_queue(self, job: str) -> str:
        """A new FIFO trigger queue for ``job`` (a new one per call)."""
        name = f"{job}-{uuid.uuid4().hex[:8]}-triggers.fifo"
        url: str = self.sqs.create_queue(
            QueueName=name,
            Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"},
        )["QueueUrl"]
        self.queues[job] = url
        return url

    def runs(self, job: str) -> list[RunRecord]:
        """The job's run log, oldest first."""
        return list(reversed(self.store.list_runs(job, limit=1000)))

    def statuses(self, job: str) -> list[str]:
        return [r.status.value for r in self.runs(job)]

    def lease_item(self, job: str) -> dict[str, Any] | None:
        item = self.ddb.get_item(
            TableName=self.table,
            Key={"pk": {"S": f"JOB#{job}"}, "sk": {"S": "LEASE"}},
            ConsistentRead=True,
        ).get("Item")
        return item

    def item_count(self) -> int:
        return int(self.ddb.scan(TableName=self.table, Select="COUNT")["Count"])

    def deliver(self, job: str, handler: Any) -> tuple[dict[str, Any], bool] | None:
        """Hand the next visible message of ``job``'s trigger queue to ``handler`` as
        Lambda's SQS event source does (one record; deleted unless reported failed):
        (the message, whether it was reported failed), or None when none is visible."""
        url = self.queues[job]
        messages = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1,
                                            AttributeNames=["All"]).get("Messages", [])
        if not messages:
            return None
        (message,) = messages
        arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]
        record = {"messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"],
                  "body": message["Body"], "attributes": message.get("Attributes", {}),
                  "messageAttributes": {}, "md5OfBody": message.get("MD5OfBody", ""),
                  "eventSource": "aws:sqs", "eventSourceARN": arn,
                  "awsRegion": arn.split(":")[3]}
        response = handler({"Records": [record]}, None)
        failed = bool(response["batchItemFailures"])
        if not failed:
            self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return message, failed


@pytest.fixture
def aws() -> Iterator[Env]:
    with Sandbox.start(set_table_env=False) as sandbox:
        ddb = sandbox.client("dynamodb")
        yield Env(ddb=ddb, sqs=sandbox.client("sqs"), table=sandbox.table,
                  store=DynamoJobStore(sandbox.table, client=ddb), sandbox=sandbox)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """jobguard's JSON log lines, formatted by its own formatter."""
    from jobguard.observability import _logger

    jobguard_logger = _logger()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(jobguard_logger.registered_formatter)
    std_logger = logging.getLogger(jobguard_logger.name)
    std_logger.addHandler(handler)
    yield stream
    std_logger.removeHandler(handler)


def emf_totals(out: str) -> dict[str, float]:
    """Each metric's total over the EMF blobs (CloudWatch embedded metrics) in ``out``."""
    totals: dict[str, float] = {}
    for line in out.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        blob = json.loads(line)
        for metric in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            values = blob[metric["Name"]]
            totals[metric["Name"]] = totals.get(metric["Name"], 0) + sum(
                values if isinstance(values, list) else [values])
    return totals


@pytest.fixture
def metrics(capsys: pytest.CaptureFixture[str]) -> Callable[[], dict[str, float]]:
    """The metrics jobguard emitted (EMF on stdout) since the last call, by name."""
    return lambda: emf_totals(capsys.readouterr().out)


LEASE = timedelta(seconds=60)


def pytest_configure(config: pytest.Config) -> None:
    """``JOBGUARD_TEST_MUTANT=name``: run the suite against one known bug
    (``tests/explorer/known_bugs.py``, patched in this process), to see which tests kill it."""
    import os

    from tests import _fast

    _fast.register(config)

    name = os.environ.get("JOBGUARD_TEST_MUTANT")
    if name:
        from tests.explorer import known_bugs

        known_bugs.switch_to(name)  # an unknown name or a patch that no longer fits: raises


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test ends with the environment it began with. ``jobguard.cli.main`` called in
    process sets ``JOBGUARD_TABLE``, ``AWS_ENDPOINT_URL`` and ``JOBGUARD_RECOVERY_MODULES``
    for the command it runs (a process of its own would drop them at exit); a later test in
    the same process must not inherit them (``make mutate`` runs every test in one)."""
    before = dict(os.environ)
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)
