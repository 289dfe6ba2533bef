"""Bad input at every Lambda entry point: the error names the field, nothing is written.

One table per entry point: the scheduled event (a Scheduler tick, an EventBridge rule
event, a manual invoke), the SQS trigger message, the recovery request, and the
environment variables each function reads. The samples in ``events/malformed/`` are
exercised by ``test_events.py``; the cases here are the rest.

"Nothing written" is checked on everything the crm-sync job can touch: the jobguard
table (lease, runs, items, checkpoint), the job's trigger queue and the notes table.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from jobguard import ConfigError, GuardedJob, InvalidTriggerError, JobConfig, environment
from jobguard.errors import InvalidRequestError, JobGuardError
from jobguard.recovery import EXECUTE_ALIAS
from jobguard.requests import Take
from jobguard.testing import ManualClock
from jobguard.triggers import Trigger, TriggerKind

from .conftest import LambdaContext

EVENTS = Path(__file__).resolve().parents[2] / "events"
TICK = json.loads((EVENTS / "scheduler-tick.json").read_text())
RULE = json.loads((EVENTS / "eventbridge-rule.json").read_text())
MANUAL = json.loads((EVENTS / "manual-run.json").read_text())
SQS = json.loads((EVENTS / "sqs-follow-up-without-mark.json").read_text())
BODY = json.loads(SQS["Records"][0]["body"])
TICK_TIME = datetime.fromisoformat("2026-11-29T07:40:30+00:00")  # shortly after the samples


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``base`` with fields replaced (``None`` removes one)."""
    event = copy.deepcopy(base)
    for key, value in changes.items():
        key = key.replace("__", "-")
        if value is None:
            event.pop(key, None)
        else:
            event[key] = value
    return event


