"""What an operator sees of a recovery or a resolution: the plan of a time range, the
token the README prints, the answer of a recovery whose lease was taken over, a plain
``@guarded`` job's plan, and the field and text of every refusal.

These close the gaps ``make mutate`` left in ``recovery.py`` (docs/mutation.md). Each
test checks what a user reads: the answer's fields, the error's field and message, the
run record, the ledger. Races are staged with hook points, never sleeps.
"""

from __future__ import annotations

import re
import sys
import threading
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jobguard import BatchJob, JobConfig, OverlapPolicy, Page, WorkId, current_run, hooks
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.errors import InvalidRequestError
from jobguard.records import RunStatus
from jobguard.recovery import parse_request, recover, resolve
from jobguard.testing import ManualClock
from jobguard.workitems import ItemState

from ._items import CrmSync, NotesTable, contacts
from ._support import in_thread, make_job

JOB = "crm-sync"
T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
RECOVER = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "recover.md"


def manual(job: str, trigger_id: str) -> dict[str, Any]:
    return {"job": job, "manual": True, "trigger_id": trigger_id}


def crm_sync(aws: Any, clock: Any, notes: NotesTable, n: int, **overrides: Any) -> CrmSync:
    options: dict[str, Any] = {"name": JOB, "table_name": aws.table, "batch_size": 10,
                               "lease": timedelta(seconds=60), **overrides}
    return CrmSync(JobConfig(**options), contacts(n), notes, store=aws.store, clock=clock)


class TimedCrmSync(CrmSync):
    """A crm-sync whose contacts changed one a minute from 10:00, so that an operator
    can recover by time: the cursor of a time is the number of changes before it."""

    def cursor_of(self, record: dict) -> str:
        return str(int(record["id"].rsplit("-", 1)[1]) + 1)  # the checkpoint after it

    def cursor_at(self, at: Any) -> str:
        return str(sum(1 for i in range(len(self.source)) if T0 + timedelta(minutes=i) < at))


def test_a_recovery_by_time_plans_and_replays_exactly_the_records_of_that_window(aws, clock):
    """GIVEN 30 contacts changed one a minute from 10:00, none synced yet
    WHEN an operator recovers 10:10 to 10:20 (a time range, not cursors)
    THEN the plan selects the 10 changes of those minutes (10:10 .. 10:19), answers the
    range in UTC, and executing it writes those 10 notes and no other."""
    notes = NotesTable.create(aws.ddb)
    job = TimedCrmSync(JobConfig(name=JOB, table_name=aws.table, batch_size=4,
                                 lease=timedelta(seconds=60)), contacts(30), notes,
                       store=aws.store, clock=clock)
    request = {"job": JOB, "time_from": "2026-11-29T11:10:00+01:00",
               "time_to": "2026-11-29T10:20:00Z", "requested_by": "alice"}

    plan = recover(request, job=job, threshold=100)

    assert plan["result"] == "planned" and plan["needs_confirmation"] is False
    assert plan["range"] == {"time_from": "2026-11-29T10:10:00Z",
                             "time_to": "2026-11-29T10:20:00Z"}
    assert (plan["plan"]["selected"], plan["plan"]["never_attempted"],
            plan["plan"]["to_replay"]) == (10, 10, 10)
    window = [f"contact-{i:05d}:create-note" for i in range(10, 20)]
    assert plan["plan"]["sample"] == window
    assert notes.calls == []  # a plan writes and sends nothing

    done = recover({**request, "dry_run": False}, job=job, threshold=100)
    assert done["result"] == "executed" and done["summary"]["replayed"] == 10
    assert sorted(notes.all()) == window
    (record,) = [r for r in aws.runs(JOB) if r.trigger_kind == "recovery"]
    assert record.extra["recovery_range"] == (
        '{"time_from": "2026-11-29T10:10:00Z", "time_to": "2026-11-29T10:20:00Z"}')


