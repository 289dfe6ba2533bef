"""Attacks on issue 30's continuation chains (reviewer's break pass): races and
deliveries the chain must survive, each staged with hook points on the in-process
emulator (the fixtures and helpers of ``test_continuation.py``)."""

from __future__ import annotations

import contextlib
import json
import threading
from datetime import timedelta
from typing import Any

import pytest

from jobguard import hooks
from jobguard.callsites import Fault
from jobguard.faults import Faults, Rule
from jobguard.records import RunStatus
from jobguard.requests import ForceRelease

from ._support import in_thread, tick
from .test_continuation import JOB, assert_each_once, lease, link, make, ran


@pytest.mark.parametrize("answer", ["refused", "unanswered"])
def test_two_deliveries_of_one_continuation_racing_run_the_link_once(aws, clock, answer):
    """GIVEN a hand-off on the row and its continuation delivered twice (an async invoke
    retried, or sent twice) WHEN both deliveries read the hand-off, and the second
    tries its acquisition only after the first took the lease and while it runs
    THEN the second records ``duplicate`` and runs nothing: the pre-assigned run id
    the two share must not read as "our own earlier attempt landed", neither from its
    write's refusal nor (``unanswered``: every attempt of its write timed out, unsent)
    from the read that follows."""
    job, handler, mailbox, notes = make(aws, clock, 10)
    link(job, handler, tick(JOB, clock.now()))
    event = mailbox.take()
    pending = lease(aws)["run_id"]

    second_read = threading.Event()
    go_second = threading.Event()
    first_runs = threading.Event()

    def after_read(**ctx: Any) -> None:
        # the second delivery: it has read the hand-off; it waits for the first to run
        if threading.current_thread() is not threading.main_thread() \
                and not second_read.is_set():
            second_read.set()
            assert go_second.wait(30)

    def after_acquire(**ctx: Any) -> None:
        # the first delivery holds the link's lease: let the second try its write now,
        # and hold the first here until the second is done
        if threading.current_thread() is threading.main_thread() \
                and ctx["run_id"] == pending and not first_runs.is_set():
            first_runs.set()
            go_second.set()
            second.join(30)

    # (unanswered: the second acquisition in the block, the second delivery's, times out)
    faults = Faults([Rule(Fault.TIMEOUT, site="dynamodb.acquire", nth=2)], seed=7,
                    backoff_scale=0.001, clients=[aws.ddb]) if answer == "unanswered" \
        else contextlib.nullcontext()
    with faults, hooks.on("after_lease_read", after_read), \
            hooks.on("after_acquire", after_acquire):
        second, box = in_thread(lambda: link(job, handler, event))
        assert second_read.wait(30)
        link(job, handler, event)
        second.join(30)

    assert "error" not in box, box.get("error")
    if isinstance(faults, Faults):
        assert [c.site for c in faults.injected] == ["dynamodb.acquire"], faults.summary()
    assert box["result"]["decision"] == "duplicate", box["result"]
    while mailbox.events:
        link(job, handler, mailbox.take())
    # one run of the link (fence 2), one of the link after it, every contact once
    assert [(r.trigger_kind, r.fence) for r in ran(aws)] == [
        ("tick", 1), ("continuation", 2), ("continuation", 3)]
    assert_each_once(aws, notes, 10)


def test_a_force_released_hand_off_is_recorded_as_the_chains_link(aws, clock):
    """GIVEN a hand-off on the row (the next link not started) WHEN an operator
    force-releases it THEN the record written of the never-started link says what it
    was: a continuation, naming the link before it (so ``runs`` and the timeline show it
    in its chain), like the record a takeover or a REPLACE writes of it."""
    job, handler, mailbox, notes = make(aws, clock, 10)
    link(job, handler, tick(JOB, clock.now()))
    row = lease(aws)
    assert aws.store.force_release(ForceRelease(JOB, holder_run_id=row["run_id"],
                                                fence=int(row["fence"]), now_ms=0, by="alice"))
    record = next(r for r in aws.runs(JOB) if r.run_id == row["run_id"])
    assert record.trigger_kind == "continuation"
    assert record.extra.get("continues") == row["handed_from"]


def test_an_invoke_that_surely_failed_does_not_hold_the_job_for_a_lease(aws, clock, metrics):
    """GIVEN a link whose invoke of the next link was refused outright (a 4xx: no
    lambda:InvokeFunction outside the construct, a throttled function) WHEN the next
    tick comes within the hand-off's lease THEN it runs from the checkpoint: the link
    withdrew its hand-off at once (the never-started link recorded released, in its
    chain), and a continuation that turns up anyway finds it gone (``superseded``,
    nothing run). Every contact once."""
    from jobguard.triggers import continuation_event

    job, handler, mailbox, notes = make(aws, clock, 10)
    mailbox.refuse = True
    metrics()
    link(job, handler, tick(JOB, clock.now()))
    first = ran(aws)[0]
    assert metrics().get("ContinuationsNotSent") == 1
    row = lease(aws)
    assert "handed_from" not in row and "run_id" not in row  # withdrawn, not expiring
    pending = first.extra["continued_by"]
    withdrawn = next(r for r in aws.runs(JOB) if r.run_id == pending)
    assert withdrawn.status is RunStatus.SUPERSEDED  # never started (not an operator's)
    assert withdrawn.extra.get("continues") == first.run_id
    assert "invoke was refused" in (withdrawn.detail or "")
    clock.advance(timedelta(seconds=30))  # within the 60 s hand-off
    assert link(job, handler, tick(JOB, clock.now()), calls=20).get("decision") != "skipped"
    assert_each_once(aws, notes, 10)
    late = continuation_event(JOB, first.run_id, 2)
    assert link(job, handler, late)["decision"] == "superseded"
    assert_each_once(aws, notes, 10)
    # its record says why: the chain ended, and the lease is free (the tick's run ended)
    [gone] = [r for r in aws.runs(JOB) if (r.detail or "").startswith("chain ended before")]
    assert gone.detail == ("chain ended before this link started: the lease is free "
                           "(replaced, force-released, or taken over once the hand-off "
                           "expired)")


