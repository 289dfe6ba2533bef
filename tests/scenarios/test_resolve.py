"""The operator's path for items no run can resolve: a plain ``@guarded`` handler that
claims without ``reconcile=`` leaves an uncertain item uncertain (never redone blindly),
and only someone who looks at the destination can say what happened. ``jobguard
resolve`` (:func:`jobguard.recovery.resolve`) records that finding under the job's lease,
with who and why on a run record.

Every test checks the ledger, the destination and the run log.
"""

from __future__ import annotations

import io
import threading
from contextlib import redirect_stderr, redirect_stdout
from datetime import timedelta
from typing import Any

import pytest

from jobguard import ItemState, LeaseLostError, WorkId, current_run
from jobguard.cli import main
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.errors import InvalidRequestError, LeaseBusyError
from jobguard.recovery import resolve
from jobguard.workitems import Commit, Fence

from ._support import Gate, in_thread, make_job

JOB = "mailer"


class Mailbox:
    """A destination that keeps every mail sent, by idempotency key."""

    def __init__(self) -> None:
        self.sent: dict[str, str] = {}
        self.calls: list[str] = []
        self.lose: dict[str, str] = {}  # key -> "after" (sent, answer lost) | "before"

    def send(self, key: str) -> str:
        self.calls.append(key)
        how = self.lose.pop(key, None)
        if how == "before":
            raise TimeoutError("no answer (the mail never left)")
        message_id = self.sent.setdefault(key, f"msg-{len(self.sent) + 1}")
        if how == "after":
            raise TimeoutError("no answer (the mail was sent)")
        return message_id


def mailer(aws: Any, clock: Any, mailbox: Mailbox, records: list[str]) -> Any:
    """A plain guarded handler claiming its items without ``reconcile=``."""

    def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
        run = current_run()
        for item in run.claim(records, work_id=lambda r: WorkId(r, "mail")):
            with item:
                item.complete(destination_id=mailbox.send(item.key))
        return run.stats

    return make_job(aws, clock, lambda_handler, name=JOB)


