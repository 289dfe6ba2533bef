"""Transactions on a throttled partition: each one waits as for a throttle, a bounded time.

GIVEN a guarded job in the testing kit's sandbox whose partitions take 12 write units a
second (the in-process emulator's budget, DynamoDB's refusals: a transaction on a spent
partition is cancelled with a ``ThrottlingError`` reason), on a budget clock that only
jobguard's backoff moves:

- WHEN the release of a run is cancelled for the throttle THEN it waits as for a throttle
  (tenths of a second and more, not a conflict's milliseconds) and lands: the run ends
  ``succeeded``, its record written, the lease free;
- WHEN the partition stays spent THEN the release gives up after eight tries whose seven
  waits fit in the batch's ``time_margin``, no wait after the last, naming the throttle;
  the lease stays the run's, and the next trigger takes it over once it expires;
- WHEN a recovery's acquisition (``run_exclusive``) is cancelled for the throttle for
  good THEN it gives up after eight tries in a row once its wait is over, naming the
  throttle (it used to try forever); while its wait lasts, it goes on trying;
- WHEN a run's hand-off to its next link meets a partition that stays spent THEN it
  gives up the same way, its error naming the run and its fence;
- WHEN a page's commit that carries failed items (a transaction on the job row's
  partition) is cancelled for the throttle THEN it waits as for a throttle and lands;
- WHEN an operator's force release is cancelled for the throttle THEN it says so and
  that nothing was written, not that the lease changed hands; cancelled because the
  holder's renewal landed meanwhile, it reads the row again and releases;
- WHEN a transaction is cancelled for a ``TransactionConflict`` (another worker's
  transaction) THEN it keeps the conflict's short backoff, and a throttle gets the long
  one, on the same path.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from jobguard import JobConfig, guarded
from jobguard import lease as lease_module
from jobguard.errors import StoreError
from jobguard.lease import THROTTLE_SPAN_S
from jobguard.local.throughput import PartitionBudget, PartitionThroughput
from jobguard.testing import Sandbox

JOB = "capacity-demo"


class BudgetClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class World:
    """The sandbox, its budget and the waits jobguard's backoff asked for."""

    def __init__(self, sandbox: Any, budget: PartitionBudget, clock: BudgetClock) -> None:
        self.sandbox, self.budget, self.clock = sandbox, budget, clock
        self.waits: list[float] = []
        self.refill = True

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.refill:
            self.clock.now += seconds

    def spend(self, units: float = 100) -> None:
        """Other deliveries spend the job's partition (it goes ``units`` into debt)."""
        self.budget.charge({(self.sandbox.table, f"JOB#{JOB}"): units}, {})


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    clock = BudgetClock()
    budget = PartitionBudget(PartitionThroughput(write_units_per_s=12), clock=clock)
    with Sandbox.start(throughput=budget) as sandbox:
        w = World(sandbox, budget, clock)
        monkeypatch.setattr(lease_module, "time", SimpleNamespace(sleep=w.sleep))
        yield w


def job_spending(world: World, *, before: int = 0, units: float = 100) -> Any:
    """A job whose handler spends ``units`` of the partition while it runs (its release
    then meets a spent partition); ``before``: that many runs first that spend nothing."""
    runs = {"n": 0}

    @guarded(JobConfig(name=JOB, table_name=world.sandbox.table, lease=timedelta(minutes=5)))
    def handler(event: Any, context: Any) -> str:
        runs["n"] += 1
        if runs["n"] > before:
            world.spend(units)
        return "done"

    return world.sandbox.wire(handler)


def test_a_throttled_release_waits_as_for_a_throttle_and_lands(world):
    job = job_spending(world, units=20)  # about two seconds of refill
    assert job.tick() == "done"
    assert world.budget.throttled["TransactWriteItems"] >= 1
    assert world.waits and min(world.waits) >= 0.05, world.waits  # not 0-10 ms
    [run] = job.runs()
    assert (run.status.value, run.fence) == ("succeeded", 1)
    with world.budget.suspended():
        lease = job.lease()
        assert lease.run_id is None and lease.last_run_id == run.run_id


def test_a_release_throttled_for_good_gives_up_in_time_naming_the_throttle(world):
    job = job_spending(world)
    world.refill = False
    with pytest.raises(StoreError, match="release") as failed:
        job.tick()
    assert "throttle" in str(failed.value), failed.value
    # seven waits between eight tries, none after the last, inside the batch's margin
    assert len(world.waits) == 7, world.waits
    low, high = THROTTLE_SPAN_S
    assert low <= sum(world.waits) <= high < JobConfig(name="x").time_margin.total_seconds()
    with world.budget.suspended():
        held = job.lease()
    assert held.run_id is not None and held.fence == 1  # still the run's
    # once it expires, the next trigger takes it over and records the run abandoned
    world.refill, world.clock.now = True, world.clock.now + 100
    world.sandbox.clock.advance(timedelta(minutes=6))
    with world.budget.suspended():
        assert job.tick() == "done"
        statuses = sorted(r.status.value for r in job.runs())
    assert statuses == ["abandoned", "succeeded"], statuses


