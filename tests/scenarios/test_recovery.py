"""Recovery: bounded, planned, confirmed, exclusive; checked on the ledger, the run log,
the checkpoint and the destination."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from jobguard import ItemState, JobConfig, hooks
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.errors import InvalidRequestError, LeaseBusyError
from jobguard.recovery import recover

from ._items import CrmSync, NotesTable, contacts
from ._support import in_thread

JOB = "crm-sync"


class FlakyCrmSync(CrmSync):
    fail_ids: set[str]

    def process(self, record: dict, item: Any) -> str:
        if record["id"] in getattr(self, "fail_ids", set()):
            raise ValueError(f"CRM refused {record['id']}")
        return super().process(record, item)


def make(aws, clock, notes, n=30, **overrides) -> FlakyCrmSync:
    options: dict[str, Any] = {"name": JOB, "table_name": aws.table, "batch_size": 10,
                               "lease": timedelta(seconds=60)}
    options.update(overrides)
    job = FlakyCrmSync(JobConfig(**options), contacts(n), notes, store=aws.store, clock=clock)
    job.fail_ids = set()
    return job


def manual(trigger_id: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": trigger_id}


def rows(aws, n=30):
    ids = [f"{c['id']}:create-note" for c in contacts(n)]
    return DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, ids)


def test_a_manual_recovery_while_the_schedule_is_active_never_overlaps(aws, clock):
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes)
    job.fail_ids = {"contact-00004", "contact-00005"}
    job.handler()(manual("tick-1"), None)  # 28 completed, 2 failed; checkpoint "30"
    items = DynamoItemStore(aws.table, client=aws.ddb)
    checkpoint = items.read_checkpoint(JOB)
    assert (checkpoint.cursor, checkpoint.seq) == ("30", 3)
    job.fail_ids = set()  # the CRM is healthy again

    # GIVEN the next scheduled run is active (held inside its run)
    active = threading.Event()
    done = threading.Event()
    inside: list[str] = []

    def hold(**ctx):
        inside.append(ctx["run_id"])
        if len(inside) == 1:
            active.set()
            assert done.wait(20)

    with hooks.on("after_acquire", hold):
        scheduled, _ = in_thread(lambda: job.handler()(manual("tick-2"), None))
        assert active.wait(10)
        holder = aws.store.read_lease(JOB).run_id

        # WHEN an operator recovers the failed items of the range meanwhile
        recovery, box = in_thread(lambda: recover(
            {"job": JOB, "cursor_from": "0", "cursor_to": "30", "mode": "failed",
             "dry_run": False, "requested_by": "alice"}, job=job))
        recovery.join(1.0)
        # THEN it waits: the lease is still the scheduled run's
        assert recovery.is_alive() and aws.store.read_lease(JOB).run_id == holder
        done.set()
        scheduled.join(10)
        recovery.join(20)

    # AND once the scheduled run ended it replayed only the two failed items
    summary = box["result"]["summary"]
    assert summary["replayed"] == 2 and summary["already_completed"] == 28
    assert summary["failed"] == 0 and summary["skipped_by_mode"] == 0
    assert Counter(notes.calls).most_common(1)[0][1] == 1 and len(notes.all()) == 30
    assert {r.state for r in rows(aws).values()} == {ItemState.COMPLETED}
    # AND the runs never overlapped: each took the lease in turn, with growing fences
    runs = sorted(aws.runs(JOB), key=lambda r: r.fence or 0)
    # (the first run left 2 failed items: `incomplete`, not a green `succeeded`)
    assert [r.status.value for r in runs] == ["incomplete", "succeeded", "succeeded"]
    assert [r.fence for r in runs] == [1, 2, 3]
    assert runs[2].trigger_kind == "recovery" and runs[2].requested_by == "alice"
    assert runs[2].extra["recovery_replayed"] == 2 and runs[2].extra["recovery_mode"] == "failed"
    # AND the scheduled checkpoint did not move, and the scheduled runs' records are intact
    assert items.read_checkpoint(JOB) == checkpoint
    assert runs[0].extra["failed"] == 2 and runs[0].extra["completed"] == 28


def test_recovery_after_a_crashed_run_reconciles_first_and_replays_the_rest(aws, clock):
    # GIVEN a run that called the destination for 4 items and died (outcomes not written)
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes, n=10, flush="page")
    paused, never = threading.Event(), threading.Event()

    def die_after_four(**ctx):
        if len(notes.calls) == 4:
            paused.set()
            never.wait(30)

    with hooks.on("before_item", die_after_four):
        thread, _ = in_thread(lambda: job.handler()(manual("doomed"), None))
        assert paused.wait(10)
    clock.advance(timedelta(seconds=66))  # its lease is long gone
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "10", "requested_by": "bob"}

    # WHEN an operator plans the recovery
    plan = recover(request, job=job, threshold=5)

    # THEN the plan sees 10 unfinished items and asks for confirmation
    assert plan["result"] == "planned" and plan["needs_confirmation"]
    assert plan["plan"]["uncertain"] == 10 and plan["plan"]["to_replay"] == 10
    assert len(notes.calls) == 4  # planning wrote and sent nothing

    # AND executing needs the token
    with pytest.raises(InvalidRequestError) as info:
        recover({**request, "dry_run": False}, job=job, threshold=5)
    assert info.value.field == "confirm"
    assert str(info.value) == ("confirm: required: 10 items exceed the threshold of 5; run "
                               "the dry run and pass its token")  # and what to do next
    result = recover({**request, "dry_run": False, "confirm": plan["plan"]["token"]}, job=job,
                     threshold=5)

    # THEN the 4 found at the destination were reconciled, the 6 others replayed once
    summary = result["summary"]
    assert (summary["reconciled"], summary["replayed"]) == (4, 6)
    assert Counter(notes.calls).most_common(1)[0][1] == 1 and len(notes.calls) == 10
    ledger = rows(aws, 10)
    assert Counter(r.state for r in ledger.values()) == {ItemState.COMPLETED: 10}
    assert summary["selected"] == len(ledger)
    written = notes.all()
    assert all(written[w] == r.destination_id for w, r in ledger.items())
    never.set()
    thread.join(10)

    # AND the same recovery again replays nothing
    again = recover({**request, "dry_run": False}, job=job, threshold=5)["summary"]
    assert again["replayed"] == 0 and again["already_completed"] == 10
    assert len(notes.calls) == 10


@pytest.mark.parametrize(
    ("request_overrides", "field"),
    [
        ({"job": "no-such-job"}, "job"),
        ({"cursor_from": "20", "cursor_to": "10"}, "cursor_to"),
        ({"cursor_to": None}, "cursor_to"),
        ({"cursor_from": None, "cursor_to": None}, "cursor_from"),
        ({"cursor_from": None, "cursor_to": None, "time_from": "2026-11-01T00:00:00Z",
          "time_to": "2026-11-09T00:00:00Z"}, "time_to"),
        ({"max_items": 0}, "max_items"),
        ({"max_items": 5}, "max_items"),
        ({"mode": "all"}, "mode"),
        ({"mode": "completed"}, "mode"),
        ({"dry_run": False}, "confirm"),
        ({"dry_run": False, "confirm": "0123456789abcdef01234567"}, "confirm"),
        ({"surprise": True}, "surprise"),
        ({"dry_run": "no"}, "dry_run"),
    ],
)
def test_bad_recovery_requests_name_the_field_and_write_nothing(aws, clock, request_overrides,
                                                              field, monkeypatch):
    from jobguard import registry

    monkeypatch.setattr(registry, "_JOBS", {})
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes)
    registry.register(job)
    before = aws.item_count()
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "30", **request_overrides}
    request = {k: v for k, v in request.items() if v is not None}
    with pytest.raises(InvalidRequestError) as info:
        recover(request, threshold=10)
    assert info.value.field == field, str(info.value)
    assert aws.item_count() == before and notes.calls == []


def test_a_recovery_that_cannot_get_the_lease_in_time_names_the_holder(aws, clock):
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes, n=5)
    active, done = threading.Event(), threading.Event()

    def hold(**ctx):
        active.set()
        assert done.wait(20)

    with hooks.on("after_acquire", hold):
        thread, _ = in_thread(lambda: job.handler()(manual("tick"), None))
        assert active.wait(10)
    holder = aws.store.read_lease(JOB)
    with pytest.raises(LeaseBusyError) as info:
        recover({"job": JOB, "cursor_from": "0", "cursor_to": "5", "dry_run": False,
                 "wait_seconds": 0}, job=job)
    done.set()
    thread.join(10)
    assert info.value.holder_run_id == holder.run_id
    assert info.value.lease_expires_at_ms == holder.expires_at_ms
    assert [r.trigger_kind for r in aws.runs(JOB)] == ["manual"]  # the recovery wrote nothing


def test_a_recovery_of_a_coalesce_job_ends_cleanly_when_a_tick_coalesced_behind_it(
        aws, clock, monkeypatch):
    from jobguard.local.esm import deliver_once

    # GIVEN a COALESCE job: its scheduled function has the trigger queue, the recovery
    # function (like the deployed one) has none
    monkeypatch.delenv("JOBGUARD_TRIGGER_QUEUE_URL", raising=False)
    notes = NotesTable.create(aws.ddb)
    url = aws.fifo_queue(JOB)
    scheduled = make(aws, clock, notes, n=6, policy="COALESCE", trigger_queue_url=url)
    recovery_job = make(aws, clock, notes, n=6, policy="COALESCE")
    inside, go = threading.Event(), threading.Event()

    def hold(**ctx):
        inside.set()
        assert go.wait(20)

    # WHEN a tick arrives while the recovery holds the lease
    with hooks.on("after_acquire", hold):
        recovery, box = in_thread(lambda: recover(
            {"job": JOB, "cursor_from": "0", "cursor_to": "6", "dry_run": False},
            job=recovery_job))
        assert inside.wait(10)
    tick = scheduled.handler()(manual("tick-during-recovery"), None)
    assert tick["decision"] == "coalesced"
    go.set()
    recovery.join(20)

    # THEN the recovery reports its work (it has no queue to wake or resend: the
    # follow-up's own message is already on the queue) ...
    assert "error" not in box, box.get("error")
    assert box["result"]["result"] == "executed"
    assert box["result"]["summary"]["replayed"] == 6
    # ... and the follow-up runs once, from the scheduled function's queue
    assert deliver_once(aws.sqs, url, scheduled.handler()) == 1
    kinds = Counter((r.trigger_kind, r.status.value) for r in aws.runs(JOB))
    assert kinds[("follow_up", "succeeded")] == 1 and kinds[("recovery", "succeeded")] == 1
    assert len(notes.all()) == 6 and Counter(notes.calls).most_common(1)[0][1] == 1


# -- recovery always checks (issue 16) ---------------------------------------------------

def test_a_wrong_token_is_refused_even_for_a_plan_under_the_threshold(aws, clock):
    """GIVEN a plan of 2 failed items, far under the threshold (no token needed)
    WHEN the operator executes it with a token that is not this plan's
    THEN it is refused naming ``confirm`` and nothing is written or sent; without a
    token it runs."""
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes)
    job.fail_ids = {"contact-00004", "contact-00005"}
    job.handler()(manual("tick-1"), None)
    job.fail_ids = set()
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "30", "mode": "failed",
               "dry_run": False}
    before, calls = aws.item_count(), list(notes.calls)
    runs_before = len(aws.runs(JOB))
    with pytest.raises(InvalidRequestError) as info:
        recover({**request, "confirm": "0123456789abcdef01234567"}, job=job, threshold=100)
    assert info.value.field == "confirm" and "does not match" in str(info.value)
    assert aws.item_count() == before and notes.calls == calls
    assert len(aws.runs(JOB)) == runs_before
    assert recover(request, job=job, threshold=100)["summary"]["replayed"] == 2


def test_the_threshold_is_judged_on_the_plan_made_under_the_lease(aws, clock):
    """GIVEN a recovery of the failed items in 0..60 planned at 3 items (threshold 10:
    no token needed), waiting for the lease a scheduled run holds
    WHEN that run, once the recovery is waiting, fails 20 more items of the range
    THEN the recovery, judging again under the lease, refuses (``confirm`` required)
    and replays nothing; its dry run afterwards shows 23 and asks for the token."""
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes, n=30)
    job.fail_ids = {"contact-00001", "contact-00002", "contact-00003"}
    job.handler()(manual("tick-1"), None)
    grown = make(aws, clock, notes, n=60)
    grown.fail_ids = {f"contact-{i:05d}" for i in range(30, 50)}
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "60", "mode": "failed",
               "dry_run": False}
    assert recover({**request, "dry_run": True}, job=grown, threshold=10)["plan"][
        "to_replay"] == 3

    inside, go = threading.Event(), threading.Event()

    def hold(**ctx: Any) -> None:
        if not inside.is_set():
            inside.set()
            assert go.wait(20)

    with hooks.on("after_acquire", hold):
        scheduled, _ = in_thread(lambda: grown.handler()(manual("tick-2"), None))
        assert inside.wait(10)
        recovery, box = in_thread(lambda: recover(request, job=grown, threshold=10))
        recovery.join(0.5)
        assert recovery.is_alive(), box  # planned at 3: no token asked; waits for the lease
        go.set()
        scheduled.join(10)
        recovery.join(20)
    error = box.get("error")
    assert isinstance(error, InvalidRequestError) and error.field == "confirm", box
    assert "23 items exceed the threshold of 10" in str(error)
    failed = [w for w, r in rows(aws, 60).items() if r.state is ItemState.FAILED]
    assert len(failed) == 23  # nothing replayed
    again = recover({**request, "dry_run": True}, job=grown, threshold=10)
    assert again["needs_confirmation"] and again["plan"]["to_replay"] == 23


def test_a_completed_item_past_its_ttl_is_absent_in_the_plan_as_in_a_run(aws, clock):
    """GIVEN 5 completed items whose TTL has passed (DynamoDB has not deleted them yet)
    WHEN an operator plans a recovery of the range
    THEN they count as never attempted (and expired), as a run would claim them again;
    executing replays them once each."""
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes, n=5, item_ttl=timedelta(days=1))
    job.handler()(manual("tick-1"), None)
    assert {r.state for r in rows(aws, 5).values()} == {ItemState.COMPLETED}
    clock.advance(timedelta(days=1, minutes=1))
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "5"}
    plan = recover(request, job=job, threshold=100)["plan"]
    assert (plan["completed"], plan["never_attempted"], plan["expired"]) == (0, 5, 5)
    assert plan["to_replay"] == 5
    summary = recover({**request, "dry_run": False}, job=job, threshold=100)["summary"]
    assert summary["replayed"] == 5
    assert Counter(notes.calls) == Counter({f"contact-{i:05d}:create-note": 2
                                            for i in range(5)})


def test_payload_conflicts_are_reported_by_plans_runs_and_recoveries(aws, clock):
    """GIVEN items left uncertain (a run died mid-call) and completed items
    WHEN the source records change content under the same work ids, and a run, a plan
    and a recovery meet them
    THEN each reports the reused work ids as conflicts (never ``conflicts = 0``)."""
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes, n=4, flush="page")
    paused, never = threading.Event(), threading.Event()

    def die_after_two(**ctx: Any) -> None:
        if len(notes.calls) == 2:
            paused.set()
            never.wait(30)

    with hooks.on("before_item", die_after_two):
        thread, _ = in_thread(lambda: job.handler()(manual("doomed"), None))
        assert paused.wait(10)
    clock.advance(timedelta(seconds=66))
    changed = make(aws, clock, notes, n=4, flush="page")
    for record in changed.source:
        record["change"] += " (edited)"
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "4"}
    plan = recover(request, job=changed, threshold=100)["plan"]
    assert plan["conflicts"] == 4 and len(plan["conflict_ids"]) == 4, plan
    summary = recover({**request, "dry_run": False}, job=changed, threshold=100)["summary"]
    assert summary["conflicts"] == 4, summary
    never.set()
    thread.join(10)


def test_a_run_reports_an_uncertain_item_presented_with_another_payload(aws, clock):
    """GIVEN 4 items claimed by a run that died mid-call (2 reached the destination)
    WHEN the next run meets them with other content under the same work ids
    THEN it reconciles them as usual and reports 4 conflicts on its record."""
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes, n=4, flush="page")
    paused, never = threading.Event(), threading.Event()

    def die_after_two(**ctx: Any) -> None:
        if len(notes.calls) == 2:
            paused.set()
            never.wait(30)

    with hooks.on("before_item", die_after_two):
        thread, _ = in_thread(lambda: job.handler()(manual("doomed"), None))
        assert paused.wait(10)
    clock.advance(timedelta(seconds=66))
    changed = make(aws, clock, notes, n=4, flush="page")
    for record in changed.source:
        record["change"] += " (edited)"
    changed.handler()(manual("tick-2"), None)
    (second,) = [r for r in aws.runs(JOB) if r.trigger_id.endswith("tick-2")]
    assert second.extra["conflicts"] == 4, second.extra
    assert len(notes.all()) == 4  # still one note per work id
    never.set()
    thread.join(10)


def test_a_confirmed_plan_that_shrank_while_waiting_still_runs(aws, clock):
    """GIVEN a recovery of 10 unfinished items confirmed with its token (threshold 5),
    waiting for the lease a scheduled run holds
    WHEN that run completes them all before it releases (the plan shrinks to 0)
    THEN the recovery runs (it replays nothing), not refused for a changed ledger."""
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes, n=10)
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "10"}
    plan = recover(request, job=job, threshold=5)
    assert plan["needs_confirmation"] and plan["plan"]["to_replay"] == 10
    inside, go = threading.Event(), threading.Event()

    def hold(**ctx: Any) -> None:
        if not inside.is_set():
            inside.set()
            assert go.wait(20)

    with hooks.on("after_acquire", hold):
        scheduled, _ = in_thread(lambda: job.handler()(manual("tick-1"), None))
        assert inside.wait(10)
        recovery, box = in_thread(lambda: recover(
            {**request, "dry_run": False, "confirm": plan["plan"]["token"]}, job=job,
            threshold=5))
        recovery.join(0.5)
        assert recovery.is_alive(), box
        go.set()
        scheduled.join(10)
        recovery.join(20)
    assert "error" not in box, box["error"]
    assert box["result"]["summary"]["replayed"] == 0
    assert len(notes.all()) == 10 and Counter(notes.calls).most_common(1)[0][1] == 1


def test_review_a_given_token_is_compared_under_the_lease_too(aws, clock):
    """Review (branch `review`). GIVEN a plan of 3 failed items (threshold 10) that the
    operator executes WITH its token, waiting for the lease a scheduled run holds
    WHEN that run fails 5 more items of the range meanwhile (fresh plan: 8, still under
    the threshold)
    THEN the token no longer matches the plan it would execute and is refused, as the
    same request is refused before the lease ("a given token is always compared"; a
    token "from before the ledger changed is refused"). Today `_check_under_lease`
    returns early for any fresh plan <= threshold and replays the 5 items the operator
    never confirmed."""
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes, n=30)
    job.fail_ids = {"contact-00001", "contact-00002", "contact-00003"}
    job.handler()(manual("tick-1"), None)
    grown = make(aws, clock, notes, n=60)
    grown.fail_ids = {f"contact-{i:05d}" for i in range(30, 35)}
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "60", "mode": "failed"}
    plan = recover(request, job=grown, threshold=10)["plan"]
    assert plan["to_replay"] == 3
    inside, go = threading.Event(), threading.Event()

    def hold(**ctx: Any) -> None:
        if not inside.is_set():
            inside.set()
            assert go.wait(20)

    with hooks.on("after_acquire", hold):
        scheduled, _ = in_thread(lambda: grown.handler()(manual("tick-2"), None))
        assert inside.wait(10)
        recovery, box = in_thread(lambda: recover(
            {**request, "dry_run": False, "confirm": plan["token"]}, job=grown, threshold=10))
        recovery.join(0.5)
        assert recovery.is_alive(), box
        go.set()
        scheduled.join(10)
        recovery.join(20)
    error = box.get("error")
    assert isinstance(error, InvalidRequestError) and error.field == "confirm", (
        f"token of a 3-item plan executed a different plan: {box.get('result')}")


def test_a_recovery_cut_off_by_a_force_release_still_shows_as_a_recovery(
        aws, clock, monkeypatch):
    import json

    from ._trigger_support import cli

    # GIVEN a REPLACE job's recovery, asked for by alice, holding the lease inside its run
    monkeypatch.setenv("LOGNAME", "oscar")  # the operator at the terminal
    monkeypatch.setenv("USER", "oscar")
    notes = NotesTable.create(aws.ddb)
    job = make(aws, clock, notes, n=5, policy="REPLACE")
    inside, go = threading.Event(), threading.Event()

    def hold(**ctx):
        inside.set()
        assert go.wait(20)

    with hooks.on("after_acquire", hold):
        recovery, box = in_thread(lambda: recover(
            {"job": JOB, "cursor_from": "0", "cursor_to": "5", "dry_run": False,
             "requested_by": "alice"}, job=job))
        assert inside.wait(10)
    run_id = aws.store.read_lease(JOB).run_id

    # WHEN the operator force-releases it, saying why, and the cut-off run goes on
    code, _, err = cli(aws, "release", JOB, "--force", "--yes", "--reason", "CRM hung")
    assert code == 0, err
    go.set()
    recovery.join(20)
    assert box["result"]["result"] == "lease_lost" and notes.calls == []

    # THEN its record is the operator's (who and why) and still the recovery's story:
    # its trigger kind, the job's policy, its requester, its trigger
    (record,) = aws.runs(JOB)
    assert record.run_id == run_id and record.status.value == "released_by_operator"
    assert record.detail == "lease force-released by oscar: CRM hung"
    assert (record.trigger_kind, record.policy, record.requested_by) == (
        "recovery", "REPLACE", "alice")
    assert record.trigger_id.startswith(f"{JOB}@recovery:") and record.fence == 1
    # AND `jobguard runs` and the timeline show it as alice's recovery
    code, out, err = cli(aws, "--json", "runs", JOB)
    (row,) = json.loads(out)
    assert (row["status"], row["trigger_kind"], row["policy"], row["requested_by"]) == (
        "released_by_operator", "recovery", "REPLACE", "alice")
    code, out, err = cli(aws, "--json", "timeline", JOB, "--since", "10m")
    assert code == 0, err
    (bar,) = json.loads(out)["jobs"][0]["runs"]
    assert (bar["run_id"], bar["status"], bar["trigger_kind"], bar["requested_by"]) == (
        run_id, "released_by_operator", "recovery", "alice")
    code, out, err = cli(aws, "timeline", JOB, "--since", "10m", "--width", "200")
    assert code == 0 and "requested by alice" in out and "CRM hung" in out
