"""A claim loop left early (a ``break``, or an error out of the handler) whose clean-up
write fails.

The clean-up runs as the loop's iterator is collected, where an exception reaches no
caller: Python would print it as it was (the token in a proxy's error, unredacted) and
drop it. So a clean-up failure is logged redacted and kept; the run's close, which always
follows, writes what is still owed and then fails the run as the loop's end would have:
the run record says so, the error raised to Lambda is redacted (it is jobguard's, not the
handler's), and the ledger holds every item as completed or uncertain, never lost.
(From the break-it review of the first fix, which covered only the batch flush.)
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from jobguard import GuardedJob, ItemState, WorkId, current_run, hooks
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.records import RunStatus

from ._items import NotesTable, contacts
from .test_redaction import JOB, LEAKS, SECRET, config, everything, hide

WRITES = ("BatchWriteItem", "TransactWriteItems", "UpdateItem")


def _failing(aws: Any, state: dict[str, Any], calls: tuple[str, ...]) -> Any:
    def proxy_fails(**_: Any) -> None:
        if state["armed"]:  # each try of the outcomes' write; not the release after it
            raise EndpointConnectionError(endpoint_url=f"https://proxy/?{LEAKS}")
    for call in calls:
        aws.ddb.meta.events.register(f"before-call.dynamodb.{call}", proxy_fails)
    return proxy_fails


def _run(aws: Any, job: Any, state: dict[str, Any], calls: tuple[str, ...]) -> list[str]:
    """One manual trigger with ``calls`` failing while armed; what it raised, if anything."""
    proxy = _failing(aws, state, calls)
    raised: list[str] = []
    try:
        with hooks.on("before_release", lambda **_: state.update(armed=False)):
            try:
                job({"job": JOB, "manual": True, "trigger_id": "t"}, None)
            except Exception as exc:  # noqa: BLE001 - what reaches Lambda
                raised.append(f"{type(exc).__name__}: {exc}")
    finally:
        for call in calls:
            aws.ddb.meta.events.unregister(f"before-call.dynamodb.{call}", proxy)
    return raised


def _note(record: dict[str, Any]) -> WorkId:
    return WorkId(record["id"], "create-note")


def completes_one_then_breaks(notes: NotesTable, state: dict[str, Any]) -> None:
    """The handler's claim loop: one note created and completed, the writes armed to
    fail, then ``break``."""
    for item in current_run().claim(contacts(2), work_id=_note):
        with item:
            item.complete(destination_id=notes.put(item.key, "x"))
        state["armed"] = True
        break


def arms_each_completion(notes: NotesTable, state: dict[str, Any]) -> Any:
    """A handler whose every completion's write is armed to fail (``flush='item'``
    writes it inside ``with item:``), and which lets the failure go."""
    def lambda_handler(event: Any, context: Any) -> str:
        for item in current_run().claim(contacts(2), work_id=_note):
            with item:
                destination_id = notes.put(item.key, "x")
                state["armed"] = True
                item.complete(destination_id=destination_id)
        return "done"
    return lambda_handler


@pytest.mark.parametrize("leave", ["break", "raise"])
def test_a_per_item_flush_loop_left_early_leaves_nothing_for_python_to_print(
        aws, clock, log_lines, capsys, monkeypatch, leave):
    """GIVEN flush='item' and the redact hook; the handler is handed an item and leaves
    the loop (break, or an error) before recording its outcome
    WHEN the clean-up's write of that item's uncertain row fails with the token in it
    THEN nothing is left for Python to print as an exception it could not raise, and
    the token is in no log line, no output and no row."""
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    NotesTable.create(aws.ddb)
    state = {"armed": False}

    def lambda_handler(event: Any, context: Any) -> None:
        run = current_run()
        for _item in run.claim(contacts(2), work_id=lambda r: WorkId(r["id"], "create-note")):
            state["armed"] = True  # handed out, no outcome: the clean-up records it
            if leave == "break":
                break
            raise RuntimeError("the handler failed")

    job = GuardedJob(config(aws, redact=hide, flush="item"), lambda_handler,
                     store=aws.store, clock=clock)
    _run(aws, job, state, WRITES)

    assert [f"{type(u.exc_value).__name__}: {u.exc_value}" for u in unraisable] == []
    printed = capsys.readouterr()
    assert SECRET not in log_lines.getvalue() + printed.out + printed.err
    assert SECRET not in everything(aws)


@pytest.mark.parametrize("leave", ["end", "break", "raise"])
def test_a_completion_write_that_failed_in_the_clean_up_is_reported(
        aws, clock, log_lines, leave):
    """GIVEN a handler that completes one item; only the completions' write
    (BatchWriteItem) fails, the job-row writes work
    WHEN the loop ends ('end': control), is left by break, or by an error
    THEN the failure reaches the run record as it does when the loop ends: the run
    failed, naming the write (after a break, jobguard's own error, raised to Lambda; after
    the handler's error, in what the run wrote); the completed item is uncertain in the
    ledger (the destination holds it: reconciled before anything is redone), never lost
    or left claimed."""
    notes = NotesTable.create(aws.ddb)
    state = {"armed": False}

    def lambda_handler(event: Any, context: Any) -> str:
        run = current_run()
        count = 1 if leave == "end" else 2
        for item in run.claim(contacts(count), work_id=lambda r: WorkId(r["id"], "create-note")):
            with item:
                item.complete(destination_id=notes.put(item.key, "x"))
            state["armed"] = True
            if leave == "break":
                break
            if leave == "raise":
                raise RuntimeError("the handler failed after one item")
        return "done"

    job = GuardedJob(config(aws, redact=hide), lambda_handler, store=aws.store, clock=clock)
    raised = _run(aws, job, state, ("BatchWriteItem",))

    [record] = aws.runs(JOB)
    assert record.status is RunStatus.FAILED
    if leave == "raise":
        assert raised == ["RuntimeError: the handler failed after one item"]
        assert "write_facts" in record.extra["written_on_failure"]
    else:
        assert len(raised) == 1 and raised[0].startswith("FactsNotWrittenError: write_facts")
        assert record.error == raised[0]
    assert SECRET not in json.dumps([raised, record.error, record.extra])
    first = str(WorkId(contacts(1)[0]["id"], "create-note"))
    row = DynamoItemStore(aws.table, client=aws.ddb).get_many(JOB, [first])[first]
    assert row.state is ItemState.UNCERTAIN and notes.find(first) is not None
    assert DynamoItemStore(aws.table, client=aws.ddb).read_row(JOB).claim is None


def test_a_close_failure_after_a_break_reaches_lambda_redacted(aws, clock):
    """GIVEN the redact hook; the handler completes one item, breaks out and returns
    WHEN every write of its outcomes fails with the token in the error
    THEN the error the guard raises to Lambda (which logs it) carries no token: it is
    jobguard's own StoreError, not the handler's, and goes through the hook as the run
    record's copy does."""
    notes = NotesTable.create(aws.ddb)
    state = {"armed": False}

    def lambda_handler(event: Any, context: Any) -> str:
        completes_one_then_breaks(notes, state)
        return "done"

    job = GuardedJob(config(aws, redact=hide), lambda_handler, store=aws.store, clock=clock)
    raised = _run(aws, job, state, WRITES)

    [record] = aws.runs(JOB)
    assert record.error is not None and SECRET not in record.error  # the record's copy
    assert raised and not any(SECRET in text for text in raised), raised


def test_a_per_item_write_that_fails_inside_the_loop_reaches_lambda_redacted(
        aws, clock, log_lines, capsys, monkeypatch):
    """GIVEN flush='item' and the redact hook
    WHEN the write of an item's completion fails with the token in the error, inside the
    handler's ``with item:``, and the handler lets it go
    THEN what reaches Lambda, the run record, the logs and the output carry no token,
    and nothing is left for Python to print."""
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    notes = NotesTable.create(aws.ddb)
    state = {"armed": False}

    job = GuardedJob(config(aws, redact=hide, flush="item"), arms_each_completion(notes, state),
                     store=aws.store, clock=clock)
    raised = _run(aws, job, state, WRITES)

    assert len(raised) == 1 and "token=<hidden>" in raised[0], raised
    [record] = aws.runs(JOB)
    assert record.status is RunStatus.FAILED and record.error == raised[0]
    printed = capsys.readouterr()
    assert unraisable == []
    assert SECRET not in log_lines.getvalue() + printed.out + printed.err
    assert SECRET not in everything(aws)
