"""Error text is someone else's words: a job's ``redact`` hook sees every error text and
excerpt before jobguard writes or logs it.

The attack is a secret in an exception's message (a remote API that echoes the request's
token, a connection string in a driver's error) and in a record's content. With a hook,
the secret is nowhere in the jobguard table (every row of it is scanned, whatever kind:
run records, item rows, rejected rows, the job row) nor in jobguard's log lines nor on
stdout (Powertools' logs and metrics); a hook that fails writes a fixed placeholder,
never the text; a hook that cannot be called is refused when the job is defined.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import timedelta
from typing import Any

import pytest

from jobguard import (
    ConfigError,
    GuardedJob,
    ItemState,
    JobConfig,
    OverlapPolicy,
    WorkId,
    current_run,
    hooks,
)
from jobguard.definitions import JobDefinition
from jobguard.destinations import DestinationOutcomeUnknown
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.recovery import recover
from jobguard.triggerqueue import TriggerQueue

from ._items import CrmSync, NotesTable, contacts

JOB = "leaky-sync"
SECRET = "SECRET123"
LEAKS = f"token={SECRET} refused by the CRM (request was: ?token={SECRET})"


def hide(text: str) -> str:
    """A user's hook: mask the value of every ``token=``."""
    return re.sub(r"token=[^\s)&]+", "token=<hidden>", text)


def config(aws: Any, **overrides: Any) -> JobConfig:
    options: dict[str, Any] = {"name": JOB, "table_name": aws.table, "batch_size": 4,
                               "lease": timedelta(seconds=60)}
    options.update(overrides)
    return JobConfig(**options)


class LeakySync(CrmSync):
    """The crm-sync shape, whose CRM echoes the token in its errors: contact 1 fails
    with it, contact 2 stays uncertain with it, and one record's id cannot be read (its
    content carries the token, and so does the reason)."""

    def work_id(self, record: dict) -> WorkId:
        if "id" not in record:
            raise ValueError(f"no id in a record of the feed at {record['url']}")
        return super().work_id(record)

    def process(self, record: dict, item: Any) -> str:
        if record["id"] == "contact-00001":
            raise RuntimeError(LEAKS)  # a known failure: failed, retryable
        if record["id"] == "contact-00002":
            # the call's outcome is unknown: uncertain
            raise DestinationOutcomeUnknown("crm", item.key, LEAKS)
        return super().process(record, item)

    def reconcile(self, record: dict | None, item: Any) -> str | None:
        raise ConnectionError(LEAKS)  # the lookup fails too: it stays uncertain


def source() -> list[dict[str, Any]]:
    records = contacts(5)
    records.insert(3, {"url": f"https://crm.example/feed?token={SECRET}", "change": "x"})
    return records


def everything(aws: Any) -> str:
    """Every row of the jobguard table, as one text."""
    rows: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": aws.table, "ConsistentRead": True}
    while True:
        page = aws.ddb.scan(**kwargs)
        rows += page["Items"]
        if "LastEvaluatedKey" not in page:
            return json.dumps(rows)
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def run_the_leaks(aws: Any, clock: Any, redact: Any) -> dict[str, Any]:
    """A BatchJob run meeting the token in an item's failure, an uncertain item, a failed
    reconciliation and a rejected record; a plain handler that raises with it; a trigger
    message carrying it; a recovery plan over the rejected record."""
    notes = NotesTable.create(aws.ddb)
    batch = LeakySync(config(aws, redact=redact), source(), notes, store=aws.store,
                      clock=clock)
    handler = batch.handler()
    handler({"job": JOB, "manual": True, "trigger_id": "first"}, None)
    handler({"job": JOB, "manual": True, "trigger_id": "again"}, None)  # reconciles

    def raises(event: Any, context: Any) -> None:
        current_run()
        raise RuntimeError(LEAKS)

    plain = GuardedJob(config(aws, name="leaky-plain", redact=redact), raises,
                       store=aws.store, clock=clock)
    with pytest.raises(RuntimeError):  # the handler's own exception goes to Lambda as it is
        plain({"job": "leaky-plain", "manual": True, "trigger_id": "boom"}, None)

    queued = GuardedJob(config(aws, name="leaky-queue", policy=OverlapPolicy.QUEUE,
                               redact=redact), lambda e, c: "ran",
                        store=aws.store, clock=clock,
                        queue=TriggerQueue(aws.fifo_queue("leaky-queue"), client=aws.sqs))
    body = json.dumps({"jobguard": 1, "job": "leaky-queue", "trigger_id": "leaky-queue@x",
                       "kind": f"token={SECRET}", "event": None, "scheduled_at": None,
                       "requested_by": None})
    aws.sqs.send_message(QueueUrl=aws.queues["leaky-queue"], MessageBody=body,
                         MessageGroupId="leaky-queue", MessageDeduplicationId="leak")
    assert aws.deliver("leaky-queue", queued) is not None

    return recover({"job": JOB, "cursor_from": "0", "cursor_to": "9"}, job=batch)