class DemoFeed(BatchJob[dict[str, str]]):
    """The README's "Recovery, step by step" job: 12 changes, cursors 000001..000012."""

    def __init__(self, config: JobConfig, notes: NotesTable, **guard_options: Any) -> None:
        super().__init__(config, **guard_options)
        self.notes = notes
        self.feed = [{"seq": f"{i:06d}", "contact": f"contact-{i}"} for i in range(1, 13)]

    def select(self, cursor: str | None, limit: int) -> Page[dict[str, str]]:
        rows = [r for r in self.feed if cursor is None or r["seq"] > cursor][:limit]
        return Page(rows, rows[-1]["seq"] if rows else cursor)

    def work_id(self, record: dict[str, str]) -> WorkId:
        return WorkId(f"{record['contact']}@{record['seq']}", "create-note")

    def cursor_of(self, record: dict[str, str]) -> str:
        return record["seq"]

    def process(self, record: dict[str, str], item: Any) -> str:
        return self.notes.put(item.key, f"{record['contact']} changed")

    def reconcile(self, record: Any, item: Any) -> str | None:
        return self.notes.find(item.work_id)


def test_the_token_the_readme_prints_is_the_one_its_recovery_plans(aws, clock):
    """GIVEN the README's story: demo-crm-sync's run died after 5 of its first page of
    6 notes (6 items claimed, 6 never attempted)
    WHEN the operator plans the README's range (000000 .. 000012)
    THEN the plan is the README's (12 selected, 6 uncertain, 6 never attempted) and its
    token is the one the README prints: a token depends on the request and the ledger
    only, so a dry run made in one place (the CLI in the operator's shell) confirms the
    execution made in another (the recovery Lambda, maybe of a newer release)."""
    section = RECOVER.read_text()
    printed = re.search(r"^token: ([0-9a-f]{24}) ", section, re.MULTILINE)
    assert printed is not None, "the README's recovery story prints no token"
    notes = NotesTable.create(aws.ddb)
    job = DemoFeed(JobConfig(name="demo-crm-sync", table_name=aws.table, batch_size=6,
                             lease=timedelta(minutes=2)), notes, store=aws.store, clock=clock)
    died, never = threading.Event(), threading.Event()

    def die_after_five(**ctx: Any) -> None:
        if len(notes.calls) == 5:
            died.set()
            never.wait(30)  # the worker is gone: no outcome, no release

    with hooks.on("before_item", die_after_five):
        worker, _ = in_thread(lambda: job.handler()(manual("demo-crm-sync", "doomed"), None))
        assert died.wait(10)
    try:
        clock.advance(timedelta(minutes=3))  # its lease is long gone
        plan = recover({"job": "demo-crm-sync", "cursor_from": "000000",
                        "cursor_to": "000012"}, job=job, threshold=5)["plan"]
    finally:
        never.set()
        worker.join(10)

    assert (plan["selected"], plan["completed"], plan["failed"], plan["uncertain"],
            plan["never_attempted"], plan["to_replay"]) == (12, 0, 0, 6, 6, 12)
    assert plan["token"] == printed.group(1)


def test_a_token_confirms_the_same_request_whoever_asks_and_no_other_range_or_mode(aws,
                                                                                 clock):
    """GIVEN 10 contacts never synced and a dry run of 0 .. 10 (threshold 5: a token is
    needed)
    WHEN the operator executes with that token a request that selects the very same 10
    records but names another range end, another mode or another max_items
    THEN each is refused naming ``confirm`` (a token is bound to the request, not only
    to the items), and nothing is sent; the same request, asked by someone else, runs."""
    notes = NotesTable.create(aws.ddb)
    job = crm_sync(aws, clock, notes, 10)
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "10"}
    token = recover(request, job=job, threshold=5)["plan"]["token"]
    wider = recover({**request, "cursor_to": "11"}, job=job, threshold=5)["plan"]
    assert wider["selected"] == 10 and wider["token"] != token  # same items, other range

    for other in ({"cursor_to": "11"}, {"mode": "uncertain"}, {"max_items": 500}):
        with pytest.raises(InvalidRequestError) as info:
            recover({**request, **other, "dry_run": False, "confirm": token}, job=job,
                    threshold=5)
        assert info.value.field == "confirm", other
        assert "does not match this plan" in str(info.value)
    assert notes.calls == [] and aws.runs(JOB) == []

    done = recover({**request, "dry_run": False, "confirm": token, "requested_by": "bob"},
                   job=job, threshold=5)
    assert done["result"] == "executed" and done["summary"]["replayed"] == 10


def take_over_once(aws: Any, clock: Any, job_name: str) -> tuple[Any, list[dict[str, Any]]]:
    """An ``after_acquire`` hook: the first run to acquire has its lease taken by a
    REPLACE trigger of the same job (run in full in another thread) before it works."""
    replaced: list[dict[str, Any]] = []
    thief = make_job(aws, clock, lambda event, context: "took over", name=job_name,
                     policy=OverlapPolicy.REPLACE)

    def hook(**ctx: Any) -> None:
        if replaced:
            return  # the thief's own acquisition
        replaced.append(ctx)
        thread, box = in_thread(lambda: thief(manual(job_name, "thief"), None))
        thread.join(10)
        assert box.get("result") == "took over", box

    return hook, replaced


