"""Issue 14: trigger state by construction. One regression test per behaviour found.

Each test stages its race with hook points and botocore events (never sleeps), moves a
``ManualClock`` by hand, and asserts what a user sees: how often the handler ran for a
trigger, the run log's decisions and statuses, what the trigger queue holds, and (for
size and damage only) the raw lease row.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobguard import OverlapPolicy, hooks
from jobguard.clock import to_ms
from jobguard.errors import InvalidTriggerError, StoreError

from ._support import make_job, tick
from ._trigger_support import (
    Script,
    call,
    cli_force_release,
    comes_back,
    compare_mismatched_types_as_false,
    decisions_of,
    deliver,
    drain,
    fail_next_send,
    force_release,
    item_bytes,
    lose_next_write_response,
    manual,
    outcomes_of,
    record_text,
    records_of,
    start,
    tick_id,
    visible,
)

JOB = "crm-sync"
LEASE = timedelta(seconds=60)
PAST_THE_LEASE = LEASE + timedelta(seconds=15)  # lease + skew margin (5 s) + a bit


def _queued_n(aws) -> int:
    row = aws.lease_item(JOB) or {}
    return int(row.get("queued_n", {"N": "0"})["N"])


def _follow_ups(aws, *direct: str) -> list:
    """Runs of triggers the test did not send itself: follow-ups."""
    return [r for r in aws.runs(JOB) if r.decision.value == "ran" and r.trigger_id not in direct]


# -- 1 ----------------------------------------------------------------------------------


def test_release_never_deletes_a_trigger_queued_during_the_run(aws, clock):
    """GIVEN a QUEUE job (max_queued 1) and a manual trigger whose run failed long ago
    (more than the job's dedup window)
    WHEN it is delivered again while another run holds the lease, and that run releases
    THEN the queued trigger's message still runs it, nothing stays counted as pending,
    and a later tick is not dropped."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.QUEUE, max_queued=1)
    event, manual_id = manual(JOB, "export-2026-11")
    script.fail(manual_id)
    assert isinstance(call(job, event), RuntimeError)
    clock.advance(job.config.dedup_window + timedelta(minutes=5))

    t1 = tick(JOB, clock.now())
    gate = script.hold(tick_id(JOB, clock.now()))
    holder, _ = start(lambda: job(t1, None))
    assert gate.entered.wait(10)
    assert call(job, event)["decision"] == "queued"

    clock.advance(timedelta(seconds=30))
    gate.release.set()
    holder.join(10)
    clock.advance(timedelta(seconds=5))
    drain(aws, JOB, job)

    assert ("ran", "succeeded") in outcomes_of(aws, JOB, manual_id), \
        f"the queued trigger never ran: {outcomes_of(aws, JOB, manual_id)}"
    assert script.ran(manual_id) == 2
    assert _queued_n(aws) == 0
    clock.advance(timedelta(minutes=1))
    later = tick(JOB, clock.now())
    outcome = call(job, later)
    assert not (isinstance(outcome, dict) and outcome.get("decision") == "dropped"), outcome
    assert script.ran(tick_id(JOB, clock.now())) == 1


# -- 2 ----------------------------------------------------------------------------------


def test_force_release_records_the_stuck_run_and_its_redelivery_is_a_duplicate(aws, clock):
    """GIVEN a run held inside its handler
    WHEN an operator force-releases it (who: alice, why: stuck) and the run then returns
    THEN the run log keeps that run as released_by_operator naming alice, and the same
    tick delivered again is a duplicate: the handler ran once for it."""
    script = Script()
    job = make_job(aws, clock, script)
    stuck = tick(JOB, clock.now())
    stuck_id = tick_id(JOB, clock.now())
    gate = script.hold(stuck_id)
    acquired: dict = {}
    with hooks.on("after_acquire", lambda **ctx: acquired.setdefault("run", ctx)):
        holder, _ = start(lambda: job(stuck, None))
        assert gate.entered.wait(10)
    run_id, fence = acquired["run"]["run_id"], acquired["run"]["fence"]

    clock.advance(timedelta(seconds=30))
    force_release(aws.store, JOB, holder_run_id=run_id, fence=fence,
                  now_ms=to_ms(clock.now()), by="alice", reason="stuck")
    gate.release.set()
    holder.join(10)

    mine = [r for r in aws.runs(JOB) if r.run_id == run_id]
    log = [(r.run_id, r.status.value) for r in aws.runs(JOB)]
    assert [r.status.value for r in mine] == ["released_by_operator"], \
        f"the force-released run {run_id} has no record of it: {log}"
    assert "alice" in record_text(mine[0])

    clock.advance(timedelta(minutes=1))
    again = call(job, stuck)
    assert isinstance(again, dict) and again.get("decision") == "duplicate", again
    assert script.ran(stuck_id) == 1


# -- 3 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [OverlapPolicy.QUEUE, OverlapPolicy.COALESCE],
                         ids=["queued", "follow-up"])
