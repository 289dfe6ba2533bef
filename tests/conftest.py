"""Shared fixtures: the serialized in-process emulator, a table, queues, a clock.

Built on the testing kit users get (:mod:`jobguard.testing`, whose pytest plugin also
gives these suites ``jobguard_sandbox``, ``manual_clock`` and ``lambda_context``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from jobguard.dynamodb import DynamoJobStore
from jobguard.records import RunRecord
from jobguard.testing import ManualClock, Sandbox


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


@pytest.fixture
def aws() -> Iterator[Env]:
    with Sandbox.start(set_table_env=False) as sandbox:
        ddb = sandbox.client("dynamodb")
        yield Env(ddb=ddb, sqs=sandbox.client("sqs"), table=sandbox.table,
                  store=DynamoJobStore(sandbox.table, client=ddb), sandbox=sandbox)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


LEASE = timedelta(seconds=60)


def pytest_configure(config: pytest.Config) -> None:
    """``JOBGUARD_TEST_MUTANT=name``: run the suite against one known-bug switch
    (``jobguard._mutants``), to see which tests kill it."""
    import os

    name = os.environ.get("JOBGUARD_TEST_MUTANT")
    if name:
        from jobguard import _mutants

        assert name in _mutants.KNOWN, f"unknown mutant {name!r}: {sorted(_mutants.KNOWN)}"
        _mutants.ACTIVE.add(name)