def test_a_recovery_whose_lease_is_taken_over_answers_lease_lost(aws, clock):
    """GIVEN 5 contacts to replay
    WHEN a REPLACE trigger takes the job's lease just after the recovery acquired it
    THEN the recovery replays nothing and answers ``result: lease_lost`` (not
    ``executed``), with its summary, and its run record says ``lease_lost``."""
    notes = NotesTable.create(aws.ddb)
    job = crm_sync(aws, clock, notes, 5)
    hook, replaced = take_over_once(aws, clock, JOB)

    with hooks.on("after_acquire", hook):
        answer = recover({"job": JOB, "cursor_from": "0", "cursor_to": "5",
                          "dry_run": False, "requested_by": "alice"}, job=job)

    assert replaced, "the recovery never acquired the lease"
    assert answer["result"] == "lease_lost", answer
    assert answer["summary"]["replayed"] == 0 and answer["summary"]["selected"] == 5
    assert notes.calls == []
    (record,) = [r for r in aws.runs(JOB) if r.trigger_kind == "recovery"]
    assert record.status is RunStatus.LEASE_LOST


class Mailbox:
    """A destination whose answers can be lost (the item stays uncertain)."""

    def __init__(self) -> None:
        self.sent: dict[str, str] = {}
        self.lose: set[str] = set()

    def send(self, key: str) -> str:
        message_id = self.sent.setdefault(key, f"msg-{len(self.sent) + 1}")
        if key in self.lose:
            raise TimeoutError("no answer (the mail was sent)")
        return message_id


def mailer(aws: Any, clock: Any, mailbox: Mailbox, name: str = "mailer") -> Any:
    """A plain ``@guarded``-style job without ``reconcile=``: its event names the mails."""

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(event["mails"], work_id=lambda r: WorkId(r, "mail")):
            with item:
                if item.key.startswith("refused"):
                    raise ValueError("the mail server refused it")
                item.complete(destination_id=mailbox.send(item.key))
        return run.stats

    return make_job(aws, clock, lambda_handler, name=name)


def mails(*names: str) -> dict[str, Any]:
    return {"job": "mailer", "manual": True, "trigger_id": "-".join(names), "mails": list(names)}


def test_a_resolution_reports_its_mode_on_its_run_record(aws, clock):
    """GIVEN two mails whose answers were lost (uncertain)
    WHEN the operator resolves one as found and the other as not found
    THEN each resolution's run record says which (``resolve_mode``: ``found`` or
    ``not_found``), beside who and why."""
    mailbox = Mailbox()
    mailbox.lose = {"mail-1:mail", "mail-2:mail"}
    mailer(aws, clock, mailbox)(mails("mail-1", "mail-2"), None)
    config = JobConfig(name="mailer", table_name=aws.table, lease=timedelta(seconds=60))
    options = {"store": aws.store, "clock": clock}

    found = resolve(config, ["mail-1:mail"], found=mailbox.sent["mail-1:mail"],
                    reason="seen in the outbox", requested_by="alice", guard_options=options)
    missing = resolve(config, ["mail-2:mail"], found=None, reason="not in the outbox",
                      requested_by="alice", guard_options=options)

    assert (found["result"], found["found"]) == ("resolved", ["mail-1:mail"])
    assert (missing["result"], missing["not_found"]) == ("resolved", ["mail-2:mail"])
    records = {r.run_id: r for r in aws.runs("mailer")}
    assert records[found["run_id"]].extra["resolve_mode"] == "found"
    assert records[missing["run_id"]].extra["resolve_mode"] == "not_found"
    assert records[missing["run_id"]].extra["resolve_reason"] == "not in the outbox"
    assert records[missing["run_id"]].requested_by == "alice"


