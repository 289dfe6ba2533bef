"""Decisions made from a read of the lease row older than a retake of the same trigger.

A delivery D of tick T0 reads the row; before it decides, another copy E of T0 takes the
lease and runs. D's first attempt is refused on T0's item (now `running` under E), with
the row as D read it: D must not end E's live trigger. Found by the break-it review of
the fix for explorer seed 232944 (a decision over a trigger still `running` under a run
the row no longer names moves its item): DROP, PAUSED and QUEUE did not pin the holder on
the row, so the move landed on E's item. The move is now conditioned on the row not
naming that run. Races are staged with the ``after_lease_read`` hook point, never sleeps.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from jobguard import OverlapPolicy, hooks
from jobguard.clock import to_ms

from ._support import make_job, tick
from ._trigger_support import (
    Script,
    call,
    decisions_of,
    drain,
    hold_a_run,
    outcomes_of,
    start,
    tick_id,
)
from .test_adversarial_triggers import JOB, LEASE, PAST_THE_LEASE, crash, crashed_then_queued


@contextlib.contextmanager
def d_reads_first(job: Any, event: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Delivery D of ``event`` reads the lease row and waits there until the block ends
    (what happens in the block happens after D's read); then D decides. Yields D's box
    (``result`` once it ended)."""
    read, go = threading.Event(), threading.Event()
    ident: dict[str, int] = {}

    def hold(**_: Any) -> None:
        if threading.get_ident() == ident.get("d") and not read.is_set():
            read.set()
            assert go.wait(10)

    def d() -> Any:
        ident["d"] = threading.get_ident()
        return call(job, event)

    with hooks.on("after_lease_read", hold):
        thread, box = start(d)
        assert read.wait(10), "D never read the lease row"
        try:
            yield box
        finally:
            go.set()
            thread.join(10)


@pytest.mark.parametrize("fate", ["fails", "crashes"])
def test_a_drop_from_an_older_read_never_ends_a_live_retake_of_the_same_tick(
        aws, clock, fate):
    """GIVEN a QUEUE job (max_queued 1) whose tick T0 crashed holding the lease, and T1
    queued behind it (the bound reached)
    WHEN D reads the row (naming the dead run), E retakes T0 and is in its handler, and
    then D decides DROP (whose row check is only the bound)
    THEN E's trigger is still E's: when E fails (or dies), T0 runs again after T1, as it
    does without D; D is a duplicate, not a `dropped` tick that ran."""
    script = Script()
    job, t0, t1 = crashed_then_queued(aws, clock, script, max_queued=1)
    gate = script.hold(tick_id(JOB, t0))
    if fate == "fails":
        script.fail(tick_id(JOB, t0))
    run_e: Callable[[], Any] = ((lambda: call(job, tick(JOB, t0))) if fate == "fails"
                                else (lambda: crash(job, tick(JOB, t0))))
    with d_reads_first(job, tick(JOB, t0)) as d:
        e, _ = start(run_e)
        assert gate.entered.wait(10)  # E retook T0 and is in its handler
    gate.release.set()
    e.join(10)
    clock.advance(PAST_THE_LEASE)
    drain(aws, JOB, job)  # T1 runs (taking E's lease over if E died)
    assert script.ran(tick_id(JOB, t1)) == 1, outcomes_of(aws, JOB, tick_id(JOB, t1))
    clock.advance(timedelta(minutes=1))
    retry = call(job, tick(JOB, t0))  # Lambda's retry of E's failed invocation
    log = outcomes_of(aws, JOB, tick_id(JOB, t0))
    assert script.ran(tick_id(JOB, t0)) == 3, (d.get("result"), retry, log)
    assert "dropped" not in [decision for decision, _ in log], log


def test_a_queue_decision_from_an_older_read_never_requeues_a_live_retake(aws, clock):
    """GIVEN a QUEUE job (max_queued 10) whose tick T0 crashed holding the lease, and T1
    queued behind it
    WHEN D reads the row (naming the dead run), E retakes T0 and is in its handler, and
    then D decides QUEUE (whose row check passes on `queued_n > 0` alone)
    THEN T0 is not run again after E succeeded: one trigger, one successful run, and the
    queued count goes back to 0."""
    script = Script()
    job, t0, t1 = crashed_then_queued(aws, clock, script, max_queued=10)
    gate = script.hold(tick_id(JOB, t0))
    with d_reads_first(job, tick(JOB, t0)) as d:
        e, e_box = start(lambda: call(job, tick(JOB, t0)))
        assert gate.entered.wait(10)
    gate.release.set()
    e.join(10)
    assert e_box.get("result", {}).get("ran") == tick_id(JOB, t0), e_box
    clock.advance(timedelta(seconds=5))
    for _ in range(3):
        drain(aws, JOB, job)
        clock.advance(timedelta(minutes=1))
    succeeded = [r for r in aws.runs(JOB) if r.trigger_id == tick_id(JOB, t0)
                 and r.decision.value == "ran" and r.status.value == "succeeded"]
    assert len(succeeded) == 1, (d.get("result"), outcomes_of(aws, JOB, tick_id(JOB, t0)))
    assert script.ran(tick_id(JOB, t1)) == 1
    assert int(aws.lease_item(JOB).get("queued_n", {"N": "0"})["N"]) == 0