def test_a_recovery_throttled_for_good_gives_up_naming_the_throttle(world):
    from jobguard.triggers import Trigger, TriggerKind

    job = job_spending(world, before=1)
    assert job.tick() == "done"
    world.refill = False
    world.spend()
    trigger = Trigger(JOB, f"{JOB}@recovery:r1", TriggerKind.RECOVERY, requested_by="alice")
    with pytest.raises(StoreError, match="throttle"):
        job.guarded.run_exclusive(trigger, wait=0, ignore_pause=True)
    # bounded: eight refused tries, seven throttle-sized waits between them
    assert len(world.waits) == 7 and min(world.waits) >= 0.05, world.waits
    assert [r.status.value for r in job.runs()] == ["succeeded"]  # nothing ran


def test_a_commit_of_failed_items_on_a_throttled_partition_waits_and_lands(world):
    from jobguard.dynamodb_items import DynamoItemStore
    from jobguard.workitems import Commit, Fence, ItemState, JobRow, Unresolved

    sandbox = world.sandbox
    ddb = sandbox.client("dynamodb")
    with world.budget.suspended():
        ddb.put_item(TableName=sandbox.table, Item={"pk": {"S": f"JOB#{JOB}"},
                                                    "sk": {"S": "FENCE"}, "hw": {"N": "1"}})
    store = DynamoItemStore(sandbox.table, client=ddb)
    world.spend(20)  # a second and more in debt
    change = Commit(expected=JobRow(job=JOB, fence=1),
                    rows=(Unresolved("contact-1:create-note", ItemState.FAILED, error="boom"),))
    store.commit(Fence(JOB, "R1", 1), change, now_ms=1_000)
    assert world.budget.throttled["TransactWriteItems"] >= 1
    assert world.waits and min(world.waits) >= 0.05, world.waits
    with world.budget.suspended():
        item = store.get_many(JOB, ["contact-1:create-note"])["contact-1:create-note"]
    assert item.state is ItemState.FAILED


def test_a_throttled_force_release_says_so_and_writes_nothing(world):
    from jobguard.requests import ForceRelease

    job = job_spending(world, before=10)
    with job.holding():
        with world.budget.suspended():
            lease = job.lease()
        world.spend()
        with pytest.raises(StoreError, match="throttle.*nothing was written"):
            world.sandbox.store.force_release(ForceRelease(
                JOB, holder_run_id=lease.run_id, fence=lease.fence,
                now_ms=(lease.acquired_at_ms or 0) + 1000, by="alice"))
        with world.budget.suspended():
            still = job.lease()
        assert (still.run_id, still.fence, still.released_by) == (lease.run_id, lease.fence,
                                                                 lease.released_by)
        world.clock.now += 100


@pytest.mark.parametrize(("reason", "throttle"), [("TransactionConflict", False),
                                                  ("ThrottlingError", True)])
def test_a_conflict_keeps_the_short_backoff_and_a_throttle_gets_the_long_one(
        world, reason, throttle):
    """The first acquisition is answered as DynamoDB cancels one (its three actions: the
    lease row with ``reason``, the others ``None``); the second is sent."""
    @guarded(JobConfig(name=JOB, table_name=world.sandbox.table, lease=timedelta(minutes=5)))
    def handler(event: Any, context: Any) -> str:
        return "done"

    job = world.sandbox.wire(handler)
    client = job.guarded.runtime().store._client  # noqa: SLF001 - the job's own client
    send = client.transact_write_items
    answered = {"n": 0}

    def cancel_first(**request: Any) -> Any:
        answered["n"] += 1
        if answered["n"] > 1:
            return send(**request)
        raise cancellation(reason, len(request["TransactItems"]))

    client.transact_write_items = cancel_first
    try:
        assert job.tick() == "done"
    finally:
        del client.transact_write_items
    [wait] = world.waits
    if throttle:
        assert 0.05 <= wait <= 0.1, wait  # attempt 0 of the throttle schedule
    else:
        assert wait <= 0.01, wait  # attempt 0 of the conflict schedule
    assert [r.status.value for r in job.runs()] == ["succeeded"]


def cancellation(reason: str, actions: int) -> Exception:
    """What DynamoDB answers a transaction cancelled for ``reason`` on its first action."""
    from botocore.exceptions import ClientError

    reasons = [{"Code": reason, "Message": reason}] + [{"Code": "None"}] * (actions - 1)
    return ClientError({"Error": {"Code": "TransactionCanceledException",
                                  "Message": f"Transaction cancelled [{reason}, ...]"},
                        "CancellationReasons": reasons}, "TransactWriteItems")