@pytest.mark.parametrize(("kwargs", "field", "text"), [
    pytest.param({"reason": " "}, "reason",
                 "reason: say why (it is written on the run record)", id="no reason"),
    pytest.param({"requested_by": None}, "requested_by",
                 "requested_by: say who (it is written on the run record)", id="nobody"),
    pytest.param({"requested_by": "  "}, "requested_by",
                 "requested_by: say who (it is written on the run record)", id="blank"),
    pytest.param({"work_ids": []}, "work_id", "work_id: name at least one work item",
                 id="no work id"),
    pytest.param({"work_ids": [f"m-{i}:mail" for i in range(1001)]}, "work_id",
                 "work_id: at most 1000 work items a call", id="too many"),
    pytest.param({"work_ids": ["no-operation"]}, "work_id", "work_id: 'no-operation': ",
                 id="not a work id"),
    pytest.param({"found": " "}, "found", "found: the destination id ", id="blank found"),
    pytest.param({"found": "msg-1", "work_ids": ["a:mail", "b:mail"]}, "found",
                 "found: a destination id proves one work item: name exactly one",
                 id="found for two"),
])
def test_a_refused_resolution_says_what_is_missing(aws, clock, kwargs, field, text):
    """GIVEN a resolution missing its reason, its requester, its work ids, or with a
    destination id for several items WHEN it is asked THEN it is refused naming the
    field, with the text an operator acts on, and no run is recorded."""
    config = JobConfig(name="mailer", table_name=aws.table, lease=timedelta(seconds=60))
    call: dict[str, Any] = {"work_ids": ["a:mail"], "found": None, "reason": "r",
                            "requested_by": "x", **kwargs}
    with pytest.raises(InvalidRequestError) as info:
        resolve(config, call.pop("work_ids"), guard_options={"store": aws.store,
                                                             "clock": clock}, **call)
    assert info.value.field == field
    assert str(info.value).startswith(text), str(info.value)
    assert aws.runs("mailer") == []


class Invocation:
    """A Lambda context with a fixed remaining time."""

    def __init__(self, remaining: timedelta) -> None:
        self.remaining_ms = int(remaining.total_seconds() * 1000)

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_a_wait_that_does_not_fit_the_invocation_is_refused_naming_wait_seconds(aws, clock):
    """GIVEN a recovery Lambda invocation with 5 minutes left and a job whose time margin
    is 2 minutes (3 usable)
    WHEN the request asks to wait 200 s for the lease
    THEN it is refused naming ``wait_seconds`` and saying how long it may wait; nothing
    is written; a wait that fits (170 s) is accepted."""
    notes = NotesTable.create(aws.ddb)
    job = crm_sync(aws, clock, notes, 5, time_margin=timedelta(minutes=2))
    request = {"job": JOB, "cursor_from": "0", "cursor_to": "5", "dry_run": False}
    before = aws.item_count()

    with pytest.raises(InvalidRequestError) as info:
        recover({**request, "wait_seconds": 200}, job=job,
                context=Invocation(timedelta(minutes=5)))

    assert info.value.field == "wait_seconds"
    assert str(info.value).startswith("wait_seconds: 200 s does not fit this invocation: it "
                                      "has 180 s left before the job's 0:02:00 time margin")
    assert "wait at most 179 s" in str(info.value)
    assert aws.item_count() == before and notes.calls == []
    done = recover({**request, "wait_seconds": 170}, job=job,
                   context=Invocation(timedelta(minutes=5)))
    assert done["result"] == "executed" and done["summary"]["replayed"] == 5


@pytest.fixture
def plain_mailer(aws: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Mailbox, ManualClock]:
    """A plain ``@guarded`` mailer (no BatchJob) that recovery finds through
    ``JOBGUARD_RECOVERY_MODULES``, as the recovery Lambda does; its clock starts at T0."""
    from jobguard import environment, registry

    clock = ManualClock(T0)
    mailbox = Mailbox()
    job = mailer(aws, clock, mailbox)
    module = types.ModuleType("ops_mailer_jobs")
    module.mailer = job  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setenv(environment.RECOVERY_MODULES, module.__name__)
    monkeypatch.setattr(registry, "_JOBS", {})
    return job, mailbox, clock


