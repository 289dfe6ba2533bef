"""Real processes against a local AWS server: 50 triggers at once, and SIGKILL.

Each test runs twice: against the embedded emulator (``python -m
jobguard.local.emulator``, DynamoDB serialized by a lock) and against MiniStack, the
local AWS the stack is deployed into (DynamoDB atomic per request, like AWS). Both run
in their own process, so the workers forked here share nothing with them but the HTTP
endpoint, as Lambda workers share nothing but DynamoDB.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from datetime import timedelta
from typing import Any

import pytest

from jobguard import GuardedJob, JobConfig, OverlapPolicy
from jobguard.clock import to_ms

pytestmark = pytest.mark.server

JOB = "race"


def _job(table: str, handler: Any, lease_s: float = 30) -> GuardedJob:
    return GuardedJob(
        JobConfig(name=JOB, policy=OverlapPolicy.SKIP, table_name=table,
                  lease=timedelta(seconds=lease_s),
                  heartbeat_every=timedelta(seconds=lease_s / 4),
                  skew_margin=timedelta(seconds=lease_s / 10)),
        handler,
    )


def _contender(table: str, n: int, barrier: Any, hold: Any, out: Any) -> None:
    def handler(event: Any, context: Any) -> str:
        out.put(("ran", n, None))
        hold.wait(60)
        return "ran"

    job = _job(table, handler)
    barrier.wait(60)
    result = job({"job": JOB, "manual": True, "trigger_id": f"p{n}"}, None)
    if result != "ran":
        out.put(("decided", n, result))


def test_fifty_triggers_from_separate_processes_give_exactly_one_run(any_table):
    table = any_table
    # GIVEN 50 worker processes lined up on a barrier
    ctx = mp.get_context("fork")
    barrier, hold, out = ctx.Barrier(50), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_contender, args=(table, n, barrier, hold, out))
             for n in range(50)]
    for p in procs:
        p.start()

    # WHEN they all trigger at once (the winner holds its run until the rest decided)
    messages = [out.get(timeout=60) for _ in range(50)]
    hold.set()
    for p in procs:
        p.join(60)

    # THEN exactly one ran and 49 recorded a decision naming it
    ran = [m for m in messages if m[0] == "ran"]
    decided = [m for m in messages if m[0] == "decided"]
    assert len(ran) == 1 and len(decided) == 49
    import boto3

    from jobguard.dynamodb import DynamoJobStore

    runs = DynamoJobStore(table, client=boto3.client("dynamodb")).list_runs(JOB, limit=100)
    winners = [r for r in runs if r.decision.value == "ran"]
    assert len(winners) == 1 and winners[0].status.value == "succeeded"
    skipped = [r for r in runs if r.status.value == "skipped"]
    assert len(skipped) == 49
    assert {r.holder_run_id for r in skipped} == {winners[0].run_id}
    assert all(p.exitcode == 0 for p in procs)


def _doomed(table: str, acquired: Any) -> None:
    def handler(event: Any, context: Any) -> None:
        acquired.set()
        while True:  # works until killed
            time.sleep(0.05)

    _job(table, handler, lease_s=2)({"job": JOB, "manual": True, "trigger_id": "doomed"}, None)


def test_a_sigkilled_holder_is_taken_over_after_expiry_and_recorded_as_abandoned(any_table):
    table = any_table
    import boto3

    from jobguard.dynamodb import DynamoJobStore

    store = DynamoJobStore(table, client=boto3.client("dynamodb"))
    # GIVEN a worker process holding the lease
    ctx = mp.get_context("fork")
    acquired = ctx.Event()
    worker = ctx.Process(target=_doomed, args=(table, acquired))
    worker.start()
    assert acquired.wait(30)
    held = store.read_lease(JOB)

    # WHEN it is killed with SIGKILL, and the next trigger comes once the lease has
    # expired by more than the skew margin
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(10)
    held = store.read_lease(JOB)  # the last renewal the dead worker made
    takeover_at_ms = held.expires_at_ms + 200 + 1
    time.sleep(max(0.0, (takeover_at_ms - to_ms(_now())) / 1000))  # wait for the deadline
    sends: list[str] = []
    job = _job(table, lambda event, context: "took over", lease_s=2)
    job.runtime().store.client.meta.events.register(  # count acquisition transactions
        "before-parameter-build.dynamodb.TransactWriteItems",
        lambda params, **kw: sends.append(str(len(params.get("TransactItems", [])))),
    )
    result = job({"job": JOB, "manual": True, "trigger_id": "next"}, None)

    # THEN it took over at once (its read of the lease row names the dead holder; the
    # first transaction is the takeover naming it, with the dead run's trigger and
    # record: 5 actions), with a higher fence, and the dead run is recorded as abandoned
    assert result == "took over"
    assert sends[:1] == ["5"], sends
    abandoned = store.get_run(JOB, held.run_id)
    assert abandoned is not None and abandoned.status.value == "abandoned"
    assert abandoned.fence == held.fence
    runs = [r for r in store.list_runs(JOB) if r.status.value == "succeeded"]
    assert len(runs) == 1 and runs[0].fence == held.fence + 1


def _now():
    from jobguard import SystemClock

    return SystemClock().now()