def test_a_paused_decision_from_an_older_read_never_ends_a_live_run(aws, clock):
    """GIVEN a SKIP job, paused
    WHEN D reads the row (paused, no holder), the operator resumes, a second copy E of
    T0 runs (in its handler), the operator pauses again, and then D decides PAUSED
    (whose row check is only the pause)
    THEN E's trigger is still E's: E fails, and once resumed Lambda's retry of E's
    failed invocation runs T0 again (a failed trigger runs again)."""
    script = Script()
    job = make_job(aws, clock, script, lease=LEASE)
    aws.store.pause(JOB, reason="maintenance", now_ms=to_ms(clock.now()))
    t0 = clock.now()
    gate = script.hold(tick_id(JOB, t0))
    script.fail(tick_id(JOB, t0))
    with d_reads_first(job, tick(JOB, t0)) as d:
        aws.store.resume(JOB)
        e, _ = start(lambda: call(job, tick(JOB, t0)))
        assert gate.entered.wait(10)
        aws.store.pause(JOB, reason="again", now_ms=to_ms(clock.now()))
    gate.release.set()
    e.join(10)
    aws.store.resume(JOB)
    clock.advance(timedelta(minutes=1))
    retry = call(job, tick(JOB, t0))
    assert script.ran(tick_id(JOB, t0)) == 2, (
        d.get("result"), retry, outcomes_of(aws, JOB, tick_id(JOB, t0)))


def test_a_late_retry_of_a_coalesced_tick_never_reruns_its_follow_up(aws, clock):
    """GIVEN a COALESCE job: T0 held, T1 coalesced onto it (its send ok), T0 released and
    the follow-up F run once; three hours later a run Y of tick T2 holds the lease
    WHEN Lambda's late retry of T1 comes (its item is kept 6 h 15 min), and again after
    Y released
    THEN both retries are duplicates: F never runs a second time and T2 ran once (the
    longer-kept coalesced item only turns `stale` into a duplicate)."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.COALESCE, lease=LEASE)
    t0 = clock.now()
    gate, holder, _ = hold_a_run(job, script, JOB, t0)
    clock.advance(timedelta(seconds=10))
    t1 = clock.now()
    assert call(job, tick(JOB, t1))["decision"] == "coalesced"
    gate.release.set()
    holder.join(10)
    for _ in range(3):
        drain(aws, JOB, job)
        clock.advance(timedelta(minutes=1))
    follow = [r for r in aws.runs(JOB) if r.trigger_kind == "follow_up"
              and r.decision.value == "ran"]
    assert len(follow) == 1, [(r.trigger_id, r.decision.value) for r in aws.runs(JOB)]
    f_id = follow[0].trigger_id

    clock.advance(timedelta(hours=3))
    t2 = clock.now()
    gate2, y, _ = hold_a_run(job, script, JOB, t2)
    first = call(job, tick(JOB, t1))
    for _ in range(2):
        drain(aws, JOB, job)
    gate2.release.set()
    y.join(10)
    clock.advance(timedelta(minutes=1))
    second = call(job, tick(JOB, t1))
    for _ in range(3):
        drain(aws, JOB, job)
        clock.advance(timedelta(minutes=1))
    assert decisions_of(aws, JOB, tick_id(JOB, t1)) == ["coalesced", "duplicate",
                                                        "duplicate"], (first, second)
    assert script.ran(f_id) == 1
    assert script.ran(tick_id(JOB, t2)) == 1
    assert [r.trigger_id for r in aws.runs(JOB) if r.decision.value == "ran"] == [
        tick_id(JOB, t0), f_id, tick_id(JOB, t2)], outcomes_of(aws, JOB, f_id)


def test_a_queue_decision_when_a_restored_row_names_the_items_run_again(aws, clock):
    """GIVEN a QUEUE job: T0's run X in its handler, T1 queued behind it; the lease row
    deleted and a manual run M holding a new row
    WHEN T0 is delivered again (D), and between D's read and its write the old row
    (naming X, one queued) is put back (a restore)
    THEN D is a duplicate (X holds the row again), not `queued` over X's live item: T0
    never succeeds twice, and T1 runs once. (From the second review; without the
    condition on the row, `queued_n > 0` let the move through.)"""
    from ._trigger_support import manual

    key = {"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "LEASE"}}
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.QUEUE, lease=LEASE,
                   max_queued=10)
    t0 = clock.now()
    stuck = script.hold(tick_id(JOB, t0))
    x, _ = start(lambda: call(job, tick(JOB, t0)))
    assert stuck.entered.wait(10)
    clock.advance(timedelta(seconds=5))
    t1 = clock.now()
    assert call(job, tick(JOB, t1))["decision"] == "queued"
    snapshot = aws.lease_item(JOB)
    aws.ddb.delete_item(TableName=aws.table, Key=key)
    event, m_id = manual(JOB, "m")
    holding_m = script.hold(m_id)
    m, _ = start(lambda: call(job, event))
    assert holding_m.entered.wait(10)

    with d_reads_first(job, tick(JOB, t0)) as d:
        aws.ddb.put_item(TableName=aws.table, Item=snapshot)
    result = d.get("result")
    assert isinstance(result, dict) and result["decision"] == "duplicate", (
        result, outcomes_of(aws, JOB, tick_id(JOB, t0)))
    holding_m.release.set()
    m.join(10)
    stuck.release.set()
    x.join(10)
    clock.advance(timedelta(seconds=5))
    for _ in range(3):
        drain(aws, JOB, job)
        clock.advance(PAST_THE_LEASE)
    succeeded = [r for r in aws.runs(JOB) if r.trigger_id == tick_id(JOB, t0)
                 and r.decision.value == "ran" and r.status.value == "succeeded"]
    assert len(succeeded) == 1, outcomes_of(aws, JOB, tick_id(JOB, t0))
    assert script.ran(tick_id(JOB, t0)) == 1
    assert script.ran(tick_id(JOB, t1)) == 1, outcomes_of(aws, JOB, tick_id(JOB, t1))