def test_paused_job_records_a_failed_queued_trigger_as_paused(aws, clock, policy):
    """GIVEN a queued trigger (QUEUE) or a follow-up (COALESCE) whose own run failed
    WHEN the job is paused and its message is delivered again
    THEN the delivery is recorded paused, the message is done with (no batch item
    failure, no StoreError), and the handler is not called again."""
    script = Script()
    job = make_job(aws, clock, script, policy=policy)
    t0, t1 = clock.now(), clock.now() + timedelta(seconds=30)
    direct = {tick_id(JOB, t0), tick_id(JOB, t1)}
    gate = script.hold(tick_id(JOB, t0))
    pending = (lambda t: t == tick_id(JOB, t1)) if policy is OverlapPolicy.QUEUE \
        else (lambda t: t not in direct)
    script.fail(pending)
    holder, _ = start(lambda: job(tick(JOB, t0), None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=30))
    assert call(job, tick(JOB, t1))["decision"] in ("queued", "coalesced")
    gate.release.set()
    holder.join(10)

    first = deliver(aws, JOB, job)
    assert first is not None and first.failed and script.ran(pending) == 1
    aws.store.pause(JOB, reason="maintenance", now_ms=to_ms(clock.now()))
    clock.advance(timedelta(minutes=1))
    comes_back(aws, JOB, first)
    again = deliver(aws, JOB, job)

    assert again is not None
    assert not again.failed, f"paused delivery failed: {again.response or again.error}"
    (trigger_id,) = {t for t, _ in script.calls if pending(t)}
    assert decisions_of(aws, JOB, trigger_id)[-1] == "paused"
    assert script.ran(pending) == 1


# -- 4 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [OverlapPolicy.QUEUE, OverlapPolicy.COALESCE],
                         ids=["queued", "follow-up"])
def test_a_release_whose_response_was_lost_still_wakes_and_sends(aws, clock, policy):
    """GIVEN a run holding the lease, and a queued trigger (QUEUE) or the follow-up
    (COALESCE) delivered early and deferred until the holder releases
    WHEN the holder's release is applied but its response is lost
    THEN the deferred message is receivable at once (not a lease later) and runs."""
    script = Script()
    job = make_job(aws, clock, script, policy=policy)
    t0, t1 = clock.now(), clock.now() + timedelta(seconds=30)
    gate = script.hold(tick_id(JOB, t0))
    holder, box = start(lambda: job(tick(JOB, t0), None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=30))
    assert call(job, tick(JOB, t1))["decision"] in ("queued", "coalesced")
    early = deliver(aws, JOB, job)
    assert early is not None and early.failed and len(script.calls) == 1
    assert visible(aws, JOB) == 0  # deferred: waiting for the holder

    clock.advance(timedelta(seconds=10))
    with lose_next_write_response(aws.ddb, thread_ident=lambda: box.get("ident")) as lost:
        gate.release.set()
        holder.join(10)
    assert lost, "no release write was made"
    (holder_run,) = [r for r in aws.runs(JOB) if r.trigger_id == tick_id(JOB, t0)]

    assert visible(aws, JOB) == 1, "the deferred message was not woken by the release"
    drain(aws, JOB, job)
    after = [r for r in _follow_ups(aws, tick_id(JOB, t0)) if r.status.value == "succeeded"]
    assert after and after[0].started_at_ms >= holder_run.ended_at_ms