def test_with_a_redacting_hook_the_secret_is_written_and_logged_nowhere(
        aws, clock, log_lines, capsys):
    # GIVEN jobs whose config redacts tokens WHEN every path meets the token
    plan = run_the_leaks(aws, clock, hide)

    # THEN the secret is in no row of the table, no log line, nothing on stdout, and
    # not in the recovery plan's answer
    table, logged = everything(aws), log_lines.getvalue()
    printed = capsys.readouterr()
    assert SECRET not in table
    assert SECRET not in logged
    assert SECRET not in printed.out + printed.err
    assert SECRET not in json.dumps(plan)
    # and what was written is the redacted text, not nothing: every path reached
    assert table.count("token=<hidden>") >= 6, table
    ledger = DynamoItemStore(aws.table, client=aws.ddb)
    failed = ledger.get_many(JOB, ["contact-00001:create-note"])["contact-00001:create-note"]
    assert failed.state is ItemState.FAILED
    assert failed.last_error == ("RuntimeError: token=<hidden> refused by the CRM "
                                 "(request was: ?token=<hidden>)")
    uncertain = ledger.get_many(JOB, ["contact-00002:create-note"])
    assert uncertain["contact-00002:create-note"].state is ItemState.UNCERTAIN
    [boom] = aws.runs("leaky-plain")
    assert boom.error == ("RuntimeError: token=<hidden> refused by the CRM "
                          "(request was: ?token=<hidden>)")
    [rejected_message] = aws.runs("leaky-queue")
    assert "token=<hidden>" in rejected_message.extra["excerpt"]
    [sample] = plan["plan"]["rejected_sample"]
    assert "token=<hidden>" in sample
    assert "reconcile failed" in logged and "token=<hidden>" in logged


def test_without_a_hook_the_text_is_kept_as_it_was(aws, clock, log_lines):
    # GIVEN the same jobs without a hook WHEN the same paths meet the token THEN it is
    # written (what redact changes: the attack is real)
    run_the_leaks(aws, clock, None)
    assert SECRET in everything(aws) and SECRET in log_lines.getvalue()


def test_a_hook_that_raises_writes_the_placeholder_never_the_text(aws, clock, log_lines):
    # GIVEN a hook that fails on the text it is given
    def broken(text: str) -> str:
        raise ValueError(f"cannot parse {text}")  # its message quotes the text

    # WHEN every path meets the token
    run_the_leaks(aws, clock, broken)

    # THEN each text is the placeholder (the hook's exception type, not its message)
    table = everything(aws)
    assert SECRET not in table and SECRET not in log_lines.getvalue()
    [boom] = aws.runs("leaky-plain")
    assert boom.error == "<redaction failed: ValueError>"
    ledger = DynamoItemStore(aws.table, client=aws.ddb)
    failed = ledger.get_many(JOB, ["contact-00001:create-note"])["contact-00001:create-note"]
    assert failed.last_error == "<redaction failed: ValueError>"


