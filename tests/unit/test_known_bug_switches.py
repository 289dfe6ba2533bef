"""The known bugs (``tests/explorer/known_bugs.py``): each patch brings its old defect back.

The explorer (``tests/explorer``) proves it still finds each of issue 14's eleven
defects (and issue 33's garbage message) by patching them back in, one at a time, in
its own process. A patch that silently stopped bringing its defect back (it applies,
but to code that no longer matters) would make that proof empty: the explorer would
"miss" a defect that is not there. So each known bug gets one test, on the in-process
emulator, that

GIVEN the situation the defect needs, WHEN it plays out with the switch off and then
(for another job) with it on, THEN the fixed behaviour is seen first and the old defect
second, as a user saw it: the run log, a trigger's item, the lease row, a return value.

The patch mechanism itself (each applies exactly once, compiles, is undone; nothing in
``lib/jobguard`` knows of them): ``test_known_bug_patches.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from jobguard import GuardedJob, JobConfig, OverlapPolicy, current_run
from jobguard.clock import to_ms
from jobguard.errors import DamagedRowError, InvalidTriggerError, LeaseLostError, SendError
from jobguard.lease import Acquired, LeaseState, parse_lease
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import ForceRelease, Release, Take
from jobguard.trigger_state import Next, Route, State, TriggerRecord, decide
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import Trigger, TriggerKind, format_instant
from tests.explorer import known_bugs
from tests.scenarios._trigger_support import fail_next_send

LEASE = timedelta(seconds=60)
LEASE_MS = 60_000
SKEW_MS = 5_000  # JobConfig's default skew margin

Switch = Callable[[str, bool], contextlib.AbstractContextManager[None]]


@pytest.fixture
def switch() -> Iterator[Switch]:
    """``with switch(name, on):`` runs the block with exactly that known bug patched in
    (or none), whatever ``JOBGUARD_TEST_MUTANT`` brought back for the session (restored
    after each block)."""

    @contextlib.contextmanager
    def only(name: str, on: bool) -> Iterator[None]:
        assert name in known_bugs.KNOWN, name
        with known_bugs.only(*([name] if on else [])):
            yield

    yield only


def job_of(aws: Any, clock: Any, name: str, policy: OverlapPolicy,
           handler: Callable[[Any, Any], Any]) -> GuardedJob:
    config = JobConfig(name=name, policy=policy, lease=LEASE, table_name=aws.table)
    queue = TriggerQueue(aws.fifo_queue(name), client=aws.sqs) if config.needs_queue else None
    return GuardedJob(config, handler, store=aws.store, queue=queue, clock=clock,
                      owner="test-worker")


def manual(job: str, name: str) -> dict[str, Any]:
    return {"job": job, "manual": True, "trigger_id": name, "requested_by": "ops"}


def held_by(aws: Any, job: str, run_id: str, *, at_ms: int, replace: bool = False) -> Acquired:
    """Worker ``run_id`` took ``job``'s lease at ``at_ms`` for its manual trigger
    ``run_id`` (and is still running, or died)."""
    result = aws.store.take(Take(Trigger(job, f"{job}@manual:{run_id}", TriggerKind.MANUAL),
                                 run_id=run_id, owner=f"worker-{run_id}", now_ms=at_ms,
                                 lease_ms=LEASE_MS, skew_ms=SKEW_MS, replace=replace))
    assert isinstance(result, Acquired), result
    return result


def ok(event: Any, context: Any) -> str:
    return "done"


# -- #1 ---------------------------------------------------------------------------------

def test_release_prunes_from_old_read_deletes_a_trigger_whatever_it_became(aws, clock, switch):
    """GIVEN a SKIP job whose trigger A failed WHEN trigger B runs and, while it runs, A
    is delivered again (skipped: B holds the lease) THEN once B released, A's item says
    ``skipped`` (a later copy of A is a duplicate); with ``release-prunes-from-old-read``
    on, B's release deletes A's item, which it saw failed when it started."""
    after: dict[bool, Any] = {}
    for on in (False, True):
        name = f"prune-{'on' if on else 'off'}"
        nested: list[dict[str, Any]] = []

        def handler(event: Any, context: Any, name: str = name,
                    nested: list[dict[str, Any]] = nested) -> str:
            if current_run().trigger.trigger_id.endswith(":a"):
                raise RuntimeError("the export failed")
            nested.append(job(manual(name, "a"), None))  # noqa: B023 - this round's job
            return "done"

        job = job_of(aws, clock, name, OverlapPolicy.SKIP, handler)
        with switch("release-prunes-from-old-read", on):
            with pytest.raises(RuntimeError):
                job(manual(name, "a"), None)
            assert aws.store.read_trigger(name, f"{name}@manual:a").state is State.FAILED
            assert job(manual(name, "b"), None) == "done"
        assert [n["decision"] for n in nested] == ["skipped"]
        after[on] = aws.store.read_trigger(name, f"{name}@manual:a")
    assert after[False] is not None and after[False].state is State.SKIPPED
    assert after[True] is None


# -- #2 ---------------------------------------------------------------------------------

def test_force_release_erases_run_leaves_no_record_and_a_running_trigger(aws, clock, switch):
    """GIVEN run R1 stuck holding its job's lease WHEN the operator force-releases it
    THEN R1's record says ``released_by_operator`` and its trigger ``released`` (a
    redelivery never runs it again); with ``force-release-erases-run`` on, there is no
    record of R1 and its trigger still reads ``running``."""
    now_ms = to_ms(clock.now())
    for on in (False, True):
        name = f"erase-{'on' if on else 'off'}"
        held_by(aws, name, "R1", at_ms=now_ms)
        with switch("force-release-erases-run", on):
            assert aws.store.force_release(ForceRelease(name, holder_run_id="R1", fence=1,
                                                        now_ms=now_ms + 1_000, by="alice")) is True
        records = {r.run_id: r for r in aws.runs(name)}
        trigger = aws.store.read_trigger(name, f"{name}@manual:R1")
        assert aws.store.read_lease(name).run_id is None
        if on:
            assert "R1" not in records and trigger.state is State.RUNNING
        else:
            assert records["R1"].status is RunStatus.RELEASED_BY_OPERATOR
            assert trigger.state is State.RELEASED and trigger.ended_by == "operator"


# -- #3 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("state", [State.FAILED, State.LOST])
def test_paused_queue_retry_loops_retries_a_failed_queued_trigger_of_a_paused_job(
        switch, state):
    """GIVEN a paused QUEUE job whose lease nobody holds, and a queued trigger whose run
    failed (or lost its lease) WHEN its message comes back THEN it is recorded
    ``paused``; with ``paused-queue-retry-loops`` on, it is run (and, as the pause
    refuses the acquisition, decided again and again)."""
    now_ms = 1_800_000_000_000
    paused = LeaseState(job="j", fence=4, paused_at_ms=now_ms - 1, paused_reason="upgrade")
    item = TriggerRecord(trigger_id="j@t", state=state, route=Route.QUEUE, run_id="R0",
                         ttl_epoch_s=now_ms // 1000 + 3600)
    trigger = Trigger("j", "j@t", TriggerKind.QUEUED)
    config = JobConfig(name="j", policy=OverlapPolicy.QUEUE)
    steps = {}
    for on in (False, True):
        with switch("paused-queue-retry-loops", on):
            steps[on] = decide(paused, item, trigger, config, now_ms)
    assert steps == {False: Next.PAUSED, True: Next.RUN}


# -- #4 ---------------------------------------------------------------------------------

def _lose_second_transaction_answer(client: Any) -> Callable[[], None]:
    """The second TransactWriteItems is applied, but its answer is lost on the way
    back. Returns the function that removes the fault."""
    calls: list[int] = []

    def after(http_response: Any, **_: Any) -> None:
        calls.append(http_response.status_code)
        if len(calls) == 2 and http_response.status_code == 200:
            raise ReadTimeoutError(endpoint_url="emulator (answer lost)")

    client.meta.events.register("after-call.dynamodb.TransactWriteItems", after,
                                unique_id="lose-second")
    return lambda: client.meta.events.unregister("after-call.dynamodb.TransactWriteItems",
                                                 unique_id="lose-second")


def test_lost_release_forgets_drops_the_wake_receipt_of_its_own_landed_release(
        aws, clock, switch):
    """GIVEN R1 holds the lease and a deferred message left its wake receipt WHEN R1
    releases (its first attempt learns the receipt, its second lands but the answer is
    lost, its third is refused by its own release) THEN the release still returns the
    receipt, so the message is woken; with ``lost-release-forgets`` on, it returns
    none (the message waits its whole visibility timeout)."""
    now_ms = to_ms(clock.now())
    receipts = {}
    for on in (False, True):
        name = f"forgets-{'on' if on else 'off'}"
        held_by(aws, name, "R1", at_ms=now_ms)
        assert aws.store.set_wake(name, holder_run_id="R1", receipt="rcpt-1")
        record = RunRecord(job=name, run_id="R1", trigger_id=f"{name}@manual:R1",
                           trigger_kind="manual", policy="QUEUE", decision=Decision.RAN,
                           status=RunStatus.SUCCEEDED, started_at_ms=now_ms,
                           ended_at_ms=now_ms + 1_000, fence=1)
        remove = _lose_second_transaction_answer(aws.ddb)
        try:
            with switch("lost-release-forgets", on):
                released = aws.store.release(Release(name, run_id="R1", fence=1,
                                                     trigger_id=f"{name}@manual:R1",
                                                     outcome=State.DONE, record=record,
                                                     record_ttl_s=now_ms // 1000 + 60,
                                                     trigger_ttl_s=now_ms // 1000 + 60))
        finally:
            remove()
        assert released.released is True
        assert aws.store.read_lease(name).run_id is None
        receipts[on] = released.wake_receipt
    assert receipts == {False: "rcpt-1", True: None}


# -- #5 ---------------------------------------------------------------------------------

def test_coalesce_undo_strands_takes_the_follow_up_off_the_row_when_its_send_fails(
        aws, clock, switch):
    """GIVEN a COALESCE job whose lease R1 holds WHEN a trigger coalesces and the
    follow-up's message cannot be sent THEN the sender sees the error and the lease row
    still names the follow-up (queued), which R1's release sends again; with
    ``coalesce-undo-strands`` on, the follow-up is taken off the row and its item is
    deleted, so the coalesced trigger is owed a run nobody will start."""
    now_ms = to_ms(clock.now())
    for on in (False, True):
        name = f"strands-{'on' if on else 'off'}"
        job = job_of(aws, clock, name, OverlapPolicy.COALESCE, ok)
        held_by(aws, name, "R1", at_ms=now_ms)
        follow_up = f"{name}@follow-up:R1"
        with switch("coalesce-undo-strands", on), fail_next_send(aws.sqs) as failed, \
                pytest.raises(SendError):
            job(manual(name, "during"), None)
        assert len(failed) == 1
        assert aws.store.read_trigger(name, f"{name}@manual:during").state is State.COALESCED
        lease, item = aws.store.read_lease(name), aws.store.read_trigger(name, follow_up)
        if on:
            assert lease.follow_up is None and item is None
        else:
            assert lease.follow_up == follow_up and item.state is State.QUEUED


# -- #6 ---------------------------------------------------------------------------------

def test_replace_displaced_retryable_leaves_the_replaced_trigger_lost(aws, clock, switch):
    """GIVEN R1 holds a REPLACE job's lease for trigger A WHEN trigger B takes it over
    THEN A's item says ``replaced`` (final: a redelivery of A does not run it again);
    with ``replace-displaced-retryable`` on, it says ``lost``, which is retried."""
    now_ms = to_ms(clock.now())
    states = {}
    for on in (False, True):
        name = f"replace-{'on' if on else 'off'}"
        held_by(aws, name, "R1", at_ms=now_ms)
        with switch("replace-displaced-retryable", on):
            taken = held_by(aws, name, "R2", at_ms=now_ms + 1_000, replace=True)
        assert taken.fence == 2 and taken.displaced_run_id == "R1"
        states[on] = aws.store.read_trigger(name, f"{name}@manual:R1").state
    assert states == {False: State.REPLACED, True: State.LOST}


# -- #7 ---------------------------------------------------------------------------------

def test_lease_lost_is_done_ends_the_trigger_of_a_run_that_lost_its_lease_done(
        aws, clock, switch):
    """GIVEN a job whose handler finds its lease lost (a commit refused: a higher fence)
    WHEN the run ends THEN it says ``lease_lost``, its record too, and its trigger's
    item says ``lost`` (retried by its next delivery); with ``lease-lost-is-done`` on,
    the item says ``done``: the trigger never runs to the end."""
    states = {}
    for on in (False, True):
        name = f"lost-{'on' if on else 'off'}"

        def handler(event: Any, context: Any, name: str = name) -> str:
            run = current_run()
            raise LeaseLostError(name, run.run_id, run.fence, "the job row carries fence 2")

        job = job_of(aws, clock, name, OverlapPolicy.SKIP, handler)
        with switch("lease-lost-is-done", on):
            result = job(manual(name, "x"), None)
        assert result["jobguard"] == "lease_lost"
        [record] = aws.runs(name)
        assert record.status is RunStatus.LEASE_LOST
        states[on] = aws.store.read_trigger(name, f"{name}@manual:x").state
    assert states == {False: State.LOST, True: State.DONE}


# -- #8 ---------------------------------------------------------------------------------

def test_queued_forgotten_early_keeps_a_queued_trigger_only_its_dedup_window(
        aws, clock, switch):
    """GIVEN a QUEUE job whose lease R1 holds WHEN a trigger is queued THEN its item is
    kept while SQS can still deliver its message (14 days' retention, plus a day);
    with ``queued-forgotten-early`` on, only ``dedup_window`` (2 h): a message delivered
    later finds no item and is dropped as a duplicate."""
    now_ms = to_ms(clock.now())
    kept = {}
    for on in (False, True):
        name = f"forgotten-{'on' if on else 'off'}"
        job = job_of(aws, clock, name, OverlapPolicy.QUEUE, ok)
        held_by(aws, name, "R1", at_ms=now_ms)
        with switch("queued-forgotten-early", on):
            assert job(manual(name, "waits"), None)["decision"] == "queued"
        item = aws.store.read_trigger(name, f"{name}@manual:waits")
        assert item.state is State.QUEUED
        kept[on] = timedelta(seconds=item.ttl_epoch_s - now_ms // 1000)
    assert kept == {False: timedelta(days=15), True: job.config.dedup_window}


# -- #9 ---------------------------------------------------------------------------------

def test_lease_row_grows_leaves_a_mark_of_every_skip_on_the_lease_row(aws, clock, switch):
    """GIVEN a SKIP job whose lease R1 holds WHEN two triggers are skipped THEN the lease
    row gains nothing (every decision reads it: it must stay small); with
    ``lease-row-grows`` on, each skip leaves an attribute naming its trigger."""
    now_ms = to_ms(clock.now())
    marks = {}
    for on in (False, True):
        name = f"grows-{'on' if on else 'off'}"
        job = job_of(aws, clock, name, OverlapPolicy.SKIP, ok)
        held_by(aws, name, "R1", at_ms=now_ms)
        before = set(aws.store.read_lease_raw(name))
        with switch("lease-row-grows", on):
            for n in ("x", "y"):
                assert job(manual(name, n), None)["decision"] == "skipped"
        row = aws.store.read_lease_raw(name)
        marks[on] = {k: row[k] for k in set(row) - before}
    assert marks[False] == {}
    assert marks[True] == {f"t:grows-on@manual:{n}": "skipped" for n in ("x", "y")}


# -- #10 --------------------------------------------------------------------------------

def test_fence_restarts_reads_a_held_row_without_fence_as_fence_0_and_keeps_no_high_water(
        aws, clock, switch):
    """GIVEN a lease row that has been held but lost its fence (restored from an old
    backup, edited by hand) WHEN it is read THEN it is damage to ``fence``, naming the
    repair; with ``fence-restarts`` on it reads as fence 0 (the next run would get fence
    1 again). And an acquisition moves the fence high-water mark, except with the
    switch on."""
    row = {"last_run_id": "R3", "released_at_ms": 1_800_000_000_000, "released_by": "run"}
    with switch("fence-restarts", False), pytest.raises(DamagedRowError) as damaged:
        parse_lease("j", row)
    assert damaged.value.attribute == "fence"
    with switch("fence-restarts", True):
        assert parse_lease("j", row).fence == 0
    now_ms = to_ms(clock.now())
    high_water = {}
    for on in (False, True):
        name = f"restarts-{'on' if on else 'off'}"
        with switch("fence-restarts", on):
            assert held_by(aws, name, "R1", at_ms=now_ms).fence == 1
        high_water[on] = aws.store.high_water(name)
    assert high_water == {False: 1, True: 0}


# -- #11 --------------------------------------------------------------------------------

def test_future_tick_runs_accepts_a_tick_scheduled_hours_ahead(aws, clock, switch):
    """GIVEN a SKIP job WHEN a tick scheduled 2 h ahead of the worker's clock arrives
    THEN it is refused on ``scheduled_at`` and nothing runs (no schedule writes such an
    event); with ``future-tick-runs`` on, it runs."""
    ran: list[str] = []

    def handler(event: Any, context: Any) -> str:
        ran.append(current_run().trigger.trigger_id)
        return "done"

    ahead = format_instant(clock.now() + timedelta(hours=2))
    for on in (False, True):
        name = f"future-{'on' if on else 'off'}"
        job = job_of(aws, clock, name, OverlapPolicy.SKIP, handler)
        with switch("future-tick-runs", on):
            if on:
                assert job({"job": name, "scheduled_at": ahead}, None) == "done"
            else:
                with pytest.raises(InvalidTriggerError) as refused:
                    job({"job": name, "scheduled_at": ahead}, None)
                assert refused.value.field == "scheduled_at"
                assert aws.runs(name) == []
    assert ran == [f"future-on@{ahead}"]


# -- #12 (issue 33) -----------------------------------------------------------------------

def test_garbage_message_returned_reports_a_message_that_is_no_trigger_failed(
        aws, clock, switch):
    """GIVEN a QUEUE job whose trigger queue delivers a message that is not JSON WHEN it
    is handled THEN it is reported processed (SQS deletes it) and recorded ``rejected``;
    with ``garbage-message-returned`` on, it is reported failed (redelivered until the
    DLQ, the group behind it waiting) and nothing is recorded."""
    answers, records = {}, {}
    for on in (False, True):
        name = f"garbage-{'on' if on else 'off'}"
        job = job_of(aws, clock, name, OverlapPolicy.QUEUE, ok)
        aws.sqs.send_message(QueueUrl=aws.queues[name], MessageBody="{not json",
                             MessageGroupId=name, MessageDeduplicationId=name)
        with switch("garbage-message-returned", on):
            delivered = aws.deliver(name, job)
        assert delivered is not None
        answers[on] = delivered[1]
        records[on] = [r.status for r in aws.runs(name)]
    assert answers == {False: False, True: True}
    assert records == {False: [RunStatus.REJECTED], True: []}


# -- #13 (issue 30) -----------------------------------------------------------------------

def test_link_ignores_hand_off_takes_the_lease_from_a_live_run(aws, clock, switch):
    """GIVEN a chain whose hand-off was lost (its invoke never arrived) and a tick that
    took the job over once it expired, still running WHEN the late continuation arrives
    THEN it is recorded ``superseded`` and the tick keeps the lease; with
    ``link-ignores-hand-off`` on, the continuation takes the lease from the live run."""
    holders = {}
    for on in (False, True):
        name = f"link-{'on' if on else 'off'}"
        sent: list[dict[str, Any]] = []

        class Port:
            def send(self, event: dict[str, Any], sent: list[Any] = sent) -> None:
                sent.append(event)

        def handler(event: Any, context: Any) -> str:
            if current_run().trigger.kind is TriggerKind.MANUAL:
                current_run().continue_requested = True  # out of time, records left
            return "done"

        config = JobConfig(name=name, lease=LEASE, table_name=aws.table, max_chain=3)
        job = GuardedJob(config, handler, store=aws.store, clock=clock, owner="w",
                         continuation=Port())
        job(manual(name, "first"), None)
        assert len(sent) == 1
        clock.advance(timedelta(seconds=70))  # the hand-off expired: a takeover
        taker = held_by(aws, name, f"taker{int(on)}", at_ms=to_ms(clock.now()))
        assert taker.fence == 2
        with switch("link-ignores-hand-off", on):
            outcome = job(sent[0], None)
        holders[on] = (aws.store.read_lease(name).run_id,
                       outcome.get("decision") if isinstance(outcome, dict) else "ran")
    assert holders[False] == ("taker0", "superseded")
    assert holders[True][0] != "taker1"


# -- every switch has its test ------------------------------------------------------------

SWITCH_TESTS = {
    "link-ignores-hand-off": test_link_ignores_hand_off_takes_the_lease_from_a_live_run,
    "release-prunes-from-old-read":
        test_release_prunes_from_old_read_deletes_a_trigger_whatever_it_became,
    "force-release-erases-run":
        test_force_release_erases_run_leaves_no_record_and_a_running_trigger,
    "paused-queue-retry-loops":
        test_paused_queue_retry_loops_retries_a_failed_queued_trigger_of_a_paused_job,
    "lost-release-forgets":
        test_lost_release_forgets_drops_the_wake_receipt_of_its_own_landed_release,
    "coalesce-undo-strands":
        test_coalesce_undo_strands_takes_the_follow_up_off_the_row_when_its_send_fails,
    "replace-displaced-retryable":
        test_replace_displaced_retryable_leaves_the_replaced_trigger_lost,
    "lease-lost-is-done":
        test_lease_lost_is_done_ends_the_trigger_of_a_run_that_lost_its_lease_done,
    "queued-forgotten-early":
        test_queued_forgotten_early_keeps_a_queued_trigger_only_its_dedup_window,
    "lease-row-grows": test_lease_row_grows_leaves_a_mark_of_every_skip_on_the_lease_row,
    "fence-restarts":
        test_fence_restarts_reads_a_held_row_without_fence_as_fence_0_and_keeps_no_high_water,
    "future-tick-runs": test_future_tick_runs_accepts_a_tick_scheduled_hours_ahead,
    "garbage-message-returned":
        test_garbage_message_returned_reports_a_message_that_is_no_trigger_failed,
}


def test_every_known_bug_switch_has_a_test_that_sees_its_defect_come_back():
    """GIVEN the switch list WHEN a switch is added THEN it comes with its test here (the
    explorer's proof that it finds each defect is only as good as the switch)."""
    assert sorted(SWITCH_TESTS) == sorted(known_bugs.KNOWN)