def test_a_plain_jobs_recovery_plans_the_unresolved_items_of_its_time_window(aws,
                                                                            plain_mailer):
    """GIVEN a plain @guarded mailer: at 10:00 a run left mail-1 uncertain and refused-1
    failed; at 12:00 another left mail-2 uncertain
    WHEN an operator plans a recovery of 09:30 to 10:30
    THEN the plan lists only the 10:00 run's unresolved items (1 uncertain, 1 failed),
    says it is a plain job's and what to do next (``jobguard resolve``); executing it
    is refused naming ``dry_run``; a cursor range is refused naming ``cursor_from``."""
    job, mailbox, clock = plain_mailer
    mailbox.lose = {"mail-1:mail", "mail-2:mail"}
    job(mails("mail-0", "mail-1", "refused-1"), None)
    clock.advance(timedelta(hours=2))
    job(mails("mail-2"), None)
    states = {r.work_id: r.state for r in DynamoItemStore(aws.table, client=aws.ddb)
              .unresolved("mailer")}
    assert states == {"mail-1:mail": ItemState.UNCERTAIN, "refused-1:mail": ItemState.FAILED,
                      "mail-2:mail": ItemState.UNCERTAIN}
    request = {"job": "mailer", "time_from": "2026-11-29T09:30:00Z",
               "time_to": "2026-11-29T10:30:00Z"}

    answer = recover(request, threshold=100)

    assert (answer["result"], answer["plain"], answer["needs_confirmation"]) == (
        "planned", True, False)
    assert answer["range"] == {"time_from": "2026-11-29T09:30:00Z",
                               "time_to": "2026-11-29T10:30:00Z"}
    plan = answer["plan"]
    assert (plan["selected"], plan["uncertain"], plan["failed"]) == (2, 1, 1)
    assert plan["sample"] == ["mail-1:mail", "refused-1:mail"]
    assert "jobguard resolve mailer WORK_ID --found DESTINATION_ID" in answer["next_steps"]
    later = recover({**request, "time_from": "2026-11-29T11:30:00Z",
                     "time_to": "2026-11-29T12:30:00Z"}, threshold=100)["plan"]
    assert later["sample"] == ["mail-2:mail"] and later["token"] != plan["token"]

    with pytest.raises(InvalidRequestError) as refused:
        recover({**request, "dry_run": False}, threshold=100)
    assert refused.value.field == "dry_run" and "plain @guarded job" in str(refused.value)
    with pytest.raises(InvalidRequestError) as by_cursor:
        recover({"job": "mailer", "cursor_from": "0", "cursor_to": "5"}, threshold=100)
    assert by_cursor.value.field == "cursor_from"
    assert "recover it by time_from/time_to" in str(by_cursor.value)
    # max_items bounds the window: its 2 unresolved items fit 2, not 1
    assert recover({**request, "max_items": 2}, threshold=100)["plan"]["selected"] == 2
    with pytest.raises(InvalidRequestError) as too_many:
        recover({**request, "max_items": 1}, threshold=100)
    assert too_many.value.field == "max_items"
    assert "the range holds more than 1 unresolved items" in str(too_many.value)



def test_a_resolution_whose_lease_is_taken_over_does_not_say_resolved(aws, clock):
    """GIVEN a mail whose answer was lost (uncertain)
    WHEN a REPLACE trigger takes the job's lease just after the operator's resolution
    acquired it
    THEN the resolution writes nothing (the item stays uncertain) and answers
    ``result: lease_lost``, as a recovery does, so that the operator tries again."""
    mailbox = Mailbox()
    mailbox.lose = {"mail-1:mail"}
    mailer(aws, clock, mailbox)(mails("mail-1"), None)
    config = JobConfig(name="mailer", table_name=aws.table, lease=timedelta(seconds=60))
    hook, replaced = take_over_once(aws, clock, "mailer")

    with hooks.on("after_acquire", hook):
        answer = resolve(config, ["mail-1:mail"], found="msg-1", reason="seen",
                         requested_by="alice",
                         guard_options={"store": aws.store, "clock": clock})

    assert replaced, "the resolution never acquired the lease"
    (row,) = DynamoItemStore(aws.table, client=aws.ddb).get_many(
        "mailer", ["mail-1:mail"]).values()
    assert row.state is ItemState.UNCERTAIN  # nothing was resolved
    (record,) = [r for r in aws.runs("mailer") if "@resolve:" in r.trigger_id]
    assert record.status is RunStatus.LEASE_LOST
    assert answer["result"] == "lease_lost", answer


REQUEST = {"job": "crm-sync", "cursor_from": "0", "cursor_to": "3"}
DAY = {"job": "crm-sync", "time_from": "2026-11-29T00:00:00Z",
       "time_to": "2026-11-29T01:00:00Z"}


