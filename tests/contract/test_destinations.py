"""The destination contract, run against every destination helper and every emulator.

Each case is one destination (DynamoDB table, S3 bucket) behind one emulator (moto
in-process, moto over HTTP). The helper is the only code under test, and every
assertion looks at the destination itself: how many writes it accepted (counted by a
botocore hook on the real responses), what it stores, and, for S3, how many object
versions exist.

Faults are injected with botocore event hooks; threads are lined up with
``threading.Barrier``; nothing sleeps.
"""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from jobguard.destinations import (
    DestinationError,
    DynamoDBDestination,
    S3Destination,
)
from jobguard.errors import JobGuardError

THREADS = 8
BARRIER_TIMEOUT_S = 30.0
WORK_ID = "contact-42:create-note"


# --------------------------------------------------------------------------- harness


@dataclass
class Harness:
    """One destination helper plus the means to inspect what landed at the destination."""

    kind: str
    destination: DynamoDBDestination | S3Destination
    client: Any
    write_event: str  # botocore event of the write, e.g. "after-call.s3.PutObject"
    put: Callable[[str, int], str]  # put(work_id, variant) -> destination id
    content: Callable[[str], Any]  # what the destination stores for a work id
    expected_content: Callable[[int], Any]  # content of put(..., variant)
    versions: Callable[[str], int]  # S3: object versions; DynamoDB: items (0 or 1)
    accepted_writes: list[str] = field(default_factory=list)

    def count_accepted_writes(self) -> None:
        """Record every write the destination answered with 2xx (not refused)."""

        def spy(http_response: Any, **_: Any) -> None:
            if 200 <= http_response.status_code < 300:
                self.accepted_writes.append(self.write_event)

        self.client.meta.events.register(self.write_event, spy)

    def effects(self, work_id: str) -> int:
        """Writes accepted for ``work_id`` (all writes here are for one work id)."""
        return len(self.accepted_writes)


def _dynamodb_harness(aws: Any) -> Harness:
    client = aws.client("dynamodb")
    table = DynamoDBDestination.create_table(client, f"notes-{uuid.uuid4().hex[:8]}")
    destination = DynamoDBDestination(table, client=client)

    def item(variant: int) -> dict[str, Any]:
        return {"text": f"note {variant}", "score": 0.5 + variant, "tags": ["a", None, True]}

    def content(work_id: str) -> Any:
        stored = client.get_item(
            TableName=table, Key={"work_id": {"S": work_id}}, ConsistentRead=True
        ).get("Item")
        if stored is None:
            return None
        return {k: v for k, v in stored.items() if k not in ("work_id", "destination_id")}

    def expected(variant: int) -> Any:
        return {
            "text": {"S": f"note {variant}"},
            "score": {"N": str(0.5 + variant)},
            "tags": {"L": [{"S": "a"}, {"NULL": True}, {"BOOL": True}]},
        }

    def versions(work_id: str) -> int:
        return 0 if content(work_id) is None else 1

    return Harness(
        kind="dynamodb",
        destination=destination,
        client=client,
        write_event="after-call.dynamodb.PutItem",
        put=lambda work_id, variant: destination.put(work_id, item(variant)),
        content=content,
        expected_content=expected,
        versions=versions,
    )


def _s3_harness(aws: Any) -> Harness:
    client = aws.client("s3")
    bucket = f"exports-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    # Versioned, so that an overwrite would leave a second version behind: the count
    # of versions is the count of effects.
    client.put_bucket_versioning(
        Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}
    )
    destination = S3Destination(bucket, client=client, prefix="daily/")

    def content(work_id: str) -> Any:
        if destination.reconcile(work_id) is None:
            return None
        body: bytes = client.get_object(Bucket=bucket, Key=f"daily/{work_id}")["Body"].read()
        return body

    def versions(work_id: str) -> int:
        listed = client.list_object_versions(Bucket=bucket, Prefix=f"daily/{work_id}")
        return len(listed.get("Versions", [])) + len(listed.get("DeleteMarkers", []))

    return Harness(
        kind="s3",
        destination=destination,
        client=client,
        write_event="after-call.s3.PutObject",
        put=lambda work_id, variant: destination.put(
            work_id, f"report {variant}".encode(), content_type="text/csv"
        ),
        content=content,
        expected_content=lambda variant: f"report {variant}".encode(),
        versions=versions,
    )


def _unversioned_s3(aws: Any) -> tuple[S3Destination, Any, str]:
    client = aws.client("s3")
    bucket = f"plain-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    return S3Destination(bucket, client=client), client, bucket


@pytest.fixture(params=["in_process", pytest.param("server", marks=pytest.mark.server)])
def aws(request: pytest.FixtureRequest) -> Iterator[Any]:
    from jobguard.local.emulator import LocalAWS, in_process

    if request.param == "in_process":
        with in_process() as emulator:
            yield emulator
    else:
        with LocalAWS() as server:
            server.reset()
            yield server


