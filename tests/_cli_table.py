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