def cli(aws: Any, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--table", aws.table, *argv])
    return code, out.getvalue(), err.getvalue()


def manual(trigger_id: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": trigger_id}


def ledger(aws: Any, ids: list[str]) -> dict[str, Any]:
    return DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, ids)


def test_an_operator_resolves_what_a_handler_without_reconcile_left_uncertain(aws, clock):
    # GIVEN a handler without reconcile=: mail-2's answer was lost after it was sent,
    # mail-3's before it left; both are uncertain, and another run leaves them so
    mailbox = Mailbox()
    records = ["mail-1", "mail-2", "mail-3"]
    job = mailer(aws, clock, mailbox, records)
    mailbox.lose = {"mail-2:mail": "after", "mail-3:mail": "before"}
    job(manual("first"), None)
    job(manual("second"), None)
    ids = [f"{r}:mail" for r in records]
    rows = ledger(aws, ids)
    assert [rows[i].state for i in ids] == [ItemState.COMPLETED, ItemState.UNCERTAIN,
                                           ItemState.UNCERTAIN]
    assert mailbox.calls == ids  # never redone blindly

    # WHEN the operator looks in the mailbox and records what they found
    found = cli(aws, "--json", "resolve", JOB, "mail-2:mail", "--found",
                mailbox.sent["mail-2:mail"], "--reason", "seen in the outbox",
                "--requested-by", "alice")
    not_found = cli(aws, "resolve", JOB, "mail-3:mail", "--not-found", "--reason",
                    "not in the outbox", "--requested-by", "alice")
    assert found[0] == 0 and not_found[0] == 0, (found, not_found)
    assert "failed, retryable" in not_found[1] and "mail-3:mail" in not_found[1]

    # THEN mail-2 is completed with the id the operator saw; mail-3 is a retryable
    # failure, which the next run redoes once
    rows = ledger(aws, ids)
    assert rows["mail-2:mail"].state is ItemState.COMPLETED
    assert rows["mail-2:mail"].destination_id == mailbox.sent["mail-2:mail"]
    assert rows["mail-3:mail"].state is ItemState.FAILED and rows["mail-3:mail"].retryable
    assert "not in the outbox" in (rows["mail-3:mail"].last_error or "")
    job(manual("third"), None)
    assert mailbox.calls == [*ids, "mail-3:mail"]  # ONCE: mail-2 not sent again
    assert {r.state for r in ledger(aws, ids).values()} == {ItemState.COMPLETED}
    assert len(mailbox.sent) == 3
    # the run log says who and why, as for any run that held the lease
    resolutions = [r for r in aws.runs(JOB) if r.trigger_id.startswith(f"{JOB}@resolve:")]
    assert len(resolutions) == 2
    assert {r.requested_by for r in resolutions} == {"alice"}
    assert {r.trigger_kind for r in resolutions} == {"recovery"}
    assert {r.extra["resolve_reason"] for r in resolutions} == {"seen in the outbox",
                                                                "not in the outbox"}
    assert sorted(r.extra.get("resolve_found", 0) for r in resolutions) == [0, 1]
    fences = sorted(r.fence or 0 for r in aws.runs(JOB) if r.decision.value == "ran")
    assert len(fences) == len(set(fences))  # each under a fence of its own (FENCE)


def test_a_resolution_waits_for_the_running_run_and_writes_nothing_beside_it(aws, clock):
    # GIVEN a run holding the job's lease, with an uncertain item from an earlier run
    mailbox = Mailbox()
    mailbox.lose = {"mail-1:mail": "after"}
    mailer(aws, clock, mailbox, ["mail-1"])(manual("first"), None)
    gate = Gate()

    def held(event: Any, context: Any) -> str:
        gate.hold()
        return "done"

    thread, _ = in_thread(lambda: make_job(aws, clock, held, name=JOB)(manual("busy"), None))
    assert gate.entered.wait(10)
    before = ledger(aws, ["mail-1:mail"])

    # WHEN the operator resolves it without waiting
    code, out, err = cli(aws, "resolve", JOB, "mail-1:mail", "--found", "msg-1",
                         "--reason", "seen", "--requested-by", "bob", "--wait", "0")
    gate.release.set()
    thread.join(10)

    # THEN it is refused naming the job and the holder; nothing was written
    assert code == 2 and "JOB" in err and "held" in err.lower(), err
    assert ledger(aws, ["mail-1:mail"]) == before
    assert not [r for r in aws.runs(JOB) if r.trigger_id.startswith(f"{JOB}@resolve:")]


def test_resolving_an_item_of_a_vanished_runs_claim_keeps_the_others_findable(aws, clock):
    # GIVEN a run that claimed 3 items and vanished (its claim open on the job row)
    items = DynamoItemStore(aws.table, client=aws.ddb)
    ids = ["mail-1:mail", "mail-2:mail", "mail-3:mail"]
    box: dict[str, Any] = {}

    def vanishing(event: Any, context: Any) -> str:
        run = current_run()
        box["fence"] = Fence(JOB, run.run_id, run.fence)
        box["row"] = items.commit(box["fence"], Commit(
            expected=items.read_row(JOB), claim=dict.fromkeys(ids, "")), now_ms=0).row
        return "gone"  # as if killed: its outcomes never written

    make_job(aws, clock, vanishing, name=JOB)(manual("gone"), None)
    assert {r.state for r in ledger(aws, ids).values()} == {ItemState.CLAIMED}

    # WHEN the operator resolves one of them (found)
    from jobguard import JobConfig

    answer = resolve(JobConfig(name=JOB, table_name=aws.table, lease=timedelta(seconds=60)),
                     ["mail-1:mail"], found="msg-9", reason="seen", requested_by="carol",
                     guard_options={"store": aws.store, "clock": clock})

    # THEN it is completed; the two others are uncertain rows (findable, reconciled
    # before any redo), the claim is gone, and the vanished run can write nothing more
    assert answer["found"] == ["mail-1:mail"] and answer["result"] == "resolved"
    rows = ledger(aws, ids)
    assert rows["mail-1:mail"].state is ItemState.COMPLETED
    assert rows["mail-1:mail"].destination_id == "msg-9"
    assert {rows[i].state for i in ids[1:]} == {ItemState.UNCERTAIN}
    assert {r.work_id for r in items.unresolved(JOB)} == set(ids[1:])
    assert items.read_row(JOB).claim is None
    with pytest.raises(LeaseLostError):
        items.commit(box["fence"], Commit(expected=box["row"], claim={ids[0]: ""}), now_ms=1)


def test_completed_and_unknown_items_are_left_as_they_are(aws, clock):
    """An item the ledger does not hold is refused before the lease is taken (exit 1,
    named, nothing written: issue 29 row 11); a completed one is left as it is."""
    mailbox = Mailbox()
    mailer(aws, clock, mailbox, ["mail-1"])(manual("first"), None)
    before = ledger(aws, ["mail-1:mail"])
    table = aws.ddb.scan(TableName=aws.table, ConsistentRead=True)["Items"]
    code, out, err = cli(aws, "--json", "resolve", JOB, "mail-1:mail", "never-claimed:mail",
                         "--not-found", "--reason", "tidying up", "--requested-by", "dan")
    assert code == 1 and "no work item 'never-claimed:mail'" in err, err
    assert aws.ddb.scan(TableName=aws.table, ConsistentRead=True)["Items"] == table
    code, out, err = cli(aws, "--json", "resolve", JOB, "mail-1:mail",
                         "--not-found", "--reason", "tidying up", "--requested-by", "dan")
    assert code == 0, err
    import json

    answer = json.loads(out)
    assert answer["already_completed"] == ["mail-1:mail"]
    assert answer["unknown"] == []
    assert answer["not_found"] == [] and answer["found"] == []
    assert ledger(aws, ["mail-1:mail", "never-claimed:mail"]) == before


@pytest.mark.parametrize(("argv", "option"), [
    (["mail-1:mail", "--reason", "x"], "--found"),  # neither --found nor --not-found
    (["mail-1:mail", "--found", "m", "--not-found", "--reason", "x"], "--found"),
    (["mail-1:mail", "mail-2:mail", "--found", "m", "--reason", "x"], "--found"),
    (["mail-1:mail", "--found", "m", "--reason", "  "], "--reason"),
    (["no-operation", "--not-found", "--reason", "x"], "WORK_ID"),
    (["mail-1:mail", "--not-found", "--reason", "x", "--wait", "-1"], "--wait"),
])
def test_bad_input_is_refused_naming_the_option_and_nothing_is_written(aws, clock, argv,
                                                                       option):
    mailbox = Mailbox()
    mailbox.lose = {"mail-1:mail": "after"}
    mailer(aws, clock, mailbox, ["mail-1"])(manual("first"), None)
    before = aws.ddb.scan(TableName=aws.table, ConsistentRead=True)["Items"]
    code, out, err = cli(aws, "resolve", JOB, *argv, "--requested-by", "eve")
    assert code == 2 and f"error: {option}" in err and "Traceback" not in err, err
    assert out == ""
    assert aws.ddb.scan(TableName=aws.table, ConsistentRead=True)["Items"] == before


def test_the_library_call_refuses_bad_input_before_taking_the_lease(aws, clock):
    from jobguard import JobConfig

    config = JobConfig(name=JOB, table_name=aws.table)
    cases = [
        ({"work_ids": ["a:mail"], "found": None, "reason": "", "requested_by": "x"}, "reason"),
        ({"work_ids": ["a:mail"], "found": None, "reason": "r", "requested_by": " "},
         "requested_by"),
        ({"work_ids": [], "found": None, "reason": "r", "requested_by": "x"}, "work_id"),
        ({"work_ids": ["a:mail"], "found": "", "reason": "r", "requested_by": "x"}, "found"),
    ]
    for kwargs, field in cases:
        with pytest.raises(InvalidRequestError) as caught:
            resolve(config, kwargs.pop("work_ids"), guard_options={"store": aws.store,
                                                                   "clock": clock}, **kwargs)
        assert caught.value.field == field
    assert aws.runs(JOB) == []
    # a lease that stays held past the wait: LeaseBusyError, nothing written
    release = threading.Event()
    entered = threading.Event()

    def held(event: Any, context: Any) -> str:
        entered.set()
        release.wait(20)
        return "done"

    thread, _ = in_thread(lambda: make_job(aws, clock, held, name=JOB)(manual("busy"), None))
    assert entered.wait(10)
    try:
        with pytest.raises(LeaseBusyError):
            resolve(config, ["a:mail"], found=None, reason="r", requested_by="x",
                    guard_options={"store": aws.store, "clock": clock}, wait=timedelta(0))
    finally:
        release.set()
        thread.join(10)
