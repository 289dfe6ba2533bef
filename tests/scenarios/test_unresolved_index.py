"""Finding uncertain items through the sparse index when many failed items are indexed
beside them (break-cost review of issue 12).

Within a shard the index sorts ``failed#...`` before ``uncertain#...``, and failed
(retryable) rows stay indexed until a recovery replays them (the checkpoint passes them),
so a long outage at scale leaves thousands: ``DynamoItemStore.unresolved`` reads the
index state by state, so a limit filled by failed rows never hides an uncertain one.
"""

from __future__ import annotations

import zlib

from jobguard import ItemState
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.lease import Acquired
from jobguard.requests import Take
from jobguard.schema import UNRESOLVED_SHARDS
from jobguard.triggers import Trigger, TriggerKind
from jobguard.workitems import Commit, Fence, Unresolved

JOB = "crm-sync"
FAILED = 1100


def _in_last_shard() -> str:
    for i in range(10_000):
        work_id = f"contact-u{i}:create-note"
        if zlib.crc32(work_id.encode()) % UNRESOLVED_SHARDS == UNRESOLVED_SHARDS - 1:
            return work_id
    raise AssertionError("no work id in the last shard")


def test_an_uncertain_item_is_found_whatever_the_number_of_failed_ones(aws, clock):
    """GIVEN 1,100 failed (retryable) items and one uncertain item, all written under
    the fence by a run, the uncertain one in the last index shard
    WHEN an operator lists the uncertain items (``jobguard items --status uncertain``:
    ``unresolved(job, states=[UNCERTAIN])``), and when a sweep reads what to reconcile
    (``unresolved(job, limit=1000)``)
    THEN the uncertain item is listed, and is among what the sweep examines.

    (Before the fix the list was empty: the states filter came after the 1,000 limit,
    filled by failed rows, and a reconciler never resolved it.)"""
    items = DynamoItemStore(aws.table, client=aws.ddb)
    held = aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:outage", TriggerKind.MANUAL),
                               run_id="R1", owner="w", now_ms=1_000, lease_ms=600_000))
    assert isinstance(held, Acquired)
    fence = Fence(JOB, "R1", held.fence)
    uncertain = _in_last_shard()
    rows = [Unresolved(f"contact-{i:05d}:create-note", ItemState.FAILED, error="CRM down",
                       retryable=True) for i in range(FAILED)]
    rows.append(Unresolved(uncertain, ItemState.UNCERTAIN, error="timeout"))
    items.commit(fence, Commit(expected=items.read_row(JOB), rows=tuple(rows)), now_ms=1_000)
    assert items.get(JOB, uncertain).state is ItemState.UNCERTAIN  # type: ignore[union-attr]

    listed = items.unresolved(JOB, states=[ItemState.UNCERTAIN])
    swept = {r.work_id for r in items.unresolved(JOB, limit=1000)}
    print(len(listed), "listed;", uncertain in swept, "in the sweep's read")
    assert [r.work_id for r in listed] == [uncertain]
    assert uncertain in swept
