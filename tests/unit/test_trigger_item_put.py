"""A trigger item with nothing live in it is written whole, under its condition.

GIVEN a guarded job on the in-process emulator and a trigger whose item is absent, or
left past its TTL by an earlier trigger of the same id (DynamoDB deletes expired items
up to days late), WHEN the trigger runs or is decided, THEN its item holds exactly what
this trigger wrote: nothing of the earlier trigger (its follow-up, gate, requester,
delivery, who ended it, an attribute jobguard never wrote) survives into it. And a live
item that appears between the guard's read and its write refuses the write: the guard
decides again from the item the refusal returns, and the handler never runs twice.

The write is one conditional ``Put`` (no update expression), which is also what takes
the acquisition's trigger write off the emulator's slow path (``cold_start_ratio`` in
``make bench``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jobguard import GuardedJob, JobConfig, OverlapPolicy, current_run, hooks
from jobguard.clock import to_ms
from jobguard.lease import Acquired
from jobguard.records import Decision
from jobguard.requests import Take
from jobguard.schema import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, job_pk, trigger_sk
from jobguard.triggers import Trigger, TriggerKind, format_instant

JOB = "put-job"
LEASE_MS = 60_000

# what an earlier trigger of the same id left on its item, and what must not survive
LEFTOVERS = {"into": {"S": f"{JOB}@follow-up:old"}, "gate_fence": {"N": "7"},
             "ended_by": {"S": "operator"}, "requested_by": {"S": "alice"},
             "delivery_id": {"S": "delivery-old"}, "note": {"S": "not jobguard's"}}


def job_of(aws: Any, clock: Any, policy: OverlapPolicy, handler: Any) -> GuardedJob:
    config = JobConfig(name=JOB, policy=policy, lease=timedelta(milliseconds=LEASE_MS),
                       table_name=aws.table)
    return GuardedJob(config, handler, store=aws.store, clock=clock, owner="test-worker")


def tick(clock: Any) -> tuple[dict[str, Any], str]:
    """A scheduled event for the clock's current second, and its trigger id."""
    at = datetime.fromtimestamp(int(clock.now().timestamp()), tz=UTC)
    return {"job": JOB, "scheduled_at": format_instant(at)}, f"{JOB}@{format_instant(at)}"


def key(trigger_id: str) -> dict[str, Any]:
    return {PARTITION_KEY: {"S": job_pk(JOB)}, SORT_KEY: {"S": trigger_sk(trigger_id)}}


def raw_item(aws: Any, trigger_id: str) -> dict[str, Any]:
    return aws.ddb.get_item(TableName=aws.table, Key=key(trigger_id),
                            ConsistentRead=True).get("Item") or {}


def plant(aws: Any, trigger_id: str, *, state: str, ttl_epoch_s: int,
          extra: dict[str, Any] | None = None) -> dict[str, Any]:
    item = {**key(trigger_id), "state": {"S": state}, "route": {"S": "direct"},
            "run_id": {"S": "R-OLD"}, "at_ms": {"N": "1"}, "job": {"S": JOB},
            "kind": {"S": "tick"}, "policy": {"S": "COALESCE"}, "fence": {"N": "3"},
            TTL_ATTRIBUTE: {"N": str(ttl_epoch_s)}, **(extra or {})}
    aws.ddb.put_item(TableName=aws.table, Item=item)
    return item


def records(aws: Any) -> list[Any]:
    return aws.store.list_runs(JOB)


