"""Break-cost review of issue 12: write units per item at batch 100 with work ids and
destination ids as long as the library allows (the bench measures 25-byte work ids and
32-character destination ids).

Issue 12's goal: at batch 100, at most 2.0 write units per item (Powertools' figure,
which does not depend on the work id's length: its key is a fixed-size hash).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from bench.write_units import WriteUnitMeter
from jobguard import BatchJob, ItemRecord, JobConfig, Page, WorkId
from jobguard.dynamodb import DynamoJobStore
from jobguard.testing import ManualClock, Sandbox

JOB = "j" * 64  # the longest job name
N = 200


@pytest.fixture
def metered() -> Iterator[tuple[WriteUnitMeter, Sandbox]]:
    meter = WriteUnitMeter()
    meter.install()
    try:
        with Sandbox.start(set_table_env=False) as sandbox:
            yield meter, sandbox
    finally:
        meter.uninstall()


class LongIds(BatchJob[int]):
    def select(self, cursor: str | None, limit: int) -> Page[int]:
        start = int(cursor or 0)
        rows = list(range(start, min(N, start + limit)))
        return Page(rows, str(start + len(rows)))

    def work_id(self, record: int) -> WorkId:
        return WorkId(f"{record:08d}" + "s" * 248, "create-note")  # 256-byte source id

    def process(self, record: int, item: Any) -> str:
        return f"arn:aws:s3:::exports-bucket/{record:08d}/" + "k" * 72  # 120 bytes

    def reconcile(self, record: int | None, item: ItemRecord) -> str | None:
        return None


def test_long_work_ids_stay_within_the_goal_of_2_write_units_per_item(metered):
    """GIVEN a BatchJob at batch 100 whose work ids are the longest a WorkId allows (256
    bytes of source id), a 64-character job name, 120-byte destination ids (an S3 ARN
    with a version) and the default payload hash
    WHEN it runs 200 items, metered by the bench's own meter
    THEN it stays within issue 12's goal of 2.0 write units per item.

    Holds (measured 1.50): each fact is still under 1 KB (1 unit), and the job row with
    a 100-item claim of these ids is ~29 KB (29 units per page write, 0.29 per item, the
    rest of the margin). A destination id near its 1,024-byte bound makes each fact 2
    units, and the figure ~2.4."""
    meter, sandbox = metered
    ddb = sandbox.client("dynamodb")
    clock = ManualClock()
    config = JobConfig(name=JOB, table_name=sandbox.table, batch_size=100,
                       lease=timedelta(minutes=10))
    handler = LongIds(config, store=DynamoJobStore(sandbox.table, client=ddb),
                      clock=clock).handler()
    with meter.metering(sandbox):
        report = handler({"job": JOB, "manual": True, "trigger_id": "t"}, None)
    assert report["completed"] == N
    ops = meter.operations()
    per_item = meter.total() / N
    print(f"{per_item:.2f} units per item", ops)
    assert per_item <= 2.0, (round(per_item, 2), ops)
