"""A throttled acquisition: a handler runs only on an acquisition known to have landed.

GIVEN a SKIP job whose DynamoDB client answers every ``TransactWriteItems``,
``UpdateItem`` and ``PutItem`` with ``ProvisionedThroughputExceededException`` (reads
answered), and a destination on a client of its own:

- WHEN no write of the job's lands THEN the handler never runs, nothing is written, the
  delivery fails naming the throttle, and the sender's retry after the throttling runs
  it once;
- WHEN the acquisition's first attempt lands unanswered and the SDK's retries are
  throttled (the caller sees a throttle for a write that landed), and the release does
  the same THEN the handler runs once, on the lease the consistent read found (checked
  from inside the handler, before its side effect), the release is read back as landed,
  the delivery returns the handler's answer, the run log says ``succeeded`` at fence 1,
  and a redelivery is a duplicate;
- WHEN the acquisition lands that way and the release is throttled for good THEN the
  delivery fails saying how the run ended and that its lease stays until it expires,
  and the sender's retry meanwhile is a duplicate;
- WHEN a recovery's acquisition is throttled for good THEN it gives up naming the
  throttle instead of trying forever, and nothing runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobguard import current_run
from jobguard.callsites import Fault
from jobguard.errors import StoreError
from jobguard.faults import Faults, Rule
from jobguard.triggers import Trigger, TriggerKind

from ..scenarios._items import NotesTable
from ..scenarios._support import make_job, tick

JOB = "crm-sync"
PTEE = "ProvisionedThroughputExceededException"
WRITES = ("TransactWriteItems", "UpdateItem", "PutItem")


def _every_write_throttled() -> list[Rule]:
    return [Rule(Fault.THROTTLE, operation=op, code=PTEE) for op in WRITES]


def _landed_then_throttled(site: str) -> Rule:
    """The call's first attempt lands and its answer is lost; the SDK's retries are
    throttled: the caller's error is a throttle, for a write that landed."""
    return Rule(Fault.LOST, site=site, nth=1, attempts=1, then=Fault.THROTTLE, code=PTEE)