def test_a_tick_over_an_item_past_its_ttl_runs_with_only_its_own_attributes(aws, clock):
    """GIVEN the tick's trigger item is left ``coalesced`` past its TTL by an earlier
    trigger of the same id, with a follow-up, a gate, a requester, a delivery id, who
    ended it and an attribute jobguard never wrote
    WHEN the tick is delivered THEN it runs once, and while it runs its item holds
    exactly the run's attributes (running, this run, this fence, the tick's kind,
    policy and scheduled time); after the release only ``ended_by = release`` joins
    them."""
    event, trigger_id = tick(clock)
    plant(aws, trigger_id, state="coalesced",
          ttl_epoch_s=to_ms(clock.now()) // 1000 - 60, extra=LEFTOVERS)
    seen: list[dict[str, Any]] = []

    def handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        assert run.trigger.trigger_id == trigger_id
        seen.append({"run_id": run.run_id, "fence": run.fence,
                     "item": raw_item(aws, trigger_id)})
        return {"ok": True}

    out = job_of(aws, clock, OverlapPolicy.SKIP, handler)(event, None)
    assert out == {"ok": True} and len(seen) == 1
    during = seen[0]["item"]
    assert set(during) == {PARTITION_KEY, SORT_KEY, "state", "route", "run_id", "at_ms",
                           TTL_ATTRIBUTE, "job", "fence", "kind", "policy", "scheduled_at"}
    assert during["state"] == {"S": "running"}
    assert during["run_id"] == {"S": seen[0]["run_id"]}
    assert during["fence"] == {"N": str(seen[0]["fence"])}
    assert during["kind"] == {"S": "tick"} and during["policy"] == {"S": "SKIP"}
    assert during["scheduled_at"] == {"S": event["scheduled_at"]}
    assert int(during[TTL_ATTRIBUTE]["N"]) > to_ms(clock.now()) // 1000
    after = raw_item(aws, trigger_id)
    assert set(after) == set(during) | {"ended_by"}
    assert after["state"] == {"S": "done"} and after["ended_by"] == {"S": "release"}
    ran = [r for r in records(aws) if r.trigger_id == trigger_id]
    assert [(r.decision, r.run_id) for r in ran] == [(Decision.RAN, seen[0]["run_id"])]


def test_a_skip_over_an_item_past_its_ttl_keeps_nothing_of_the_earlier_trigger(aws, clock):
    """GIVEN a worker holds the lease, and the tick's item is left past its TTL by an
    earlier trigger of the same id (requester, delivery, follow-up, gate...)
    WHEN the tick is delivered THEN it is skipped without running, and its item holds
    the skip alone: state ``skipped``, the skip's run id, route, kind, job, time and
    TTL; none of the leftovers. The skip's record is the only record of the trigger."""
    now_ms = to_ms(clock.now())
    held = aws.store.take(Take(Trigger(JOB, f"{JOB}@manual:W", TriggerKind.MANUAL),
                               run_id="W", owner="worker-W", now_ms=now_ms,
                               lease_ms=LEASE_MS, skew_ms=5_000))
    assert isinstance(held, Acquired)
    event, trigger_id = tick(clock)
    plant(aws, trigger_id, state="done", ttl_epoch_s=now_ms // 1000 - 1, extra=LEFTOVERS)
    calls: list[Any] = []
    out = job_of(aws, clock, OverlapPolicy.SKIP, lambda e, c: calls.append(e))(event, None)
    assert calls == [] and out["decision"] == "skipped"
    item = raw_item(aws, trigger_id)
    assert set(item) == {PARTITION_KEY, SORT_KEY, "state", "route", "run_id", "at_ms",
                         TTL_ATTRIBUTE, "job", "kind"}
    assert item["state"] == {"S": "skipped"} and item["run_id"] == {"S": out["run_id"]}
    assert item["kind"] == {"S": "tick"} and item["route"] == {"S": "direct"}
    mine = [r for r in records(aws) if r.trigger_id == trigger_id]
    assert [(r.decision, r.run_id) for r in mine] == [(Decision.SKIPPED, out["run_id"])]


def test_an_item_made_live_after_the_read_refuses_the_write_and_the_guard_decides_again(
        aws, clock):
    """GIVEN a tick whose item is absent when the guard reads the lease
    WHEN, before the guard writes, another delivery's run leaves the item ``done``
    (staged at the ``after_lease_read`` hook point) THEN the guard's write is refused,
    it decides again from the item the refusal returned: a duplicate, recorded; the
    handler never runs; the item is exactly the other run's, unchanged; the lease is
    free and its fence did not move."""
    event, trigger_id = tick(clock)
    now_s = to_ms(clock.now()) // 1000
    planted: list[dict[str, Any]] = []

    def meanwhile(**ctx: Any) -> None:
        if ctx.get("trigger_id") == trigger_id and not planted:
            planted.append(plant(aws, trigger_id, state="done", ttl_epoch_s=now_s + 3600))

    calls: list[Any] = []
    fence_before = aws.store.read_lease(JOB).fence
    with hooks.on("after_lease_read", meanwhile):
        out = job_of(aws, clock, OverlapPolicy.SKIP, lambda e, c: calls.append(e))(event,
                                                                                   None)
    assert planted and calls == []
    assert out["decision"] == "duplicate"
    assert raw_item(aws, trigger_id) == planted[0]
    lease = aws.store.read_lease(JOB)
    assert lease.run_id is None and lease.fence == fence_before
    mine = [r for r in records(aws) if r.trigger_id == trigger_id]
    assert [r.decision for r in mine] == [Decision.DUPLICATE]
