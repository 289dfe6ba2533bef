"""Who may invoke a job's function: a tick or rule event made by hand, ahead of its time.

Anyone who may invoke the function can send ``{"job": ..., "scheduled_at": ...}``. A
tick's identity is the job and its scheduled time, so an event scheduled ahead of the
worker's clock, taken, would be the next tick run early: the Scheduler's own delivery
then meets it as a ``duplicate`` and runs nothing, and a handler that reads
``scheduled_at`` as its cut-off ("the report as of 09:00") runs on earlier data under
the later identity. EventBridge delivers a tick (a rule event) at or after its time;
only clock skew can put it ahead of a worker's clock, by at most the job's
``skew_margin``. Further ahead is refused, before anything is written.

Each delivery's sender id (Scheduler's execution id, the rule event's id) is kept on
the run record (``delivery_id``) for operators.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobguard import InvalidTriggerError, OverlapPolicy, current_run
from jobguard.testing import ManualClock, tick_event
from jobguard.triggers import format_instant

from ._support import Gate, Recorder, holding, make_job

EVENTS = Path(__file__).resolve().parents[2] / "events"
T = datetime.fromisoformat("2026-11-29T09:00:00+00:00")
"""The scheduled tick the hand-made events try to take."""
SKEW = timedelta(seconds=5)
"""The jobs' skew margin (JobConfig's default)."""


def _table(aws: Any) -> list[dict[str, Any]]:
    """Every row of the table, as stored."""
    rows = aws.ddb.scan(TableName=aws.table, ConsistentRead=True)["Items"]
    return sorted(rows, key=lambda r: (r["pk"]["S"], r["sk"]["S"]))


def _rule_event(at: datetime, event_id: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / "eventbridge-rule.json").read_text())
    event["time"] = format_instant(at)
    if event_id is None:
        del event["id"]
    else:
        event["id"] = event_id
    return event


class CutOff:
    """A handler that reports "as of" its trigger's scheduled time, and when it ran."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.ran: list[tuple[str, datetime, datetime]] = []

    def __call__(self, event: Any, context: Any) -> str:
        run = current_run()
        assert run.trigger.scheduled_at is not None
        self.ran.append((run.trigger.trigger_id, run.trigger.scheduled_at, self.clock.now()))
        return f"report as of {format_instant(run.trigger.scheduled_at)}"


@pytest.mark.parametrize("shape", ["tick", "rule"])
def test_a_hand_made_event_14_minutes_early_is_refused_and_the_schedules_own_runs(
        aws, shape):
    """GIVEN a SKIP job whose next tick is at 09:00, at 08:46 on the worker's clock
    WHEN someone who may invoke the function sends that tick (or the rule's event) by
    hand THEN it is refused naming ``scheduled_at`` and the table is as it was (no run
    record, no trigger, no lease row); WHEN the schedule's own delivery comes at 09:00
    THEN it runs (not a duplicate), its report is as of 09:00 made at 09:00, and its
    record names the delivery's id."""
    clock = ManualClock(T - timedelta(minutes=14))
    report = CutOff(clock)
    job = make_job(aws, clock, report)
    before = _table(aws)
    early = (tick_event("crm-sync", T) if shape == "tick"
             else _rule_event(T, "53dc4d37-0000-4fa6-80c9-8b7d4a4d2eaa"))

    with pytest.raises(InvalidTriggerError) as refused:
        job(early, None)

    assert refused.value.field == "scheduled_at"
    assert "14 minutes ahead" in str(refused.value) and "skew margin (5 s)" in str(
        refused.value)
    assert _table(aws) == before  # nothing written: no lease row, trigger or run record
    assert report.ran == []

    clock.advance(timedelta(minutes=14))  # 09:00: the schedule fires
    delivery = "c4c1a6f2-1e0b-4a57-9a43-0f3c1b2d5e61"
    scheduled = (tick_event("crm-sync", T, execution_id=delivery) if shape == "tick"
                 else _rule_event(T, delivery))
    assert job(scheduled, None) == "report as of 2026-11-29T09:00:00Z"
    assert report.ran == [("crm-sync@2026-11-29T09:00:00Z", T, T)]
    (record,) = aws.runs("crm-sync")
    assert (record.decision.value, record.status.value) == ("ran", "succeeded")
    assert record.delivery_id == delivery


@pytest.mark.parametrize("shape", ["tick", "rule"])
def test_a_tick_early_by_less_than_the_skew_margin_is_a_clock_behind_and_runs(aws, shape):
    """GIVEN a worker whose clock is 4 s behind the Scheduler's (skew margin 5 s) WHEN
    the 09:00 tick is delivered at 09:00 (4 s ahead on that clock) THEN it runs; one
    6 s ahead is refused, nothing written."""
    clock = ManualClock(T - SKEW + timedelta(seconds=1))
    report = CutOff(clock)
    job = make_job(aws, clock, report)
    event = tick_event("crm-sync", T) if shape == "tick" else _rule_event(T)

    assert job(event, None) == "report as of 2026-11-29T09:00:00Z"
    assert [r.trigger_id for r in aws.runs("crm-sync")] == ["crm-sync@2026-11-29T09:00:00Z"]

    later = T + timedelta(minutes=5)
    before = _table(aws)
    clock.advance(timedelta(minutes=5) - timedelta(seconds=2))  # 6 s before 09:05
    with pytest.raises(InvalidTriggerError) as refused:
        job(tick_event("crm-sync", later) if shape == "tick" else _rule_event(later), None)
    assert refused.value.field == "scheduled_at"
    assert _table(aws) == before


