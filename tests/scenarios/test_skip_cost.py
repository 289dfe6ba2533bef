"""Break-cost review of issue 12: what a skip decision is billed while the running
run holds an open claim on the job row.

A trigger that meets a held lease first sends the acquisition transaction against the
lease it expects (free), which carries an ``Update`` of the job row (``JOB#<job>`` /
``FENCE``: the fence mark, beside the checkpoint and the open claim). The transaction is
cancelled, and by the bench's own billing rules (``bench/write_units.py``: every action
of a cancelled transaction is charged, doubled, at the item's size before) that action
costs twice the job row's size: the size of the running run's open claim.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from bench.write_units import WriteUnitMeter
from jobguard import GuardedJob, JobConfig, OverlapPolicy
from jobguard.dynamodb import DynamoJobStore
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.lease import Acquired
from jobguard.requests import Take
from jobguard.testing import ManualClock, Sandbox
from jobguard.triggers import Trigger, TriggerKind
from jobguard.workitems import Commit, Fence

JOB = "skip-cost"


@pytest.fixture
def metered() -> Iterator[tuple[WriteUnitMeter, Sandbox]]:
    meter = WriteUnitMeter()
    meter.install()  # before the sandbox builds its clients
    try:
        with Sandbox.start(set_table_env=False) as sandbox:
            yield meter, sandbox
    finally:
        meter.uninstall()


def _skip_units(meter: WriteUnitMeter, sandbox: Sandbox, claim: dict[str, str]) -> dict:
    """Units of one SKIP decision while run R1 holds the lease and, on the job row, an
    open claim of ``claim``."""
    ddb = sandbox.client("dynamodb")
    store = DynamoJobStore(sandbox.table, client=ddb)
    items = DynamoItemStore(sandbox.table, client=ddb)
    clock = ManualClock()
    now = int(clock.now().timestamp() * 1000)
    held = store.take(Take(Trigger(JOB, f"{JOB}@manual:holder", TriggerKind.MANUAL), run_id="R1",
                           owner="worker-R1", now_ms=now, lease_ms=600_000, skew_ms=5_000))
    assert isinstance(held, Acquired)
    if claim:
        items.commit(Fence(JOB, "R1", held.fence),
                     Commit(expected=items.read_row(JOB), claim=claim,
                            claim_expires_at_ms=now + 600_000), now_ms=now)
    config = JobConfig(name=JOB, policy=OverlapPolicy.SKIP, table_name=sandbox.table,
                       lease=timedelta(minutes=10))
    skipper = GuardedJob(config, lambda e, c: "ran", store=store, clock=clock)
    with meter.metering(sandbox):
        result: Any = skipper({"job": JOB, "manual": True, "trigger_id": "second"}, None)
    assert isinstance(result, dict) and result.get("decision") == "skipped", result
    return meter.operations()


def _page(n: int, source_bytes: int) -> dict[str, str]:
    """An open claim of ``n`` work ids with ``source_bytes``-byte source ids (the longest
    a WorkId allows is 256), each with its 16-character payload hash prefix."""
    return {f"{i:06d}{'x' * (source_bytes - 6)}:create-note": "0123456789abcdef"
            for i in range(n)}


def test_a_skip_costs_the_same_whatever_the_running_runs_page(metered):
    """GIVEN run R1 holds the lease of a SKIP job and, on the job row, the open claim of
    the page it is working on: none; 100 items (batch 100, the README's 4.4 KB row); 1000
    items with 256-byte source ids (batch_size's upper bound, WorkId's longest)
    WHEN a second trigger arrives and is skipped
    THEN each skip is billed the same write units (the README's wcu_per_skip, 12,
    measured while the holder had no claim): a skip decides nothing about the page.

    Before the fix: the skip's refused acquisition is billed 2 x the job row, i.e. 2 x the
    running run's claim (12 -> 20 at batch 100, 12 -> ~670 at the 1000 x 256-byte
    bound), and so is every QUEUE / COALESCE trigger and duplicate delivery that meets a
    held lease."""
    meter, sandbox = metered
    idle = _skip_units(meter, sandbox, {})
    assert sum(idle.values()) <= 12, idle  # the README's figure holds with no claim

    global JOB
    try:
        JOB = "skip-cost-b100"
        b100 = _skip_units(meter, sandbox, _page(100, 20))
        JOB = "skip-cost-b1000"
        b1000 = _skip_units(meter, sandbox, _page(1000, 256))
    finally:
        JOB = "skip-cost"
    print("idle", idle, "\nbatch 100", b100, "\nbatch 1000 x 256 B", b1000)
    assert (sum(b100.values()), sum(b1000.values())) == (sum(idle.values()),) * 2, (
        b100, b1000)