def test_a_hook_that_returns_no_text_writes_the_placeholder(aws, clock):
    run_the_leaks(aws, clock, lambda text: None)
    [boom] = aws.runs("leaky-plain")
    assert boom.error == "<redaction failed: returned NoneType>"
    assert SECRET not in everything(aws)


@pytest.mark.parametrize("hook", ["token", 3, re.compile("token")],
                         ids=["a string", "a number", "a pattern"])
def test_a_hook_that_cannot_be_called_is_refused_when_the_job_is_defined(hook):
    with pytest.raises(ConfigError) as config_error:
        JobConfig(name=JOB, redact=hook)
    assert config_error.value.field == "redact"
    assert str(config_error.value).startswith("redact: must be a function")
    with pytest.raises(ConfigError) as definition_error:
        JobDefinition(name=JOB, handler="handlers.leaky.lambda_handler",
                      schedule="rate(5 minutes)", policy=OverlapPolicy.SKIP,
                      timeout=timedelta(minutes=1), overlap_alarm_share=None,
                      redact=hook)
    assert definition_error.value.field == "redact"


def test_a_definitions_hook_reaches_the_config_its_handler_guards_with():
    definition = JobDefinition(name=JOB, handler="handlers.leaky.lambda_handler",
                               schedule="rate(5 minutes)", policy=OverlapPolicy.SKIP,
                               timeout=timedelta(minutes=1), overlap_alarm_share=None,
                               redact=hide)
    assert definition.config().redact is hide
    assert definition.for_drills().config().redact is hide


def test_a_failed_write_after_the_handler_failed_is_logged_redacted(
        aws, clock, log_lines, capsys, monkeypatch):
    """GIVEN a plain handler with the hook that completes one item and then raises out of
    its claim loop
    WHEN writing what it finished fails too, with the token in the failure (a proxy
    that echoes the request): first as the loop's iterator is collected, then at the
    run's close
    THEN the handler's error is the run's (on its record too), and the warning that the
    outcomes were not written carries the redacted text, never the token; nothing is
    left for Python to print as an exception it could not raise (it would print the
    text as it was)."""
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    notes = NotesTable.create(aws.ddb)
    state = {"armed": False}

    def lambda_handler(event: Any, context: Any) -> None:
        run = current_run()
        for item in run.claim(contacts(2), work_id=lambda r: WorkId(r["id"], "create-note")):
            with item:
                item.complete(destination_id=notes.put(item.key, "x"))
            state["armed"] = True
            raise RuntimeError("the handler failed after one item")

    def proxy_fails(**_: Any) -> None:
        if state["armed"]:  # each try of the outcomes' write; not the release after it
            raise ConnectionError(LEAKS)

    def disarm(**_: Any) -> None:
        state["armed"] = False

    job = GuardedJob(config(aws, redact=hide), lambda_handler, store=aws.store, clock=clock)
    events = aws.ddb.meta.events
    for call in ("BatchWriteItem", "TransactWriteItems", "UpdateItem"):
        events.register(f"before-call.dynamodb.{call}", proxy_fails)
    try:
        with hooks.on("before_release", disarm), pytest.raises(
                RuntimeError, match="the handler failed after one item"):
            job({"job": JOB, "manual": True, "trigger_id": "fails"}, None)
    finally:
        for call in ("BatchWriteItem", "TransactWriteItems", "UpdateItem"):
            events.unregister(f"before-call.dynamodb.{call}", proxy_fails)

    logged, printed = log_lines.getvalue(), capsys.readouterr()
    assert unraisable == []
    assert SECRET not in logged and SECRET not in printed.out + printed.err
    [warning] = [json.loads(line) for line in logged.splitlines()
                 if '"outcomes not written after the handler failed"' in line]
    assert "token=<hidden> refused by the CRM" in warning["error"]
    [record] = aws.runs(JOB)
    assert record.error == "RuntimeError: the handler failed after one item"
    assert SECRET not in everything(aws)
