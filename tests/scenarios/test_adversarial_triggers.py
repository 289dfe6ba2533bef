"""Adversarial review of the issue-14 trigger state (each test is a suspected defect).

Races are staged with hook points and botocore events, never sleeps; the clock is a
``ManualClock`` moved by hand. Each test asserts what the design promises, so a failing
test is a demonstrated defect.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from jobguard import OverlapPolicy, hooks
from jobguard.clock import to_ms
from jobguard.errors import StoreError

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
    hold_a_run,
    manual,
    outcomes_of,
    records_of,
    start,
    tick_id,
    visible,
)

JOB = "crm-sync"
LEASE = timedelta(seconds=60)
PAST_THE_LEASE = LEASE + timedelta(seconds=15)  # lease + skew margin (5 s) + a bit


class Crash(BaseException):
    """The worker process dies right after its handler returned, before its release
    (a Lambda timeout, an OOM kill): the lease stays held, the trigger stays running."""


def crash(job: Any, event: Any) -> None:
    def boom(**_: Any) -> None:
        raise Crash()

    with hooks.on("before_release", boom):
        try:
            job(event, None)
        except Crash:
            return
    raise AssertionError("the run was expected to crash before its release")


def crashed_then_queued(aws: Any, clock: Any, script: Script, *, max_queued: int = 10,
                        policy: OverlapPolicy = OverlapPolicy.QUEUE) -> tuple[Any, Any, Any]:
    """A QUEUE job whose tick T0's run crashed holding the lease, T1 queued behind it
    (``policy`` COALESCE: coalesced onto it), the clock past the lease: (job, T0's time,
    T1's time)."""
    options = {"max_queued": max_queued} if policy is OverlapPolicy.QUEUE else {}
    job = make_job(aws, clock, script, policy=policy, lease=LEASE, **options)
    t0 = clock.now()
    crash(job, tick(JOB, t0))
    clock.advance(timedelta(seconds=10))
    t1 = clock.now()
    decision = "queued" if policy is OverlapPolicy.QUEUE else "coalesced"
    assert call(job, tick(JOB, t1))["decision"] == decision
    clock.advance(PAST_THE_LEASE)
    return job, t0, t1


def _queued_n(aws: Any) -> int:
    row = aws.lease_item(JOB) or {}
    return int(row.get("queued_n", {"N": "0"})["N"])


def _trigger_items(aws: Any) -> list[dict[str, Any]]:
    items = aws.ddb.query(
        TableName=aws.table, KeyConditionExpression="pk = :pk AND begins_with(sk, :t)",
        ExpressionAttributeValues={":pk": {"S": f"JOB#{JOB}"}, ":t": {"S": "TRIGGER#"}},
        ConsistentRead=True)["Items"]
    return items


def _pending_queued(aws: Any) -> int:
    """Trigger items waiting on the queue as QUEUE triggers (not follow-ups)."""
    return sum(1 for i in _trigger_items(aws)
               if i.get("state", {}).get("S") == "queued"
               and i.get("kind", {}).get("S") != "follow_up")


def _rounds(aws: Any, job: Any, clock: Any, n: int = 4) -> list[Any]:
    """Let the event source mapping work for ``n`` visibility timeouts."""
    seen = []
    for _ in range(n):
        for d in drain(aws, JOB, job):
            seen.append(d)
            if d.failed:
                comes_back(aws, JOB, d)
        clock.advance(timedelta(minutes=1))
    return seen


def _release_the_held_run_then_drain(aws: Any, job: Any, clock: Any, run: dict[str, Any],
                                     gate: Any, thread: threading.Thread) -> None:
    """alice force-releases ``run`` (held in its handler behind ``gate``), the run
    returns, and the event source mapping works for two visibility timeouts."""
    assert force_release(aws.store, JOB, holder_run_id=run["run_id"], fence=run["fence"],
                         now_ms=to_ms(clock.now()), by="alice", reason="stuck")
    gate.release.set()
    thread.join(10)
    clock.advance(timedelta(seconds=5))
    _rounds(aws, job, clock, n=2)


# -- A. a re-decided running trigger wedges every takeover --------------------------------


def test_crashed_run_redelivered_while_paused_wedges_the_job_after_resume(aws, clock):
    """GIVEN a run that crashed holding the lease (Lambda timeout)
    WHEN an operator pauses the job, Lambda's retry of the crashed tick arrives after the
    lease expired (recorded `paused`), and the operator resumes
    THEN the next tick runs (the crashed run's lease is taken over).

    Found: the paused decision rewrote the crashed trigger's item (state `paused`,
    run_id := the decision's run id) while the lease row still names the crashed run.
    Every takeover carries `attribute_not_exists(state) OR run_id = <crashed run>` on
    that item, which now fails; `_transact` maps a failure of the `displaced_trigger`
    action to an empty `Refused()`, so `handle()` decides RUN again 8 times and raises
    "no stable decision" on every trigger, forever. `release --force` carries the same
    condition and fails too: no way out."""
    script = Script()
    job = make_job(aws, clock, script, lease=LEASE)
    t1 = clock.now()
    crash(job, tick(JOB, t1))
    clock.advance(PAST_THE_LEASE)
    aws.store.pause(JOB, reason="investigating", now_ms=to_ms(clock.now()))
    retry = call(job, tick(JOB, t1))
    assert isinstance(retry, dict) and retry["decision"] == "paused", retry
    aws.store.resume(JOB)

    clock.advance(timedelta(minutes=1))
    t2 = clock.now()
    outcome = call(job, tick(JOB, t2))
    code, out, err = cli_force_release(aws, JOB)
    assert script.ran(tick_id(JOB, t2)) == 1, \
        f"the tick after resume did not run: {outcome!r}; release --force: {code} {err or out}"


@pytest.mark.parametrize("max_queued", [10, 1], ids=["retry-queued", "retry-dropped"])
def test_crashed_runs_retry_decided_behind_a_queued_trigger_wedges_the_queue(
        aws, clock, max_queued):
    """GIVEN a QUEUE job whose tick T1 crashed holding the lease, and tick T2 queued
    behind it
    WHEN the lease expires and Lambda's retry of T1 arrives (queued_n > 0, so it is
    decided `queued` / `dropped`), then the event source mapping delivers T2
    THEN T2 runs (it takes the expired lease over).

    Found: the retry's decision moved T1's item from `running` to `queued`/`dropped`
    with a new run id while the lease row still names T1's crashed run; T2's takeover
    transaction then fails on the displaced-trigger condition, `Refused()` carries
    nothing, and every delivery of T2 ends in "no stable decision" (to the DLQ, with
    its item left `queued`, so queued_n leaks). No operator action involved."""
    script = Script()
    job, t1, t2 = crashed_then_queued(aws, clock, script, max_queued=max_queued)
    retry = call(job, tick(JOB, t1))  # Lambda's retry of the timed-out invocation
    clock.advance(timedelta(seconds=5))
    deliveries = _rounds(aws, job, clock)
    errors = [d.response for d in deliveries if d.failed]
    assert script.ran(tick_id(JOB, t2)) == 1, \
        f"T2 never ran (retry of T1 was {retry!r}); failed deliveries: {errors[:1]}"


# -- B. operator actions and the pending follow-up ---------------------------------------


def test_force_release_does_not_absorb_the_pending_follow_up(aws, clock):
    """GIVEN a COALESCE run held in its handler, and tick T1 coalesced onto it
    WHEN an operator force-releases the stuck run, and the follow-up's message is
    delivered
    THEN the follow-up runs: no run has started since T1 was coalesced.

    Found: `_operator_release` REMOVEs `follow_up` (part of _HOLDER_ATTRS) and moves the
    fence on without any run; the follow-up's delivery sees `lease.fence > gate_fence`
    and is decided `absorbed` (decide(): ABSORB), so T1's request is served by nobody."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.COALESCE, lease=LEASE)
    t0 = clock.now()
    gate = script.hold(tick_id(JOB, t0))
    acquired: dict = {}
    with hooks.on("after_acquire", lambda **ctx: acquired.setdefault("run", ctx)):
        holder, _ = start(lambda: job(tick(JOB, t0), None))
        assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=10))
    t1 = clock.now()
    assert call(job, tick(JOB, t1))["decision"] == "coalesced"

    clock.advance(timedelta(seconds=10))
    _release_the_held_run_then_drain(aws, job, clock, acquired["run"], gate, holder)

    direct = {tick_id(JOB, t0), tick_id(JOB, t1)}
    follow = [r for r in aws.runs(JOB) if r.trigger_id not in direct]
    ran = [r for r in follow if r.decision.value == "ran"]
    assert ran, ("no run after the coalesced trigger: the follow-up was "
                 f"{[(r.decision.value, r.detail) for r in follow]}")


def test_a_force_released_run_takes_the_coalesced_tick_it_was_serving_with_it(aws, clock):
    """GIVEN a COALESCE holder H that died holding the lease, tick T1 coalesced onto it
    (its follow-up sent), and tick T2 that took the expired lease over (a run that
    started after T1: it serves T1) and is in its handler
    WHEN an operator force-releases T2's run, and T1's follow-up message comes
    THEN (README, "Operators are transitions too") the follow-up is absorbed, not run:
    T1 went with the run the operator ended, whose record says `released_by_operator`
    naming who; the next tick runs as usual. The remedy is recovering the range."""
    script = Script()
    job, _, _ = crashed_then_queued(aws, clock, script, policy=OverlapPolicy.COALESCE)
    t2 = clock.now()
    gate = script.hold(tick_id(JOB, t2))
    acquired: dict = {}
    with hooks.on("after_acquire", lambda **ctx: acquired.setdefault("run", ctx)):
        serving, _ = start(lambda: job(tick(JOB, t2), None))
        assert gate.entered.wait(10)
    _release_the_held_run_then_drain(aws, job, clock, acquired["run"], gate, serving)

    follow = [r for r in aws.runs(JOB) if "@follow-up:" in r.trigger_id]
    # (an absorbed follow-up is recorded `coalesced`, saying it was absorbed)
    assert [(r.decision.value, (r.detail or "").split(":")[0]) for r in follow] == [
        ("coalesced", "follow-up absorbed")], [(r.decision.value, r.detail) for r in follow]
    record = next(r for r in aws.runs(JOB) if r.run_id == acquired["run"]["run_id"])
    assert record.status.value == "released_by_operator" and "alice" in (record.detail or "")
    assert not [r for r in follow if r.decision.value == "ran"]
    t3 = clock.now()
    assert call(job, tick(JOB, t3))["ran"] == tick_id(JOB, t3)


def lose_the_acquisitions_answer(aws: Any, job: Any, event: Any,
                                 between: Callable[[Any], None]) -> Any:
    """Deliver ``event`` with its acquisition's answer lost (the write lands, the SDK
    sends it again); ``between(lease)`` runs before the SDK's retry, with the lease row
    the landed acquisition wrote. Returns the delivery's outcome."""
    from jobguard.callsites import Fault
    from jobguard.faults import Faults, Rule

    seen: list[Any] = []

    def before_retry(caught_exception: Any = None, **_: Any) -> None:
        if seen or not isinstance(caught_exception, ReadTimeoutError):
            return
        lease = aws.store.read_lease(JOB)
        assert lease.run_id is not None, "the lost acquisition did not land"
        seen.append(lease)
        between(lease)

    events = aws.store._client.meta.events  # noqa: SLF001 - the store's own client
    events.register("needs-retry.dynamodb.TransactWriteItems", before_retry,
                    unique_id="lost-acquisition")
    try:
        with Faults([Rule(Fault.LOST, site="dynamodb.acquire", nth=1)],
                    backoff_scale=0.001, clients=[aws.store._client]):  # noqa: SLF001
            outcome = call(job, event)
    finally:
        events.unregister("needs-retry.dynamodb.TransactWriteItems",
                          unique_id="lost-acquisition")
    assert seen, "the acquisition's answer was not lost"
    return outcome