def _snapshot(aws: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = aws.ddb.scan(TableName=aws.table, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"]))


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _nothing_written(aws: Any, crm: Any, *, table: bool = True) -> None:
    if table:
        assert aws.item_count() == 0, "the jobguard table holds something"
    for url in aws.queues.values():
        attributes = aws.sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages",
                                          "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        assert attributes == {"ApproximateNumberOfMessages": "0",
                              "ApproximateNumberOfMessagesNotVisible": "0"}
    notes = crm.os.environ[crm.NOTES_TABLE]
    assert aws.ddb.scan(TableName=notes, Select="COUNT")["Count"] == 0


# -- the scheduled event ----------------------------------------------------------------

SCHEDULED: dict[str, tuple[Any, str]] = {
    # the Scheduler tick
    "tick: a string": ("crm-sync", "event"),
    "tick: null": (None, "event"),
    "tick: empty object": ({}, "job"),
    "tick: job not a string": (_with(TICK, job=["crm-sync"]), "job"),
    "tick: job empty": (_with(TICK, job="  "), "job"),
    "tick: job too long": (_with(TICK, job="c" * 65), "job"),
    "tick: job placeholder": (_with(TICK, job="<aws.scheduler.job>"), "job"),
    "tick: no scheduled_at": (_with(TICK, scheduled_at=None), "scheduled_at"),
    "tick: scheduled_at a number": (_with(TICK, scheduled_at=1764401700), "scheduled_at"),
    "tick: scheduled_at a bool": (_with(TICK, scheduled_at=True), "scheduled_at"),
    "tick: scheduled_at a date only, naive": (_with(TICK, scheduled_at="2026-11-29"),
                                              "scheduled_at"),
    "tick: scheduled_at before year 1 in UTC": (
        _with(TICK, scheduled_at="0001-01-01T00:00:00+01:00"), "scheduled_at"),
    "tick: scheduled_at after year 9999 in UTC": (
        _with(TICK, scheduled_at="9999-12-31T23:59:59-01:00"), "scheduled_at"),
    "tick: execution_id a number": (_with(TICK, execution_id=42), "execution_id"),
    "tick: execution_id placeholder": (
        _with(TICK, execution_id="<aws.scheduler.execution-id>"), "execution_id"),
    "tick: execution_id empty": (_with(TICK, execution_id=""), "execution_id"),
    "tick: policy not a string": (_with(TICK, policy=1), "policy"),
    "tick: policy of another job": (_with(TICK, policy="QUEUE"), "policy"),
    # the EventBridge rule event
    "rule: another detail-type": (_with(RULE, detail__type="Object Created"), "detail-type"),
    "rule: aws.events without detail-type": (_with(RULE, detail__type=None), "detail-type"),
    "rule: no time": (_with(RULE, time=None), "time"),
    "rule: time naive": (_with(RULE, time="2026-11-29T07:40:00"), "time"),
    "rule: time not a time": (_with(RULE, time="now"), "time"),
    "rule: id a number": (_with(RULE, id=7), "id"),
    "rule: for another job": (_with(RULE, job="report-export"), "job"),
    # the manual invoke
    "manual: manual is the string 'true'": (_with(MANUAL, manual="true"), "manual"),
    "manual: manual false": (_with(MANUAL, manual=False), "manual"),
    "manual: manual 1": (_with(MANUAL, manual=1), "manual"),
    "manual: no job": (_with(MANUAL, job=None), "job"),
    "manual: for another job": (_with(MANUAL, job="report-export"), "job"),
    "manual: trigger_id with a space": (_with(MANUAL, trigger_id="backfill today"),
                                        "trigger_id"),
    "manual: trigger_id with the key delimiter": (_with(MANUAL, trigger_id="a#b"),
                                                  "trigger_id"),
    "manual: trigger_id too long": (_with(MANUAL, trigger_id="t" * 129), "trigger_id"),
    "manual: no trigger_id outside Lambda": (_with(MANUAL, trigger_id=None), "trigger_id"),
    "manual: requested_by empty": (_with(MANUAL, requested_by=" "), "requested_by"),
    "manual: requested_by an object": (_with(MANUAL, requested_by={"name": "alice"}),
                                       "requested_by"),
    "manual: requested_by a lone surrogate": (_with(MANUAL, requested_by="al\udc00ice"),
                                              "requested_by"),
}


@pytest.mark.parametrize("case", sorted(SCHEDULED))
def test_a_malformed_scheduled_event_names_the_field_and_writes_nothing(
        aws, crm, crm_sync, case):
    event, field = SCHEDULED[case]
    with pytest.raises(InvalidTriggerError) as info:
        crm_sync(event, None)  # no Lambda context: no request id to fall back on
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    _nothing_written(aws, crm)


# -- the SQS trigger message ---------------------------------------------------------------

def _sqs(body: Any = None, **record: Any) -> dict[str, Any]:
    """The sample SQS event with its body (JSON-encoded unless a string) or other fields
    of its record replaced (``None`` removes one)."""
    event = copy.deepcopy(SQS)
    if body is not None:
        event["Records"][0]["body"] = body if isinstance(body, str) else json.dumps(body)
    event["Records"][0].update(record)
    for key in [k for k, v in record.items() if v is None]:
        del event["Records"][0][key]
    return event


def _raw_record(**fields: Any) -> dict[str, Any]:
    event = copy.deepcopy(SQS)
    event["Records"][0].update(fields)
    return event


# A malformed envelope is refused whole (nothing from an event source mapping looks
# like it): the handler raises.
ENVELOPES: dict[str, tuple[Any, str]] = {
    "no records": ({"Records": []}, "Records"),
    "a record that is a string": ({"Records": ["{}"]}, "Records[0]"),
    "a record from S3": (_sqs(eventSource="aws:s3"), "Records[0].eventSource"),
    "no messageId": (_sqs(messageId=None), "Records[0].messageId"),
    "no receiptHandle": (_sqs(receiptHandle=None), "Records[0].receiptHandle"),
    "a body that is not a string": (_raw_record(body={"job": "crm-sync"}), "Records[0].body"),
    "an empty body": (_raw_record(body=""), "Records[0].body"),
    "no body": (_sqs(body=None, **{"md5OfBody": None}) | {"Records": [
        {k: v for k, v in SQS["Records"][0].items() if k != "body"}]}, "Records[0].body"),
}


@pytest.mark.parametrize("case", sorted(ENVELOPES))
def test_a_malformed_sqs_envelope_names_the_field_and_writes_nothing(aws, crm, crm_sync, case):
    event, field = ENVELOPES[case]
    with pytest.raises(InvalidTriggerError) as info:
        crm_sync(event, None)
    assert info.value.field == field
    _nothing_written(aws, crm)


# A body that can never become a trigger is that message's alone: recorded `rejected`
# with the field, logged with it, and reported processed (SQS deletes it: redelivered,
# it would hold the triggers behind it in its FIFO group until the DLQ).
BODIES: dict[str, tuple[Any, str]] = {
    "not JSON": ("{job: crm-sync", "body"),
    "a JSON list": ([BODY], "body"),
    "no jobguard version": (_with(BODY, jobguard=None), "body.jobguard"),
    "jobguard version true": (_with(BODY, jobguard=True), "body.jobguard"),
    "no job": (_with(BODY, job=None), "body.job"),
    "another job": (_with(BODY, job="report-export"), "body.job"),
    "a job with the key delimiter": (_with(BODY, job="crm#sync"), "body.job"),
    "no trigger_id": (_with(BODY, trigger_id=None), "body.trigger_id"),
    "a trigger_id of another job": (_with(BODY, trigger_id="report-export@follow-up:01M8"),
                                    "body.trigger_id"),
    "a trigger_id with a space": (_with(BODY, trigger_id="crm-sync@follow up"),
                                  "body.trigger_id"),
    "a tick kind": (_with(BODY, kind="tick"), "body.kind"),
    "no kind": (_with(BODY, kind=None), "body.kind"),
    "scheduled_at naive": (_with(BODY, kind="queued", trigger_id="crm-sync@2026-11-29T07:35:00Z",
                                 scheduled_at="2026-11-29T07:35:00"), "body.scheduled_at"),
    "requested_by a number": (_with(BODY, requested_by=3), "body.requested_by"),
    "requested_by a lone surrogate": (json.dumps(_with(BODY, requested_by="al\ud800ice")),
                                      "body.requested_by"),
    "JSON nested too deeply": ("[" * 100_000 + "]" * 100_000, "body"),
}


@pytest.mark.parametrize("case", sorted(BODIES))
def test_a_malformed_trigger_message_is_recorded_rejected_alone_and_deleted(
        aws, crm, crm_sync, case, caplog):
    body, field = BODIES[case]
    event = _sqs(body)
    message_id = event["Records"][0]["messageId"]
    assert crm_sync(event, None) == {"batchItemFailures": []}  # processed: SQS deletes it
    logged = [r for r in caplog.records if r.getMessage() == "malformed trigger message"]
    assert [(r.field, r.message_id) for r in logged] == [(field, message_id)]
    assert logged[0].error.startswith(f"{field}: ")
    # one run record, `rejected`, naming the field; nothing else written
    [record] = aws.runs("crm-sync")
    assert (record.decision.value, record.status.value) == ("rejected", "rejected")
    assert (record.extra["field"], record.extra["message_id"]) == (field, message_id)
    assert record.trigger_id == f"crm-sync@message:{message_id}"
    assert aws.item_count() == 1, "more than the rejected record in the jobguard table"
    _nothing_written(aws, crm, table=False)


def test_a_message_of_a_newer_jobguard_is_left_on_the_queue_not_rejected(
        aws, crm, crm_sync, caplog):
    """A message whose ``jobguard`` version is above this worker's is a trigger a newer
    jobguard wrote (a deployment under way), not garbage: reported failed, for a worker
    that reads it (or the DLQ), logged, and nothing recorded."""
    event = _sqs(_with(BODY, jobguard=2))
    message_id = event["Records"][0]["messageId"]
    assert crm_sync(event, None) == {"batchItemFailures": [{"itemIdentifier": message_id}]}
    [logged] = [r for r in caplog.records
                if r.getMessage() == "trigger message from a newer jobguard: left on the queue"]
    assert (logged.version, logged.message_id) == (2, message_id)
    _nothing_written(aws, crm)


# -- the recovery request --------------------------------------------------------------------

@pytest.fixture
def recovery(aws, crm, monkeypatch):
    from jobguard.functions import recovery

    monkeypatch.setenv(environment.TABLE, aws.table)
    monkeypatch.setenv(environment.RECOVERY_MODULES, "handlers.crm_sync")
    monkeypatch.delenv(environment.RECOVERY_CONFIRM_ABOVE, raising=False)
    monkeypatch.setattr(crm.crm_sync, "_guard_options", {"store": aws.store})
    return recovery


PLAN = {"job": "crm-sync", "cursor_from": "000000", "cursor_to": "000003"}
RECOVERY: dict[str, tuple[Any, str]] = {
    "a list": ([PLAN], "request"),
    "a string": ("crm-sync", "request"),
    "no job": (_with(PLAN, job=None), "job"),
    "an empty job": (_with(PLAN, job=""), "job"),
    "a job that is not registered": (_with(PLAN, job="report-export"), "job"),
    "a job with the key delimiter": (_with(PLAN, job="crm#sync"), "job"),
    "an unknown field": (_with(PLAN, curser_to="000003"), "curser_to"),
    "no range": (_with(PLAN, cursor_from=None, cursor_to=None), "cursor_from"),
    "only cursor_from": (_with(PLAN, cursor_to=None), "cursor_to"),
    "only cursor_to": (_with(PLAN, cursor_from=None), "cursor_from"),
    "a reversed range": (_with(PLAN, cursor_from="000003", cursor_to="000001"), "cursor_to"),
    "an empty range": (_with(PLAN, cursor_to="000000"), "cursor_to"),
    "a numeric cursor": (_with(PLAN, cursor_from=0), "cursor_from"),
    "cursors and times": (_with(PLAN, time_from="2026-11-29T00:00:00Z",
                                time_to="2026-11-29T01:00:00Z"), "cursor_from"),
    "a naive time": (_with(PLAN, cursor_from=None, cursor_to=None,
                           time_from="2026-11-29T00:00:00", time_to="2026-11-29T01:00:00Z"),
                     "time_from"),
    "a time that is not a time": (_with(PLAN, cursor_from=None, cursor_to=None,
                                        time_from="yesterday", time_to="2026-11-29T01:00:00Z"),
                                  "time_from"),
    "a window over 7 days": (_with(PLAN, cursor_from=None, cursor_to=None,
                                   time_from="2026-11-01T00:00:00Z",
                                   time_to="2026-11-29T00:00:00Z"), "time_to"),
    "a time range for a job that maps no times": (
        _with(PLAN, cursor_from=None, cursor_to=None, time_from="2026-11-29T00:00:00Z",
              time_to="2026-11-29T01:00:00Z"), "time_from"),
    "an unknown mode": (_with(PLAN, mode="everything"), "mode"),
    "mode completed": (_with(PLAN, mode="completed"), "mode"),
    "dry_run as a string": (_with(PLAN, dry_run="false"), "dry_run"),
    "dry_run as 0": (_with(PLAN, dry_run=0), "dry_run"),
    "max_items 0": (_with(PLAN, max_items=0), "max_items"),
    "max_items a float": (_with(PLAN, max_items=10.0), "max_items"),
    "max_items over the bound": (_with(PLAN, max_items=100_001), "max_items"),
    "max_items below the range's size": (_with(PLAN, max_items=2), "max_items"),
    "wait_seconds negative": (_with(PLAN, wait_seconds=-1), "wait_seconds"),
    "an empty confirm token": (_with(PLAN, confirm=""), "confirm"),
    "an execution with a wrong token above the threshold": (
        _with(PLAN, dry_run=False, confirm="not-the-token"), "confirm"),
}


@pytest.mark.parametrize("case", sorted(RECOVERY))
def test_a_malformed_recovery_request_is_refused_naming_the_field_and_writes_nothing(
        aws, crm, recovery, monkeypatch, case):
    event, field = RECOVERY[case]
    if "threshold" in case:
        monkeypatch.setenv(environment.RECOVERY_CONFIRM_ABOVE, "1")
    # through the execute alias: what is refused is the request itself
    answer = recovery.lambda_handler(event, LambdaContext(qualifier=EXECUTE_ALIAS))
    assert (answer["result"], answer["field"]) == ("refused", field), answer
    assert answer["error"].startswith(f"{field}: ")
    _nothing_written(aws, crm)


def test_the_library_raises_what_the_handler_returns(aws, crm, recovery):
    from jobguard.recovery import recover

    with pytest.raises(InvalidRequestError) as info:
        recover(_with(PLAN, cursor_to=None), job=crm.crm_sync)
    assert info.value.field == "cursor_to"
    _nothing_written(aws, crm)


def _LambdaContext(remaining_s: float) -> LambdaContext:  # noqa: N802 - reads as the class
    """An invocation through the execute alias with ``remaining_s`` left."""
    return LambdaContext(qualifier=EXECUTE_ALIAS, remaining_s=remaining_s)


def test_a_wait_for_the_lease_that_outlasts_the_invocation_is_refused(aws, crm, recovery):
    # GIVEN the deployed recovery function's 240 s timeout (the longest job timeout),
    # nearly all of it left, and crm-sync's 10 s time margin
    context = _LambdaContext(239.5)
    # WHEN an execution asks to wait 600 s (or 230 s) for a running run's lease
    for wait in (600, 230):
        answer = recovery.lambda_handler(_with(PLAN, dry_run=False, wait_seconds=wait), context)
        # THEN it is refused naming the field, before anything is written
        assert (answer["result"], answer["field"]) == ("refused", "wait_seconds"), answer
        assert "wait at most 228 s" in answer["error"]
    _nothing_written(aws, crm)


def test_a_wait_that_fits_and_the_default_wait_run(aws, crm, recovery):
    # a wait that fits runs (the lease is free: no wait at all)
    answer = recovery.lambda_handler(_with(PLAN, dry_run=False, wait_seconds=200),
                                     _LambdaContext(239.5))
    assert answer["result"] == "executed", answer
    # the default wait is clamped to what a short invocation has left (no refusal)
    answer = recovery.lambda_handler(_with(PLAN, dry_run=True), _LambdaContext(30))
    assert answer["result"] == "planned", answer


# -- environment variables ---------------------------------------------------------------------

QUEUE_URL = "https://sqs.eu-west-1.amazonaws.com/123456789012/crm-sync-triggers.fifo"
JOB_ENVIRONMENT: dict[str, tuple[dict[str, str | None], str]] = {
    "no table": ({environment.TABLE: None}, environment.TABLE),
    "an empty table": ({environment.TABLE: ""}, environment.TABLE),
    "a blank table": ({environment.TABLE: "  "}, environment.TABLE),
    "a table name with a space": ({environment.TABLE: "jobguard table"}, environment.TABLE),
    "a table name too short": ({environment.TABLE: "jg"}, environment.TABLE),
    "a table ARN of another service": (
        {environment.TABLE: "arn:aws:s3:::jobguard"}, environment.TABLE),
    "no trigger queue": ({environment.TRIGGER_QUEUE_URL: None}, environment.TRIGGER_QUEUE_URL),
    "an empty trigger queue": ({environment.TRIGGER_QUEUE_URL: ""},
                               environment.TRIGGER_QUEUE_URL),
    "a standard (not FIFO) queue": (
        {environment.TRIGGER_QUEUE_URL: QUEUE_URL.removesuffix(".fifo")},
        environment.TRIGGER_QUEUE_URL),
    "a queue name, not a URL": ({environment.TRIGGER_QUEUE_URL: "crm-sync-triggers.fifo"},
                                environment.TRIGGER_QUEUE_URL),
    "a queue URL with a trailing space": ({environment.TRIGGER_QUEUE_URL: QUEUE_URL + " "},
                                          environment.TRIGGER_QUEUE_URL),
}


@pytest.mark.parametrize("case", sorted(JOB_ENVIRONMENT))
def test_a_job_function_refuses_its_environment_naming_the_variable_and_writes_nothing(
        aws, crm, monkeypatch, case):
    variables, field = JOB_ENVIRONMENT[case]
    monkeypatch.setenv(environment.TABLE, aws.table)
    monkeypatch.setenv(environment.TRIGGER_QUEUE_URL, aws.fifo_queue("crm-sync"))
    for name, value in variables.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)
    if field == environment.TRIGGER_QUEUE_URL:
        # the queue is needed once a trigger meets a held lease (COALESCE): hold it
        aws.store.take(Take(Trigger("crm-sync", "crm-sync@manual:holder", TriggerKind.MANUAL),
                            run_id="HOLDER", owner="elsewhere", now_ms=_ms(TICK_TIME),
                            lease_ms=10**9, skew_ms=0))
    before = _snapshot(aws)
    # the stack's wiring: no store or queue injected, the function reads its environment
    job = GuardedJob(crm.crm_sync.config, lambda event, context: "ran",
                     clock=ManualClock(TICK_TIME))
    with pytest.raises(ConfigError) as info:
        job(TICK, None)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert _snapshot(aws) == before  # no coalesced record, no follow-up mark
    _nothing_written(aws, crm, table=False)


