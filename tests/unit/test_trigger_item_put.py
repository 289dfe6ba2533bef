"""A trigger item with nothing live in it is written whole, under its condition.

GIVEN a guarded job on the in-process emulator and a trigger whose item is absent, or
left past its TTL by an earlier trigger of the same id (DynamoDB deletes expired items
up to days late), WHEN the trigger runs or is decided, THEN its item holds exactly what
this trigger wrote: nothing of the earlier trigger (its follow-up, gate, requester,
delivery, who ended it, an attribute jobguard never wrote) survives into it. And a live
item that appears between the guard's read and its write refuses the write: the guard
decides again from the item the refusal returns, and the handler never runs twice.

The write is one conditional ``Put`` (no update expression); a run whose acquisition
wrote its item so ends it with one too. On AWS that bills the same write units as the
update it replaces and saves no round trip; on the emulator it is cheaper (moto parses
every update expression in Python), which is what moved ``cold_start_ratio`` in
``make bench``.
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


def test_a_release_after_the_item_was_deleted_mid_run_writes_it_whole_again(aws, clock):
    """GIVEN a tick whose acquisition wrote its item whole
    WHEN the item is deleted while the run holds the job (DynamoDB's TTL deleting it;
    staged at the ``after_acquire`` hook point) THEN the release makes it again, whole:
    ``done``, ended by the release, with every attribute the acquisition wrote (the
    tick's kind, policy, scheduled time, fence, route), so a later delivery of the
    same tick is a duplicate; the run is recorded once, succeeded."""
    event, trigger_id = tick(clock)
    written: list[dict[str, Any]] = []

    def delete(**ctx: Any) -> None:
        written.append(raw_item(aws, trigger_id))
        aws.ddb.delete_item(TableName=aws.table, Key=key(trigger_id))

    calls: list[Any] = []
    guarded = job_of(aws, clock, OverlapPolicy.SKIP, lambda e, c: calls.append(e) or "ok")
    with hooks.on("after_acquire", delete):
        assert guarded(event, None) == "ok"
    after = raw_item(aws, trigger_id)
    assert set(after) == set(written[0]) | {"ended_by"}
    for name in ("kind", "policy", "scheduled_at", "fence", "route", "job", "run_id"):
        assert after[name] == written[0][name], name
    assert after["state"] == {"S": "done"} and after["ended_by"] == {"S": "release"}
    again = guarded(event, None)
    assert again["decision"] == "duplicate" and len(calls) == 1
    mine = [r for r in records(aws) if r.trigger_id == trigger_id]
    assert sorted(r.decision.value for r in mine) == ["duplicate", "ran"]


def test_a_release_never_writes_over_an_item_an_operator_moved_mid_run(aws, clock):
    """GIVEN a tick whose acquisition wrote its item whole
    WHEN an operator force-releases the run while it runs (staged at the
    ``before_release`` hook point), which ends its trigger ``released``
    THEN the run's release is refused: the item stays the operator's (``released``,
    ended by the operator), the run's one record is the operator's (who and why), and
    the lease is free."""
    from jobguard.requests import ForceRelease

    event, trigger_id = tick(clock)
    moved: list[int] = []

    def force(**ctx: Any) -> None:
        moved.append(aws.store.force_release(ForceRelease(
            JOB, holder_run_id=ctx["run_id"], fence=ctx["fence"],
            now_ms=to_ms(clock.now()), by="bob", reason="test")))

    guarded = job_of(aws, clock, OverlapPolicy.SKIP, lambda e, c: "ok")
    with hooks.on("before_release", force):
        guarded(event, None)
    assert moved
    item = raw_item(aws, trigger_id)
    assert item["state"] == {"S": "released"} and item["ended_by"] == {"S": "operator"}
    lease = aws.store.read_lease(JOB)
    assert lease.run_id is None
    ran = [r for r in records(aws) if r.trigger_id == trigger_id
           and r.decision is Decision.RAN]
    assert len(ran) == 1 and ran[0].status.value == "released_by_operator"
    assert ran[0].detail == "lease force-released by bob: test"


def test_a_release_leaves_an_item_another_delivery_decided_mid_run_alone(aws, clock):
    """GIVEN a tick whose acquisition wrote its item whole
    WHEN, while the run still holds the lease, another delivery of the same trigger
    decides over the item (it outlived its TTL: skipped under another run id; staged
    at the ``before_release`` hook point) THEN the run releases its lease without
    touching that item (its condition refuses the write and the release goes on
    without it): the item is exactly the other delivery's, the run is recorded once,
    succeeded, and the lease is free."""
    event, trigger_id = tick(clock)
    now_s = to_ms(clock.now()) // 1000
    decided: list[dict[str, Any]] = []

    def other_delivery(**ctx: Any) -> None:
        decided.append(plant(aws, trigger_id, state="skipped", ttl_epoch_s=now_s + 3600))

    guarded = job_of(aws, clock, OverlapPolicy.SKIP, lambda e, c: "ok")
    with hooks.on("before_release", other_delivery):
        assert guarded(event, None) == "ok"
    assert raw_item(aws, trigger_id) == decided[0]
    assert aws.store.read_lease(JOB).run_id is None
    ran = [r for r in records(aws) if r.trigger_id == trigger_id]
    assert [(r.decision, r.status.value) for r in ran] == [(Decision.RAN, "succeeded")]


# Every place in the library that reads or writes a trigger item, and why none of them
# changes a ``running`` item while leaving its state and run id as they were: what
# makes the release's whole-item Put exact (above). A new writer fails the test below
# until it is listed here with its reason.
TRIGGER_ITEM_SITES = {
    "_store_table.StoreTable.read_trigger": "a read",
    "_store_table.StoreTable._trigger_write": "sets state and run_id, always",
    "_store_table.StoreTable._end_trigger": "sets state (replaced, lost, released)",
    "_store_lease.LeaseRows.acquire":
        "its own trigger (_trigger_write); a displaced run's (_end_trigger); the "
        "pending follow-up's gate, conditioned on state = queued",
    "_store_operator.OperatorCommands._operator_release":
        "the stuck run's trigger (_end_trigger); the follow-up's gate, conditioned on "
        "state = queued",
    "_store_operator.OperatorCommands.repair": "sets state = released",
    "_store_release.LeaseRelease.release": "the run's own release",
    "_store_release.LeaseRelease.hand_off":
        "the link's own trigger (sets state = done); the next link's (_trigger_write)",
    "_store_triggers.TriggerItems.record_decision":
        "the decided trigger (_trigger_write); a follow-up's item, conditioned on "
        "absent or state = queued, sets state = queued",
    "_store_triggers.TriggerItems.undo_queued": "conditioned on state = queued",
}


def test_every_trigger_item_writer_is_listed_with_why_the_whole_item_release_stays_exact():
    """GIVEN the library's source WHEN every function that addresses a trigger item is
    found (a call of ``_trigger_key``, ``_trigger_write``, ``_end_trigger`` or
    ``trigger_sk``) THEN it is exactly the list above, each with its reason."""
    import ast
    from pathlib import Path

    import jobguard

    names = {"_trigger_key", "_trigger_write", "_end_trigger", "trigger_sk"}
    root = Path(jobguard.__file__).parent
    found: set[str] = set()

    def visit(node: ast.AST, module: str, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, module, [*scope, child.name])
                continue
            if isinstance(child, ast.Call):
                func = child.func
                called = func.attr if isinstance(func, ast.Attribute) else \
                    func.id if isinstance(func, ast.Name) else None
                if called in names and scope:
                    found.add(f"{module}.{'.'.join(scope)}")
            visit(child, module, scope)

    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        visit(ast.parse(path.read_text()), module, [])
    found.discard("_store_table.StoreTable._trigger_key")  # the key itself
    assert found == set(TRIGGER_ITEM_SITES)
