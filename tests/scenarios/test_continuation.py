"""Continuation (issue 30, part 1): a ``BatchJob`` run that stops for time hands its job
to the next link at once, and the chain holds the job like one run.

Every test runs the crm-sync shape (``_items.py``) on the in-process emulator with a
continuation port that keeps the invoke events (a :class:`Mailbox`), so a test decides
when (and whether, and how often) the next link is delivered: lost, late, duplicated,
or with another trigger in between. Each reads the run log, the lease row, the item
ledger and the destination.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from jobguard import JobConfig, OverlapPolicy, WorkId
from jobguard.definitions import JobDefinition
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.errors import ConfigError, ContinuationRefused
from jobguard.records import Decision, RunStatus
from jobguard.requests import ForceRelease
from jobguard.triggerqueue import TriggerQueue

from ._items import CrmSync, NotesTable, contacts
from ._support import tick

JOB = "crm-sync"
LEASE = timedelta(seconds=60)


class Mailbox:
    """The continuation port: keeps each invoke's event; ``fail`` makes the invoke raise
    an error of unknown outcome (no answer), ``refuse`` one refused outright (a 4xx)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.fail = False
        self.refuse = False

    def send(self, event: dict[str, Any]) -> None:
        if self.refuse:
            raise ContinuationRefused("continue", str(event.get("job")),
                                      "AccessDeniedException: not authorized")
        if self.fail:
            raise ConnectionError("invoke not answered")
        self.events.append(dict(event))

    def take(self) -> dict[str, Any]:
        return self.events.pop(0)


class Budget:
    """A Lambda context that has time for ``calls`` destination calls (1 s each), then
    less than the 10 s time margin: a link does ``calls`` items and stops for time."""

    def __init__(self, calls: int) -> None:
        self.remaining_ms = 10_000 + calls * 1_000 - 1

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms

    def spend(self, _item: Any) -> None:
        self.remaining_ms -= 1_000


def make(aws: Any, clock: Any, n: int, *, policy: OverlapPolicy = OverlapPolicy.SKIP,
         max_chain: int = 10, per_link: int = 4) -> tuple[CrmSync, Any, Mailbox, NotesTable]:
    notes = NotesTable.create(aws.ddb)
    mailbox = Mailbox()
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=per_link, lease=LEASE,
                       policy=policy, max_chain=max_chain)
    queue = None
    if config.needs_queue:
        queue = TriggerQueue(aws.fifo_queue(JOB), client=aws.sqs)
    job = CrmSync(config, contacts(n), notes, store=aws.store, clock=clock, queue=queue,
                  continuation=mailbox)
    handler = job.handler()
    return job, handler, mailbox, notes


def link(job: CrmSync, handler: Any, event: dict[str, Any], calls: int = 4) -> Any:
    budget = Budget(calls)
    job.before_call = budget.spend
    return handler(event, budget)


def ran(aws: Any) -> list[Any]:
    """The runs, in fence order (run ids made within one millisecond of the manual
    clock do not sort by time)."""
    return sorted((r for r in aws.runs(JOB) if r.decision is Decision.RAN),
                  key=lambda r: r.fence or 0)


def lease(aws: Any) -> dict[str, Any]:
    item = aws.lease_item(JOB)
    assert item is not None
    return {k: next(iter(v.values())) for k, v in item.items()}


def key(i: int) -> str:
    return str(WorkId(f"contact-{i:05d}", "create-note"))


def assert_each_once(aws: Any, notes: NotesTable, n: int) -> None:
    assert sorted(notes.calls) == [key(i) for i in range(n)]  # each destination call once
    assert set(notes.all()) == {key(i) for i in range(n)}
    rows = DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, [key(i) for i in range(n)])
    assert {r.state.value for r in rows.values()} == {"completed"} and len(rows) == n


# -- a chain drains a backlog ----------------------------------------------------------


