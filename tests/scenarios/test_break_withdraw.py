"""Attacks on the withdrawal of a hand-off whose continuation's invoke was refused
(reviewer's break pass on issue 30 item 1): the withdrawal must never free a lease the
continuation (or anyone) holds or is about to take. Each race is staged with hook
points and the SDK's own ``before-call`` event on the in-process emulator."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from jobguard import JobConfig, hooks
from jobguard.errors import ContinuationRefused

from ._items import CrmSync, NotesTable, contacts
from ._support import in_thread, tick
from .test_continuation import JOB, LEASE, assert_each_once, lease, link, ran


class QueuedThenRefused:
    """An invoke whose first SDK attempt queued the event (its answer lost) and whose
    retry was answered 4xx: the event is delivered although ``send`` raised refused."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def send(self, event: dict[str, Any]) -> None:
        self.events.append(dict(event))
        raise ContinuationRefused("continue", str(event.get("job")),
                                  "TooManyRequestsException: Rate exceeded")


def make_with(aws: Any, clock: Any, port: Any, n: int) -> tuple[Any, Any, NotesTable]:
    notes = NotesTable.create(aws.ddb)
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=4, lease=LEASE,
                       max_chain=10)
    job = CrmSync(config, contacts(n), notes, store=aws.store, clock=clock,
                  continuation=port)
    return job, job.handler(), notes


def _withdrawal_transaction(aws: Any, callback: Any) -> Any:
    """Call ``callback`` once, just before the withdrawal's transaction is sent (after
    its read of the row): the first TransactWriteItems of the main thread once armed."""
    armed = {"on": False, "done": False}

    def before(**_kw: Any) -> None:
        if armed["on"] and not armed["done"] \
                and threading.current_thread() is threading.main_thread():
            armed["done"] = True
            callback()

    aws.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", before)
    return armed


def test_a_continuation_taking_the_lease_between_the_withdrawals_read_and_write_keeps_it(
        aws, clock):
    """GIVEN an invoke queued by an attempt whose answer was lost and then refused (4xx)
    WHEN the continuation is delivered and acquires the lease after the withdrawal read
    the hand-off but before its transaction THEN the withdrawal is refused: the running
    link keeps its lease (no tick runs beside it) and every contact is done once."""
    port = QueuedThenRefused()
    job, handler, notes = make_with(aws, clock, port, 10)
    acquired, go_on = threading.Event(), threading.Event()
    holder: dict[str, Any] = {}

    def after_acquire(**ctx: Any) -> None:
        if threading.current_thread() is not threading.main_thread() and not acquired.is_set():
            holder.update(ctx)
            acquired.set()
            assert go_on.wait(30)

    def deliver() -> None:
        thread, box = in_thread(lambda: link(job, handler, port.events.pop(0)))
        holder["thread"], holder["box"] = thread, box
        assert acquired.wait(30)

    armed = _withdrawal_transaction(aws, deliver)

    with hooks.on("after_acquire", after_acquire):
        original = port.send

        def send(event: dict[str, Any]) -> None:
            armed["on"] = True
            original(event)

        port.send = send  # type: ignore[method-assign]
        link(job, handler, tick(JOB, clock.now()))
        assert armed["done"], "the withdrawal never sent its transaction"
        row = lease(aws)
        # the continuation holds the lease, the withdrawal did not free it
        assert row.get("run_id") == holder["run_id"], row
        assert int(row["fence"]) == holder["fence"]
        clock.advance(timedelta(seconds=5))
        assert link(job, handler, tick(JOB, clock.now()))["decision"] == "skipped"
        go_on.set()
        holder["thread"].join(30)
    assert "error" not in holder["box"], holder["box"].get("error")
    while port.events:
        link(job, handler, port.events.pop(0))
    for _ in range(4):
        clock.advance(timedelta(seconds=70))
        link(job, handler, tick(JOB, clock.now()), calls=20)
    assert_each_once(aws, notes, 10)


