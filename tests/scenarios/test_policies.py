"""A second trigger during an active run, for each policy.

Every test inspects the run log and the lease row, not only return values.
"""

from __future__ import annotations

from datetime import timedelta

from jobguard import OverlapPolicy, hooks
from jobguard.local.esm import deliver_once
from jobguard.requests import Take

from ._support import Gate, Recorder, holding, in_thread, make_job, tick


def _queue_depth(aws, job: str) -> int:
    attrs = aws.sqs.get_queue_attributes(
        QueueUrl=aws.queues[job],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(
        attrs["ApproximateNumberOfMessagesNotVisible"]
    )


def test_skip_records_a_skipped_run_naming_the_holder(aws, clock):
    # GIVEN a SKIP job whose first run is held open inside its handler
    gate, rec = Gate(), Recorder()
    first = tick("crm-sync", clock.now())
    job = make_job(aws, clock, rec.handler(holding(gate, first)))
    thread, box = in_thread(lambda: job(first, None))
    assert gate.entered.wait(10)

    # WHEN the next tick fires while it runs
    clock.advance(timedelta(seconds=10))
    second = job(tick("crm-sync", clock.now()), None)

    # THEN it is skipped, naming the holder, and the handler ran once
    gate.release.set()
    thread.join(10)
    (holder,) = [r for r in aws.runs("crm-sync") if r.decision.value == "ran"]
    assert second["decision"] == "skipped"
    assert second["holder_run_id"] == holder.run_id and second["holder_fence"] == 1
    assert sorted(aws.statuses("crm-sync")) == ["skipped", "succeeded"]
    (skipped,) = [r for r in aws.runs("crm-sync") if r.status.value == "skipped"]
    assert skipped.holder_run_id == holder.run_id and skipped.policy == "SKIP"
    assert len(rec.calls) == 1 and box["result"]["fence"] == 1


def test_queue_runs_every_trigger_once_in_order_and_enforces_its_bound(aws, clock):
    # GIVEN a QUEUE job (bound 3) whose first run is held open
    gate, rec = Gate(), Recorder()
    t0 = clock.now() - timedelta(minutes=10)  # the ticks below: none ahead of the clock
    job = make_job(aws, clock, rec.handler(holding(gate, tick("crm-sync", t0))),
                   policy=OverlapPolicy.QUEUE, max_queued=3)
    thread, _ = in_thread(lambda: job(tick("crm-sync", t0), None))
    assert gate.entered.wait(10)

    # WHEN four more ticks fire during it
    outcomes = []
    for minute in range(1, 5):
        outcomes.append(job(tick("crm-sync", t0 + timedelta(minutes=minute)), None))

    # THEN three are queued and the fourth is dropped
    assert [o["decision"] for o in outcomes] == ["queued", "queued", "queued", "dropped"]
    assert _queue_depth(aws, "crm-sync") == 3

    # AND a queued trigger delivered while the run is active does not run; it waits
    assert deliver_once(aws.sqs, aws.queues["crm-sync"], job) == 1
    assert len(rec.calls) == 1
    assert aws.store.read_lease("crm-sync").wake_receipt is not None

    # WHEN the active run ends, the waiting message is woken and the queue drains
    gate.release.set()
    thread.join(10)
    while deliver_once(aws.sqs, aws.queues["crm-sync"], job):
        pass

    # THEN every queued trigger ran exactly once, in trigger order, one at a time
    ran = [trigger for trigger, _ in rec.calls]
    expected = [tick("crm-sync", t0 + timedelta(minutes=m))["scheduled_at"] for m in range(0, 4)]
    assert [r.rsplit("@", 1)[1] for r in ran] == expected
    assert rec.max_active == 1
    fences = [fence for _, fence in rec.calls]
    assert fences == sorted(fences) and len(set(fences)) == 4
    statuses = aws.statuses("crm-sync")
    assert statuses.count("succeeded") == 4 and statuses.count("queued") == 3
    assert statuses.count("dropped") == 1
    lease = aws.store.read_lease("crm-sync")
    assert lease.queued_n == 0 and lease.run_id is None
    assert _queue_depth(aws, "crm-sync") == 0


def test_queue_new_tick_does_not_overtake_pending_triggers(aws, clock):
    # GIVEN a QUEUE job with one trigger pending after its active run ended
    gate, rec = Gate(), Recorder()
    t0 = clock.now() - timedelta(minutes=10)  # the ticks below: none ahead of the clock
    job = make_job(aws, clock, rec.handler(holding(gate, tick("crm-sync", t0))),
                   policy=OverlapPolicy.QUEUE)
    thread, _ = in_thread(lambda: job(tick("crm-sync", t0), None))
    assert gate.entered.wait(10)
    assert job(tick("crm-sync", t0 + timedelta(minutes=1)), None)["decision"] == "queued"
    gate.release.set()
    thread.join(10)

    # WHEN a new tick fires before the pending one was delivered
    late = job(tick("crm-sync", t0 + timedelta(minutes=2)), None)

    # THEN it queues behind it instead of running first
    assert late["decision"] == "queued"
    while deliver_once(aws.sqs, aws.queues["crm-sync"], job):
        pass
    assert [c[0][-20:] for c in rec.calls] == [
        tick("x", t0 + timedelta(minutes=m))["scheduled_at"] for m in range(3)
    ]


def test_coalesce_ten_triggers_give_exactly_one_follow_up_after_the_run(aws, clock):
    # GIVEN a COALESCE job whose run is held open
    gate, rec = Gate(), Recorder()
    t0 = clock.now() - timedelta(minutes=10)  # the ticks below: none ahead of the clock
    job = make_job(aws, clock, rec.handler(holding(gate, tick("crm-sync", t0))),
                   policy=OverlapPolicy.COALESCE)
    thread, _ = in_thread(lambda: job(tick("crm-sync", t0), None))
    assert gate.entered.wait(10)

    # WHEN ten triggers arrive during it
    outcomes = [job(tick("crm-sync", t0 + timedelta(seconds=s)), None) for s in range(1, 11)]

    # THEN all ten are coalesced into one pending follow-up message
    assert {o["decision"] for o in outcomes} == {"coalesced"}
    assert _queue_depth(aws, "crm-sync") == 1
    assert deliver_once(aws.sqs, aws.queues["crm-sync"], job) == 1  # arrives early: waits
    assert len(rec.calls) == 1

    # WHEN the active run ends
    clock.advance(timedelta(seconds=30))
    gate.release.set()
    thread.join(10)
    (active,) = [r for r in aws.runs("crm-sync") if r.decision.value == "ran"]
    while deliver_once(aws.sqs, aws.queues["crm-sync"], job):
        pass

    # THEN exactly one follow-up ran, after the active run ended
    runs = [r for r in aws.runs("crm-sync") if r.decision.value == "ran"]
    assert len(runs) == 2 and len(rec.calls) == 2
    follow_up = runs[1]
    assert follow_up.trigger_kind == "follow_up" and follow_up.status.value == "succeeded"
    assert follow_up.started_at_ms >= active.ended_at_ms
    assert follow_up.fence == active.fence + 1
    assert aws.statuses("crm-sync").count("coalesced") == 10
    assert aws.store.read_lease("crm-sync").follow_up is None


def test_coalesce_follow_up_still_happens_when_the_active_run_crashed(aws):
    # GIVEN a COALESCE job (short lease) whose holder dies holding the lease: its row
    # says "held" and nobody will ever renew or release it
    from jobguard import GuardedJob
    from jobguard.clock import SystemClock, to_ms
    from jobguard.testing import ManualClock
    from jobguard.triggers import Trigger, TriggerKind

    rec = Recorder()
    real = SystemClock()
    # the triggers are decided at one instant (a loaded machine must not let the short
    # lease expire between them); the follow-up's delivery runs on the real clock, as
    # the queue's delay does
    frozen = ManualClock(real.now())
    job = make_job(aws, frozen, rec.handler(), policy=OverlapPolicy.COALESCE,
                   lease=timedelta(seconds=2), heartbeat_every=timedelta(milliseconds=500),
                   skew_margin=timedelta(milliseconds=300))
    later = GuardedJob(job.config, rec.handler(), store=aws.store, queue=job._queue,
                       clock=real)
    taken_ms = to_ms(frozen.now())
    crashed = aws.store.take(Take(
        Trigger("crm-sync", "crm-sync@manual:crashed", TriggerKind.MANUAL), run_id="CRASHED",
        owner="dead-worker", now_ms=taken_ms, lease_ms=2000, skew_ms=300))
    assert crashed.fence == 1

    # WHEN triggers arrive while the dead run still "holds" the lease
    now = frozen.now()
    outcomes = [job(tick("crm-sync", now + timedelta(milliseconds=i)), None) for i in range(10)]
    assert {o["decision"] for o in outcomes} == {"coalesced"}
    assert deliver_once(aws.sqs, aws.queues["crm-sync"], job) == 1  # deferred
    assert rec.calls == []

    # THEN once its lease expires (plus the skew margin), the deferred follow-up comes back
    # on its own and takes the lease over
    delivered = 0
    while delivered == 0:
        delivered = deliver_once(aws.sqs, aws.queues["crm-sync"], later, wait_s=5)
    assert len(rec.calls) == 1 and rec.calls[0][1] == 2
    log = {r.run_id: r for r in aws.runs("crm-sync")}
    assert log["CRASHED"].status.value == "abandoned"
    assert log["CRASHED"].started_at_ms == taken_ms  # when it took the lease, not the takeover
    ran = [r for r in log.values() if r.decision.value == "ran" and r.run_id != "CRASHED"]
    assert len(ran) == 1 and ran[0].trigger_kind == "follow_up"


def test_replace_takes_the_lease_and_the_old_run_stops_within_one_heartbeat(aws, clock):
    # GIVEN a REPLACE job whose first run keeps working and heartbeating
    lost = Gate()
    renewals_after_takeover: list[int] = []
    taken_over = Gate()

    def count_renewal(**ctx):
        if taken_over.entered.is_set() and ctx["fence"] == 1:
            renewals_after_takeover.append(ctx["fence"])

    def old_handler(event, context):
        from jobguard import current_run

        run = current_run()
        lost.entered.set()
        assert lost.release.wait(20)
        run.ensure_lease()  # raises: the lease is gone
        return "committed"  # never reached

    def new_handler(event, context):
        return "fresh"

    job_old = make_job(aws, clock, old_handler, policy=OverlapPolicy.REPLACE,
                       lease=timedelta(seconds=3), heartbeat_every=timedelta(milliseconds=200),
                       skew_margin=timedelta(milliseconds=100))
    job_new = make_job(aws, clock, new_handler, policy=OverlapPolicy.REPLACE,
                       lease=timedelta(seconds=3), heartbeat_every=timedelta(milliseconds=200),
                       skew_margin=timedelta(milliseconds=100))
    with hooks.on("before_renew", count_renewal), \
            hooks.on("lease_lost", lambda **ctx: lost.release.set()):
        thread, box = in_thread(lambda: job_old(tick("crm-sync", clock.now()), None))
        assert lost.entered.wait(10)

        # WHEN a new trigger arrives
        clock.advance(timedelta(seconds=1))
        taken_over.entered.set()
        result = job_new(tick("crm-sync", clock.now()), None)
        thread.join(10)

    # THEN it ran with a higher fence, and the old run stopped at its next heartbeat
    assert result == "fresh"
    assert box["result"]["jobguard"] == "lease_lost"
    assert len(renewals_after_takeover) == 1
    old, new = aws.runs("crm-sync")
    assert (old.fence, old.status.value) == (1, "lease_lost")
    assert (new.fence, new.status.value) == (2, "succeeded")
    # AND the old run's later lease writes are rejected
    assert aws.store.renew("crm-sync", run_id=old.run_id, fence=1, now_ms=0, lease_ms=1) is False


def test_replace_a_late_redelivery_of_a_displaced_trigger_is_a_duplicate(aws, clock):
    # GIVEN tick 1 was replaced by tick 2, which is still running
    gate, rec = Gate(), Recorder()
    t1, t2 = tick("crm-sync", clock.now()), tick("crm-sync", clock.now() + timedelta(seconds=1))
    job = make_job(aws, clock, rec.handler(lambda t: gate), policy=OverlapPolicy.REPLACE)
    first, _ = in_thread(lambda: job(t1, None))
    assert gate.entered.wait(10)
    gate.entered.clear()
    second, _ = in_thread(lambda: job(t2, None))
    assert gate.entered.wait(10)

    # WHEN tick 1 is delivered again
    again = job(t1, None)

    # THEN it does not take the lease back from tick 2
    assert again["decision"] == "duplicate"
    assert aws.store.read_lease("crm-sync").fence == 2
    gate.release.set()
    first.join(10)
    second.join(10)
    assert [f for _, f in rec.calls] == [1, 2]


def test_queue_a_queued_trigger_whose_run_failed_runs_again_on_redelivery(aws, clock):
    # GIVEN a QUEUE job with one trigger queued behind an active run
    gate, rec = Gate(), Recorder()
    t0 = clock.now() - timedelta(minutes=10)  # the ticks below: none ahead of the clock
    queued_tick = tick("crm-sync", t0 + timedelta(minutes=1))
    failures = {"left": 1}
    inner = rec.handler(holding(gate, tick("crm-sync", t0)))

    def handler(event, context):
        from jobguard import current_run

        result = inner(event, context)
        if current_run().trigger.trigger_id.endswith(queued_tick["scheduled_at"]) and \
                failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("the export's destination was down")
        return result

    job = make_job(aws, clock, handler, policy=OverlapPolicy.QUEUE)
    thread, _ = in_thread(lambda: job(tick("crm-sync", t0), None))
    assert gate.entered.wait(10)
    assert job(queued_tick, None)["decision"] == "queued"
    gate.release.set()
    thread.join(10)

    # WHEN its run fails, and SQS delivers the message again (as the mapping would after
    # the visibility timeout: here at once)
    assert deliver_once(aws.sqs, aws.queues["crm-sync"], job, visibility_s=0) == 1
    assert deliver_once(aws.sqs, aws.queues["crm-sync"], job, wait_s=1) == 1

    # THEN the trigger ran again and succeeded: a failed queued run is retried, not
    # recorded as a duplicate of itself and dropped
    ran = [trigger for trigger, _ in rec.calls]
    assert ran.count(f"crm-sync@{queued_tick['scheduled_at']}") == 2
    statuses = aws.statuses("crm-sync")
    assert statuses.count("failed") == 1 and statuses.count("succeeded") == 2
    assert "duplicate" not in statuses
    lease = aws.store.read_lease("crm-sync")
    assert lease.queued_n == 0 and lease.run_id is None
    assert _queue_depth(aws, "crm-sync") == 0