class NoteWriter:
    """A handler whose side effect is one note per trigger, at a destination of its own;
    before writing it, it reads what its run stands on (the job's table, unfaulted)."""

    def __init__(self, aws: Any, notes: NotesTable, faults: Faults | None = None) -> None:
        self.aws, self.notes, self.faults = aws, notes, faults
        self.runs: list[dict[str, Any]] = []

    def __call__(self, event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        seen: dict[str, Any] = {"run_id": run.run_id, "fence": run.fence,
                                "notes_before": dict(self.notes.all())}
        if self.faults is not None:
            with self.faults.suspended():
                seen["lease"] = self.aws.store.read_lease(JOB)
                seen["trigger"] = self.aws.store.read_trigger(JOB, run.trigger.trigger_id)
        self.runs.append(seen)
        note = self.notes.put(run.trigger.trigger_id, "synced")
        return {"note": note}


def _nothing_written(aws: Any, trigger_id: str) -> None:
    assert aws.lease_item(JOB) is None
    assert aws.store.read_trigger(JOB, trigger_id) is None
    assert aws.runs(JOB) == []


def test_a_job_whose_every_write_is_throttled_never_runs_its_handler(aws, clock):
    notes = NotesTable.create(aws.sandbox.client("dynamodb"))  # its own client: unfaulted
    writer = NoteWriter(aws, notes)
    job = make_job(aws, clock, writer)
    event = tick(JOB, clock.now())
    trigger_id = f"{JOB}@{event['scheduled_at']}"

    with Faults(_every_write_throttled(), seed=7, backoff_scale=0.001,
                clients=[aws.ddb]) as faults, pytest.raises(StoreError) as failed:
        job(event, None)

    # THEN no attempt landed, and the handler never ran: no note, nothing written
    acquisitions = faults.calls_at("dynamodb.acquire")
    assert acquisitions and all(c.fault is Fault.THROTTLE and not c.reached
                                for c in acquisitions)
    assert writer.runs == [] and notes.calls == [] and notes.all() == {}
    _nothing_written(aws, trigger_id)
    # AND the sender is told why: the throttle, not an unstable decision
    assert PTEE in str(failed.value) and "no attempt landed" in str(failed.value)

    # WHEN the sender retries once the throttling is over THEN it runs, once
    assert job(event, None) == {"note": notes.find(trigger_id)}
    (record,) = aws.runs(JOB)
    assert (record.status.value, record.fence, record.trigger_id) == ("succeeded", 1,
                                                                      trigger_id)
    assert len(writer.runs) == 1 and list(notes.all()) == [trigger_id]


def test_a_throttled_answer_to_a_landed_acquisition_runs_on_that_lease(aws, clock):
    notes = NotesTable.create(aws.sandbox.client("dynamodb"))  # its own client: unfaulted
    faults = Faults([_landed_then_throttled("dynamodb.acquire"),
                     _landed_then_throttled("dynamodb.release"), *_every_write_throttled()],
                    seed=7, backoff_scale=0.001, clients=[aws.ddb])
    writer = NoteWriter(aws, notes, faults)
    job = make_job(aws, clock, writer)
    event = tick(JOB, clock.now())
    trigger_id = f"{JOB}@{event['scheduled_at']}"

    with faults:
        answer = job(event, None)

    # THEN the acquisition's and the release's answers were throttles, for writes that
    # landed (their first attempts reached the table)
    for site in ("dynamodb.acquire", "dynamodb.release"):
        first = faults.calls_at(site)[0]
        assert first.fault is Fault.LOST and first.reached and first.error is not None
    # AND the handler ran once, on a real acquisition: before its note, the lease row
    # named its run with fence 1 and its trigger was running under it
    (seen,) = writer.runs
    assert seen["notes_before"] == {}
    lease, item = seen["lease"], seen["trigger"]
    assert (lease.run_id, lease.fence, seen["fence"]) == (seen["run_id"], 1, 1)
    assert (item.state.value, item.run_id, item.fence) == ("running", seen["run_id"], 1)
    # AND the release, read back as landed, let the delivery return the handler's answer
    assert answer == {"note": notes.find(trigger_id)}
    row = aws.store.read_lease(JOB)
    assert (row.run_id, row.fence, row.last_run_id, row.released_by) == (
        None, 1, seen["run_id"], "run")
    ended = aws.store.read_trigger(JOB, trigger_id)
    assert (ended.state.value, ended.run_id, ended.ended_by) == ("done", seen["run_id"],
                                                                  "release")
    (record,) = aws.runs(JOB)
    assert (record.run_id, record.status.value, record.fence) == (seen["run_id"],
                                                                  "succeeded", 1)
    assert list(notes.all()) == [trigger_id] and notes.calls == [trigger_id]

    # WHEN the sender delivers it again THEN it is a duplicate: the note stays one
    again = job(event, None)
    assert again["decision"] == "duplicate" and len(writer.runs) == 1
    assert notes.calls == [trigger_id]


def test_a_release_that_cannot_land_says_how_the_run_ended_and_keeps_the_lease(aws, clock):
    notes = NotesTable.create(aws.sandbox.client("dynamodb"))  # its own client: unfaulted
    faults = Faults([_landed_then_throttled("dynamodb.acquire"), *_every_write_throttled()],
                    seed=7, backoff_scale=0.001, clients=[aws.ddb])
    writer = NoteWriter(aws, notes, faults)
    job = make_job(aws, clock, writer)
    event = tick(JOB, clock.now())
    trigger_id = f"{JOB}@{event['scheduled_at']}"

    with faults, pytest.raises(StoreError) as failed:
        job(event, None)

    # THEN the handler ran once on its landed lease, and no release attempt landed
    (seen,) = writer.runs
    assert (seen["lease"].run_id, seen["fence"]) == (seen["run_id"], 1)
    assert all(not c.reached for c in faults.calls_at("dynamodb.release"))
    # AND the error says how the run ended and what it leaves: the lease, still its own
    said = str(failed.value)
    assert f"run {seen['run_id']} (fence 1) ended succeeded" in said
    assert "could not release its lease" in said and PTEE in said
    row = aws.store.read_lease(JOB)
    assert (row.run_id, row.fence) == (seen["run_id"], 1)
    assert aws.store.read_trigger(JOB, trigger_id).state.value == "running"
    assert [(r.run_id, r.status.value) for r in aws.runs(JOB)] == [(seen["run_id"],
                                                                    "running")]
    assert notes.calls == [trigger_id]
    # AND the sender's retry while that lease lives runs nothing again
    assert job(event, None)["decision"] == "duplicate" and len(writer.runs) == 1


@pytest.mark.timeout(60)
def test_a_recovery_whose_acquisition_is_throttled_gives_up_naming_it(aws, clock):
    notes = NotesTable.create(aws.sandbox.client("dynamodb"))
    writer = NoteWriter(aws, notes)
    job = make_job(aws, clock, writer)
    trigger = Trigger(JOB, f"{JOB}@recovery:throttled", TriggerKind.RECOVERY,
                      requested_by="alice")

    with Faults(_every_write_throttled(), seed=7, backoff_scale=0.001,
                clients=[aws.ddb]) as faults, pytest.raises(StoreError) as failed:
        job.run_exclusive(trigger, wait=0, ignore_pause=True)

    assert PTEE in str(failed.value) and "no attempt landed" in str(failed.value)
    assert 1 < len(faults.calls_at("dynamodb.acquire")) <= 8
    assert writer.runs == [] and notes.calls == []
    _nothing_written(aws, trigger.trigger_id)



def test_a_run_acquired_by_an_earlier_attempt_counts_its_deadline_from_that_attempt(
        aws, clock):
    """GIVEN an acquisition recognised from the row (an earlier attempt that landed
    unanswered, 30 s before the attempt that read it: its expiry is 30 s older than
    this attempt's clock would put)
    WHEN the run's local deadline is set
    THEN it counts from the attempt that landed: the deadline (base + lease - skew
    margin) is the row's expiry - the skew margin, never later, so a REPLACE or a
    takeover judged from the row's expiry never meets a run that still calls. A run
    acquired by this attempt counts from the clock it read (with ``now``)."""
    from jobguard.lease import Acquired

    job = make_job(aws, clock, lambda event, context: None)
    lease_ms = int(job.config.lease.total_seconds() * 1000)
    now_ms, now_mono = 1_000_000_000, 5_000.0
    landed = Acquired(fence=1, expires_at_ms=now_ms - 30_000 + lease_ms)
    assert job._deadline_base(landed, now_ms, now_mono) == now_mono - 30.0
    assert job._deadline_base(Acquired(fence=1), now_ms, now_mono) == now_mono
    ours = Acquired(fence=1, expires_at_ms=now_ms + lease_ms)
    assert job._deadline_base(ours, now_ms, now_mono) == now_mono