RECOVERY_ENVIRONMENT: dict[str, tuple[dict[str, str | None], str]] = {
    "no modules": ({environment.RECOVERY_MODULES: None}, environment.RECOVERY_MODULES),
    "only commas": ({environment.RECOVERY_MODULES: " , ,"}, environment.RECOVERY_MODULES),
    "a relative module": ({environment.RECOVERY_MODULES: ".crm_sync"},
                          environment.RECOVERY_MODULES),
    "a path, not a module": ({environment.RECOVERY_MODULES: "handlers/crm_sync.py"},
                             environment.RECOVERY_MODULES),
    "a module that does not exist": ({environment.RECOVERY_MODULES: "handlers.no_such_job"},
                                     environment.RECOVERY_MODULES),
    "a threshold that is not a number": ({environment.RECOVERY_CONFIRM_ABOVE: "lots"},
                                         environment.RECOVERY_CONFIRM_ABOVE),
    "an empty threshold": ({environment.RECOVERY_CONFIRM_ABOVE: ""},
                           environment.RECOVERY_CONFIRM_ABOVE),
    "a threshold of 0": ({environment.RECOVERY_CONFIRM_ABOVE: "0"},
                         environment.RECOVERY_CONFIRM_ABOVE),
    "a negative threshold": ({environment.RECOVERY_CONFIRM_ABOVE: "-5"},
                             environment.RECOVERY_CONFIRM_ABOVE),
    "a fractional threshold": ({environment.RECOVERY_CONFIRM_ABOVE: "2.5"},
                               environment.RECOVERY_CONFIRM_ABOVE),
    "a malformed table": ({environment.TABLE: "jobguard table"}, environment.TABLE),
}