# -- 5 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [OverlapPolicy.COALESCE, OverlapPolicy.QUEUE],
                         ids=["coalesce", "queue"])
def test_coalesce_send_failure_strands_no_trigger(aws, clock, policy):
    """GIVEN a run holding the lease
    WHEN trigger A is coalesced (or queued) but its message's send fails once, while
    trigger B is decided during that send
    THEN (COALESCE) a follow-up still runs after the holder, so B is not stranded, and
    A's redelivery leaves no second coalesced record; (QUEUE) A is queued once and run
    once, and so is B."""
    script = Script()
    job = make_job(aws, clock, script, policy=policy)
    t0 = clock.now()
    a_at, b_at = t0 + timedelta(seconds=5), t0 + timedelta(seconds=10)
    a_id, b_id = tick_id(JOB, a_at), tick_id(JOB, b_at)
    gate = script.hold(tick_id(JOB, t0))
    holder, _ = start(lambda: job(tick(JOB, t0), None))
    assert gate.entered.wait(10)

    outcomes: dict = {}

    def b_arrives() -> None:
        clock.advance(timedelta(seconds=5))
        thread, box = start(lambda: call(job, tick(JOB, b_at)))
        thread.join(10)
        outcomes["B"] = box["result"]

    clock.advance(timedelta(seconds=5))
    with fail_next_send(aws.sqs, meanwhile=b_arrives) as failed:
        outcomes["A"] = call(job, tick(JOB, a_at))
    assert failed, "no send was made for A"
    assert not isinstance(outcomes["B"], Exception), outcomes["B"]

    if policy is OverlapPolicy.QUEUE:
        # Lambda retries A's failed invocation while the holder still runs.
        clock.advance(timedelta(seconds=5))
        call(job, tick(JOB, a_at))
        clock.advance(timedelta(seconds=5))
        gate.release.set()
        holder.join(10)
        clock.advance(timedelta(seconds=5))
        drain(aws, JOB, job)
        assert decisions_of(aws, JOB, a_id).count("queued") <= 1, decisions_of(aws, JOB, a_id)
        assert script.ran(a_id) == 1 and script.ran(b_id) == 1, script.calls
        assert ("ran", "succeeded") in outcomes_of(aws, JOB, a_id)
        assert ("ran", "succeeded") in outcomes_of(aws, JOB, b_id)
        return

    clock.advance(timedelta(seconds=5))
    gate.release.set()
    holder.join(10)
    (holder_run,) = records_of(aws, JOB, tick_id(JOB, t0))
    clock.advance(timedelta(seconds=5))
    drain(aws, JOB, job)
    after = [r for r in _follow_ups(aws, tick_id(JOB, t0), a_id, b_id)
             if r.started_at_ms >= holder_run.ended_at_ms and r.status.value == "succeeded"]
    assert after, f"no follow-up ran after the holder: B stranded ({aws.statuses(JOB)})"

    # A's invocation failed; Lambda delivers it again, during the next held run.
    clock.advance(timedelta(minutes=1))
    t3 = clock.now()
    gate3 = script.hold(tick_id(JOB, t3))
    holder3, _ = start(lambda: job(tick(JOB, t3), None))
    assert gate3.entered.wait(10)
    clock.advance(timedelta(seconds=10))
    call(job, tick(JOB, a_at))
    gate3.release.set()
    holder3.join(10)
    clock.advance(timedelta(seconds=5))
    drain(aws, JOB, job)
    assert decisions_of(aws, JOB, a_id).count("coalesced") <= 1, decisions_of(aws, JOB, a_id)


