"""The heartbeat: a real thread renewing a real lease row on the in-process emulator.

GIVEN a run holding its job's lease, WHEN its heartbeat runs (the worker's time moved by
a ``ManualClock``, pauses staged with the ``before_renew`` / ``lease_lost`` hook points,
faults injected through botocore event hooks), THEN it renews on its interval and moves
its local deadline with each confirmed renewal, sends nothing once stopped, retries a
renewal it could not confirm soon (well within its deadline), and gives the lease up,
announcing why, when a renewal is refused or its local deadline passes. An ambiguous
renewal is settled by reading the row. These close the gaps ``make mutate`` found in
``jobguard.run`` (docs/mutation.md): the fast suites stopped every heartbeat before its
first renewal.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from jobguard import GuardedJob, JobConfig, JobGuardError, LeaseLostError, current_run, hooks
from jobguard._clients import client
from jobguard.callsites import Fault
from jobguard.clock import to_ms
from jobguard.dynamodb import DynamoJobStore
from jobguard.faults import Faults, Rule
from jobguard.lease import Acquired
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import Release, Take
from jobguard.run import Heartbeat, next_wait
from jobguard.testing import ManualClock
from jobguard.trigger_state import State
from jobguard.triggers import Trigger, TriggerKind

JOB = "heartbeat-job"
LEASE = timedelta(seconds=60)
SKEW = timedelta(seconds=5)
WAIT_S = 10  # how long a test waits for an event it expects (it comes in milliseconds)
DEADLINE_PASSED = "local lease deadline passed without a confirmed renewal"
REFUSED = "renewal refused: the lease was taken over or released"


def trigger(run_id: str) -> Trigger:
    return Trigger(JOB, f"{JOB}@manual:{run_id}", TriggerKind.MANUAL)


def take(aws: Any, run_id: str, now_ms: int) -> Acquired:
    result = aws.store.take(Take(trigger(run_id), run_id=run_id, owner=f"worker-{run_id}",
                                 now_ms=now_ms, lease_ms=to_ms_of(LEASE), skew_ms=to_ms_of(SKEW)))
    assert isinstance(result, Acquired)
    return result


def to_ms_of(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def heartbeat(aws: Any, clock: ManualClock, *, every: timedelta = timedelta(milliseconds=10),
              acquired_ago_s: float = 0.0, run_id: str = "R1", fence: int = 1,
              store: DynamoJobStore | None = None) -> Heartbeat:
    """R1's heartbeat, as the guard builds it right after the acquisition returned
    (``acquired_ago_s``: how long before now the acquisition's request was sent). Its
    store has the client a Lambda's guard builds (standard retries, 3 attempts), so a
    fault meets the SDK's retries as deployed, whatever the emulator's own clients do."""
    return Heartbeat(store=store or lambda_store(aws), job=JOB, run_id=run_id, fence=fence,
                     lease=LEASE, every=every, skew_margin=SKEW, clock=clock,
                     acquired_monotonic=clock.monotonic() - acquired_ago_s)


def lambda_store(aws: Any) -> DynamoJobStore:
    """The store on the client a Lambda's guard builds (one per test: jobguard caches
    none), on the emulator's table."""
    return DynamoJobStore(aws.table, client=client("dynamodb"))


def faults(store: DynamoJobStore, *rules: Rule) -> Faults:
    """``rules`` on the heartbeat's store, its SDK backoff scaled down."""
    return Faults(list(rules), backoff_scale=0.001, clients=[store.client])


@contextmanager
def lost_events() -> Iterator[tuple[list[dict[str, Any]], threading.Event]]:
    """Every ``lease_lost`` the heartbeat announces, and an event set at the first."""
    seen: list[dict[str, Any]] = []
    first = threading.Event()

    def on_lost(**context: Any) -> None:
        seen.append(context)
        first.set()

    with hooks.on("lease_lost", on_lost):
        yield seen, first


def row(aws: Any) -> tuple[Any, ...]:
    lease = aws.store.read_lease(JOB)
    return lease.run_id, lease.fence, lease.heartbeat_at_ms, lease.expires_at_ms


# -- the thread ----------------------------------------------------------------------------