def test_a_run_out_of_time_hands_the_job_to_a_chain_that_drains_the_backlog(aws, clock):
    # GIVEN 14 contacts, pages of 4, and invocations with time for 4 calls each
    job, handler, mailbox, notes = make(aws, clock, 14)

    # WHEN one tick starts it and each continuation is delivered as it is sent
    link(job, handler, tick(JOB, clock.now()))
    links = 1
    while mailbox.events:
        link(job, handler, mailbox.take())
        links += 1

    # THEN four links did the 14 contacts, each once, and the lease is free
    assert links == 4
    assert_each_once(aws, notes, 14)
    runs = ran(aws)
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 4
    assert "run_id" not in lease(aws) and "handed_from" not in lease(aws)
    # AND each link's record names the one before and after it, in order, fence + 1 each
    assert [r.extra.get("link") for r in runs] == [1, 2, 3, 4]
    assert [r.extra.get("continues") for r in runs] == [None] + [r.run_id for r in runs[:3]]
    assert [r.extra.get("continued_by") for r in runs] == [r.run_id for r in runs[1:]] + [None]
    assert [r.fence for r in runs] == [1, 2, 3, 4]
    assert runs[-1].extra["stopped"] == "exhausted"
    assert [r.trigger_kind for r in runs[1:]] == ["continuation"] * 3


def test_the_chain_is_bounded_by_max_chain_and_the_next_tick_resumes(aws, clock):
    # GIVEN a job whose chains have at most 2 links, and 14 contacts (4 links' worth)
    job, handler, mailbox, notes = make(aws, clock, 14, max_chain=2)

    # WHEN a tick starts a chain
    link(job, handler, tick(JOB, clock.now()))
    link(job, handler, mailbox.take())

    # THEN the second link, out of time, hands nothing on: the lease is free
    assert mailbox.events == []
    assert [r.extra.get("link") for r in ran(aws)] == [1, 2]
    assert "continued_by" not in ran(aws)[1].extra
    assert "run_id" not in lease(aws)
    # AND the next tick resumes from the checkpoint with a chain of its own
    clock.advance(timedelta(minutes=1))
    link(job, handler, tick(JOB, clock.now()))
    link(job, handler, mailbox.take(), calls=10)
    assert_each_once(aws, notes, 14)
    assert [r.extra.get("link") for r in ran(aws)] == [1, 2, 1, 2]


def test_max_chain_is_checked_when_the_job_is_defined():
    for bad in (0, 101, True, "3", 2.0):
        with pytest.raises(ConfigError) as raised:
            JobConfig(name=JOB, max_chain=bad)
        assert raised.value.field == "max_chain"
    with pytest.raises(ConfigError) as raised:
        JobDefinition(name=JOB, handler="h.handler", schedule="rate(5 minutes)",
                      policy=OverlapPolicy.SKIP, timeout=timedelta(minutes=5), max_chain=0)
    assert raised.value.field == "max_chain"
    assert JobConfig(name=JOB).max_chain == 1  # the default: no continuation


def test_outside_lambda_without_a_port_a_run_out_of_time_releases_as_before(aws, clock):
    # GIVEN a chain-enabled job with no continuation port and no AWS_LAMBDA_FUNCTION_NAME
    notes = NotesTable.create(aws.ddb)
    config = JobConfig(name=JOB, table_name=aws.table, batch_size=4, lease=LEASE,
                       max_chain=5)
    job = CrmSync(config, contacts(10), notes, store=aws.store, clock=clock)
    # WHEN a run stops for time
    link(job, job.handler(), tick(JOB, clock.now()))
    # THEN it released the lease as a run always did (nothing to start a link with)
    assert "run_id" not in lease(aws)
    assert "continued_by" not in ran(aws)[0].extra


# -- the chain holds the job like one run ------------------------------------------------


def test_a_skip_tick_meeting_the_chain_between_two_links_is_skipped(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 10)
    first = tick(JOB, clock.now())
    link(job, handler, first)
    row = lease(aws)
    assert row["handed_from"] == ran(aws)[0].run_id  # the row names the next link

    # WHEN a tick arrives between the links
    clock.advance(timedelta(seconds=30))
    outcome = link(job, handler, tick(JOB, clock.now()))

    # THEN it is skipped, naming the next link as the holder, and the chain goes on
    assert outcome["decision"] == "skipped" and outcome["holder_run_id"] == row["run_id"]
    while mailbox.events:
        link(job, handler, mailbox.take())
    assert_each_once(aws, notes, 10)
    assert len(ran(aws)) == 3