@pytest.mark.parametrize("case", sorted(RECOVERY_ENVIRONMENT))
def test_the_recovery_function_refuses_its_environment_naming_the_variable(
        aws, crm, recovery, monkeypatch, case):
    variables, field = RECOVERY_ENVIRONMENT[case]
    for name, value in variables.items():
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(recovery, "_loaded", [])  # a cold start: the modules load again
    monkeypatch.setattr(crm.crm_sync, "_guard_options", {})  # the stack's wiring
    try:
        answer = recovery.lambda_handler(_with(PLAN, dry_run=False),
                                         LambdaContext(qualifier=EXECUTE_ALIAS))
    except JobGuardError as exc:  # raised before the handler's own try (module loading)
        answer = {"result": "raised", "field": getattr(exc, "field", None), "error": str(exc)}
    assert answer["field"] == field, answer
    assert answer["error"].startswith(f"{field}: ")
    _nothing_written(aws, crm)


@pytest.mark.parametrize(("value", "field"), [
    (None, environment.JOB_NAME), ("", environment.JOB_NAME), ("crm#sync", environment.JOB_NAME),
    ("crm sync", environment.JOB_NAME)])
def test_the_reconciler_job_variable_is_checked(monkeypatch, value, field):
    environ = {} if value is None else {environment.JOB_NAME: value}
    with pytest.raises(ConfigError) as info:
        environment.job_name(environ)
    assert info.value.field == field


def test_a_well_formed_environment_is_taken(aws, crm, recovery, monkeypatch):
    # the other side of the tables above: the same wiring with good values runs
    monkeypatch.setenv(environment.TRIGGER_QUEUE_URL, aws.fifo_queue("crm-sync"))
    job = GuardedJob(crm.crm_sync.config, lambda event, context: "ran",
                     clock=ManualClock(TICK_TIME))
    assert job(TICK, None) == "ran"
    assert environment.confirm_above(100, {environment.RECOVERY_CONFIRM_ABOVE: " 250 "}) == 250
    assert environment.job_name({environment.JOB_NAME: "crm-sync"}) == "crm-sync"
    assert JobConfig(name="crm-sync", table_name=f"arn:aws:dynamodb:eu-west-1:123456789012:table/"
                     f"{aws.table}").table_name.endswith(aws.table)
