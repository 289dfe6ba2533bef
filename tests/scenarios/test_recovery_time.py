"""Break-cost review of issue 12: a recovery's replay and the Lambda's remaining time.

DESIGN: "A run stops taking items when the Lambda's remaining time is below a safety
margin". ``BatchJob.run`` checks ``time_margin`` before every item; the recovery's
``_execute`` (batched in the redesign, pages of ``batch_size``) replays every page of
the plan without looking at the invocation's remaining time, although ``recover`` is
given the Lambda context (it uses it only to bound the wait for the lease).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobguard import ItemState, JobConfig
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.recovery import recover
from tests.scenarios._items import CrmSync, NotesTable, contacts

JOB = "crm-sync"
N = 40


class Invocation:
    """A Lambda context whose remaining time drops by a minute per destination call."""

    def __init__(self, minutes: int) -> None:
        self.remaining_ms = minutes * 60_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms

    def spend(self, _item: Any) -> None:
        self.remaining_ms -= 60_000


class Refusing(CrmSync):
    refuse = True

    def process(self, record: dict, item: Any) -> str:
        if self.refuse:
            raise ValueError(f"CRM refused {record['id']}")
        return super().process(record, item)


def test_a_recovery_stops_replaying_when_the_invocation_runs_out_of_time(aws, clock):
    """GIVEN 40 items failed (retryable) by a run while the CRM was down
    WHEN an operator recovers them (mode failed) in an invocation with 10 minutes left,
    each destination call taking a minute, and the job's time_margin is 2 minutes
    THEN the recovery stops taking items once less than the margin is left (at most 8
    destination calls), as every run does, instead of being killed by Lambda's timeout
    mid-page (its summary lost, its page's open claim left for the next run to
    reconcile item by item).

    Before the fix: all 40 are replayed; the invocation would have been killed at the 10th."""
    notes = NotesTable.create(aws.ddb)
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=10,
                       lease=timedelta(seconds=60), time_margin=timedelta(minutes=2))
    job = Refusing(config, contacts(N), notes, store=aws.store, clock=clock)
    job.handler()({"job": JOB, "manual": True, "trigger_id": "down"}, None)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    ids = [f"{c['id']}:create-note" for c in contacts(N)]
    assert {r.state for r in items.get_many(JOB, ids).values()} == {ItemState.FAILED}

    invocation = Invocation(minutes=10)
    job.refuse = False
    job.before_call = invocation.spend
    answer = recover({"job": JOB, "cursor_from": "0", "cursor_to": str(N), "mode": "failed",
                      "dry_run": False, "requested_by": "alice"}, job=job, threshold=1000,
                     context=invocation)
    calls = len(notes.calls)
    print(answer, "destination calls", calls, "remaining ms", invocation.remaining_ms)
    assert answer["result"] == "executed"
    assert calls <= 8, f"{calls} destination calls; the invocation had time for 8"
    assert invocation.remaining_ms >= 0
    # it says what is left, and where to recover from; no claim is left open
    summary = answer["summary"]
    assert (summary["stopped"], summary["replayed"], summary["left"]) == ("time", calls,
                                                                          N - calls)
    assert summary["next_cursor"] is None  # CrmSync has no cursor_of: recover the range again
    assert items.read_row(JOB).claim is None
    states = [r.state for r in items.get_many(JOB, ids).values()]
    assert (states.count(ItemState.COMPLETED), states.count(ItemState.FAILED)) == (calls,
                                                                                   N - calls)