def test_queue_ticks_wait_behind_the_chain_and_run_after_it(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 7, policy=OverlapPolicy.QUEUE)
    link(job, handler, tick(JOB, clock.now()))
    # a tick between the links is queued; its message, delivered then, waits
    clock.advance(timedelta(seconds=5))
    queued = tick(JOB, clock.now())
    assert link(job, handler, queued)["decision"] == "queued"
    delivered = aws.deliver(JOB, handler)
    assert delivered is not None and delivered[1] is True  # deferred: the chain holds it
    # the chain goes on and ends
    link(job, handler, mailbox.take())
    assert mailbox.events == []
    # THEN the queued tick runs after the chain, once
    aws.sqs.change_message_visibility(QueueUrl=aws.queues[JOB],
                                      ReceiptHandle=delivered[0]["ReceiptHandle"],
                                      VisibilityTimeout=0)
    assert aws.deliver(JOB, handler) is not None
    runs = ran(aws)
    assert [r.trigger_kind for r in runs] == ["tick", "continuation", "queued"]
    assert runs[2].started_at_ms >= runs[1].ended_at_ms
    assert_each_once(aws, notes, 7)


def test_coalesce_folds_into_the_chain_with_one_follow_up_after_it_ends(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 11, policy=OverlapPolicy.COALESCE)
    link(job, handler, tick(JOB, clock.now()))
    # two ticks meet the chain: one between links, one during the second link
    clock.advance(timedelta(seconds=5))
    assert link(job, handler, tick(JOB, clock.now()))["decision"] == "coalesced"
    link(job, handler, mailbox.take())
    clock.advance(timedelta(seconds=5))
    assert link(job, handler, tick(JOB, clock.now()))["decision"] == "coalesced"
    link(job, handler, mailbox.take())
    assert mailbox.events == []
    # THEN exactly one follow-up runs after the chain (not absorbed by a link)
    follow_ups = 0
    while aws.deliver(JOB, handler) is not None:
        follow_ups += 1
    runs = ran(aws)
    assert [r.trigger_kind for r in runs] == ["tick", "continuation", "continuation",
                                               "follow_up"]
    assert follow_ups >= 1 and runs[3].fence == runs[2].fence + 1
    assert_each_once(aws, notes, 11)


# -- what ends a chain -------------------------------------------------------------------


def test_replace_ends_the_chain_and_the_pending_link_records_superseded(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 12, policy=OverlapPolicy.REPLACE)
    link(job, handler, tick(JOB, clock.now()))
    pending = lease(aws)["run_id"]
    # WHEN a REPLACE tick arrives between the links, then the continuation
    clock.advance(timedelta(seconds=5))
    link(job, handler, tick(JOB, clock.now()), calls=20)
    late = mailbox.take()
    clock.advance(timedelta(seconds=1))
    outcome = link(job, handler, late)
    # THEN the replacer did the rest, the continuation ran nothing and says superseded
    assert outcome["decision"] == "superseded"
    runs = aws.runs(JOB)
    pending_record = next(r for r in runs if r.run_id == pending)
    assert pending_record.status is RunStatus.LEASE_LOST
    first = next(r for r in runs if r.extra.get("continued_by") == pending)
    assert pending_record.extra["continues"] == first.run_id
    assert [r.trigger_kind for r in ran(aws) if r.status is RunStatus.SUCCEEDED] == [
        "tick", "tick"]
    assert_each_once(aws, notes, 12)
    assert "run_id" not in lease(aws)  # (replace)


def test_pause_ends_the_chain_cleanly_and_resume_goes_on_from_the_checkpoint(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 10)
    link(job, handler, tick(JOB, clock.now()))
    assert aws.store.pause(JOB, reason="maintenance", now_ms=0)
    # WHEN the continuation arrives while the job is paused
    outcome = link(job, handler, mailbox.take())
    # THEN it ran nothing, says so, and freed the lease (the chain ended)
    assert outcome["decision"] == "paused" and "chain ended" in outcome["detail"]
    assert "run_id" not in lease(aws) and "handed_from" not in lease(aws)
    assert len(ran(aws)) == 1
    # AND after resume the next tick goes on from the checkpoint, nothing done twice
    assert aws.store.resume(JOB)
    clock.advance(timedelta(minutes=1))
    link(job, handler, tick(JOB, clock.now()), calls=20)
    assert_each_once(aws, notes, 10)


def test_a_pause_during_a_link_ends_the_chain_at_that_link(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 10)
    from jobguard import hooks

    def pause(**_: Any) -> None:
        aws.store.pause(JOB, reason="stop", now_ms=0)

    with hooks.on("before_release", pause):
        link(job, handler, tick(JOB, clock.now()))
    assert mailbox.events == [] and "run_id" not in lease(aws)
    assert "continued_by" not in ran(aws)[0].extra