# -- 6 ----------------------------------------------------------------------------------


def test_replace_never_reruns_the_displaced_trigger(aws, clock):
    """GIVEN a REPLACE job whose tick T1 runs, held, and tick T2 displaces it
    WHEN T1's handler returns (its run learns it lost), T2 finishes, and T1 is
    delivered again late
    THEN that delivery is a duplicate: T1's handler ran exactly once."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.REPLACE)
    t1, t2 = clock.now(), clock.now() + timedelta(seconds=10)
    gate1, gate2 = script.hold(tick_id(JOB, t1)), script.hold(tick_id(JOB, t2))
    first, _ = start(lambda: job(tick(JOB, t1), None))
    assert gate1.entered.wait(10)
    clock.advance(timedelta(seconds=10))
    second, _ = start(lambda: job(tick(JOB, t2), None))
    assert gate2.entered.wait(10)

    gate1.release.set()
    first.join(10)
    clock.advance(timedelta(seconds=10))
    gate2.release.set()
    second.join(10)
    assert ("ran", "succeeded") in outcomes_of(aws, JOB, tick_id(JOB, t2))
    assert ("ran", "succeeded") not in outcomes_of(aws, JOB, tick_id(JOB, t1))

    clock.advance(timedelta(minutes=2))
    late = call(job, tick(JOB, t1))
    assert isinstance(late, dict) and late.get("decision") == "duplicate", late
    assert script.ran(tick_id(JOB, t1)) == 1


# -- 7 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [OverlapPolicy.QUEUE, OverlapPolicy.COALESCE],
                         ids=["queued-taken-over", "follow-up-expired"])
def test_queued_trigger_whose_run_lost_its_lease_runs_again(aws, clock, policy):
    """GIVEN a queued trigger (QUEUE) or a follow-up (COALESCE) whose run is held
    WHEN the clock moves past its lease (QUEUE: and the next tick takes the lease over)
    and the run then ends having lost its lease
    THEN its message is not deleted (a batch item failure) and a later delivery runs
    it to succeeded."""
    script = Script()
    job = make_job(aws, clock, script, policy=policy, lease=LEASE)
    t0, t1 = clock.now(), clock.now() + timedelta(seconds=30)
    direct = {tick_id(JOB, t0), tick_id(JOB, t1)}
    gate = script.hold(tick_id(JOB, t0))
    holder, _ = start(lambda: job(tick(JOB, t0), None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=30))
    assert call(job, tick(JOB, t1))["decision"] in ("queued", "coalesced")
    gate.release.set()
    holder.join(10)

    pending = (lambda t: t == tick_id(JOB, t1)) if policy is OverlapPolicy.QUEUE \
        else (lambda t: t not in direct)
    gate_p = script.hold(pending)
    consumer, box = start(lambda: deliver(aws, JOB, job))
    assert gate_p.entered.wait(10)
    clock.advance(PAST_THE_LEASE)
    if policy is OverlapPolicy.QUEUE:
        call(job, tick(JOB, clock.now()))  # the next tick takes the expired lease over
    gate_p.release.set()
    consumer.join(10)
    lost = box["result"]
    (trigger_id,) = {t for t, _ in script.calls if pending(t)}
    assert ("ran", "succeeded") not in outcomes_of(aws, JOB, trigger_id)

    assert lost.failed, "the lease-lost run's message was deleted: it never runs again"
    clock.advance(timedelta(minutes=1))
    comes_back(aws, JOB, lost)
    drain(aws, JOB, job)
    assert ("ran", "succeeded") in outcomes_of(aws, JOB, trigger_id)
    assert script.ran(trigger_id) == 2


# -- 8 ----------------------------------------------------------------------------------


def test_failed_queued_trigger_retries_after_the_dedup_window(aws, clock):
    """GIVEN a QUEUE job whose queued trigger's run failed, while the schedule goes on
    WHEN its message comes back 3 hours later (past the 2 h dedup window)
    THEN it runs again and succeeds (it is not a duplicate)."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.QUEUE)
    t0, t1 = clock.now(), clock.now() + timedelta(seconds=30)
    queued_id = tick_id(JOB, t1)
    gate = script.hold(tick_id(JOB, t0))
    script.fail(queued_id)
    holder, _ = start(lambda: job(tick(JOB, t0), None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=30))
    assert call(job, tick(JOB, t1))["decision"] == "queued"
    gate.release.set()
    holder.join(10)
    failed = deliver(aws, JOB, job)
    assert failed is not None and failed.failed and script.ran(queued_id) == 1

    clock.advance(timedelta(hours=3))
    assert job.config.dedup_window < timedelta(hours=3)
    call(job, tick(JOB, clock.now()))  # the schedule went on meanwhile
    clock.advance(timedelta(seconds=5))
    comes_back(aws, JOB, failed)
    drain(aws, JOB, job)

    assert "duplicate" not in decisions_of(aws, JOB, queued_id), \
        outcomes_of(aws, JOB, queued_id)
    assert ("ran", "succeeded") in outcomes_of(aws, JOB, queued_id)
    assert script.ran(queued_id) == 2