def test_the_heartbeat_renews_on_its_interval_and_sends_nothing_once_stopped(aws, clock):
    """GIVEN R1 holds the lease (60 s, skew margin 5 s) from t0, its heartbeat renewing
    every 10 ms WHEN 20 s of the worker's time pass before each renewal and the run stops
    just before the fourth THEN three renewals landed: heartbeat t0+60 s, expiry t0+120 s
    (the local deadline moved with each: t0+60 s is past the first one), each announced
    with the job, run and fence from the job's own daemon thread; the fourth sent
    nothing, and the lease was never given up."""
    t0 = to_ms(clock.now())
    take(aws, "R1", t0)
    start = clock.monotonic()
    hb = heartbeat(aws, clock)
    announced: list[tuple[dict[str, Any], str, bool]] = []
    fourth = threading.Event()

    def before_renew(**context: Any) -> None:
        if context["run_id"] != "R1":
            return  # a heartbeat another test left running (the hook point is global)
        me = threading.current_thread()
        announced.append((context, me.name, me.daemon))
        if len(announced) == 4:
            hb.stop()  # the run ends while this renewal is about to go out
            fourth.set()
            return
        clock.advance(timedelta(seconds=20))

    with lost_events() as (lost, _), hooks.on("before_renew", before_renew):
        hb.start()
        assert fourth.wait(WAIT_S), "the heartbeat never came round to a fourth renewal"
        hb.stop()

    assert hb.renewals == 3
    assert row(aws) == ("R1", 1, t0 + 60_000, t0 + 120_000)
    assert hb.deadline == start + 60 + 55
    assert hb.lost_reason is None and lost == []
    # Each renewal came a full interval (10 ms) after the last, not the 1 s retry delay.
    assert announced == [({"job": JOB, "run_id": "R1", "fence": 1, "waited_s": 0.01},
                          f"jobguard-heartbeat-{JOB}", True)] * 4


def test_a_heartbeat_whose_deadline_passed_before_it_started_gives_up_at_once(aws, clock):
    """GIVEN R1's acquisition returned 56 s after it was sent (lease 60 s - skew margin
    5 s: its local deadline passed already) and a heartbeat interval of 30 s WHEN the
    heartbeat starts THEN it gives the lease up at once, without waiting its interval
    and without renewing: ``lease_lost`` names the job, run, fence and reason, and the
    row keeps the acquisition's expiry."""
    t0 = to_ms(clock.now())
    take(aws, "R1", t0)
    hb = heartbeat(aws, clock, every=timedelta(seconds=30), acquired_ago_s=56)
    renewing: list[dict[str, Any]] = []

    with lost_events() as (lost, first), hooks.on("before_renew", lambda **c: renewing.append(c)):
        hb.start()
        assert first.wait(WAIT_S), "the heartbeat kept waiting past its deadline"
        hb.stop()

    assert lost == [{"job": JOB, "run_id": "R1", "fence": 1, "reason": DEADLINE_PASSED}]
    assert renewing == [] and hb.renewals == 0
    assert hb.lost_reason == DEADLINE_PASSED
    assert row(aws) == ("R1", 1, t0, t0 + 60_000)


def test_a_renewal_the_table_throttles_is_retried_soon_and_the_deadline_still_ends_it(
        aws, clock):
    """GIVEN R1 holds the lease and every renewal is throttled (the row stays as it was)
    WHEN the heartbeat starts 52 s later (3 s before its local deadline: lease 60 s, skew
    margin 5 s) THEN it renews after its 10 ms interval, and the throttled renewal is not
    lost for that: it is retried after a quarter of the 3 s left (0.75 s, not a full
    interval and not the 1 s cap); and once the worker's clock passes the local deadline
    (moved 56 s during the retry) it gives the lease up for the deadline, after exactly
    two attempts and no renewal."""
    t0 = to_ms(clock.now())
    take(aws, "R1", t0)
    store = lambda_store(aws)
    hb = heartbeat(aws, clock, store=store)
    clock.advance(timedelta(seconds=52))
    attempts: list[str | None] = []
    waits: list[float] = []

    def before_renew(**context: Any) -> None:
        if context["run_id"] != "R1":
            return  # a heartbeat another test left running (the hook point is global)
        attempts.append(hb.lost_reason)
        waits.append(context["waited_s"])
        if len(attempts) == 2:
            clock.advance(timedelta(seconds=56))

    throttled = Rule(Fault.THROTTLE, operation="UpdateItem")
    with faults(store, throttled), \
            lost_events() as (lost, first), hooks.on("before_renew", before_renew):
        hb.start()
        assert first.wait(WAIT_S), "a throttled renewal was not retried within its deadline"
        hb.stop()

    assert attempts == [None, None]
    assert waits == [0.01, 0.75]
    assert [c["reason"] for c in lost] == [DEADLINE_PASSED]
    assert hb.renewals == 0
    assert row(aws) == ("R1", 1, t0, t0 + 60_000)