def operator_releases(aws: Any, clock: Any, lease: Any, released: dict[str, Any]) -> None:
    """alice force-releases ``lease``'s run ("stuck"), from another process (a thread)."""
    released["run_id"] = lease.run_id
    op, box = start(lambda: force_release(
        aws.store, JOB, holder_run_id=str(lease.run_id), fence=lease.fence,
        now_ms=to_ms(clock.now()), by="alice", reason="stuck"))
    op.join(10)
    released["ok"] = box.get("result")


def test_a_force_release_of_an_acquisition_whose_answer_was_lost_keeps_its_record(
        aws, clock):
    """GIVEN a tick T0 whose acquisition lands but whose answer is lost
    WHEN, before the SDK sends it again, an operator force-releases the run that
    acquisition started (alice, "stuck"); the retry is refused and T0 is decided
    `duplicate` (its trigger is `released`)
    THEN the run's record still says `released_by_operator`, naming alice and why (the
    runbook's first line for it); the handler never ran.

    Found by the explorer (seed 290187): the duplicate's record, written under the
    delivery's own run id, replaced the operator's."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.COALESCE, lease=LEASE)
    t0 = clock.now()
    released: dict[str, Any] = {}
    outcome = lose_the_acquisitions_answer(
        aws, job, tick(JOB, t0), lambda lease: operator_releases(aws, clock, lease, released))
    assert released.get("ok") is True, released
    assert script.ran(tick_id(JOB, t0)) == 0
    assert isinstance(outcome, dict) and outcome["decision"] == "duplicate", outcome
    record = next(r for r in aws.runs(JOB) if r.run_id == released["run_id"])
    assert record.status.value == "released_by_operator", (record.decision, record.detail)
    assert "alice" in (record.detail or "") and "stuck" in (record.detail or ""), record


def test_a_force_release_of_a_lost_acquisition_keeps_its_record_when_the_retry_is_stale(
        aws, clock):
    """GIVEN a tick T0 delivered a second before it turns stale (a late Lambda retry),
    whose acquisition lands but whose answer is lost
    WHEN, before the SDK sends it again, an operator force-releases the run that
    acquisition started (alice, "stuck"), and T0 is stale by the time the retry is
    refused (the operator took two seconds)
    THEN the run's record still says `released_by_operator`, naming alice and why; the
    handler never ran.

    Break-it review of the duplicate fix (seed 290187): the same erasure by another
    path. The refused retry is decided again, finds T0 stale, and `_stale` writes its
    record under the delivery's own run id unconditionally (`put_run` without
    `only_if_absent`), so `stale` replaces the operator's record."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.SKIP, lease=LEASE)
    t0 = clock.now() - job.config.stale_after + timedelta(seconds=1)
    released: dict[str, Any] = {}

    def between(lease: Any) -> None:
        operator_releases(aws, clock, lease, released)
        clock.advance(timedelta(seconds=2))  # the operator's two seconds

    outcome = lose_the_acquisitions_answer(aws, job, tick(JOB, t0), between)
    assert released.get("ok") is True, released
    assert script.ran(tick_id(JOB, t0)) == 0
    record = next(r for r in aws.runs(JOB) if r.run_id == released["run_id"])
    assert record.status.value == "released_by_operator", (
        outcome, record.status.value, record.detail)
    assert "alice" in (record.detail or "") and "stuck" in (record.detail or ""), record