# -- 9 ----------------------------------------------------------------------------------


@pytest.mark.timeout(900)
def test_lease_row_stays_bounded(aws, clock):
    """GIVEN a SKIP job with a long lease
    WHEN 3,000 distinct manual triggers arrive over 2 hours, 30 of them running (each
    held while the next 99 are skipped against it)
    THEN the lease row never grows past 2 KB."""
    script = Script()
    job = make_job(aws, clock, script, lease=timedelta(hours=3))
    step = timedelta(hours=2) / 3000
    sizes = []
    for block in range(30):
        event, holder_id = manual(JOB, f"run-{block:02d}")
        gate = script.hold(holder_id)
        holder, _ = start(lambda event=event: job(event, None))
        assert gate.entered.wait(10)
        for n in range(99):
            clock.advance(step)
            skipped = job(manual(JOB, f"ask-{block:02d}-{n:02d}")[0], None)
            assert skipped["decision"] == "skipped", skipped
        gate.release.set()
        holder.join(10)
        clock.advance(step)
        sizes.append(item_bytes(aws.lease_item(JOB)))
        assert max(sizes) < 2048, \
            f"lease row is {max(sizes)} bytes after {100 * (block + 1)} triggers"
    assert script.ran(lambda t: "@manual:run-" in t) == 30


# -- 10 ---------------------------------------------------------------------------------

_DAMAGE = {
    "expires_at_ms-removed": ("expires_at_ms", "REMOVE #a", None),
    "fence-removed": ("fence", "REMOVE #a", None),
    "fence-not-a-number": ("fence", "SET #a = :v", {"S": "abc"}),
    "expires_at_ms-a-string": ("expires_at_ms", "SET #a = :v", {"S": "soon"}),
}


