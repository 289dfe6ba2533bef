"""The timeline tests' table on the in-process emulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jobguard.dynamodb import DynamoJobStore
from tests._cli_table import cli_table


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, DynamoJobStore]]:
    """A fresh table the CLI finds through JOBGUARD_TABLE: its client and its store."""
    # the example jobs (crm-sync, report-export) are defined: named, as `make demo`'s
    # export line names them (nothing is imported from the folder unless named)
    with cli_table(monkeypatch, jobs_module="handlers.jobs") as (ddb, name):
        yield ddb, DynamoJobStore(name, client=ddb)