def test_a_lost_acquisition_taken_over_before_its_retry_keeps_the_takeovers_record(
        aws, clock):
    """GIVEN a SKIP job's tick T0 whose acquisition lands (run R) but whose answer is lost
    WHEN the SDK waits out its read timeout past the lease (R never renews: its worker
    does not know it holds it), and T1 takes the lease over (T0's item `lost`, R's
    record `abandoned`, T1's record naming R as displaced) and is still running when
    T0's retry is refused; T0 is decided `skipped`
    THEN R's record still says what happened to R (`abandoned`, taken over by T1's
    run), as the duplicate fix promises for "a takeover": a record under the delivery's
    own run id is never replaced by the delivery's later decision.

    Break-it review of the duplicate fix (seed 290187): only the duplicate's put was
    conditioned; record_decision's transaction for every other step (here SKIP) still
    puts the decision's record under the delivery's run id unconditionally, so
    `skipped` replaces the takeover's record, and T1's `displaced_run_id` points at a
    run the log says was skipped and never held the lease."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.SKIP, lease=LEASE)
    t0 = clock.now()
    seen: dict[str, Any] = {}

    def between(lease: Any) -> None:
        seen["run_id"] = lease.run_id
        clock.advance(PAST_THE_LEASE)  # the SDK's read timeout outlasts the lease
        seen["t1"] = clock.now()
        seen["gate"], seen["thread"], seen["box"] = hold_a_run(job, script, JOB,
                                                               seen["t1"])

    try:
        outcome = lose_the_acquisitions_answer(aws, job, tick(JOB, t0), between)
    finally:
        if "gate" in seen:
            seen["gate"].release.set()
            seen["thread"].join(10)
    assert "run_id" in seen, seen
    assert script.ran(tick_id(JOB, t0)) == 0
    assert script.ran(tick_id(JOB, seen["t1"])) == 1
    runs = aws.runs(JOB)
    t1_record = next(r for r in runs if r.trigger_id == tick_id(JOB, seen["t1"]))
    assert t1_record.extra.get("displaced_run_id") == seen["run_id"], t1_record
    record = next(r for r in runs if r.run_id == seen["run_id"])
    assert record.status.value == "abandoned", (outcome, record.status.value,
                                                record.detail)


def test_an_acquisition_that_lands_after_its_unknown_answer_is_read_still_runs(aws, clock):
    """GIVEN a SKIP job's tick T0 whose acquisition (run R) gets no answer: every SDK
    attempt times out while the first is still in flight, and the consistent read that
    resolves an unanswered acquisition (`_acquire_unknown`) sees the row free
    WHEN the in-flight write lands just after that read (before the next attempt)
    THEN the next attempt is refused by T0's own write and recognises it: T0 runs once
    and the lease is released, as the acquisition call site promises ("an unanswered
    attempt is resolved by the next attempt's refusal or a read").

    Break-it review of the run-id rotation (892fbb9): a refused acquisition now draws
    a new run id, so the next attempt (R2) no longer recognises the row naming R as its
    own. It is refused, T0's item is `running` under R with R holding the lease, and T0
    is decided `duplicate` ("trigger already running"): the handler never runs, the
    lease is held by a run nobody executes until it expires (every tick meanwhile
    skipped), and T0 is then only `lost` to a takeover, with no delivery left to run
    it. Before the rotation, the same run id made this attempt `Acquired`."""
    import copy

    from jobguard.faults import Faults

    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.SKIP, lease=LEASE)
    t0 = clock.now()
    events = aws.store._client.meta.events  # noqa: SLF001 - the store's own client
    flight: dict[str, Any] = {}

    def capture(params: Any, **_: Any) -> None:
        if "params" not in flight:  # the delivery's first transaction: its acquisition
            flight["params"] = copy.deepcopy(params)
            flight["stalled"] = True

    def in_flight(request: Any, **_: Any) -> None:
        if flight.get("stalled"):
            flight["attempts"] = flight.get("attempts", 0) + 1
            raise ReadTimeoutError(endpoint_url=str(request.url))

    def lands(**_: Any) -> None:
        # the first after_lease_read after the unanswered acquisition was resolved
        if flight.get("stalled"):
            flight["stalled"] = False
            aws.ddb.transact_write_items(**flight["params"])  # the write lands now
            flight["landed"] = aws.store.read_lease(JOB).run_id

    events.register("before-parameter-build.dynamodb.TransactWriteItems", capture,
                    unique_id="in-flight-capture")
    events.register_first("before-send.dynamodb.TransactWriteItems", in_flight,
                          unique_id="in-flight-stall")
    try:
        with Faults([], backoff_scale=0.001,
                    clients=[aws.store._client]), \
                hooks.on("after_lease_read", lands):  # noqa: SLF001
            outcome = call(job, tick(JOB, t0))
    finally:
        events.unregister("before-parameter-build.dynamodb.TransactWriteItems",
                          unique_id="in-flight-capture")
        events.unregister("before-send.dynamodb.TransactWriteItems",
                          unique_id="in-flight-stall")
    assert flight.get("attempts", 0) >= 2 and flight.get("landed"), flight
    lease = aws.store.read_lease(JOB)
    assert script.ran(tick_id(JOB, t0)) == 1, (outcome, lease.run_id, flight["landed"])
    assert lease.run_id is None, (outcome, lease.run_id)


# -- C. queued_n drift --------------------------------------------------------------------


def test_repair_recounts_the_pending_queued_triggers(aws, clock, monkeypatch):
    """GIVEN a QUEUE job with one trigger queued behind a held run
    WHEN the lease row is damaged and `jobguard release --force` rewrites it
    THEN queued_n still equals the number of pending queued triggers (1), and stays
    equal to it (0) once that trigger has run.

    Found: `repair()` recounts with `_count_queued`, which filters `kind = "queued"`,
    but a QUEUE decision writes the item's kind as the *original* trigger's kind
    (`record.trigger_kind`: "tick"/"manual"); only an acquisition rewrites it to
    "queued". The pending trigger is not counted: queued_n 0, then -1 once it runs
    (stored; read back clamped to 0), so the bound and the queue gate are off by one
    from then on."""
    compare_mismatched_types_as_false(monkeypatch)
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.QUEUE, lease=LEASE)
    t0 = clock.now()
    gate = script.hold(tick_id(JOB, t0))
    holder, _ = start(lambda: job(tick(JOB, t0), None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=10))
    t1 = clock.now()
    assert call(job, tick(JOB, t1))["decision"] == "queued"
    assert _queued_n(aws) == _pending_queued(aws) == 1

    aws.ddb.update_item(TableName=aws.table,
                        Key={"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": "LEASE"}},
                        UpdateExpression="SET #a = :v",
                        ExpressionAttributeNames={"#a": "expires_at_ms"},
                        ExpressionAttributeValues={":v": {"S": "soon"}})
    code, out, err = cli_force_release(aws, JOB)
    assert code == 0, err or out
    after_repair = (_queued_n(aws), _pending_queued(aws))
    gate.release.set()
    holder.join(10)
    clock.advance(timedelta(seconds=5))
    _rounds(aws, job, clock, n=2)
    after_run = (_queued_n(aws), _pending_queued(aws))
    assert script.ran(tick_id(JOB, t1)) == 1
    assert after_repair == (1, 1) and after_run == (0, 0), \
        f"queued_n vs pending: after repair {after_repair}, after the run {after_run}"


class _Http:
    status_code = 200
    headers: dict = {}


def _sqs_fifo_dedup(client: Any, clock: Any) -> Any:
    """SQS FIFO deduplication as AWS does it (and MiniStack measured): a send whose
    deduplication id was accepted in the last 5 minutes is acknowledged and dropped,
    even when the first message has already been received and deleted. (moto only
    compares messages still in the queue.)"""
    seen: dict[str, Any] = {}

    def before_call(params: Any, **_: Any) -> Any:
        dedup = params.get("MessageDeduplicationId")
        now = clock.now()
        if dedup in seen and now - seen[dedup] < timedelta(minutes=5):
            return _Http(), {"MessageId": "deduplicated", "MD5OfMessageBody": "",
                             "ResponseMetadata": {"HTTPStatusCode": 200}}
        seen[dedup] = now
        return None

    client.meta.events.register("before-call.sqs.SendMessage", before_call,
                                unique_id="fifo-dedup")
    return before_call


def test_queued_send_whose_response_was_lost_is_not_lost(aws, clock):
    """GIVEN a QUEUE job (max_queued 1) with a run held
    WHEN tick T1 is decided queued and its SendMessage is applied by SQS but the response
    is lost (the decision is undone, the invocation fails), the message is delivered
    while the holder still runs, and Lambda retries T1 a minute later
    THEN T1 runs once after the holder, and a later tick is not dropped.

    Found: the undo deletes T1's item although its message exists; the delivery finds
    no item and is decided `duplicate` (message deleted). Lambda's retry decides
    `queued` again and sends with the same deduplication id within 5 minutes: SQS
    acknowledges and drops it. T1's item stays `queued` with no message ever: T1 never
    runs, queued_n stays 1 forever, and (max_queued 1) every later tick is `dropped`
    although the lease is free. Correctness depends on SQS dedup after all
    (guard._decide: send/undo_queued; the DUPLICATE resend relies on the same id)."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.QUEUE, max_queued=1,
                   lease=timedelta(minutes=5))
    dedup = _sqs_fifo_dedup(aws.sqs, clock)
    lost: list[str] = []

    def lose(http_response: Any, **_: Any) -> None:
        if not lost and getattr(http_response, "status_code", 0) == 200:
            lost.append("SendMessage")
            raise ReadTimeoutError(endpoint_url="https://sqs (response lost)")

    try:
        t0 = clock.now()
        gate = script.hold(tick_id(JOB, t0))
        holder, _ = start(lambda: job(tick(JOB, t0), None))
        assert gate.entered.wait(10)
        clock.advance(timedelta(seconds=10))
        t1 = clock.now()
        aws.sqs.meta.events.register("after-call.sqs.SendMessage", lose, unique_id="lose")
        try:
            first = call(job, tick(JOB, t1))
        finally:
            aws.sqs.meta.events.unregister("after-call.sqs.SendMessage", unique_id="lose")
        assert lost and isinstance(first, StoreError), first

        clock.advance(timedelta(seconds=5))
        deliver(aws, JOB, job)  # the message SQS did accept, while the holder runs
        clock.advance(timedelta(minutes=1))
        retry = call(job, tick(JOB, t1))  # Lambda's first retry of the failed invoke
        clock.advance(timedelta(seconds=5))
        gate.release.set()
        holder.join(10)
        clock.advance(timedelta(seconds=5))
        _rounds(aws, job, clock, n=3)
        clock.advance(timedelta(minutes=5))
        t3 = clock.now()
        later = call(job, tick(JOB, t3))
        assert script.ran(tick_id(JOB, t1)) == 1, \
            (f"T1 never ran: {outcomes_of(aws, JOB, tick_id(JOB, t1))} (retry {retry}); "
             f"queued_n {_queued_n(aws)}; a later tick: {later}")
        assert script.ran(tick_id(JOB, t3)) == 1, later
    finally:
        aws.sqs.meta.events.unregister("before-call.sqs.SendMessage", dedup)