@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_damaged_lease_row_is_reported_not_wedged(aws, clock, damage, monkeypatch):
    """GIVEN a job whose lease row, held by a run, is damaged (an attribute missing or
    of the wrong type)
    WHEN a trigger arrives
    THEN it fails with a StoreError naming the job and the attribute (never a bare
    ValueError/TypeError or a retry loop); `jobguard release --force` repairs the row so
    the next tick runs; and once the whole row is deleted, the next fence is still
    higher than every fence issued before."""
    compare_mismatched_types_as_false(monkeypatch)  # as DynamoDB does; moto would raise
    script = Script()
    job = make_job(aws, clock, script)
    for _ in range(2):
        clock.advance(timedelta(minutes=1))
        job(tick(JOB, clock.now()), None)
    clock.advance(timedelta(minutes=1))
    held_at = clock.now()
    gate = script.hold(tick_id(JOB, held_at))
    holder, _ = start(lambda: job(tick(JOB, held_at), None))
    assert gate.entered.wait(10)

    attribute, update, value = _DAMAGE[damage]
    params = {"ExpressionAttributeNames": {"#a": attribute}}
    if value is not None:
        params["ExpressionAttributeValues"] = {":v": value}
    aws.ddb.update_item(TableName=aws.table, Key={"pk": {"S": f"JOB#{JOB}"},
                                                  "sk": {"S": "LEASE"}},
                        UpdateExpression=update, **params)

    clock.advance(timedelta(seconds=10))
    with pytest.raises(StoreError) as refused:
        job(tick(JOB, clock.now()), None)
    assert attribute in str(refused.value) and JOB in str(refused.value), str(refused.value)
    assert "tries" not in str(refused.value)

    code, out, err = cli_force_release(aws, JOB)
    assert code == 0, f"release --force failed on the damaged row: {err or out}"
    gate.release.set()
    holder.join(10)
    clock.advance(timedelta(minutes=1))
    repaired = clock.now()
    call(job, tick(JOB, repaired))
    assert script.ran(tick_id(JOB, repaired)) == 1, "the next tick did not run after repair"

    issued = set(script.fences()) | {r.fence for r in aws.runs(JOB) if r.fence is not None}
    aws.ddb.delete_item(TableName=aws.table, Key={"pk": {"S": f"JOB#{JOB}"},
                                                  "sk": {"S": "LEASE"}})
    clock.advance(timedelta(minutes=1))
    job(tick(JOB, clock.now()), None)
    newest = script.fences()[-1]
    assert newest > max(issued), f"fence went backwards: {newest} after {sorted(issued)}"


# -- 11 ---------------------------------------------------------------------------------


def test_far_future_tick_is_refused_or_never_runs_twice(aws, clock):
    """GIVEN a tick scheduled in 2062
    WHEN it is delivered, the schedule goes on for 3 hours, and it is delivered again
    THEN it is refused naming scheduled_at, or recorded without running: either way its
    handler ran at most once in total."""
    script = Script()
    job = make_job(aws, clock, script)
    far = datetime(2062, 3, 1, 7, 35, tzinfo=UTC)
    far_id = tick_id(JOB, far)

    deliveries = []
    for _ in range(2):
        deliveries.append(call(job, tick(JOB, far)))
        clock.advance(timedelta(hours=3))
        now = clock.now()
        job(tick(JOB, now), None)  # the schedule goes on
        assert script.ran(tick_id(JOB, now)) == 1

    for outcome in deliveries:
        if isinstance(outcome, Exception):
            assert isinstance(outcome, InvalidTriggerError), repr(outcome)
            assert outcome.field == "scheduled_at"
    assert script.ran(far_id) <= 1, f"the 2062 tick ran {script.ran(far_id)} times"


# -- a count left by a dead-lettered trigger ----------------------------------------------


def test_repair_recounts_a_queued_count_left_by_a_dead_lettered_trigger(aws, clock):
    """GIVEN a QUEUE job with max_queued=1 whose one queued trigger's message went to the
    DLQ before it ever ran (its item still `queued`, the count 1), so every new tick is
    `dropped`; WHEN the trigger item is gone (an operator replayed it from the DLQ as a
    manual run, and TTL removed it) and `jobguard repair` runs; THEN the count is the
    number of queued items (0) and the next tick runs."""
    from ._trigger_support import cli

    job = make_job(aws, clock, lambda e, c: "ran", policy=OverlapPolicy.QUEUE, max_queued=1)
    aws.ddb.update_item(TableName=aws.table, Key={"pk": {"S": f"JOB#{JOB}"},
                                                   "sk": {"S": "LEASE"}},
                        UpdateExpression="SET queued_n = :one, fence = :f",
                        ExpressionAttributeValues={":one": {"N": "1"}, ":f": {"N": "3"}})
    dropped = job(tick(JOB, clock.now()), None)
    assert dropped["decision"] == "dropped"
    code, out, err = cli(aws, "repair", JOB, "--yes")
    assert code == 0, err
    assert _queued_n(aws) == 0
    clock.advance(timedelta(minutes=1))
    assert job(tick(JOB, clock.now()), None) == "ran"


