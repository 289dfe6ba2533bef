"""report-export on the in-process emulator: one S3 object per period, exactly once.

Every test looks at the three sides: the bucket (objects and every version of them, and
the PutObject calls made), the item ledger, and the run log.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from jobguard import GuardedJob, InvalidTriggerError, ItemState, hooks
from jobguard.local.emulator import InProcessAWS
from jobguard.local.esm import deliver_once
from jobguard.testing import ManualClock
from jobguard.triggerqueue import TriggerQueue

JOB = "report-export"
# a tick arrives at or after its time: the 11:00 tick may be early by seconds, not an hour
NOW = datetime(2026, 11, 29, 10, 59, 30, tzinfo=UTC)


def tick(at: str, execution_id: str = "exec-1") -> dict[str, Any]:
    return {"job": JOB, "scheduled_at": at, "execution_id": execution_id, "policy": "QUEUE"}


@dataclass
class Reports:
    """The job's handler wired to this test's emulator, and its bucket."""

    aws: Any
    s3: Any
    bucket: str
    job: GuardedJob
    queue_url: str
    items: Any
    clock: ManualClock
    puts: list[str] = field(default_factory=list)
    """Keys of every PutObject the handler sent (counted before the call, so a lost
    response counts too)."""

    def deliver(self, event: Any) -> Any:
        """One delivery to the handler, a second after the previous one (run ids, and
        so the run log's order, follow the clock)."""
        self.clock.advance(timedelta(seconds=1))
        return self.job(event, None)

    def versions(self) -> dict[str, int]:
        """Key -> number of versions (and delete markers): the effects at the destination."""
        listed = self.s3.list_object_versions(Bucket=self.bucket)
        counts: dict[str, int] = {}
        for entry in [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]:
            counts[entry["Key"]] = counts.get(entry["Key"], 0) + 1
        return counts

    def body(self, key: str) -> str:
        return str(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read().decode())

    def version_id(self, key: str) -> str:
        return str(self.s3.head_object(Bucket=self.bucket, Key=key)["VersionId"])

    def item(self, period: str) -> Any:
        return self.items.get(JOB, f"report@{period}:export")


@pytest.fixture
def reports(aws, monkeypatch) -> Reports:
    from handlers import report_export
    from jobguard.dynamodb_items import DynamoItemStore

    s3 = InProcessAWS().client("s3")
    bucket = "reports-test"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    monkeypatch.setenv(report_export.BUCKET, bucket)
    monkeypatch.setitem(report_export._clients, "s3", s3)  # noqa: SLF001 - the test's emulator
    original: GuardedJob = report_export.lambda_handler
    url = aws.fifo_queue(JOB)
    clock = ManualClock(NOW)
    job = GuardedJob(original.config, original.handler, store=aws.store,
                     queue=TriggerQueue(url, client=aws.sqs), clock=clock)
    result = Reports(aws=aws, s3=s3, bucket=bucket, job=job, queue_url=url,
                     items=DynamoItemStore(aws.table, client=aws.ddb), clock=clock)
    s3.meta.events.register("before-parameter-build.s3.PutObject",
                            lambda params, **_: result.puts.append(params["Key"]))
    return result


KEY_10 = "reports/report@2026-11-29T10:00Z:export"
KEY_11 = "reports/report@2026-11-29T11:00Z:export"
BODY_10 = "period_start,period_end,job\n2026-11-29T10:00Z,2026-11-29T11:00Z,report-export\n"


def test_a_tick_exports_one_object_for_its_period(aws, reports):
    # WHEN the 10:00 tick runs
    result = reports.deliver(tick("2026-11-29T10:00:00Z"))

    # THEN the destination holds one object, one version, with the period's report
    assert result["period"] == "2026-11-29T10:00Z"
    assert (result["selected"], result["completed"]) == (1, 1)
    assert reports.versions() == {KEY_10: 1}
    assert reports.body(KEY_10) == BODY_10
    assert reports.puts == [KEY_10]
    # AND the ledger proves it with the object's version id
    item = reports.item("2026-11-29T10:00Z")
    assert item.state is ItemState.COMPLETED
    assert item.destination_id == reports.version_id(KEY_10)
    # AND the run log has one succeeded run of the tick, which released the lease
    (run,) = aws.runs(JOB)
    assert (run.status.value, run.trigger_id, run.trigger_kind, run.policy) == (
        "succeeded", "report-export@2026-11-29T10:00:00Z", "tick", "QUEUE")
    assert run.extra["completed"] == 1
    assert aws.store.read_lease(JOB).run_id is None


def test_the_same_tick_again_and_from_a_second_registration_writes_nothing(aws, reports):
    # GIVEN the 10:00 tick exported
    reports.deliver(tick("2026-11-29T10:00:00Z"))

    # WHEN it is delivered again, and once more by a second schedule registration
    again = reports.deliver(tick("2026-11-29T10:00:00Z"))
    other = reports.deliver(tick("2026-11-29T10:00:00Z", execution_id="exec-2"))

    # THEN both are duplicates of the one trigger, and nothing new reached the bucket
    assert again["decision"] == other["decision"] == "duplicate"
    assert reports.versions() == {KEY_10: 1}
    assert reports.puts == [KEY_10]
    assert reports.item("2026-11-29T10:00Z").state is ItemState.COMPLETED
    assert aws.statuses(JOB) == ["succeeded", "duplicate", "duplicate"]
    assert {r.trigger_id for r in aws.runs(JOB)} == {"report-export@2026-11-29T10:00:00Z"}


def test_a_tick_during_a_run_is_queued_and_exported_once_after_it(aws, reports):
    # GIVEN the 10:00 run held right before its destination call (a run that outlasts
    # its interval; the clock moves well inside its lease, so it stays live)
    at_destination, go_on = threading.Event(), threading.Event()

    def hold(**ctx: Any) -> None:
        if "10:00Z" in ctx["work_id"]:
            at_destination.set()
            go_on.wait(10)

    results: dict[str, Any] = {}
    with hooks.on("before_destination", hold):
        first = threading.Thread(target=lambda: results.update(
            first=reports.deliver(tick("2026-11-29T10:00:00Z"))))
        first.start()
        assert at_destination.wait(10)

        # WHEN the 11:00 tick arrives while it runs (at 11:00: still inside its lease)
        reports.clock.advance(timedelta(seconds=30))
        queued = reports.deliver(tick("2026-11-29T11:00:00Z"))
        # THEN it is queued behind the run, not run and not written
        assert queued["decision"] == "queued"
        assert reports.puts == []
        go_on.set()
        first.join(10)
    assert results["first"]["completed"] == 1

    # WHEN the trigger queue is delivered (the event source mapping)
    assert deliver_once(aws.sqs, reports.queue_url, lambda e, c: reports.deliver(e)) == 1
    # AND the 11:00 tick is delivered once more, directly
    late = reports.deliver(tick("2026-11-29T11:00:00Z", execution_id="exec-retry"))

    # THEN the 11:00 period was exported exactly once, after the 10:00 one
    assert late["decision"] == "duplicate"
    assert deliver_once(aws.sqs, reports.queue_url, lambda e, c: reports.deliver(e)) == 0
    assert reports.versions() == {KEY_10: 1, KEY_11: 1}
    assert reports.puts == [KEY_10, KEY_11]
    for period in ("2026-11-29T10:00Z", "2026-11-29T11:00Z"):
        assert reports.item(period).state is ItemState.COMPLETED
    runs = aws.runs(JOB)
    assert [(r.trigger_id.split("@")[1], r.trigger_kind, r.status.value) for r in runs] == [
        ("2026-11-29T10:00:00Z", "tick", "succeeded"),
        ("2026-11-29T11:00:00Z", "tick", "queued"),
        ("2026-11-29T11:00:00Z", "queued", "succeeded"),
        ("2026-11-29T11:00:00Z", "tick", "duplicate"),
    ]
    assert runs[1].holder_run_id == runs[0].run_id
    assert runs[2].fence == runs[0].fence + 1


def _lose_the_next_put_response(reports: Reports) -> None:
    """The next PutObject reaches S3, but its caller sees a read timeout."""
    lost: list[bool] = []

    def after_call(**_: Any) -> None:
        if not lost:
            lost.append(True)
            raise ReadTimeoutError(endpoint_url="injected")

    reports.s3.meta.events.register("after-call.s3.PutObject", after_call)


def test_a_lost_put_response_fails_the_run_and_its_retry_reconciles(aws, reports):
    # GIVEN the S3 put's response will be lost after S3 stored the object
    _lose_the_next_put_response(reports)

    # WHEN the 10:00 tick runs
    with pytest.raises(Exception, match="not every period is confirmed") as failed:
        reports.deliver(tick("2026-11-29T10:00:00Z"))

    # THEN the run failed (so the trigger is retried), the item is uncertain, and the
    # object is in the bucket although the run never saw it confirmed
    assert type(failed.value).__name__ == "ExportUnconfirmed"
    assert reports.item("2026-11-29T10:00Z").state is ItemState.UNCERTAIN
    assert reports.versions() == {KEY_10: 1}
    (run,) = aws.runs(JOB)
    assert run.status.value == "failed" and run.extra["uncertain"] == 1

    # WHEN the trigger is retried (Lambda retries a failed asynchronous invocation)
    retry = reports.deliver(tick("2026-11-29T10:00:00Z"))

    # THEN reconcile finds the object: the item is completed with its version id and
    # nothing is written again
    assert (retry["reconciled"], retry["completed"]) == (1, 0)
    item = reports.item("2026-11-29T10:00Z")
    assert item.state is ItemState.COMPLETED
    assert item.destination_id == reports.version_id(KEY_10)
    assert reports.versions() == {KEY_10: 1}
    assert reports.puts == [KEY_10]
    assert aws.statuses(JOB) == ["failed", "succeeded"]


def test_a_period_left_uncertain_is_reconciled_by_the_next_periods_run(aws, reports):
    # GIVEN the 10:00 export's response was lost and its trigger never retried
    _lose_the_next_put_response(reports)
    with pytest.raises(Exception, match="not every period is confirmed"):
        reports.deliver(tick("2026-11-29T10:00:00Z"))

    # WHEN the 11:00 tick runs (at 11:00)
    reports.clock.advance(timedelta(seconds=30))
    result = reports.deliver(tick("2026-11-29T11:00:00Z"))

    # THEN it found the 10:00 object (not written again) and exported 11:00 once
    assert (result["period"], result["reconciled"], result["completed"]) == (
        "2026-11-29T11:00Z", 1, 1)
    assert reports.versions() == {KEY_10: 1, KEY_11: 1}
    assert reports.puts == [KEY_10, KEY_11]
    for period in ("2026-11-29T10:00Z", "2026-11-29T11:00Z"):
        assert reports.item(period).state is ItemState.COMPLETED
    assert aws.statuses(JOB) == ["failed", "succeeded"]


def test_a_failed_destination_call_is_redone_by_the_retry(aws, reports):
    # GIVEN a destination that refuses the first call (a drill's `fail` switch does this)
    def refuse(**ctx: Any) -> None:
        if not refused:
            refused.append(ctx["work_id"])
            raise RuntimeError("destination refused")

    refused: list[str] = []
    with hooks.on("before_destination", refuse):
        with pytest.raises(Exception, match="not every period is confirmed"):
            reports.deliver(tick("2026-11-29T10:00:00Z"))
        assert reports.item("2026-11-29T10:00Z").state is ItemState.FAILED
        assert reports.versions() == {}

        # WHEN the trigger is retried
        retry = reports.deliver(tick("2026-11-29T10:00:00Z"))

    # THEN the period is exported once
    assert refused == ["report@2026-11-29T10:00Z:export"]
    assert retry["completed"] == 1
    assert reports.versions() == {KEY_10: 1}
    assert reports.item("2026-11-29T10:00Z").state is ItemState.COMPLETED
    assert aws.statuses(JOB) == ["failed", "succeeded"]


# -- the period of a trigger -----------------------------------------------------------


@pytest.mark.parametrize(("scheduled_at", "event", "period"), [
    ("2026-11-29T10:00:00Z", {}, "2026-11-29T10:00Z"),
    ("2026-11-29T10:59:59.999Z", {}, "2026-11-29T10:00Z"),  # a rule firing late
    ("2026-11-29T12:30:00+02:00", {}, "2026-11-29T10:00Z"),  # hours are UTC
    (None, {"manual": True}, "2026-11-29T09:00Z"),  # the previous full hour
    (None, {"manual": True, "period": "2026-11-28T07:45Z"}, "2026-11-28T07:00Z"),
])
def test_the_period_is_the_hour_the_trigger_names(scheduled_at, event, period):
    from handlers.report_export import period_of

    at = datetime.fromisoformat(scheduled_at) if scheduled_at else None
    assert f"{period_of(at, event, NOW):%Y-%m-%dT%H:%MZ}" == period


@pytest.mark.parametrize("value", ["yesterday", "2026-11-29T10:00", 1234])
def test_a_manual_period_that_is_not_a_time_with_a_zone_names_the_field(value):
    from handlers.report_export import period_of

    with pytest.raises(InvalidTriggerError) as info:
        period_of(None, {"manual": True, "period": value}, NOW)
    assert info.value.field == "period"


def test_a_manual_export_of_a_named_period_runs_once(aws, reports):
    event = {"job": JOB, "manual": True, "trigger_id": "backfill-10", "requested_by": "alice",
             "period": "2026-11-29T10:00Z"}
    first = reports.deliver(event)
    second = reports.deliver({**event, "trigger_id": "backfill-10-again"})
    assert (first["completed"], second["already_done"], second["completed"]) == (1, 1, 0)
    assert reports.versions() == {KEY_10: 1}
    assert aws.statuses(JOB) == ["succeeded", "succeeded"]
