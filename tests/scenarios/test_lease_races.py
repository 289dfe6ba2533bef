"""Races on the lease: a paused holder, duplicate deliveries, clock skew, renewal faults."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from botocore.exceptions import ClientError, ConnectTimeoutError

from jobguard import OverlapPolicy, SystemClock, hooks
from jobguard.clock import to_ms

from ._support import Gate, Recorder, in_thread, make_job, tick


def test_paused_holder_is_taken_over_and_every_later_write_of_it_fails(aws, clock):
    # GIVEN worker A paused right after acquiring the lease (named hook point)
    paused, resumed = threading.Event(), threading.Event()
    a_results: dict[str, object] = {}

    def pause_first(**ctx):
        if ctx["fence"] == 1:
            paused.set()
            assert resumed.wait(20)

    def handler_a(event, context):
        from jobguard import current_run

        run = current_run()
        try:
            run.ensure_lease()
        except Exception as exc:  # noqa: BLE001 - recorded for the assertion below
            a_results["ensure_lease"] = exc
            raise
        return "A wrote"

    rec = Recorder()
    job_a = make_job(aws, clock, handler_a)
    job_b = make_job(aws, clock, rec.handler())
    with hooks.on("after_acquire", pause_first):
        thread, box = in_thread(lambda: job_a(tick("crm-sync", clock.now()), None))
        assert paused.wait(10)

        # WHEN its lease expires (plus the skew margin) and the next tick arrives
        clock.advance(timedelta(seconds=60 + 5) + timedelta(milliseconds=1))
        result_b = job_b(tick("crm-sync", clock.now()), None)
        resumed.set()
        thread.join(10)

    # THEN B took over with a higher fence, and A's writes all failed
    assert result_b["fence"] == 2
    assert type(a_results["ensure_lease"]).__name__ == "LeaseLostError"
    assert box["result"]["jobguard"] == "lease_lost"
    runs = {r.fence: r for r in aws.runs("crm-sync")}
    assert runs[1].status.value == "lease_lost" and runs[2].status.value == "succeeded"
    assert aws.store.renew("crm-sync", run_id=runs[1].run_id, fence=1,
                           now_ms=to_ms(clock.now()), lease_ms=60_000) is False
    # AND no overlap: A never committed, B started after A's lease had expired
    assert runs[1].error is not None and "LeaseLostError" in runs[1].error
    assert runs[2].started_at_ms > runs[1].started_at_ms + 60_000
    lease = aws.store.read_lease("crm-sync")
    assert lease.fence == 2 and lease.run_id is None and lease.last_run_id == runs[2].run_id


def test_two_registrations_and_three_deliveries_of_one_tick_run_once(aws, clock):
    # GIVEN a job whose run is held open, and one tick delivered five ways
    gate, rec = Gate(), Recorder()
    job = make_job(aws, clock, rec.handler(lambda t: gate))
    at = clock.now()
    deliveries = [
        tick("crm-sync", at, execution_id="schedule-a"),
        tick("crm-sync", at, execution_id="schedule-b"),  # second registration
        tick("crm-sync", at, execution_id="schedule-a"),  # redelivered ...
        tick("crm-sync", at, execution_id="schedule-a"),
        {"version": "0", "id": "evt-1", "detail-type": "Scheduled Event",
         "source": "aws.events", "time": tick("x", at)["scheduled_at"], "detail": {}},
    ]

    # WHEN three of them arrive at once
    barrier = threading.Barrier(3)

    def deliver(event):
        barrier.wait(10)
        return job(event, None)

    threads = [in_thread(lambda e=e: deliver(e)) for e in deliveries[:3]]
    assert gate.entered.wait(10)
    # the two that lost know the trigger is running
    others = [job(e, None) for e in deliveries[3:]]
    gate.release.set()
    for t, _ in threads:
        t.join(10)
    results = [box.get("result") for _, box in threads]
    # AND one more arrives after the run finished
    late = job(deliveries[0], None)

    # THEN exactly one run happened; every other delivery is a recorded duplicate
    assert len(rec.calls) == 1
    ran = [r for r in results if isinstance(r, dict) and "ran" in r]
    assert len(ran) == 1
    duplicates = [r for r in results + others + [late] if r.get("decision") == "duplicate"]
    assert len(duplicates) == 5
    statuses = aws.statuses("crm-sync")
    assert statuses.count("succeeded") == 1 and statuses.count("duplicate") == 5


def test_a_worker_whose_clock_runs_ahead_within_the_margin_cannot_steal(aws, clock):
    # GIVEN A holds a live lease (60 s, skew margin 5 s)
    gate, rec = Gate(), Recorder()
    job_a = make_job(aws, clock, rec.handler(lambda t: gate))
    thread, _ = in_thread(lambda: job_a(tick("crm-sync", clock.now()), None))
    assert gate.entered.wait(10)
    start = clock.now()

    # WHEN, 1 ms before A's lease ends, B's clock runs ahead by just under the margin
    clock.advance(timedelta(seconds=60) - timedelta(milliseconds=1))
    ahead = clock.skewed(timedelta(seconds=5) - timedelta(milliseconds=1))
    job_b = make_job(aws, ahead, rec.handler())
    outcome = job_b({"job": "crm-sync", "manual": True, "trigger_id": "b"}, None)

    # THEN B is skipped: the margin absorbs its skew
    assert outcome["decision"] == "skipped"
    lease = aws.store.read_lease("crm-sync")
    assert lease.fence == 1 and lease.expires_at_ms == to_ms(start) + 60_000

    # AND the control: a clock ahead by more than the margin would take over
    beyond = clock.skewed(timedelta(seconds=5) + timedelta(milliseconds=2))
    job_c = make_job(aws, beyond, rec.handler())
    assert job_c({"job": "crm-sync", "manual": True, "trigger_id": "c"}, None)["fence"] == 2
    gate.release.set()
    thread.join(10)


def test_a_stale_tick_and_a_paused_job_are_recorded_and_not_run(aws, clock):
    rec = Recorder()
    job = make_job(aws, clock, rec.handler(), stale_after=timedelta(minutes=10),
                   dedup_window=timedelta(minutes=20))
    # GIVEN a retry delivered long after its scheduled time
    stale = job(tick("crm-sync", clock.now() - timedelta(minutes=11)), None)
    # AND a paused job
    aws.store.pause("crm-sync", reason="destination maintenance", now_ms=to_ms(clock.now()))
    paused = job(tick("crm-sync", clock.now()), None)
    aws.store.resume("crm-sync")
    resumed = job(tick("crm-sync", clock.now() + timedelta(seconds=1)), None)

    # THEN neither ran, both are in the run log, and the job runs again once resumed
    assert stale["decision"] == "stale" and paused["decision"] == "paused"
    assert paused["detail"] == "destination maintenance"
    assert resumed["fence"] == 1 and len(rec.calls) == 1
    assert sorted(aws.statuses("crm-sync")) == ["paused", "stale", "succeeded"]


def _timeout() -> Exception:
    return ConnectTimeoutError(endpoint_url="injected")


def _throttle() -> Exception:
    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "injected"}},
                       "UpdateItem")


@pytest.mark.parametrize("fault", [_timeout, _throttle], ids=["timeout", "throttling"])
def test_renewal_failures_longer_than_the_lease_stop_the_run_before_it_expires(aws, fault):
    # GIVEN a run whose every renewal fails (injected with a botocore event hook)
    clock = SystemClock()
    seen: dict[str, int] = {}
    lost = threading.Event()

    def fail_renewals(params, **kwargs):
        names = set(params.get("ExpressionAttributeNames", {}).values())
        if "heartbeat_at_ms" in names and "acquired_at_ms" not in names:
            seen["renewals"] = seen.get("renewals", 0) + 1
            raise fault()

    def on_lost(**ctx):
        seen["lost_at_ms"] = to_ms(clock.now())
        lost.set()

    def handler(event, context):
        from jobguard import current_run

        run = current_run()
        assert lost.wait(20)
        run.ensure_lease()  # raises LeaseLostError
        return "committed after losing the lease"

    job = make_job(aws, clock, handler, lease=timedelta(seconds=2),
                   heartbeat_every=timedelta(milliseconds=300),
                   skew_margin=timedelta(milliseconds=600))
    aws.ddb.meta.events.register("before-parameter-build.dynamodb.UpdateItem", fail_renewals)
    try:
        with hooks.on("lease_lost", on_lost):
            result = job(tick("crm-sync", clock.now()), None)
    finally:
        aws.ddb.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", fail_renewals)

    # THEN the run gave up on its own, before its lease row expired, and committed nothing
    (run,) = aws.runs("crm-sync")
    assert result["jobguard"] == "lease_lost"
    assert run.status.value == "lease_lost" and "LeaseLostError" in (run.error or "")
    assert seen["renewals"] >= 2
    assert seen["lost_at_ms"] < run.started_at_ms + 2_000
    # AND it still released the lease it held, so the next trigger need not wait
    assert aws.store.read_lease("crm-sync").run_id is None


@pytest.mark.parametrize("policy", list(OverlapPolicy))
def test_release_keeps_the_row_and_the_fence_grows_by_one_per_acquisition(aws, clock, policy):
    rec = Recorder()
    job = make_job(aws, clock, rec.handler(), policy=policy)
    for second in range(3):
        job(tick("crm-sync", clock.now() + timedelta(seconds=second)), None)
    assert [fence for _, fence in rec.calls] == [1, 2, 3]
    lease = aws.store.read_lease("crm-sync")
    assert lease.fence == 3 and lease.run_id is None