def test_force_release_ends_the_chain_and_the_pending_link_runs_nothing(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 10)
    link(job, handler, tick(JOB, clock.now()))
    row = lease(aws)
    assert aws.store.force_release(ForceRelease(JOB, holder_run_id=row["run_id"],
                                                fence=int(row["fence"]), now_ms=0, by="alice"))
    outcome = link(job, handler, mailbox.take())
    assert outcome["decision"] == "superseded"
    assert len(ran(aws)) == 2  # the first link, and the never-started one released
    assert next(r for r in aws.runs(JOB) if r.run_id == row["run_id"]).status is \
        RunStatus.RELEASED_BY_OPERATOR
    assert "run_id" not in lease(aws)


# -- lost, late, duplicated continuations -------------------------------------------------


def test_a_lost_invoke_expires_like_a_lease_and_the_next_tick_takes_over(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 10)
    link(job, handler, tick(JOB, clock.now()))
    pending = lease(aws)["run_id"]
    lost = mailbox.take()  # never delivered (yet)
    # a tick within the hand-off's lease is skipped ...
    clock.advance(timedelta(seconds=30))
    assert link(job, handler, tick(JOB, clock.now()))["decision"] == "skipped"
    # ... one after it expired takes over from the checkpoint
    clock.advance(timedelta(seconds=40))
    link(job, handler, tick(JOB, clock.now()), calls=20)
    never = next(r for r in aws.runs(JOB) if r.run_id == pending)
    assert never.status is RunStatus.ABANDONED and "never started" in (never.detail or "")
    assert_each_once(aws, notes, 10)
    # AND the continuation, delivered late, finds its hand-off gone and runs nothing
    assert link(job, handler, lost)["decision"] == "superseded"
    assert link(job, handler, lost)["decision"] == "duplicate"
    assert_each_once(aws, notes, 10)


def test_an_invoke_that_fails_leaves_the_hand_off_to_expire(aws, clock, metrics):
    job, handler, mailbox, notes = make(aws, clock, 10)
    mailbox.fail = True
    metrics()
    link(job, handler, tick(JOB, clock.now()))
    assert metrics().get("ContinuationsNotSent") == 1
    assert "handed_from" in lease(aws)
    clock.advance(timedelta(seconds=70))
    link(job, handler, tick(JOB, clock.now()), calls=20)
    assert_each_once(aws, notes, 10)


def test_a_duplicated_continuation_runs_its_link_once(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 10)
    link(job, handler, tick(JOB, clock.now()))
    event = mailbox.take()
    from jobguard import hooks

    seen: list[Any] = []

    def again(**_: Any) -> None:
        if not seen:  # a second delivery while the link runs
            seen.append(link(job, handler, event))

    with hooks.on("after_acquire", again):
        link(job, handler, event)
    assert seen[0]["decision"] == "duplicate"
    assert link(job, handler, event)["decision"] == "duplicate"  # and one after it ended
    assert [r.trigger_kind for r in ran(aws)] == ["tick", "continuation"]
    while mailbox.events:
        link(job, handler, mailbox.take())
    assert_each_once(aws, notes, 10)


def test_a_continuation_event_made_by_hand_runs_nothing(aws, clock):
    job, handler, mailbox, notes = make(aws, clock, 10)
    outcome = link(job, handler, {"job": JOB, "continues": "01FAKE", "link": 2})
    assert outcome["decision"] == "superseded" and notes.calls == []
    assert ran(aws) == []
    with pytest.raises(Exception) as raised:
        handler({"job": JOB, "continues": "01FAKE", "link": 1}, None)
    assert getattr(raised.value, "field", None) == "link"


# -- what operators see ------------------------------------------------------------------


def test_runs_and_run_show_each_link_with_the_one_before_and_after_it(aws, clock, capsys):
    from jobguard.cli import main

    job, handler, mailbox, notes = make(aws, clock, 6)
    link(job, handler, tick(JOB, clock.now()))
    link(job, handler, mailbox.take())
    first, second = ran(aws)
    capsys.readouterr()
    assert main(["--table", aws.table, "runs", JOB]) == 0
    table = capsys.readouterr().out
    header = table.splitlines()[0].split()
    assert header[-3:] == ["link", "continues", "continued_by"]
    rows = {line.split()[0]: line.split() for line in table.splitlines()[2:]}
    assert rows[first.run_id][-3:] == ["1", "-", second.run_id]
    assert rows[second.run_id][-3:] == ["2", first.run_id, "-"]
    assert main(["--table", aws.table, "--json", "run", second.run_id]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["continues"], shown["link"], shown["trigger_kind"]) == (
        first.run_id, 2, "continuation")