# -- D. a release whose response was lost, then another run --------------------------------


def test_lost_release_response_then_another_run_keeps_the_run_succeeded(aws, clock):
    """GIVEN a SKIP run whose release is applied but whose response is lost
    WHEN, before its retry, another trigger takes the free lease and releases it
    THEN the first run is still recorded succeeded (it did succeed and release).

    Found: release()'s retry recognises its own earlier attempt only by
    `last_run_id == run_id`; the second run overwrote last_run_id, so the retry
    returns Released(False) and `_run` rewrites the succeeded record as `lease_lost`
    ("lease taken over before release"), counts LeaseLost (an alarm) and returns
    `lease_lost`. The same path drops the wake receipt / follow-up the earlier attempt
    had found."""
    script = Script()
    job = make_job(aws, clock, script, lease=LEASE)
    t0 = clock.now()
    t1 = t0 + timedelta(seconds=20)
    owner = threading.get_ident()
    lost: list[str] = []
    box: dict = {}

    def after_call(http_response: Any, model: Any, **_: Any) -> None:
        if lost or threading.get_ident() != owner or model.name != "TransactWriteItems":
            return
        if getattr(http_response, "status_code", 0) != 200 or not box.get("released"):
            return
        lost.append(model.name)
        clock.advance(timedelta(seconds=20))
        other, obox = start(lambda: job(tick(JOB, t1), None))
        other.join(10)
        box["other"] = obox
        raise ReadTimeoutError(endpoint_url="https://dynamodb (response lost)")

    aws.ddb.meta.events.register("after-call.dynamodb", after_call, unique_id="lose-rel")
    try:
        with hooks.on("before_release", lambda **_: box.setdefault("released", True)):
            first = call(job, tick(JOB, t0))
    finally:
        aws.ddb.meta.events.unregister("after-call.dynamodb", unique_id="lose-rel")
    assert lost, "no release was made"
    assert script.ran(tick_id(JOB, t1)) == 1, box.get("other")
    statuses = [r.status.value for r in records_of(aws, JOB, tick_id(JOB, t0))]
    assert statuses == ["succeeded"], f"first run recorded {statuses}, returned {first}"