def test_a_hand_made_tick_ahead_cannot_take_a_held_jobs_next_tick_either(aws):
    """GIVEN a QUEUE job whose 08:55 run is still going at 08:59 WHEN a hand-made 09:00
    tick arrives THEN it is refused (not queued under the 09:00 identity): the queue
    and the table are as they were, and the schedule's 09:00 tick is queued at 09:00."""
    clock = ManualClock(T - timedelta(minutes=1))
    gate, rec = Gate(), Recorder()
    first = tick_event("crm-sync", T - timedelta(minutes=5))
    # (a long lease: no heartbeat renews the row while the table is compared)
    job = make_job(aws, clock, rec.handler(holding(gate, first)), policy=OverlapPolicy.QUEUE,
                   lease=timedelta(minutes=30))
    thread = threading.Thread(target=lambda: job(first, None), daemon=True)
    thread.start()
    assert gate.entered.wait(10)
    before = _table(aws)

    with pytest.raises(InvalidTriggerError):
        job(tick_event("crm-sync", T), None)
    assert _table(aws) == before
    assert aws.deliver("crm-sync", job) is None  # nothing was queued

    clock.advance(timedelta(minutes=1))
    queued = job(tick_event("crm-sync", T, execution_id="exec-0900"), None)
    assert queued["decision"] == "queued"
    gate.release.set()
    thread.join(10)
    assert aws.deliver("crm-sync", job) is not None
    runs = {r.trigger_id: r for r in aws.runs("crm-sync") if r.decision.value == "ran"}
    # the queued tick's run keeps the id of the delivery that queued it
    assert runs["crm-sync@2026-11-29T09:00:00Z"].delivery_id == "exec-0900"
    assert runs["crm-sync@2026-11-29T09:00:00Z"].trigger_kind == "queued"
    assert runs["crm-sync@2026-11-29T08:55:00Z"].delivery_id is None  # sent by hand


def test_every_delivery_of_a_tick_is_recorded_with_its_own_id(aws):
    """GIVEN the 09:00 tick ran, sent by the Scheduler (execution id A) WHEN the
    Scheduler delivers it again (B), and a copy without any id arrives THEN each
    duplicate record names what its delivery carried: B, and nothing."""
    clock = ManualClock(T + timedelta(seconds=1))
    job = make_job(aws, clock, CutOff(clock))
    for execution_id in ("exec-A", "exec-B", None):
        job(tick_event("crm-sync", T, execution_id=execution_id), None)
        clock.advance(timedelta(seconds=1))  # (the run log is in run id order: time)

    assert [(r.decision.value, r.delivery_id) for r in aws.runs("crm-sync")] == [
        ("ran", "exec-A"), ("duplicate", "exec-B"), ("duplicate", None)]


@pytest.mark.parametrize(("shape", "value"), [
    pytest.param("tick", "x" * 129, id="tick-129-chars"),
    pytest.param("tick", "e" * 100_000, id="tick-100k-chars"),
    # clear the screen, set the window title
    pytest.param("tick", "exec\x1b[2J\x1b]0;owned\x07", id="tick-escapes"),
    pytest.param("tick", "exec-1\nsucceeded", id="tick-forged-line"),
    pytest.param("tick", "exec\x9b31m", id="tick-c1-csi"),
    pytest.param("tick", "exec\u202e1-cexe", id="tick-bidi-override"),
    pytest.param("tick", 42, id="tick-a-number"),
    pytest.param("rule", "y" * 129, id="rule-129-chars"),
    pytest.param("rule", "id\r\nforged", id="rule-forged-line"),
    pytest.param("rule", "id\u2066hidden\u2069", id="rule-bidi-isolate"),
])
def test_a_bad_delivery_id_is_refused_naming_its_field_and_nothing_is_written(
        aws, shape, value):
    """GIVEN an on-time tick (rule event) WHEN its execution id (event id) is huge, not
    text, or holds a control, C1 or bidirectional character THEN it is refused naming
    that field, and nothing is written."""
    clock = ManualClock(T)
    report = CutOff(clock)
    job = make_job(aws, clock, report)
    if shape == "tick":
        event: dict[str, Any] = {**tick_event("crm-sync", T), "execution_id": value}
        field = "execution_id"
    else:
        event = {**_rule_event(T), "id": value}
        field = "id"
    before = _table(aws)

    with pytest.raises(InvalidTriggerError) as refused:
        job(event, None)

    assert refused.value.field == field
    assert _table(aws) == before and report.ran == []


def test_jobguard_run_shows_the_delivery_id(jobguard_sandbox, monkeypatch):
    """GIVEN a run of the Scheduler's 09:00 tick WHEN an operator looks at it with
    ``jobguard run`` THEN the delivery's id is shown, in text and in JSON."""
    from jobguard import guarded
    from jobguard.cli import main

    monkeypatch.delenv("JOBGUARD_JOBS_MODULE", raising=False)

    @guarded("crm-sync", policy=OverlapPolicy.SKIP)
    def handler(event: Any, context: Any) -> str:
        return "done"

    wired = jobguard_sandbox.wire(handler)
    wired(tick_event("crm-sync", wired.minute(), execution_id="d32c5kddcf5bb8c3"))
    (record,) = wired.runs()

    def cli(*argv: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main([*argv, "--jobs-module", "handlers.jobs"]) == 0
        return out.getvalue()

    assert "delivery_id: d32c5kddcf5bb8c3" in cli("run", record.run_id)
    shown = json.loads(cli("run", record.run_id, "--output", "json"))
    assert shown["delivery_id"] == "d32c5kddcf5bb8c3"