def test_a_recovery_goes_on_trying_while_its_wait_lasts(world):
    """Twelve acquisitions in a row cancelled (more than the eight that end a recovery
    whose wait is over): with an hour to wait, the recovery goes on and runs."""
    from jobguard.triggers import Trigger, TriggerKind

    job = job_spending(world, before=10)
    client = job.guarded.runtime().store._client  # noqa: SLF001 - the job's own client
    send = client.transact_write_items
    answered = {"n": 0}

    def conflicting(**request: Any) -> Any:
        answered["n"] += 1
        if answered["n"] <= 12:
            raise cancellation("TransactionConflict", len(request["TransactItems"]))
        return send(**request)

    client.transact_write_items = conflicting
    try:
        trigger = Trigger(JOB, f"{JOB}@recovery:r2", TriggerKind.RECOVERY,
                          requested_by="alice")
        assert job.guarded.run_exclusive(trigger, wait=3600, ignore_pause=True) == "done"
    finally:
        del client.transact_write_items
    assert len(world.waits) == 12 and max(world.waits) <= 0.32, world.waits
    assert [r.status.value for r in job.runs()] == ["succeeded"]


def test_a_force_release_cancelled_by_the_holders_renewal_reads_again_and_releases(world):
    from jobguard.requests import ForceRelease

    job = job_spending(world, before=10)
    store = world.sandbox.store
    with job.holding():
        with world.budget.suspended():
            lease = job.lease()
        client = store._client  # noqa: SLF001 - the store's own client
        send = client.transact_write_items
        answered = {"n": 0}

        def renewed_meanwhile(**request: Any) -> Any:
            answered["n"] += 1
            if answered["n"] == 1:  # the holder's heartbeat lands during the transaction
                assert store.renew(JOB, run_id=lease.run_id, fence=lease.fence,
                                   now_ms=(lease.expires_at_ms or 0) - 60_000 + 1,
                                   lease_ms=10 * 60_000)
                raise cancellation("TransactionConflict", len(request["TransactItems"]))
            return send(**request)

        client.transact_write_items = renewed_meanwhile
        try:
            with world.budget.suspended():  # (no throttle here: a conflict alone)
                assert store.force_release(ForceRelease(
                    JOB, holder_run_id=lease.run_id, fence=lease.fence,
                    now_ms=(lease.acquired_at_ms or 0) + 1000, by="alice")) is True
        finally:
            del client.transact_write_items
        assert answered["n"] == 2 and world.waits == []
        with world.budget.suspended():
            assert job.lease().run_id is None and job.lease().fence == lease.fence + 1


def test_a_hand_off_throttled_for_good_gives_up_naming_its_run_and_fence(world):
    """GIVEN a run that holds the job's lease (fence 1) and has records left WHEN its
    hand-off to the next link meets a partition that stays spent THEN it gives up after
    eight tries, seven throttle-sized waits, and its error names the hand-off, the run,
    its fence and the throttle; the lease stays the run's and no link is named."""
    from jobguard.dynamodb import DynamoJobStore
    from jobguard.lease import Acquired, HandOff
    from jobguard.records import Decision, RunRecord, RunStatus
    from jobguard.requests import Take
    from jobguard.triggers import Trigger, TriggerKind

    store = DynamoJobStore(world.sandbox.table, client=world.sandbox.client("dynamodb"))
    now_ms = 1_800_000_000_000
    with world.budget.suspended():
        taken = store.take(Take(Trigger(JOB, f"{JOB}@manual:R1", TriggerKind.MANUAL),
                                run_id="R1", owner="worker-R1", now_ms=now_ms,
                                lease_ms=300_000, skew_ms=5_000))
    assert isinstance(taken, Acquired) and taken.fence == 1
    world.refill = False
    world.spend()
    record = RunRecord(job=JOB, run_id="R1", trigger_id=f"{JOB}@manual:R1",
                       trigger_kind="manual", policy="SKIP", decision=Decision.RAN,
                       status=RunStatus.SUCCEEDED, started_at_ms=now_ms,
                       ended_at_ms=now_ms + 1_000, fence=1)
    with pytest.raises(StoreError, match="hand_off") as failed:
        store.hand_off(HandOff(job=JOB, run_id="R1", fence=1,
                               trigger_id=f"{JOB}@manual:R1", record=record,
                               next_trigger_id=f"{JOB}@continue:R1:2", next_run_id="R2",
                               now_ms=now_ms + 1_000, lease_ms=300_000,
                               record_ttl_s=now_ms // 1000 + 60,
                               trigger_ttl_s=now_ms // 1000 + 60,
                               next_ttl_s=now_ms // 1000 + 60))
    assert "run R1 (fence 1)" in str(failed.value), failed.value
    assert "8 refused for the partition's throttle" in str(failed.value), failed.value
    assert len(world.waits) == 7 and min(world.waits) >= 0.05, world.waits
    with world.budget.suspended():
        lease = store.read_lease(JOB)
    assert lease.run_id == "R1" and lease.handed_from is None