def test_a_late_continuation_after_a_withdrawal_never_runs_beside_the_next_chain(
        aws, clock):
    """GIVEN a hand-off withdrawn (invoke queued, then refused) and a tick that took the
    job over and handed it to a chain of its own WHEN the first continuation turns up
    late, while the new chain's link is pending and again while it runs THEN it is
    ``superseded`` both times and the new chain's hand-off and lease stay whole."""
    port = QueuedThenRefused()
    job, handler, notes = make_with(aws, clock, port, 14)
    link(job, handler, tick(JOB, clock.now()))
    late = port.events.pop(0)
    assert "handed_from" not in lease(aws)  # withdrawn
    clock.advance(timedelta(seconds=5))
    port.send = lambda event: port.events.append(dict(event))  # type: ignore[method-assign]
    link(job, handler, tick(JOB, clock.now()))
    pending = lease(aws)
    assert "handed_from" in pending
    assert link(job, handler, late)["decision"] == "superseded"
    assert lease(aws) == pending
    seen: dict[str, Any] = {}

    def after_acquire(**ctx: Any) -> None:
        if not seen:
            seen["late"] = link(job, handler, late)
            seen["row"] = lease(aws)

    with hooks.on("after_acquire", after_acquire):
        link(job, handler, port.events.pop(0))
    assert seen["late"]["decision"] == "superseded"
    assert seen["row"]["run_id"] == pending["run_id"]
    while port.events:
        link(job, handler, port.events.pop(0))
    assert_each_once(aws, notes, 14)


def test_a_withdrawn_link_is_not_recorded_as_an_operators_force_release(aws, clock,
                                                                        capsys):
    """GIVEN a link whose invoke of the next link was refused (its hand-off withdrawn)
    WHEN an operator reads ``jobguard runs`` and the timeline THEN the never-started link
    reads as what it is: superseded (nothing ran), withdrawn by the link before because
    its invoke was refused, no owner; not ``released_by_operator`` / ``ran`` with the
    link before's owner and a force-release marker "by jobguard" (an operator would look
    for a colleague who force-released a running run)."""
    from jobguard.cli import main
    from jobguard.records import Decision, RunStatus
    from jobguard.timeline.collect import collect
    from jobguard.timeline.model import Window

    port = QueuedThenRefused()
    job, handler, notes = make_with(aws, clock, port, 14)
    link(job, handler, tick(JOB, clock.now()))
    first = ran(aws)[0]
    pending = first.extra["continued_by"]
    record = next(r for r in aws.runs(JOB) if r.run_id == pending)
    assert (record.decision, record.status) == (Decision.SUPERSEDED, RunStatus.SUPERSEDED)
    assert record.owner is None
    assert record.extra.get("continues") == first.run_id
    detail = record.detail or ""
    assert "operator" not in detail and "force-released" not in detail, detail
    assert f"withdrawn by run {first.run_id}" in detail and "refused" in detail, detail
    capsys.readouterr()
    assert main(["--table", aws.table, "runs", JOB]) == 0
    shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith(pending)]
    assert shown and "released_by_operator" not in shown[0], shown
    now_ms = int(clock.now().timestamp() * 1000)
    timeline = collect(aws.store, [JOB], Window(now_ms - 600_000, now_ms + 60_000),
                       now_ms=now_ms)
    assert not [m for m in timeline.lanes[0].markers if m.kind == "force_release"]
    # AND a late delivery of the link is superseded, as before
    assert link(job, handler, port.events.pop(0))["decision"] == "superseded"


def test_a_queue_tick_deferred_behind_a_withdrawn_hand_off_is_woken(aws, clock):
    """GIVEN ``QUEUE``, a tick queued (its message deferred, its wake-up left on the row)
    while a link ran, and the link's invoke of the next link refused WHEN the link
    withdraws its hand-off THEN the queued tick is woken at once, as any release wakes
    it; not left to wait out its message's visibility timeout behind a free lease."""
    from jobguard import OverlapPolicy

    from .test_continuation import make

    job, handler, mailbox, notes = make(aws, clock, 10, policy=OverlapPolicy.QUEUE)
    mailbox.refuse = True
    seen: dict[str, Any] = {}

    def before_item(**ctx: Any) -> None:
        if not seen:
            seen["queued"] = link(job, handler, tick(JOB, clock.now()))
            seen["delivered"] = aws.deliver(JOB, handler)

    with hooks.on("before_item", before_item):
        link(job, handler, tick(JOB, clock.now() - timedelta(seconds=5)))
    assert seen["queued"]["decision"] == "queued"
    assert seen["delivered"] is not None and seen["delivered"][1] is True  # deferred
    assert "handed_from" not in lease(aws)  # withdrawn
    assert aws.deliver(JOB, handler) is not None  # woken: visible again at once
    assert [r.trigger_kind for r in ran(aws)] == ["tick", "queued"]
