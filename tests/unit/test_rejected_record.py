"""The record of a trigger-queue message that can never become a trigger (issue 33, #3).

Pure: what the record keeps of a message anybody could have sent, bounded and escaped,
and the key that makes its conditional put idempotent across SQS redeliveries. (The
guard's handling, the queue and the run log: tests/scenarios/test_garbage_messages.py.)
"""

from __future__ import annotations

from jobguard._bounds import MAX_EXTRA_BYTES
from jobguard._rejected import EXCERPT_BYTES, rejected_record
from jobguard.errors import InvalidTriggerError

FIRST_MS = 1_764_400_000_000
ATTRIBUTES = {"ApproximateFirstReceiveTimestamp": str(FIRST_MS),
              "SentTimestamp": str(FIRST_MS - 5_000), "ApproximateReceiveCount": "2",
              "SenderId": "AIDAEXAMPLE"}


def record_of(body: str = "{job: x", *, job: str = "crm-sync", message_id: str = "m-1",
              attributes: dict[str, str] | None = ATTRIBUTES, now_ms: int = FIRST_MS + 900,
              error: InvalidTriggerError | None = None) -> object:
    return rejected_record(job=job, policy="QUEUE", owner="fn/1", message_id=message_id,
                           body=body, attributes=attributes,
                           error=error or InvalidTriggerError("body", "is not JSON"),
                           now_ms=now_ms)


def test_a_hostile_body_is_kept_as_a_bounded_escaped_excerpt():
    """GIVEN a 256 KB body opening with a terminal escape, a bidirectional override, a
    lone surrogate and a non-ASCII letter WHEN it is recorded THEN the excerpt keeps the
    letter, writes the others as escapes, stops after 200 characters, fits its byte
    bound, and the body's whole size is on the record."""
    body = "\x1b[2J\u202eé\ud800" + "x" * (256 * 1024)
    record = record_of(body)
    excerpt = record.extra["excerpt"]
    assert excerpt.startswith("\\x1b[2J\\u202eé\\ud800xxx") and excerpt.endswith("...")
    assert len(excerpt.encode("utf-8")) <= EXCERPT_BYTES
    assert record.extra["body_bytes"] == len(body.encode("utf-8", "surrogatepass"))
    assert len(str(record.extra).encode()) < MAX_EXTRA_BYTES


def test_what_the_message_says_about_itself_is_bounded_and_encodable():
    """GIVEN a hand-made event whose message id is 10,000 characters with a lone
    surrogate, and an error naming a value with one WHEN it is recorded THEN every text
    on the record is UTF-8 (DynamoDB stores nothing else) and bounded."""
    record = record_of(message_id="\udfff" + "m" * 10_000,
                       error=InvalidTriggerError("body.requested_by", "al\ud800ice" * 500))
    for text in (record.trigger_id, record.error, record.extra["message_id"]):
        assert len(text.encode("utf-8")) <= 1000
    assert record.extra["message_id"].startswith("\\udfff")


def test_one_message_has_one_run_id_on_every_delivery_and_per_job():
    """GIVEN one message delivered again later (its first receive time stays, its receive
    count and the worker's clock move) WHEN each delivery records it THEN both name the
    same run id (the conditional put writes it once); another message, or the same
    message reaching another job, has its own; the record starts at the first receive."""
    first = record_of(now_ms=FIRST_MS + 900)
    again = record_of(attributes={**ATTRIBUTES, "ApproximateReceiveCount": "3"},
                      now_ms=FIRST_MS + 3_600_000)
    assert first.run_id == again.run_id
    assert record_of(message_id="m-2").run_id != first.run_id
    assert record_of(job="report-export").run_id != first.run_id
    assert (first.started_at_ms, first.ended_at_ms) == (FIRST_MS, FIRST_MS + 900)
    assert (again.extra["receive_count"], again.extra["sender_id"]) == (3, "AIDAEXAMPLE")


def test_without_a_first_receive_time_the_sent_time_then_the_clock_is_used():
    sent_only = record_of(attributes={"SentTimestamp": str(FIRST_MS - 5_000)})
    assert sent_only.started_at_ms == FIRST_MS - 5_000
    bare = record_of(attributes={"ApproximateFirstReceiveTimestamp": "soon"}, now_ms=FIRST_MS)
    assert bare.started_at_ms == FIRST_MS and "receive_count" not in bare.extra
    assert record_of(attributes=None, now_ms=FIRST_MS).started_at_ms == FIRST_MS