@pytest.mark.parametrize(("event", "text"), [
    pytest.param(["crm-sync"], "request: must be a JSON object, got list", id="a list"),
    pytest.param({**REQUEST, "curser_to": "3"},
                 "curser_to: is not a field of a recovery request", id="a misspelt field"),
    pytest.param({"cursor_from": "0", "cursor_to": "3"}, "job: is required", id="no job"),
    pytest.param({**REQUEST, "job": ""}, "job: must not be empty", id="an empty job"),
    pytest.param({**REQUEST, "job": "j" * 65}, "job: must be 1 to 64 characters",
                 id="a long job"),
    pytest.param({**REQUEST, "cursor_from": "0" * 513},
                 "cursor_from: must be 1 to 512 characters", id="a long cursor"),
    pytest.param({**REQUEST, "max_items": 0}, "max_items: must be more than 0, got 0",
                 id="max_items 0"),
    pytest.param({**REQUEST, "max_items": 100_001},
                 "max_items: must be at most 100000, got 100001", id="max_items too big"),
    pytest.param({**REQUEST, "wait_seconds": -1}, "wait_seconds: must be at least 0, got -1",
                 id="a negative wait"),
    pytest.param({**REQUEST, "confirm": ""}, "confirm: must not be empty", id="no token"),
    pytest.param({**DAY, "time_from": "2026-11-29T00:00:00"},
                 "time_from: needs its timezone (e.g. 2026-11-01T00:00:00Z)", id="naive"),
    pytest.param({**DAY, "time_from": "yesterday"},
                 "time_from: 'yesterday' is not an ISO-8601 time", id="not a time"),
    pytest.param({"job": "crm-sync", "time_from": "2026-11-29T00:00:00Z"},
                 "time_to: both ends of the range are required", id="an open time range"),
    pytest.param({**DAY, "time_to": "2026-11-28T23:00:00Z"},
                 "time_to: the range is empty or reversed", id="a reversed time range"),
    pytest.param({**DAY, "time_from": "2026-11-20T00:00:00Z"},
                 "time_to: the window is longer than 7 days; recover in smaller windows",
                 id="a long window"),
    pytest.param({**REQUEST, "cursor_from": "5"},
                 "cursor_to: the range is empty or reversed ('5' .. '3')", id="reversed"),
    pytest.param({"job": "crm-sync", "cursor_to": "3"},
                 "cursor_from: both ends of the range are required", id="an open range"),
    pytest.param({"job": "crm-sync"}, "cursor_from: a bounded range is required "
                 "(cursor_from and cursor_to, or time_from and time_to)", id="no range"),
    pytest.param({**REQUEST, "time_from": "2026-11-29T00:00:00Z"},
                 "cursor_from: give a cursor range or a time range, not both", id="both"),
    pytest.param({**REQUEST, "mode": "all"},
                 "mode: unknown mode 'all'; one of unfinished, failed, uncertain "
                 "(completed items are never replayed)", id="an unknown mode"),
])
def test_a_bad_recovery_request_is_refused_in_words_that_name_the_field(event, text):
    """GIVEN a recovery request as an operator might type it wrong WHEN it is parsed
    THEN the error starts with the field it names and says, in words, what to give."""
    with pytest.raises(InvalidRequestError) as info:
        parse_request(event)
    assert str(info.value) == text
    assert info.value.field == text.split(": ", 1)[0]


def test_numeric_cursors_are_compared_as_numbers():
    """GIVEN the range 9 .. 10 (reversed as text, not as numbers) WHEN it is parsed THEN
    it is accepted; 10 .. 9 is refused as reversed."""
    assert parse_request({**REQUEST, "cursor_from": "9", "cursor_to": "10"}).cursor_to == "10"
    with pytest.raises(InvalidRequestError) as info:
        parse_request({**REQUEST, "cursor_from": "10", "cursor_to": "9"})
    assert info.value.field == "cursor_to"


def test_a_recovery_for_another_job_is_refused_naming_the_job(aws, clock):
    """GIVEN crm-sync's job WHEN a request names another job THEN it is refused, naming
    ``job`` and both names, before anything is read or written."""
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(JobConfig(name="crm-sync", table_name=aws.table), contacts(3), notes,
                  store=aws.store, clock=clock)
    with pytest.raises(InvalidRequestError) as refused:
        recover({**REQUEST, "job": "mailer"}, job=job)
    assert refused.value.field == "job"
    assert str(refused.value) == "job: 'mailer' is not this job ('crm-sync')"
    assert aws.runs("crm-sync") == [] and notes.calls == []
