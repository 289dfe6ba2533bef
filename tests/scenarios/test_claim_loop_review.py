"""A claim loop left early, continued: what a second break-it review of the first fix
found, each now held.

1. Only jobguard's own errors are redacted on their way out of the claim iterator: an
   error of the job's own (from its ``records`` iterable, or thrown in with
   ``it.throw``) reaches the handler as it was raised, its args untouched.
2. A failure kept as the loop was left, whose write the run's close then makes: after a
   handler error, the record says what the close wrote and that a write had failed
   before, never "not the rest", and nothing logs that outcomes were not written.
3. An error goes through the hook once: with a hook that is not idempotent (a
   fingerprint), the run record's error and the error Lambda logs are the same text.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from jobguard import GuardedJob, ItemState, WorkId, current_run
from jobguard.dynamodb_items import DynamoItemStore

from ._items import NotesTable, contacts
from .test_claim_loop_left import (
    WRITES,
    _run,
    arms_each_completion,
    completes_one_then_breaks,
)
from .test_redaction import JOB, SECRET, config, hide


class SourceDown(Exception):
    """The job's own error, with structured args its handler reads."""

    def __init__(self, url: str, status: int) -> None:
        self.url, self.status = url, status
        super().__init__(url, status)


@pytest.mark.parametrize("how", ["records", "throw"])
def test_a_users_own_error_through_the_iterator_is_left_as_it_was(aws, clock, how):
    """GIVEN the redact hook; the job's records iterable raises its own error after one
    record (or the handler throws its own error into the iterator)
    WHEN the handler catches it around the loop
    THEN it is the error as raised: args untouched (the docstring of redact_raised: the
    error a handler raised is its own)."""
    seen: list[Any] = []
    url = f"https://api/?token={SECRET}"
    wid = lambda r: WorkId(r["id"], "n")  # noqa: E731

    def records() -> Any:
        yield from contacts(1)
        raise SourceDown(url, 503)

    def lambda_handler(event: Any, context: Any) -> str:
        run = current_run()
        try:
            if how == "records":
                for item in run.claim(records(), work_id=wid):
                    with item:
                        item.complete(destination_id="d")
            else:
                it = iter(run.claim(contacts(2), work_id=wid))
                next(it).complete(destination_id="d")
                it.throw(SourceDown(url, 503))
        except SourceDown as exc:
            seen.append(exc.args)
        return "ok"

    job = GuardedJob(config(aws, redact=hide), lambda_handler, store=aws.store, clock=clock)
    job({"job": JOB, "manual": True, "trigger_id": "t"}, None)
    assert seen == [(url, 503)]


def test_what_the_close_wrote_after_a_break_and_a_handler_error_is_not_called_unwritten(
        aws, clock, log_lines):
    """GIVEN a handler that completes one item and breaks while the job-row writes fail
    (kept by left_early), then, the outage over, raises its own error
    WHEN the run's close writes everything owed (the ledger shows it: completed, no claim)
    THEN the record does not say the rest was not written, nor the log that outcomes
    were not written."""
    notes = NotesTable.create(aws.ddb)
    state = {"armed": False}

    def lambda_handler(event: Any, context: Any) -> str:
        completes_one_then_breaks(notes, state)
        state["armed"] = False  # the outage is over
        raise RuntimeError("later")

    job = GuardedJob(config(aws, redact=hide), lambda_handler, store=aws.store, clock=clock)
    raised = _run(aws, job, state, ("TransactWriteItems", "UpdateItem"))
    assert raised == ["RuntimeError: later"]
    store = DynamoItemStore(aws.table, client=aws.ddb)
    first = str(WorkId(contacts(1)[0]["id"], "create-note"))
    assert store.get_many(JOB, [first])[first].state is ItemState.COMPLETED
    assert store.read_row(JOB).claim is None  # everything owed was written
    [record] = aws.runs(JOB)
    assert "not the rest" not in record.extra["written_on_failure"]
    assert "outcomes not written after the handler failed" not in log_lines.getvalue()


def fingerprint(text: str) -> str:
    """A hook that keeps no text, only a fingerprint to match log lines and records."""
    return "error#" + hashlib.sha256(text.encode()).hexdigest()[:8]


def test_a_raised_error_goes_through_the_hook_once(aws, clock):
    """GIVEN flush='item' and a fingerprinting hook; an item's write fails inside
    ``with item:`` and the handler lets it go
    WHEN the guard records the run and raises to Lambda
    THEN the record's error is what Lambda logs (the original text through the hook
    once), as it is with an idempotent hook (test_claim_loop_left's last test)."""
    notes = NotesTable.create(aws.ddb)
    state = {"armed": False}

    job = GuardedJob(config(aws, redact=fingerprint, flush="item"),
                     arms_each_completion(notes, state),
                     store=aws.store, clock=clock)
    raised = _run(aws, job, state, WRITES)
    [record] = aws.runs(JOB)
    assert len(raised) == 1
    assert record.error == raised[0]