def test_a_link_replaced_between_its_read_and_its_write_keeps_the_replacements_record(
        aws, clock):
    """GIVEN a continuation that read its hand-off WHEN a REPLACE tick takes the job
    before the continuation's write THEN the continuation records ``superseded`` under a
    run id of its own, and the record the replacement wrote of the link stays."""
    from jobguard import hooks

    job, handler, mailbox, notes = make(aws, clock, 12, policy=OverlapPolicy.REPLACE)
    link(job, handler, tick(JOB, clock.now()))
    pending = lease(aws)["run_id"]
    event = mailbox.take()
    raced: list[Any] = []

    def replace(**ctx: Any) -> None:
        if ctx["trigger_id"].endswith(f"{event['continues']}:{event['link']}") and not raced:
            raced.append(link(job, handler, tick(JOB, clock.now() + timedelta(seconds=5)),
                              calls=20))

    with hooks.on("after_lease_read", replace):
        outcome = link(job, handler, event)
    assert outcome["decision"] == "superseded" and outcome["run_id"] != pending
    record = next(r for r in aws.runs(JOB) if r.run_id == pending)
    assert record.status is RunStatus.LEASE_LOST and "replaced" in (record.detail or "")
    assert_each_once(aws, notes, 12)


def test_a_link_takes_the_lease_with_one_transaction(aws, clock, metrics):
    # GIVEN a chain whose first link stopped for time and handed the job on
    job, handler, mailbox, notes = make(aws, clock, 10)
    link(job, handler, tick(JOB, clock.now()))
    metrics()

    # WHEN the next link is delivered
    link(job, handler, mailbox.take())

    # THEN it trusts the hand-off its row names (the item `handed`, live): one
    # acquisition, not one refused first for an item it took for absent
    assert metrics().get("LeaseAcquireAttempts") == 1
    assert [(r.trigger_kind, r.status) for r in ran(aws)][:2] == [
        ("tick", RunStatus.SUCCEEDED), ("continuation", RunStatus.SUCCEEDED)]


def test_a_hand_off_whose_answer_was_lost_still_sends_the_next_link(aws, clock):
    """GIVEN a link out of time whose hand-off lands in DynamoDB, but whose answer is
    lost, and whose retries (the same request token) all time out too, until the store
    reads the lease row back WHEN it finds the hand-off its own THEN the next link is sent
    (not left to the handed lease's expiry: a whole lease of idling), the record says whom
    it handed to, and the chain drains the backlog, each item once."""
    from botocore.exceptions import ReadTimeoutError

    from jobguard import hooks

    job, handler, mailbox, notes = make(aws, clock, 10)
    net = {"armed": False, "landed": 0, "refused": 0}

    def after_transaction(**_: Any) -> None:
        if net["armed"] and not net["landed"]:
            net["landed"] += 1
            raise ReadTimeoutError(endpoint_url="emulator")  # applied, answer lost

    def before_transaction(**_: Any) -> None:
        if net["armed"] and net["landed"]:
            net["refused"] += 1
            raise ReadTimeoutError(endpoint_url="emulator")  # never sent

    def before_read(**_: Any) -> None:
        if net["landed"]:
            net["armed"] = False  # the network is back for the read

    def arm(**_: Any) -> None:  # the next transaction is the hand-off
        net["armed"] = True

    events = aws.ddb.meta.events
    hooked = [("after-call.dynamodb.TransactWriteItems", after_transaction),
              ("before-call.dynamodb.TransactWriteItems", before_transaction),
              ("before-call.dynamodb.GetItem", before_read)]
    for i, (event, hook) in enumerate(hooked):
        events.register_first(event, hook, unique_id=f"lost-hand-off-{i}")
    try:
        with hooks.on("before_release", arm):
            link(job, handler, tick(JOB, clock.now()))
    finally:
        for i, (event, _) in enumerate(hooked):
            events.unregister(event, unique_id=f"lost-hand-off-{i}")
    assert net["landed"] == 1  # the hand-off landed and its answer was lost
    assert len(mailbox.events) == 1
    assert ran(aws)[0].extra.get("continued_by")  # the record says whom it handed to
    while mailbox.events:
        link(job, handler, mailbox.take())
    assert_each_once(aws, notes, 10)