# -- E. a trigger item that expires while its run is still going -----------------------


def test_manual_run_longer_than_its_trigger_ttl_is_released(aws, clock):
    """GIVEN a SKIP job whose dedup_window/stale_after (1 minute) is shorter than one of
    its runs (a valid config), and a manual trigger M running for 2 minutes
    WHEN M is delivered again (at-least-once delivery) after its item's TTL
    THEN M's run releases its lease and is recorded; the next tick runs.

    Found: the redelivery treats the expired `running` item as absent (decide(),
    `_trigger_condition`) and writes `skipped` over it with a new run id; M's release
    is then refused on its trigger item (lease fine), release() takes it for a conflict
    and retries 8 times, then raises StoreError "transaction kept conflicting". The
    lease stays held with no record; once it expires every takeover fails on the
    displaced-trigger condition (as in A): the job is wedged. A running trigger's item
    TTL is set once at acquisition and never extended by the heartbeat."""
    script = Script()
    job = make_job(aws, clock, script, lease=timedelta(minutes=5),
                   dedup_window=timedelta(minutes=1), stale_after=timedelta(minutes=1),
                   record_ttl=timedelta(days=1))
    event, manual_id = manual(JOB, "export")
    gate = script.hold(manual_id)
    holder, box = start(lambda: call(job, event))
    assert gate.entered.wait(10)
    clock.advance(timedelta(minutes=2))
    again = call(job, event)
    gate.release.set()
    holder.join(10)
    clock.advance(timedelta(minutes=6))
    t2 = clock.now()
    nxt = call(job, tick(JOB, t2))
    assert not isinstance(box.get("result"), Exception), \
        f"M's run could not release: {box.get('result')!r} (redelivery: {again!r})"
    assert script.ran(tick_id(JOB, t2)) == 1, nxt