def test_a_heartbeat_whose_lease_was_taken_over_gives_it_up_at_its_next_renewal(aws, clock):
    """GIVEN R1 held the lease and R2 (a worker whose clock reads 70 s later) took it over
    with fence 2 WHEN R1's heartbeat renews THEN the renewal is refused and R1 gives the
    lease up, saying so, once: no retry, and R2's row is untouched."""
    t0 = to_ms(clock.now())
    take(aws, "R1", t0)
    assert take(aws, "R2", t0 + 70_000).fence == 2
    hb = heartbeat(aws, clock)
    attempts: list[dict[str, Any]] = []

    with lost_events() as (lost, first), hooks.on("before_renew", lambda **c: attempts.append(c)):
        hb.start()
        assert first.wait(WAIT_S), "a refused renewal did not end the heartbeat"
        hb.stop()

    assert lost == [{"job": JOB, "run_id": "R1", "fence": 1, "reason": REFUSED}]
    assert len(attempts) == 1 and hb.renewals == 0
    assert row(aws) == ("R2", 2, t0 + 70_000, t0 + 130_000)


# -- one renewal whose outcome the worker did not see ------------------------------------------

def test_a_renewal_whose_responses_were_all_lost_but_which_landed_counts(aws, clock):
    """GIVEN R1 holds the lease from t0 WHEN it renews at t0+20 s and the write lands but
    every response is lost (the SDK gives up with a read timeout) THEN the heartbeat
    reads the row, finds its own expiry t0+80 s there, and counts the renewal: its local
    deadline moves to the renewal + 55 s."""
    t0 = to_ms(clock.now())
    take(aws, "R1", t0)
    store = lambda_store(aws)
    hb = heartbeat(aws, clock, store=store)
    clock.advance(timedelta(seconds=20))

    lost = Rule(Fault.LOST, operation="UpdateItem", attempts=99)
    with faults(store, lost) as injected:
        assert hb.renew_once() is True
    assert injected.injected, "the renewal's response was not lost"
    assert hb.renewals == 1
    assert hb.deadline == clock.monotonic() + 55
    assert row(aws) == ("R1", 1, t0 + 20_000, t0 + 80_000)