def test_an_invoke_whose_fate_is_unknown_keeps_the_hand_off_until_it_expires(aws, clock):
    """GIVEN a link whose invoke got no answer (it may have been queued) THEN the
    hand-off stays, so that a queued continuation still runs its link (withdrawing would
    be as safe, but would end a live chain early); a tick within its lease is skipped."""
    job, handler, mailbox, notes = make(aws, clock, 10)
    mailbox.fail = True
    link(job, handler, tick(JOB, clock.now()))
    assert "handed_from" in lease(aws)
    clock.advance(timedelta(seconds=30))
    assert link(job, handler, tick(JOB, clock.now()))["decision"] == "skipped"


def test_status_between_two_links_says_the_job_is_handed_not_held_by_a_running_run(
        aws, clock, capsys):
    """GIVEN a hand-off on the row WHEN an operator runs ``jobguard status`` THEN it says
    the job is handed to a continuation not started yet, by which run, not that the next
    link holds it with the link before's owner and heartbeat (an operator reading
    "held ... last heartbeat" would look for a run that does not exist yet)."""
    from jobguard.cli import main

    job, handler, mailbox, notes = make(aws, clock, 10)
    link(job, handler, tick(JOB, clock.now()))
    row = lease(aws)
    capsys.readouterr()
    assert main(["--table", aws.table, "status", JOB]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"job {JOB}: handed by run {row['handed_from']} to its "
                            f"continuation, run {row['run_id']}, not started yet"), first
    assert "heartbeat" not in first
    assert main(["--table", aws.table, "--json", "status", JOB]) == 0
    assert json.loads(capsys.readouterr().out)["handed_from"] == row["handed_from"]
    # AND once the link runs, it is held as any run
    # AND between the next two links too (link 3 pending)
    link(job, handler, mailbox.take())
    capsys.readouterr()
    assert main(["--table", aws.table, "status", JOB]) == 0
    assert capsys.readouterr().out.startswith(f"job {JOB}: handed by run ")


def test_a_continuation_naming_the_wrong_link_cannot_lengthen_the_chain(aws, clock):
    """GIVEN a chain of at most 3 links, link 2 handed to link 3 WHEN a continuation
    event names the right run before it but an earlier place (``link: 2``; made by hand,
    or by a sender that got it wrong) THEN it does not take the hand-off (``superseded``,
    nothing run): the link counter is the chain's, not the event's, so ``max_chain``
    holds; the true event then runs link 3, the last."""
    job, handler, mailbox, notes = make(aws, clock, 20, max_chain=3)
    link(job, handler, tick(JOB, clock.now()))
    link(job, handler, mailbox.take())
    true = mailbox.take()
    assert true["link"] == 3
    forged = {**true, "link": 2}
    assert link(job, handler, forged)["decision"] == "superseded"
    pending = lease(aws)["run_id"]  # the hand-off to link 3 holds the lease
    [refused] = [r for r in aws.runs(JOB) if (r.detail or "").startswith("chain ended before")]
    assert f"the lease is held by {pending} (replaced" in (refused.detail or "")
    assert notes.calls and len(notes.calls) == 8  # nothing run by it
    link(job, handler, true)
    assert mailbox.events == []  # link 3 was the last
    assert [r.extra.get("link") for r in ran(aws)] == [1, 2, 3]


def test_runs_lists_a_pending_link_as_its_chains_continuation(aws, clock, capsys):
    """GIVEN a hand-off on the row WHEN ``jobguard runs`` lists the job THEN the row
    shown for the pending link names the link before it (``continues``), its trigger
    kind and that it has not started, not the link before's owner as its own."""
    from jobguard.cli import main

    job, handler, mailbox, notes = make(aws, clock, 10)
    link(job, handler, tick(JOB, clock.now()))
    row = lease(aws)
    pending = next(r for r in aws.store.list_runs(JOB, limit=5) if r.run_id == row["run_id"])
    assert (pending.trigger_kind, pending.extra.get("continues"), pending.owner) == (
        "continuation", row["handed_from"], None)
    assert "not started" in (pending.detail or "")
    capsys.readouterr()
    assert main(["--table", aws.table, "runs", JOB]) == 0
    shown = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()
             if line.startswith(row["run_id"])}
    assert shown[row["run_id"]][-2] == row["handed_from"]  # continues column
    # AND the timeline draws it in the chain of the link before it
    from jobguard.timeline.collect import collect
    from jobguard.timeline.model import Window

    now_ms = int(clock.now().timestamp() * 1000)
    timeline = collect(aws.store, [JOB], Window(now_ms - 600_000, now_ms + 60_000),
                       now_ms=now_ms)
    bar = next(b for b in timeline.lanes[0].bars if b.run_id == row["run_id"])
    assert (bar.continues, bar.chain) == (row["handed_from"], row["handed_from"])