def test_replace_from_a_stale_read_of_an_expired_lease_still_replaces(aws, clock):
    """GIVEN a REPLACE job whose run H is in its handler, its lease past expiry
    WHEN a new tick T reads the lease (expired), then H's heartbeat renews it, then T
    takes over
    THEN H's trigger ends `replaced` (H was alive: T displaced a live run), so Lambda's
    retry of H's failed invocation is a duplicate and H's work runs once.

    Found by the explorer (seed 227578): the takeover chose `lost` (a dead run, its
    retry runs again) from its older read, and the write did not depend on that read,
    so it landed over the renewed lease; H's retry then ran a second time. A takeover
    of a lease seen expired now holds only while it still is; refused, T decides again
    from the row as it is."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.REPLACE, lease=LEASE)
    t0 = clock.now()
    held = script.hold(tick_id(JOB, t0))
    holder, box = start(lambda: job(tick(JOB, t0), None))
    assert held.entered.wait(10)
    row = aws.lease_item(JOB)
    run_id, fence = row["run_id"]["S"], int(row["fence"]["N"])
    clock.advance(PAST_THE_LEASE)
    t1 = clock.now()
    seen, go = threading.Event(), threading.Event()

    def pause(**ctx: Any) -> None:
        if ctx["trigger_id"] == tick_id(JOB, t1) and not go.is_set():
            seen.set()
            assert go.wait(10)

    with hooks.on("after_lease_read", pause):
        taker, taken = start(lambda: job(tick(JOB, t1), None))
        assert seen.wait(10)
        assert aws.store.renew(JOB, run_id=run_id, fence=fence, now_ms=to_ms(clock.now()),
                               lease_ms=int(LEASE.total_seconds() * 1000))
        go.set()
        taker.join(10)
    assert "error" not in taken, taken
    held.release.set()
    holder.join(10)
    retry = call(job, tick(JOB, t0))  # Lambda retries H's failed invocation
    assert script.ran(tick_id(JOB, t0)) == 1, (retry, outcomes_of(aws, JOB, tick_id(JOB, t0)))
    assert script.ran(tick_id(JOB, t1)) == 1
    assert outcomes_of(aws, JOB, tick_id(JOB, t0)) == [("ran", "lease_lost"),
                                                       ("duplicate", "duplicate")]


def test_a_recovery_refused_on_an_older_row_still_keeps_the_follow_up(aws, clock):
    """GIVEN a COALESCE job whose run 1 hangs past its lease with tick 2 coalesced into
    its follow-up, and two recoveries: r2 read the row (run 1 expired, the follow-up's
    gate at fence 1) and is about to take the lease
    WHEN r1 takes it first (moving the follow-up's gate to fence 2), runs and releases,
    and only then r2's write lands, refused on the row and on the gate
    THEN r2 takes the lease on its next try still carrying the follow-up, which runs
    once after it.

    Found by the explorer (seed 228127): r2 read the gate's refusal as "the follow-up
    ran or was absorbed" and took the lease without it; the row forgot the follow-up
    and the coalesced triggers were never followed. A gate refused together with the
    row it was read from says nothing of the follow-up: the next try looks again."""
    import json

    from jobguard.triggers import Trigger, TriggerKind

    from ._support import Gate, Recorder, holding, in_thread

    gate, rec = Gate(), Recorder()
    t1 = tick(JOB, clock.now())
    job = make_job(aws, clock, rec.handler(holding(gate, t1)), policy=OverlapPolicy.COALESCE)
    holder, _ = in_thread(lambda: job(t1, None))
    assert gate.entered.wait(10)
    clock.advance(timedelta(seconds=1))
    t2 = clock.now()
    assert job(tick(JOB, t2), None)["decision"] == "coalesced"
    clock.advance(PAST_THE_LEASE)

    paused, go = threading.Event(), threading.Event()
    r2_thread: list[int] = []

    def hold_r2(params: dict[str, Any], **_: Any) -> None:
        if threading.get_ident() in r2_thread and not go.is_set() \
                and "gate_fence" in json.dumps(params):
            paused.set()
            assert go.wait(10)

    events = aws.store.client.meta.events
    events.register("provide-client-params.dynamodb.TransactWriteItems", hold_r2)
    try:
        def r2() -> Any:
            r2_thread.append(threading.get_ident())
            return job.run_exclusive(Trigger(JOB, f"{JOB}@recovery:r2", TriggerKind.RECOVERY),
                                     wait=0)

        second, box = in_thread(r2)
        assert paused.wait(10), "r2 never tried to take the lease with the follow-up"
        first = job.run_exclusive(Trigger(JOB, f"{JOB}@recovery:r1", TriggerKind.RECOVERY),
                                  wait=0)
        assert first["fence"] == 2
        go.set()
        second.join(10)
    finally:
        events.unregister("provide-client-params.dynamodb.TransactWriteItems", hold_r2)
    assert box.get("result", {}).get("fence") == 3, box
    drain(aws, JOB, job)
    follow_ups = [r for r in aws.runs(JOB) if r.trigger_kind == "follow_up"
                  and r.decision.value == "ran"]
    assert [(r.status.value, r.fence) for r in follow_ups] == [("succeeded", 4)], \
        [(r.trigger_id, r.decision.value, r.status.value) for r in aws.runs(JOB)]
    gate.release.set()
    holder.join(10)


def _stuck_run_and_a_new_row(aws: Any, job: Any, script: Script, clock: Any) -> tuple[
        Any, Any, threading.Thread, Any, threading.Thread]:
    """Tick T's run held in its handler, its lease row deleted, then a manual run M
    holding a new row: (T's time, T's gate, T's thread, M's gate, M's thread)."""
    t0 = clock.now()
    stuck = script.hold(tick_id(JOB, t0))
    first, _ = start(lambda: call(job, tick(JOB, t0)))
    assert stuck.entered.wait(10)
    aws.ddb.delete_item(TableName=aws.table, Key={"pk": {"S": f"JOB#{JOB}"},
                                                   "sk": {"S": "LEASE"}})
    event, m_id = manual(JOB, "m")
    holding_m = script.hold(m_id)
    second, _ = start(lambda: call(job, event))
    assert holding_m.entered.wait(10)
    return t0, stuck, first, holding_m, second


def test_a_tick_whose_run_lost_its_lease_row_and_that_comes_again_is_queued_and_runs(
        aws, clock):
    """GIVEN a QUEUE job whose tick T's run is stuck when its lease row is deleted (an
    operator's mistake, a restore), and a manual run M then holding a new row
    WHEN T is delivered again (Lambda's retry of its stuck invocation) while M runs
    THEN T is queued and, once M ends, its message runs it to the end: the queued count
    goes back to 0 and the next tick runs.

    Found by the explorer (seed 232370): the queue decision over T's item, still
    `running` under its dead run, counted T on the lease row but left the item as it
    was (a rule meant for a paused job), so T's message was decided a duplicate: T never
    ran again and the count stayed up, dropping every later trigger."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.QUEUE, lease=LEASE,
                   max_queued=1)
    t0, stuck, first, holding_m, second = _stuck_run_and_a_new_row(aws, job, script, clock)
    assert call(job, tick(JOB, t0))["decision"] == "queued"
    holding_m.release.set()
    second.join(10)
    stuck.release.set()
    first.join(10)
    clock.advance(timedelta(seconds=5))
    drain(aws, JOB, job)
    assert ("ran", "succeeded") in outcomes_of(aws, JOB, tick_id(JOB, t0)), \
        outcomes_of(aws, JOB, tick_id(JOB, t0))
    assert int(aws.lease_item(JOB).get("queued_n", {"N": "0"})["N"]) == 0
    clock.advance(timedelta(minutes=1))
    t1 = clock.now()
    call(job, tick(JOB, t1))
    assert script.ran(tick_id(JOB, t1)) == 1


def test_a_tick_whose_run_lost_its_lease_row_is_skipped_once_then_duplicate(aws, clock):
    """GIVEN a SKIP job whose tick T's run is stuck when its lease row is deleted, and a
    manual run M then holding a new row
    WHEN T is delivered twice more while M runs
    THEN T is recorded skipped once; the second delivery is a duplicate.

    Found by the explorer (seed 232944): a skip over T's item, still `running` under
    its dead run, left the item as it was, so every later delivery was skipped again
    (one trigger, many decisions). The decision now moves the item, conditioned on the
    dead run."""
    script = Script()
    job = make_job(aws, clock, script, lease=LEASE)
    t0, stuck, first, holding_m, second = _stuck_run_and_a_new_row(aws, job, script, clock)
    assert [call(job, tick(JOB, t0))["decision"] for _ in range(2)] == ["skipped",
                                                                       "duplicate"]
    holding_m.release.set()
    second.join(10)
    stuck.release.set()
    first.join(10)
    assert decisions_of(aws, JOB, tick_id(JOB, t0)).count("skipped") == 1
    assert script.ran(tick_id(JOB, t0)) == 1


def test_a_coalesced_tick_whose_send_failed_is_followed_when_its_late_retry_comes(
        aws, clock):
    """GIVEN a COALESCE job whose tick T0's run holds the lease, and tick T1 coalesced
    onto it whose send of the follow-up failed (the invocation fails)
    WHEN T0's worker dies holding the lease (no release to send the follow-up), and
    Lambda retries T1 three hours later (past dedup_window, within its 6 hours)
    THEN the retry is a duplicate that sends the follow-up, which runs once, after T1
    was coalesced; a later copy of T1 runs nothing more.

    Found by the explorer (seeds 234513, 234935): T1's item was kept only dedup_window
    (2 h), so the late retry found no item, was recorded stale, and nothing ever sent
    the follow-up: T1's request was served by nobody. A coalesced trigger's item is now
    kept as long as Lambda retries its sender."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.COALESCE, lease=LEASE)
    t0 = clock.now()

    def die(**_: Any) -> None:
        raise Crash()

    with hooks.on("before_release", die):
        gate, holder, box = hold_a_run(job, script, JOB, t0)
        clock.advance(timedelta(seconds=10))
        t1 = clock.now()
        with fail_next_send(aws.sqs) as failed:
            first = call(job, tick(JOB, t1))
        assert failed and isinstance(first, StoreError), first
        gate.release.set()
        holder.join(10)
    assert isinstance(box.get("error"), Crash), box
    assert decisions_of(aws, JOB, tick_id(JOB, t1)) == ["coalesced"]
    assert visible(aws, JOB) == 0  # the follow-up was never sent

    clock.advance(timedelta(hours=3))
    retry = call(job, tick(JOB, t1))
    assert isinstance(retry, dict) and retry["decision"] == "duplicate", retry
    drain(aws, JOB, job)
    again = call(job, tick(JOB, t1))
    drain(aws, JOB, job)

    assert decisions_of(aws, JOB, tick_id(JOB, t1)) == ["coalesced", "duplicate",
                                                        "duplicate"], again
    followed = [r for r in aws.runs(JOB) if r.trigger_kind == "follow_up"
                and r.decision.value == "ran"]
    assert [r.status.value for r in followed] == ["succeeded"], \
        [(r.trigger_id, r.decision.value, r.status.value) for r in aws.runs(JOB)]
    assert script.ran(followed[0].trigger_id) == 1
    assert script.ran(tick_id(JOB, t1)) == 0


# -- attacks that held (kept as regression tests) ------------------------------------------


def test_replace_chain_never_reruns_a_displaced_trigger(aws, clock):
    """REPLACE three deep: each displaced trigger ends replaced, late copies duplicate."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.REPLACE, lease=LEASE)
    ts = [clock.now() + timedelta(seconds=10 * i) for i in range(3)]
    gates = [script.hold(tick_id(JOB, t)) for t in ts]
    threads = []
    for t, g in zip(ts, gates, strict=True):
        clock.advance(timedelta(seconds=10))
        th, _ = start(lambda t=t: job(tick(JOB, t), None))
        assert g.entered.wait(10)
        threads.append(th)
    for g, th in zip(gates, threads, strict=True):
        g.release.set()
        th.join(10)
    clock.advance(timedelta(minutes=1))
    for t in ts:
        call(job, tick(JOB, t))
    assert [script.ran(tick_id(JOB, t)) for t in ts] == [1, 1, 1]
    assert ("ran", "succeeded") in outcomes_of(aws, JOB, tick_id(JOB, ts[-1]))


def test_coalesce_many_triggers_one_follow_up(aws, clock):
    """Ten coalesced triggers, the follow-up's send failing for half of them: one
    follow-up run after the holder, no trigger recorded twice."""
    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.COALESCE, lease=LEASE)
    t0 = clock.now()
    gate = script.hold(tick_id(JOB, t0))
    holder, _ = start(lambda: job(tick(JOB, t0), None))
    assert gate.entered.wait(10)
    ids = []
    for _ in range(10):
        clock.advance(timedelta(seconds=2))
        ids.append(tick_id(JOB, clock.now()))
        assert call(job, tick(JOB, clock.now()))["decision"] == "coalesced"
    gate.release.set()
    holder.join(10)
    clock.advance(timedelta(seconds=5))
    _rounds(aws, job, clock, n=2)
    follow = [r for r in aws.runs(JOB) if r.decision.value == "ran"
              and r.trigger_id not in ids and r.trigger_id != tick_id(JOB, t0)]
    assert len(follow) == 1 and follow[0].status.value == "succeeded", follow
    for i in ids:
        assert decisions_of(aws, JOB, i) == ["coalesced"]


def test_skewed_taker_does_not_overlap_within_the_stated_bound(aws, clock):
    """A taker whose wall clock runs 9 s ahead (< 2 x skew margin) cannot take a lease
    its holder still believes it holds."""
    script = Script()
    holder_job = make_job(aws, clock, script, lease=LEASE)
    from jobguard import GuardedJob
    taker = GuardedJob(holder_job.config, script, store=aws.store,
                       clock=clock.skewed(timedelta(seconds=9)))
    t0 = clock.now()
    gate = script.hold(tick_id(JOB, t0))
    holder, _ = start(lambda: holder_job(tick(JOB, t0), None))
    assert gate.entered.wait(10)
    # The holder's local deadline is acquisition + lease - skew (55 s). Just before it:
    clock.advance(timedelta(seconds=54))
    out = call(taker, tick(JOB, clock.now()))
    assert isinstance(out, dict) and out.get("decision") == "skipped", out
    gate.release.set()
    holder.join(10)



def test_a_refused_send_over_an_expired_item_gives_the_trigger_back_as_it_was(aws, clock):
    """GIVEN a QUEUE job whose operator sends the same manual trigger ("backfill") now
    and again, and ran it once long ago (its item kept its TTL, which has passed: read
    as absent, as DynamoDB may not have deleted it yet); a run holds the lease
    WHEN the trigger comes again, is decided queued, and its send is refused outright
    (a 403: surely not on the queue), so the decision is undone and the invoke fails;
    then Lambda retries the invoke
    THEN the retry is decided as the first delivery was (queued behind the holder,
    not a duplicate of the run long ago), and the trigger runs a second time after the
    holder. (From a review's lead: were the undo to restore the expired item with the
    queued decision's expiry, it would read as done again, and every retry would be a
    duplicate: the trigger lost. It does not: an expired item is no prior, and the
    undo deletes the queued item.)"""
    from botocore.exceptions import ClientError

    script = Script()
    job = make_job(aws, clock, script, policy=OverlapPolicy.QUEUE,
                   lease=timedelta(minutes=5))
    event, backfill = manual(JOB, "backfill")
    assert job(event, None) is not None and script.ran(backfill) == 1
    clock.advance(timedelta(days=2))  # past the item's TTL (6 h 15 min and a day, at most)
    gate, holder, _ = hold_a_run(job, script, JOB, clock.now())
    clock.advance(timedelta(seconds=10))

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "injected"},
                           "ResponseMetadata": {"HTTPStatusCode": 403}}, "SendMessage")

    aws.sqs.meta.events.register("before-call.sqs.SendMessage", refuse, unique_id="refuse")
    try:
        first = call(job, event)
    finally:
        aws.sqs.meta.events.unregister("before-call.sqs.SendMessage", unique_id="refuse")
    assert isinstance(first, StoreError) and not first.maybe_applied, first

    clock.advance(timedelta(minutes=1))
    retry = call(job, event)  # Lambda's retry of the failed invoke
    assert isinstance(retry, dict) and retry.get("decision") == "queued", \
        (retry, outcomes_of(aws, JOB, backfill))
    gate.release.set()
    holder.join(10)
    clock.advance(timedelta(seconds=5))
    _rounds(aws, job, clock, n=3)
    assert script.ran(backfill) == 2, outcomes_of(aws, JOB, backfill)