@pytest.mark.parametrize("row_now", ["ours", "taken over", "released"])
def test_a_throttled_renewal_is_settled_by_the_row(aws, clock, row_now):
    """GIVEN R1 held the lease (fence 1) and the row is now still R1's / taken over by R2
    (fence 2) / released by R1 (fence 1, no holder) WHEN R1's renewal 20 s later is
    throttled (not applied) THEN the heartbeat reads the row: still its own, the renewal
    is unresolved (retried later; nothing lost, nothing counted, the deadline
    unchanged); anyone else's, or no one's, and the lease is lost, saying why."""
    t0 = to_ms(clock.now())
    take(aws, "R1", t0)
    if row_now == "taken over":
        take(aws, "R2", t0 + 70_000)
    elif row_now == "released":
        record = RunRecord(job=JOB, run_id="R1", trigger_id=trigger("R1").trigger_id,
                           trigger_kind="manual", policy="SKIP", decision=Decision.RAN,
                           status=RunStatus.SUCCEEDED, started_at_ms=t0, ended_at_ms=t0,
                           fence=1)
        assert aws.store.release(Release(JOB, run_id="R1", fence=1, trigger_id=record.trigger_id,
                                         outcome=State.DONE, record=record,
                                         record_ttl_s=t0 // 1000 + 3600,
                                         trigger_ttl_s=t0 // 1000 + 3600)).released
    store = lambda_store(aws)
    hb = heartbeat(aws, clock, store=store)
    deadline = hb.deadline
    clock.advance(timedelta(seconds=20))

    throttled = Rule(Fault.THROTTLE, operation="UpdateItem")
    with faults(store, throttled):
        outcome = hb.renew_once()

    assert hb.renewals == 0 and hb.deadline == deadline
    if row_now == "ours":
        assert outcome is None and hb.lost_reason is None
    else:
        assert outcome is False and hb.lost_reason == REFUSED


def test_a_renewal_unresolved_because_the_row_cannot_be_read_is_retried_not_lost(aws, clock):
    """GIVEN R1 holds the lease WHEN its renewal is throttled and so is the read that
    would settle it THEN the renewal is unresolved (None): not lost, not counted."""
    take(aws, "R1", to_ms(clock.now()))
    store = lambda_store(aws)
    hb = heartbeat(aws, clock, store=store)
    clock.advance(timedelta(seconds=20))

    rules = [Rule(Fault.THROTTLE, operation="UpdateItem"),
             Rule(Fault.THROTTLE, operation="GetItem")]
    with faults(store, *rules):
        assert hb.renew_once() is None
    assert hb.renewals == 0 and hb.lost_reason is None


def test_stop_waits_for_a_renewal_in_flight(aws, clock):
    """GIVEN R1's heartbeat in the middle of a renewal (held at ``before_renew``) WHEN the
    run ends and stops it THEN ``stop()`` does not return while that renewal is in flight
    (the release that follows must not race it); once the renewal is let go, the
    heartbeat sends nothing more and its thread has ended when ``stop()`` returns."""
    take(aws, "R1", to_ms(clock.now()))
    hb = heartbeat(aws, clock)
    renewing, proceed, returned = threading.Event(), threading.Event(), threading.Event()

    def before_renew(**_: Any) -> None:
        renewing.set()
        assert proceed.wait(WAIT_S)

    def stop() -> None:
        hb.stop()
        returned.set()

    with hooks.on("before_renew", before_renew):
        hb.start()
        assert renewing.wait(WAIT_S)
        stopper = threading.Thread(target=stop, daemon=True)
        stopper.start()
        # a bounded look for something that must not happen (it never does with the
        # join; without it, stop() returns at once)
        assert not returned.wait(0.5), "stop() returned with a renewal in flight"
        proceed.set()
        assert returned.wait(WAIT_S)

    assert hb.renewals == 0
    assert f"jobguard-heartbeat-{JOB}" not in [t.name for t in threading.enumerate()]


# -- the run's view of it ---------------------------------------------------------------------

def test_a_run_past_its_local_deadline_may_write_nothing_more(aws, clock):
    """GIVEN a guarded run whose worker's clock passes its local deadline (lease 60 s -
    skew 5 s) before any renewal WHEN the handler asks ``ensure_lease()`` THEN it raises
    LeaseLostError naming the job, run, fence and reason, and the run is recorded
    ``lease_lost`` with that reason; outside a guarded handler, ``current_run()`` says so."""
    seen: dict[str, Any] = {}

    def handler(event: Any, context: Any) -> None:
        run = current_run()
        seen.update(run_id=run.run_id, before=run.lease_lost)
        clock.advance(timedelta(seconds=56))
        seen["after"] = run.lease_lost
        with pytest.raises(LeaseLostError) as caught:
            run.ensure_lease()
        seen["error"] = caught.value
        raise caught.value

    config = JobConfig(name=JOB, lease=LEASE, skew_margin=SKEW, table_name=aws.table)
    job = GuardedJob(config, handler, store=aws.store, clock=clock)
    outcome = job({"job": JOB, "manual": True, "trigger_id": "t"}, None)

    error = seen["error"]
    assert (error.job, error.run_id, error.fence, error.reason) == (
        JOB, seen["run_id"], 1, DEADLINE_PASSED)
    assert (seen["before"], seen["after"]) == (False, True)
    assert (outcome["jobguard"], outcome["detail"]) == ("lease_lost", DEADLINE_PASSED)
    [record] = aws.runs(JOB)
    assert (record.status.value, record.detail) == ("lease_lost", DEADLINE_PASSED)
    with pytest.raises(JobGuardError) as outside:
        current_run()
    assert str(outside.value) == "current_run() called outside a guarded handler"


# -- how long it waits ------------------------------------------------------------------------

@pytest.mark.parametrize(("renewed", "remaining_s", "every_s", "expected"), [
    (True, 100.0, 10.0, 10.0),   # renewed, far from the deadline: a full interval
    (True, 3.0, 10.0, 3.0),      # never past the local deadline
    (True, -2.0, 10.0, 0.0),     # the deadline passed: look again at once
    (False, 100.0, 10.0, 1.0),   # unresolved: retry within a second, not an interval
    (False, 2.0, 10.0, 0.5),     # a quarter of what is left, so several retries fit
    (False, 0.02, 10.0, 0.01),   # but never spinning: at least 10 ms
    (False, -2.0, 10.0, 0.01),
    (False, 100.0, 0.2, 1.0),    # a retry does not follow a shorter interval
])
def test_the_wait_before_the_next_renewal(renewed, remaining_s, every_s, expected):
    """GIVEN the last renewal's outcome (renewed, or unresolved: throttled, timed out, its
    answer lost) and the time left before the local deadline WHEN the heartbeat picks its
    next wait THEN a renewed lease waits a full interval but never past the deadline, and
    an unresolved renewal is retried after a quarter of what is left, between 10 ms and
    1 s."""
    assert next_wait(renewed, remaining_s, every_s) == pytest.approx(expected)
