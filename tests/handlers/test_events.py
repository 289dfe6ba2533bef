"""Every sample in events/ goes through the crm-sync handler.

A new sample needs an expectation here: the test fails on an unlisted file. Valid
triggers are checked on the run log; malformed ones must name the field and write
nothing at all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobguard import InvalidTriggerError

EVENTS = Path(__file__).resolve().parents[2] / "events"

VALID = {
    "scheduler-tick.json": ("succeeded", "crm-sync@2026-11-29T07:35:00Z", "tick"),
    "eventbridge-rule.json": ("succeeded", "crm-sync@2026-11-29T07:40:00Z", "rule"),
    "manual-run.json": ("succeeded", "crm-sync@manual:backfill-2026-11-29", "manual"),
    # A follow-up message whose trigger item was never written is not run: correctness
    # never comes from the queue.
    "sqs-follow-up-without-mark.json": (
        "duplicate", "crm-sync@follow-up:01M8K455CTTK6J3JQ50YRKYJS2", "follow_up"),
    # Another job's message on crm-sync's queue can never run here: recorded and deleted
    # (reported processed), never returned to block the triggers behind it.
    "sqs-another-jobs-message.json": (
        "rejected", "crm-sync@message:4b7e2a90-6c1d-4f3e-9a85-0d2c3b4a5f61", "message"),
}
MALFORMED = {
    "not-a-dict.json": "event",
    "missing-job.json": "job",
    "unfilled-placeholder.json": "scheduled_at",
    "naive-time.json": "scheduled_at",
    "unparsable-time.json": "scheduled_at",
    "unknown-policy.json": "policy",
    "job-with-key-delimiter.json": "job",
    "other-job.json": "job",
    "policy-mismatch.json": "policy",
    "not-a-scheduled-event.json": "detail-type",
}


def test_every_sample_has_an_expectation():
    valid = {p.name for p in EVENTS.glob("*.json")}
    malformed = {p.name for p in (EVENTS / "malformed").glob("*.json")}
    assert valid == set(VALID) and malformed == set(MALFORMED)


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_sample_is_one_trigger_in_the_run_log(aws, crm_sync, name):
    status, trigger_id, kind = VALID[name]
    result = crm_sync(json.loads((EVENTS / name).read_text()), None)
    (record,) = aws.runs("crm-sync")
    assert (record.status.value, record.trigger_id, record.trigger_kind) == (
        status, trigger_id, kind)
    if status == "succeeded":
        assert (result["selected"], result["completed"]) == (3, 3)
        assert record.fence == 1 and record.extra["completed"] == 3
        assert aws.store.read_lease("crm-sync").run_id is None
    else:
        assert result == {"batchItemFailures": []}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_sample_names_the_field_and_writes_nothing(aws, crm_sync, name):
    with pytest.raises(InvalidTriggerError) as info:
        crm_sync(json.loads((EVENTS / "malformed" / name).read_text()), None)
    assert info.value.field == MALFORMED[name]
    assert str(info.value).startswith(MALFORMED[name] + ":")
    assert aws.item_count() == 0  # the jobguard table: no lease, no run, no item


def test_the_same_tick_from_the_scheduler_and_a_rule_at_the_same_minute_runs_once(
        aws, crm_sync):
    tick = json.loads((EVENTS / "scheduler-tick.json").read_text())
    tick["scheduled_at"] = "2026-11-29T07:40:00Z"
    first = crm_sync(tick, None)
    again = crm_sync(json.loads((EVENTS / "eventbridge-rule.json").read_text()), None)
    assert first["completed"] == 3 and again["decision"] == "duplicate"
    assert sorted(aws.statuses("crm-sync")) == ["duplicate", "succeeded"]