@pytest.fixture(params=["dynamodb", "s3"])
def harness(request: pytest.FixtureRequest, aws: Any) -> Harness:
    build = _dynamodb_harness if request.param == "dynamodb" else _s3_harness
    h = build(aws)
    h.count_accepted_writes()
    return h


@pytest.fixture
def preemptive_threads() -> Iterator[None]:
    """Switch threads every 10 us, so that a check-then-write race would show."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _lose_one_response(client: Any, event: str) -> list[ReadTimeoutError]:
    """Make the next call of ``event`` reach the destination but time out for the caller.

    Returns the list that receives the injected exception once it has been raised.
    """
    raised: list[ReadTimeoutError] = []

    def hook(**_: Any) -> None:
        if not raised:
            raised.append(ReadTimeoutError(endpoint_url="injected"))
            raise raised[0]

    client.meta.events.register(event, hook)
    return raised


# --------------------------------------------------------------------------- ONCE


def test_put_writes_once_and_returns_a_destination_id(harness: Harness) -> None:
    # GIVEN an empty destination
    # WHEN one work item is put
    destination_id = harness.put(WORK_ID, 1)

    # THEN it is stored once, with its content, under a non-empty destination id
    assert isinstance(destination_id, str) and destination_id
    assert harness.effects(WORK_ID) == 1
    assert harness.versions(WORK_ID) == 1
    assert harness.content(WORK_ID) == harness.expected_content(1)


def test_a_repeat_returns_the_same_id_and_never_overwrites(harness: Harness) -> None:
    # GIVEN a work item put once
    first = harness.put(WORK_ID, 1)
    sent: list[str] = []
    harness.client.meta.events.register(
        f"before-send.{harness.kind}", lambda request, **_: sent.append(request.method)
    )

    # WHEN it is put again, with different content
    again = harness.put(WORK_ID, 2)
    requests_for_repeat = list(sent)

    # THEN the first destination id comes back, and the destination still holds
    # exactly one effect, with the original content (ONCE)
    assert again == first
    assert harness.effects(WORK_ID) == 1
    assert harness.versions(WORK_ID) == 1
    assert harness.content(WORK_ID) == harness.expected_content(1)
    # AND DynamoDB answered the repeat in one call (ALL_OLD), with no second read
    if harness.kind == "dynamodb":
        assert requests_for_repeat == ["POST"]


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("preemptive_threads")
def test_a_race_of_writers_makes_one_effect_and_they_all_agree(harness: Harness) -> None:
    # GIVEN 8 threads sharing one client, lined up behind a barrier
    barrier = threading.Barrier(THREADS, timeout=BARRIER_TIMEOUT_S)

    def writer(i: int) -> str:
        barrier.wait()
        return harness.put(WORK_ID, i)

    # WHEN they all put the same work id at once, each with its own content
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        ids = list(pool.map(writer, range(THREADS)))

    # THEN exactly one write was accepted, every thread got its destination id, and the
    # destination holds the winner's content
    assert harness.effects(WORK_ID) == 1
    assert harness.versions(WORK_ID) == 1
    assert len(set(ids)) == 1
    assert harness.destination.reconcile(WORK_ID) == ids[0]
    assert harness.content(WORK_ID) in [harness.expected_content(i) for i in range(THREADS)]


# --------------------------------------------------------------------------- reconcile


def test_reconcile_finds_the_effect_and_none_for_an_unknown_work_id(harness: Harness) -> None:
    # GIVEN one work item put
    destination_id = harness.put(WORK_ID, 1)

    # WHEN reconciling it and a work id that was never put
    found = harness.destination.reconcile(WORK_ID)
    missing = harness.destination.reconcile("contact-43:create-note")

    # THEN the first is found with its destination id, the second is absent
    assert found == destination_id
    assert missing is None


def test_a_lost_response_propagates_and_reconcile_finds_the_effect(harness: Harness) -> None:
    # GIVEN a write whose response will be lost after the destination applied it
    raised = _lose_one_response(harness.client, harness.write_event)

    # WHEN the work item is put
    with pytest.raises(ReadTimeoutError) as lost:
        harness.put(WORK_ID, 1)

    # THEN the timeout reaches the caller unchanged (it classifies it as uncertain)
    assert lost.value is raised[0]
    assert not isinstance(lost.value, JobGuardError)

    # AND reconcile finds the effect the caller never saw confirmed
    found = harness.destination.reconcile(WORK_ID)
    assert found is not None

    # AND a repeated put returns that effect's id instead of making a second one
    assert harness.put(WORK_ID, 2) == found
    assert harness.effects(WORK_ID) == 1
    assert harness.versions(WORK_ID) == 1
    assert harness.content(WORK_ID) == harness.expected_content(1)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "work_id", ["", None, 42, "x" * 1025], ids=["empty", "none", "int", "too-long"])
def test_invalid_work_ids_are_refused_naming_the_field(aws: Any, work_id: Any) -> None:
    # GIVEN an S3 destination (the strictest: keys of at most 1,024 bytes)
    destination, client, bucket = _unversioned_s3(aws)

    # WHEN putting or reconciling an unusable work id
    with pytest.raises(ValueError, match="work_id") as put_error:
        destination.put(work_id, b"x")
    with pytest.raises(ValueError, match="work_id"):
        destination.reconcile(work_id)

    # THEN both are refused before any call, and nothing was written
    assert str(put_error.value).startswith("work_id:")
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_s3_takes_every_key_a_work_id_makes_each_under_a_key_of_its_own(aws: Any) -> None:
    # GIVEN an S3 destination and work ids whose source ids are not S3-safe: escaped or
    # hashed by WorkId, or plain with a space, a letter beyond ASCII, a '%'
    from jobguard import WorkId

    destination, client, bucket = _unversioned_s3(aws)
    ids = [str(WorkId(s, "export")) for s in (
        "https://crm.example/c/42#notes", "x" * 300, "contact 42", "kontakt-ä", "a%23b",
        "a#b", "line\nbreak")]
    assert len(set(ids)) == len(ids)

    # WHEN each is put twice and reconciled
    found = {w: destination.put(w, w.encode()) for w in ids}

    # THEN each is one object under a key of its own, found again by its work id
    assert {w: destination.put(w, b"again") for w in ids} == found
    assert {w: destination.reconcile(w) for w in ids} == found
    assert client.list_objects_v2(Bucket=bucket)["KeyCount"] == len(ids)


@pytest.mark.parametrize("work_id", ["", None, 42, "x" * 2049])
def test_dynamodb_refuses_unusable_work_ids(aws: Any, work_id: Any) -> None:
    # GIVEN a DynamoDB destination
    destination = _dynamodb_harness(aws).destination
    assert isinstance(destination, DynamoDBDestination)

    # WHEN / THEN an empty, non-string or oversized work id is refused naming the field
    with pytest.raises(ValueError, match="^work_id:"):
        destination.put(work_id, {"text": "x"})
    with pytest.raises(ValueError, match="^work_id:"):
        destination.reconcile(work_id)


def test_dynamodb_refuses_items_it_cannot_store_faithfully(aws: Any) -> None:
    # GIVEN a DynamoDB destination
    destination = _dynamodb_harness(aws).destination
    assert isinstance(destination, DynamoDBDestination)

    # WHEN / THEN reserved attributes, non-finite floats and unknown types are refused
    with pytest.raises(ValueError, match="work_id"):
        destination.put(WORK_ID, {"work_id": "other"})
    with pytest.raises(ValueError, match="destination_id"):
        destination.put(WORK_ID, {"destination_id": "forged"})
    with pytest.raises(ValueError, match=r"item\.x"):
        destination.put(WORK_ID, {"x": float("nan")})
    with pytest.raises(TypeError, match=r"item\.x"):
        destination.put(WORK_ID, {"x": object()})
    # AND nothing was written
    assert destination.reconcile(WORK_ID) is None


def test_a_missing_table_is_a_destination_error_with_context(aws: Any) -> None:
    # GIVEN a destination whose table does not exist
    destination = DynamoDBDestination("no-such-table", client=aws.client("dynamodb"))

    # WHEN putting THEN the AWS error is wrapped, naming the destination and the work id
    with pytest.raises(DestinationError) as failed:
        destination.put(WORK_ID, {"text": "x"})
    assert failed.value.destination == "dynamodb:no-such-table"
    assert failed.value.work_id == WORK_ID
    assert failed.value.__cause__ is not None
    assert isinstance(failed.value, JobGuardError)


def test_a_missing_bucket_is_a_destination_error_with_context(aws: Any) -> None:
    # GIVEN a destination whose bucket does not exist
    destination = S3Destination("no-such-bucket-jobguard", client=aws.client("s3"), prefix="p/")

    # WHEN putting THEN the AWS error is wrapped, naming the destination and the work id
    with pytest.raises(DestinationError) as failed:
        destination.put(WORK_ID, b"x")
    assert failed.value.destination == "s3://no-such-bucket-jobguard/p/"
    assert failed.value.work_id == WORK_ID


def test_s3_unversioned_destination_id_is_the_unquoted_etag(aws: Any) -> None:
    # GIVEN an unversioned bucket
    destination, client, bucket = _unversioned_s3(aws)

    # WHEN a work item is put twice
    first = destination.put(WORK_ID, b"payload")
    again = destination.put(WORK_ID, b"other payload")

    # THEN the id is the object's ETag without quotes, and the object was not replaced
    etag = client.head_object(Bucket=bucket, Key=WORK_ID)["ETag"]
    assert first == again == etag.strip('"')
    assert client.get_object(Bucket=bucket, Key=WORK_ID)["Body"].read() == b"payload"