def test_a_run_taken_over_records_lease_lost_at_its_late_release(aws, clock):
    """GIVEN run 1 held in its handler past its lease, and tick 2 taking the lease over
    (which marks run 1's trigger `lost` and records run 1 `abandoned`, in its own
    transaction); WHEN run 1 returns and releases; THEN its release is refused (its own
    trigger item was moved by the takeover, not by its release) and its record says
    `lease_lost` with its figures; run 2's record is untouched."""
    from ._support import Gate, Recorder, holding, in_thread

    gate, rec = Gate(), Recorder()
    t1 = tick(JOB, clock.now())
    job = make_job(aws, clock, rec.handler(holding(gate, t1)))
    thread, box = in_thread(lambda: job(t1, None))
    assert gate.entered.wait(10)
    clock.advance(PAST_THE_LEASE)
    assert job(tick(JOB, clock.now()), None)["fence"] == 2
    gate.release.set()
    thread.join(10)
    runs = {r.fence: r for r in aws.runs(JOB) if r.decision.value == "ran"}
    assert runs[1].status.value == "lease_lost", runs[1]
    assert runs[2].status.value == "succeeded"
    assert box.get("result", {}).get("jobguard") == "lease_lost" or "error" in box


def test_a_recovery_never_absorbs_the_pending_follow_up(aws, clock):
    """GIVEN a COALESCE job whose run 1 hangs holding the lease, and tick 2 coalesced into
    run 1's follow-up; WHEN a recovery takes the lease once run 1's expired and finishes;
    THEN the follow-up still runs after it (a recovery replays a range: it does not do
    the job's regular work, so it serves no coalesced trigger), exactly once."""
    from jobguard.triggers import Trigger, TriggerKind

    from ._support import Gate, Recorder, holding, in_thread

    gate, rec = Gate(), Recorder()
    t1 = tick(JOB, clock.now())
    job = make_job(aws, clock, rec.handler(holding(gate, t1)), policy=OverlapPolicy.COALESCE)
    thread, _ = in_thread(lambda: job(t1, None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=1))
    assert job(tick(JOB, clock.now()), None)["decision"] == "coalesced"
    clock.advance(PAST_THE_LEASE)
    recovered = job.run_exclusive(Trigger(JOB, f"{JOB}@recovery:r1", TriggerKind.RECOVERY),
                                  wait=0)
    assert recovered["fence"] == 2
    drain(aws, JOB, job)
    follow_ups = [r for r in aws.runs(JOB) if r.trigger_kind == "follow_up"
                  and r.decision.value == "ran"]
    assert [r.status.value for r in follow_ups] == ["succeeded"], aws.runs(JOB)
    assert follow_ups[0].fence == 3
    gate.release.set()
    thread.join(10)


def test_status_shows_a_damaged_row_instead_of_a_traceback(aws, clock):
    """GIVEN a lease row whose fence is not a number; WHEN `jobguard status` reads it;
    THEN it names the row, the attribute and the repair command (exit 1, no traceback),
    and `--json` carries the raw row for the operator."""
    import json

    from ._trigger_support import cli

    job = make_job(aws, clock, lambda e, c: "ran")
    job(tick(JOB, clock.now()), None)
    aws.ddb.update_item(TableName=aws.table, Key={"pk": {"S": f"JOB#{JOB}"},
                                                   "sk": {"S": "LEASE"}},
                        UpdateExpression="SET fence = :x",
                        ExpressionAttributeValues={":x": {"S": "abc"}})
    code, out, err = cli(aws, "status", JOB)
    assert code == 1 and "Traceback" not in out + err
    assert "fence" in out and f"jobguard release --force {JOB}" in out
    code, out, _ = cli(aws, "--json", "status", JOB)
    data = json.loads(out)
    assert data["damaged"]["attribute"] == "fence" and data["lease_row"]["fence"] == "abc"


