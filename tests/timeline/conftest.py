"""The timeline tests' table on the in-process emulator."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from jobguard.dynamodb import DynamoJobStore, create_table
from jobguard.local.emulator import in_process


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, DynamoJobStore]]:
    """A fresh table the CLI finds through JOBGUARD_TABLE: its client and its store."""
    with in_process() as emu:
        ddb = emu.client("dynamodb")
        name = f"jobguard-{uuid.uuid4().hex[:8]}"
        create_table(ddb, name)
        monkeypatch.setenv("JOBGUARD_TABLE", name)
        monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
        # the example jobs (crm-sync, report-export) are defined: named, as `make demo`'s
        # export line names them (nothing is imported from the folder unless named)
        monkeypatch.setenv("JOBGUARD_JOBS_MODULE", "handlers.jobs")
        yield ddb, DynamoJobStore(name, client=ddb)