def test_a_manual_trigger_is_remembered_as_long_as_lambda_retries_it(aws, clock):
    """Found by the explorer (seed 5137): a succeeded manual trigger delivered again 2 h
    15 min later (Lambda keeps retrying an asynchronous event up to 6 h) ran again: its
    item was kept only dedup_window (2 h). Now it is a duplicate for 6 h."""
    job = make_job(aws, clock, lambda e, c: "ran")
    event = {"job": JOB, "manual": True, "trigger_id": "backfill-1"}
    assert job(event, None) == "ran"
    clock.advance(timedelta(hours=5, minutes=45))
    assert job(event, None)["decision"] == "duplicate"


def test_a_follow_up_runs_after_its_lease_row_was_deleted_and_recreated(aws, clock):
    """Found by the explorer (seed 30): the lease row deleted, then a pause wrote a new
    row without a fence; the pending follow-up's gate (above 0) could never match the new
    row's fence, so it failed every delivery and went to the DLQ. Now a row below the
    follow-up's gate lets it run (once), with a fence above every fence issued."""
    from ._support import Gate, Recorder, holding, in_thread

    gate, rec = Gate(), Recorder()
    t1 = tick(JOB, clock.now())
    job = make_job(aws, clock, rec.handler(holding(gate, t1)), policy=OverlapPolicy.COALESCE)
    thread, _ = in_thread(lambda: job(t1, None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=1))
    assert job(tick(JOB, clock.now()), None)["decision"] == "coalesced"
    gate.release.set()
    thread.join(10)
    key = {"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "LEASE"}}
    aws.ddb.delete_item(TableName=aws.table, Key=key)
    aws.store.pause(JOB, reason="x", now_ms=to_ms(clock.now()))
    aws.store.resume(JOB)
    drain(aws, JOB, job)
    ran = [r for r in aws.runs(JOB) if r.trigger_kind == "follow_up"
           and r.decision.value == "ran"]
    assert [r.status.value for r in ran] == ["succeeded"], aws.runs(JOB)
    assert (ran[0].fence or 0) > 1


def test_a_service_run_resends_a_follow_up_whose_send_failed(aws, clock):
    """GIVEN a COALESCE job whose lease a recovery holds (a service run: it serves no
    coalesced trigger and leaves the follow-up named on the row)
    WHEN a tick is coalesced onto it but the follow-up message's send fails, and the
    recovery then releases
    THEN the recovery's release sends the follow-up again, so it runs after the recovery
    without waiting for the coalescing sender's retry (explorer regression 5091)."""
    from jobguard.triggers import Trigger, TriggerKind

    from ._support import Gate, Recorder, in_thread

    gate, rec = Gate(), Recorder()
    recovery_id = f"{JOB}@recovery:r1"
    job = make_job(aws, clock, rec.handler(lambda t: gate if t == recovery_id else None),
                   policy=OverlapPolicy.COALESCE)
    thread, box = in_thread(lambda: job.run_exclusive(
        Trigger(JOB, recovery_id, TriggerKind.RECOVERY), wait=0))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=1))
    t2 = clock.now()
    with fail_next_send(aws.sqs) as failed:
        outcome = call(job, tick(JOB, t2))
    assert failed, "the follow-up's send was never attempted"
    assert isinstance(outcome, Exception), f"the failed send was swallowed: {outcome}"
    assert decisions_of(aws, JOB, tick_id(JOB, t2)) == ["coalesced"]
    assert not visible(aws, JOB), "a follow-up message was sent although the send failed"
    gate.release.set()
    thread.join(10)
    assert box["result"]["fence"] == 1, box
    # no sender retries: the queue alone must bring the follow-up
    clock.advance(timedelta(seconds=5))
    drain(aws, JOB, job)
    follow_ups = [r for r in aws.runs(JOB) if r.trigger_kind == "follow_up"
                  and r.decision.value == "ran"]
    assert [r.status.value for r in follow_ups] == ["succeeded"], aws.statuses(JOB)
    assert [f for _, f in rec.calls] == [1, 2], rec.calls
