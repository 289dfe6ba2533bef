"""Scenarios for the embedded AWS emulator (jobguard.local.emulator).

moto's conditional writes are not atomic under concurrency; the emulator serialises
DynamoDB and S3 requests. These scenarios check that contended conditional writes have
exactly one winner, that SQS long polls do not hold the DynamoDB lock, that
transactions roll back exactly while backing up only the items they name, and that the
``python -m jobguard.local.emulator`` entry point serves and shuts down cleanly.

Threads are lined up with ``threading.Barrier`` and ordered with ``threading.Event``;
nothing relies on sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import boto3
import pytest
from botocore.exceptions import ClientError

from jobguard.local.emulator import (
    ENDPOINT_LINE_PREFIX,
    InProcessAWS,
    LocalAWS,
    in_process,
)

THREADS = 8
ROUNDS = 20
INCREMENTS_PER_THREAD = 25
BARRIER_TIMEOUT_S = 30.0

AwsHandle: TypeAlias = LocalAWS | InProcessAWS


# --------------------------------------------------------------------------- helpers


def _is_condition_failure(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _create_table(ddb: Any, name: str) -> None:
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )


def _run_threads(n: int, target: Callable[[int], Any]) -> list[Any]:
    """Run ``target(i)`` for i in range(n) on n concurrent threads; re-raise any failure."""
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(target, i) for i in range(n)]
        return [f.result(timeout=BARRIER_TIMEOUT_S * 4) for f in futures]


def _contend_for_keys(ddb: Any, table: str, *, rounds: int, threads: int) -> list[list[int]]:
    """Each round, ``threads`` threads put the same new key with attribute_not_exists(pk).

    Returns, per round, the indexes of the threads whose put succeeded.
    """
    barrier = threading.Barrier(threads, timeout=BARRIER_TIMEOUT_S)
    winners: list[list[int]] = [[] for _ in range(rounds)]
    lock = threading.Lock()

    def contender(i: int) -> None:
        for r in range(rounds):
            barrier.wait()  # all threads fire round r together
            try:
                ddb.put_item(
                    TableName=table,
                    Item={"pk": {"S": f"round-{r}"}, "owner": {"S": str(i)}},
                    ConditionExpression="attribute_not_exists(pk)",
                )
            except ClientError as exc:
                if not _is_condition_failure(exc):
                    raise
                continue
            with lock:
                winners[r].append(i)

    _run_threads(threads, contender)
    return winners


def _assert_one_winner_per_round(ddb: Any, table: str, winners: list[list[int]]) -> None:
    assert [len(w) for w in winners] == [1] * len(winners), winners
    for r, (winner,) in enumerate(winners):
        item = ddb.get_item(TableName=table, Key={"pk": {"S": f"round-{r}"}}, ConsistentRead=True)
        assert item["Item"]["owner"]["S"] == str(winner)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def preemptive_threads() -> Iterator[None]:
    """Make the interpreter switch threads very often while a test runs.

    With the default 5 ms switch interval, moto's check-then-write window is rarely
    interrupted and an unserialised emulator would pass the one-winner tests by luck;
    at 10 us, plain ``mock_aws`` gave several winners in about half of 100 rounds.
    """
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


@pytest.fixture
def local_aws() -> Iterator[LocalAWS]:
    with LocalAWS() as aws:
        aws.reset()
        yield aws


@pytest.fixture(
    params=[
        pytest.param("server", marks=pytest.mark.server),
        pytest.param("in_process"),
    ]
)
def aws(request: pytest.FixtureRequest) -> Iterator[AwsHandle]:
    """The same scenario against LocalAWS (server mode) and in_process() (mock_aws)."""
    if request.param == "server":
        with LocalAWS() as server:
            server.reset()
            yield server
    else:
        with in_process() as mocked:
            yield mocked


# --------------------------------------------------------------------------- atomicity


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("preemptive_threads")
def test_contended_conditional_put_has_exactly_one_winner_per_round(aws: AwsHandle) -> None:
    # GIVEN an empty table, one shared DynamoDB client, and frequent thread switches
    ddb = aws.client("dynamodb")
    _create_table(ddb, "leases")

    # WHEN, for each of 20 rounds, 8 threads released by a barrier all put the same
    # new key with attribute_not_exists(pk)
    winners = _contend_for_keys(ddb, "leases", rounds=ROUNDS, threads=THREADS)

    # THEN every round has exactly one winner, and the stored item is the winner's
    _assert_one_winner_per_round(ddb, "leases", winners)


@pytest.mark.server
@pytest.mark.timeout(60)
@pytest.mark.usefixtures("preemptive_threads")
def test_optimistic_counter_loses_no_increment(local_aws: LocalAWS) -> None:
    # GIVEN a counter item at 0
    ddb = local_aws.client("dynamodb")
    _create_table(ddb, "counters")
    key = {"pk": {"S": "counter"}}
    ddb.put_item(TableName="counters", Item={**key, "n": {"N": "0"}})
    barrier = threading.Barrier(THREADS, timeout=BARRIER_TIMEOUT_S)

    def incrementer(_: int) -> tuple[int, int]:
        barrier.wait()
        applied = conflicts = 0
        while applied < INCREMENTS_PER_THREAD:
            item = ddb.get_item(TableName="counters", Key=key, ConsistentRead=True)["Item"]
            old = int(item["n"]["N"])
            try:
                ddb.update_item(
                    TableName="counters",
                    Key=key,
                    UpdateExpression="SET #n = :new",
                    ConditionExpression="#n = :old",
                    ExpressionAttributeNames={"#n": "n"},
                    ExpressionAttributeValues={
                        ":old": {"N": str(old)},
                        ":new": {"N": str(old + 1)},
                    },
                )
            except ClientError as exc:
                if not _is_condition_failure(exc):
                    raise
                conflicts += 1
                continue
            applied += 1
        return applied, conflicts

    # WHEN 8 threads each apply 25 read-then-conditional-update increments, retrying
    # whenever their read went stale
    results = _run_threads(THREADS, incrementer)

    # THEN the counter is exactly 8 x 25: no two updates were applied on the same read
    final = ddb.get_item(TableName="counters", Key=key, ConsistentRead=True)["Item"]
    assert int(final["n"]["N"]) == THREADS * INCREMENTS_PER_THREAD
    assert sum(applied for applied, _ in results) == THREADS * INCREMENTS_PER_THREAD
    print(f"optimistic counter: {sum(c for _, c in results)} conflicts retried")


@pytest.mark.server
@pytest.mark.timeout(60)
@pytest.mark.usefixtures("preemptive_threads")
def test_unserialized_mode_reports_winners(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN moto without the DynamoDB lock (the race this module exists to remove)
    with LocalAWS(serialize_dynamodb=False) as raw:
        raw.reset()
        ddb = raw.client("dynamodb")
        _create_table(ddb, "leases")

        # WHEN 8 threads contend for the same new key, 20 rounds
        winners = _contend_for_keys(ddb, "leases", rounds=ROUNDS, threads=THREADS)

    # THEN every round has at least one winner; how many more is nondeterministic, so
    # it is only reported, never asserted
    assert all(len(w) >= 1 for w in winners)
    with capsys.disabled():
        print(f"\nunserialized moto: winners per round = {[len(w) for w in winners]}")


# --------------------------------------------------------------------------- long polls


@pytest.mark.timeout(60)
def test_sqs_long_poll_does_not_block_dynamodb(
    aws: AwsHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an empty queue, a table, and a spy that signals when moto's SQS backend has
    # actually started waiting inside ReceiveMessage
    from moto.sqs.models import SQSBackend

    sqs = aws.client("sqs")
    ddb = aws.client("dynamodb")
    queue_url = sqs.create_queue(QueueName="empty")["QueueUrl"]
    _create_table(ddb, "leases")

    poll_entered = threading.Event()
    poll_returned = threading.Event()
    original_receive = SQSBackend.receive_message

    def spying_receive(self: SQSBackend, *args: Any, **kwargs: Any) -> Any:
        poll_entered.set()
        return original_receive(self, *args, **kwargs)

    monkeypatch.setattr(SQSBackend, "receive_message", spying_receive)
    poll_result: dict[str, Any] = {}

    def long_poll() -> None:
        try:
            poll_result["response"] = sqs.receive_message(
                QueueUrl=queue_url, WaitTimeSeconds=3, MaxNumberOfMessages=1
            )
        finally:
            poll_returned.set()

    poller = threading.Thread(target=long_poll, name="long-poll", daemon=True)
    poller.start()
    assert poll_entered.wait(timeout=30), "the long poll never reached moto"

    # WHEN another thread's DynamoDB requests run while the poll is waiting
    assert not poll_returned.is_set()
    ddb.put_item(
        TableName="leases",
        Item={"pk": {"S": "job"}, "owner": {"S": "a"}},
        ConditionExpression="attribute_not_exists(pk)",
    )
    with pytest.raises(ClientError) as lost:
        ddb.put_item(
            TableName="leases",
            Item={"pk": {"S": "job"}, "owner": {"S": "b"}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    item = ddb.get_item(TableName="leases", Key={"pk": {"S": "job"}}, ConsistentRead=True)
    tables = ddb.list_tables()["TableNames"]

    # THEN they all completed while the poll was still in flight
    dynamodb_done_during_poll = not poll_returned.is_set()
    assert _is_condition_failure(lost.value)
    assert item["Item"]["owner"]["S"] == "a"
    assert tables == ["leases"]
    assert dynamodb_done_during_poll, "DynamoDB calls waited for the SQS long poll"

    # AND the poll itself ends normally, empty
    poller.join(timeout=30)
    assert not poller.is_alive()
    assert "Messages" not in poll_result["response"]


# --------------------------------------------------------------------------- subprocess


@pytest.mark.server
@pytest.mark.timeout(60)
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_module_entry_point_serves_and_stops_on_signal(stop_signal: signal.Signals) -> None:
    # GIVEN `python -m jobguard.local.emulator` started on a free port
    lib_dir = Path(__file__).resolve().parents[2] / "lib"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(lib_dir), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobguard.local.emulator", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()

        # WHEN it announces its endpoint and a client calls ListTables on it
        prefix = f"{ENDPOINT_LINE_PREFIX} endpoint="
        assert line.startswith(prefix), (line, proc.poll())
        endpoint = line.strip().removeprefix(prefix)
        assert endpoint.startswith("http://127.0.0.1:")
        ddb = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            aws_session_token="testing",
        )
        tables = ddb.list_tables()["TableNames"]

        # THEN it serves the call, and exits cleanly on the signal without more output
        assert tables == []
        proc.send_signal(stop_signal)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert out == ""
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


# --------------------------------------------------------------------------- small contracts


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com"])
def test_refuses_non_loopback_bind(host: str) -> None:
    # GIVEN / WHEN a non-loopback bind address THEN construction fails before binding
    with pytest.raises(ValueError):
        LocalAWS(host=host)


@pytest.mark.server
@pytest.mark.timeout(60)
def test_env_points_at_the_endpoint_with_fake_credentials(local_aws: LocalAWS) -> None:
    # GIVEN a running emulator WHEN asking for its environment
    env = local_aws.env()

    # THEN it names the endpoint, the fake credentials and the region
    assert env == {
        "AWS_ENDPOINT_URL": local_aws.endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }
    assert local_aws.endpoint_url.startswith("http://127.0.0.1:")


@pytest.mark.server
@pytest.mark.timeout(60)
def test_reset_drops_state(local_aws: LocalAWS) -> None:
    # GIVEN a table
    ddb = local_aws.client("dynamodb")
    _create_table(ddb, "leases")
    assert ddb.list_tables()["TableNames"] == ["leases"]

    # WHEN the emulator is reset
    local_aws.reset()

    # THEN the table is gone
    assert ddb.list_tables()["TableNames"] == []


def test_in_process_restores_environment_and_stubber(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an environment that would route boto3 elsewhere
    from moto.core.botocore_stubber import BotocoreStubber

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    original_call = BotocoreStubber.__call__

    # WHEN inside in_process()
    with in_process(region="eu-west-1") as aws:
        # THEN the fake environment is in place and clients are mocked
        assert "AWS_ENDPOINT_URL" not in os.environ
        assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
        assert os.environ["AWS_SESSION_TOKEN"] == "testing"
        assert os.environ["AWS_REGION"] == aws.region == "eu-west-1"
        assert BotocoreStubber.__call__ is not original_call
        assert aws.client("dynamodb").list_tables()["TableNames"] == []

    # AND afterwards everything is as before
    assert os.environ["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
    assert os.environ["AWS_REGION"] == "eu-west-3"
    assert "AWS_SESSION_TOKEN" not in os.environ
    assert BotocoreStubber.__call__ is original_call


# --------------------------------------------------------------------------- S3 conditional writes


def _contend_for_objects(s3: Any, bucket: str, *, rounds: int, threads: int) -> list[list[int]]:
    """Each round, ``threads`` threads put the same new key with ``If-None-Match: *``.

    Returns, per round, the indexes of the threads whose put succeeded.
    """
    barrier = threading.Barrier(threads, timeout=BARRIER_TIMEOUT_S)
    winners: list[list[int]] = [[] for _ in range(rounds)]
    lock = threading.Lock()

    def contender(i: int) -> None:
        for r in range(rounds):
            barrier.wait()
            try:
                s3.put_object(Bucket=bucket, Key=f"round-{r:02d}", Body=str(i).encode(),
                              IfNoneMatch="*")
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "PreconditionFailed":
                    raise
                continue
            with lock:
                winners[r].append(i)

    _run_threads(threads, contender)
    return winners


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("preemptive_threads")
def test_contended_s3_create_only_put_has_exactly_one_winner_per_round(aws: AwsHandle) -> None:
    # GIVEN a versioned bucket (an overwrite would leave a second version behind)
    s3 = aws.client("s3")
    s3.create_bucket(Bucket="exports")
    s3.put_bucket_versioning(Bucket="exports", VersioningConfiguration={"Status": "Enabled"})

    # WHEN, for each of 20 rounds, 8 threads put the same new key with If-None-Match: *
    winners = _contend_for_objects(s3, "exports", rounds=ROUNDS, threads=THREADS)

    # THEN every round has exactly one winner, one version, and the winner's content
    assert [len(w) for w in winners] == [1] * ROUNDS, winners
    for r, (winner,) in enumerate(winners):
        versions = s3.list_object_versions(Bucket="exports", Prefix=f"round-{r:02d}")["Versions"]
        assert len(versions) == 1
        body = s3.get_object(Bucket="exports", Key=f"round-{r:02d}")["Body"].read()
        assert body == str(winner).encode()


# --------------------------------------------------------------------------- transactions


def _create_table_with_sort_key(ddb: Any, name: str) -> None:
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def _scan_all(ddb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = ddb.scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(items, key=repr)


def _first_operation(kind: str, table: str, key: dict[str, Any]) -> dict[str, Any]:
    """The transaction's first operation, which succeeds on its own."""
    if kind.startswith("put"):
        return {"Put": {"TableName": table, "Item": {**key, "v": {"S": "written"}}}}
    if kind.startswith("update"):
        return {
            "Update": {
                "TableName": table,
                "Key": key,
                "UpdateExpression": "SET v = :v ADD n :one",
                "ExpressionAttributeValues": {":v": {"S": "updated"}, ":one": {"N": "1"}},
            }
        }
    return {"Delete": {"TableName": table, "Key": key}}


@pytest.mark.parametrize("sort_key", [False, True], ids=["hash", "hash+range"])
@pytest.mark.parametrize(
    "kind", ["put-existing", "put-new", "update-existing", "update-new", "delete-existing"]
)
def test_failed_transaction_leaves_the_first_item_unchanged(kind: str, sort_key: bool) -> None:
    # GIVEN a table holding an item "a" (and, for the range table, a sibling "a"/"y")
    with in_process() as aws:
        ddb = aws.client("dynamodb")
        if sort_key:
            _create_table_with_sort_key(ddb, "t")
        else:
            _create_table(ddb, "t")

        def key(pk: str) -> dict[str, Any]:
            return {"pk": {"S": pk}, **({"sk": {"S": "x"}} if sort_key else {})}

        ddb.put_item(TableName="t", Item={**key("a"), "v": {"S": "original"}, "n": {"N": "7"}})
        ddb.put_item(TableName="t", Item={**key("b"), "v": {"S": "guard"}})
        if sort_key:
            ddb.put_item(TableName="t", Item={"pk": {"S": "a"}, "sk": {"S": "y"}})
        before = _scan_all(ddb, "t")
        first_key = key("new" if kind.endswith("new") else "a")

        # WHEN a transaction applies the first operation, then fails its second condition
        with pytest.raises(ClientError) as cancelled:
            ddb.transact_write_items(
                TransactItems=[
                    _first_operation(kind, "t", first_key),
                    {
                        "ConditionCheck": {
                            "TableName": "t",
                            "Key": key("b"),
                            "ConditionExpression": "v = :expected",
                            "ExpressionAttributeValues": {":expected": {"S": "other"}},
                        }
                    },
                ]
            )

        # THEN the transaction is cancelled and the table is exactly as before
        assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
        assert _scan_all(ddb, "t") == before
        # AND the table still takes writes to the rolled-back key normally
        ddb.put_item(TableName="t", Item={**first_key, "v": {"S": "after"}})
        got = ddb.get_item(TableName="t", Key=first_key, ConsistentRead=True)["Item"]
        assert got["v"] == {"S": "after"}


def test_cancellation_reasons_still_carry_all_old_items(aws: AwsHandle) -> None:
    # GIVEN a lease row held by R1
    ddb = aws.client("dynamodb")
    _create_table(ddb, "leases")
    held = {"pk": {"S": "job"}, "owner": {"S": "R1"}, "fence": {"N": "3"}}
    ddb.put_item(TableName="leases", Item=held)

    # WHEN a transaction puts a new row and then fails a condition on the held row,
    # asking for ALL_OLD
    with pytest.raises(ClientError) as cancelled:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "leases", "Item": {"pk": {"S": "item-1"}}}},
                {
                    "Update": {
                        "TableName": "leases",
                        "Key": {"pk": {"S": "job"}},
                        "UpdateExpression": "SET #o = :me",
                        "ConditionExpression": "attribute_not_exists(#o)",
                        "ExpressionAttributeNames": {"#o": "owner"},
                        "ExpressionAttributeValues": {":me": {"S": "R2"}},
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ]
        )

    # THEN the reasons name each operation, with the held row for the failed one
    reasons = cancelled.value.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None", "ConditionalCheckFailed"]
    assert reasons[1]["Item"] == held
    # AND nothing was written
    assert _scan_all(ddb, "leases") == [held]


def test_a_transaction_naming_one_item_twice_is_refused_and_rolled_back() -> None:
    # GIVEN an item
    with in_process() as aws:
        ddb = aws.client("dynamodb")
        _create_table(ddb, "t")
        ddb.put_item(TableName="t", Item={"pk": {"S": "a"}, "v": {"S": "original"}})
        before = _scan_all(ddb, "t")

        # WHEN a transaction writes a new item, then names "a" twice
        with pytest.raises(ClientError) as refused:
            ddb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": "t", "Item": {"pk": {"S": "new"}}}},
                    {"Put": {"TableName": "t", "Item": {"pk": {"S": "a"}, "v": {"S": "1"}}}},
                    {"Delete": {"TableName": "t", "Key": {"pk": {"S": "a"}}}},
                ]
            )

        # THEN it is refused as moto refuses it, and nothing it did remains
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        assert _scan_all(ddb, "t") == before


LARGE_TABLE_ITEMS = 20_000


def _fill_directly(table_name: str, region: str, n: int) -> None:
    """Load ``n`` items straight into moto's backend (20k API calls would take minutes)."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID][region].get_table(table_name)
    for i in range(n):
        table.put_item({"pk": {"S": f"filler-{i:05d}"}, "v": {"N": str(i)}})


@dataclass
class _CopySpy:
    """Counts moto Item deep copies, and records which keys each transaction backed up."""

    item_copies: int = 0
    backed_up: list[set[tuple[str, str]]] = field(default_factory=list)


@pytest.fixture
def copy_spy(monkeypatch: pytest.MonkeyPatch) -> _CopySpy:
    from moto.dynamodb.models.dynamo_type import Item

    from jobguard.local import _transactions

    spy = _CopySpy()
    original_copy = Item.__deepcopy__
    original_snapshot = _transactions._snapshot_touched_items

    def counting_copy(self: Item, memo: dict[int, Any]) -> Item:
        spy.item_copies += 1
        return original_copy(self, memo)

    def recording_snapshot(*args: Any, **kwargs: Any) -> Any:
        snapshot = original_snapshot(*args, **kwargs)
        assert snapshot is not None, "the patch fell back to moto's full-table backup"
        spy.backed_up.append({(b.table_name, b.hash_key.value) for b in snapshot[0]})
        return snapshot

    monkeypatch.setattr(Item, "__deepcopy__", counting_copy)
    monkeypatch.setattr(_transactions, "_snapshot_touched_items", recording_snapshot)
    return spy


def _small_transaction(table: str, *, fail: bool) -> list[dict[str, Any]]:
    return [
        {"Put": {"TableName": table, "Item": {"pk": {"S": "work-1"}, "v": {"S": "claimed"}}}},
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": "filler-00042"}},
                "UpdateExpression": "SET v = :v",
                "ExpressionAttributeValues": {":v": {"N": "-1"}},
            }
        },
        {
            "ConditionCheck": {
                "TableName": table,
                "Key": {"pk": {"S": "filler-00007"}},
                "ConditionExpression": "attribute_exists(pk)"
                if not fail
                else "attribute_not_exists(pk)",
            }
        },
    ]


TOUCHED = {("big", "work-1"), ("big", "filler-00042"), ("big", "filler-00007")}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fail", [False, True], ids=["commits", "cancelled"])
def test_a_transaction_on_a_large_table_backs_up_only_the_items_it_names(
    copy_spy: _CopySpy, fail: bool
) -> None:
    # GIVEN a table of 20,000 items, and a spy on moto's Item deep copies
    with in_process() as aws:
        ddb = aws.client("dynamodb")
        _create_table(ddb, "big")
        _fill_directly("big", aws.region, LARGE_TABLE_ITEMS)
        copies_before = copy_spy.item_copies
        started = time.perf_counter()

        # WHEN a 3-item transaction runs (and commits, or fails its last condition)
        try:
            ddb.transact_write_items(TransactItems=_small_transaction("big", fail=fail))
        except ClientError as exc:
            assert fail, exc
        elapsed_s = time.perf_counter() - started

        # THEN it backed up exactly the three items it names, and copied no others
        # (moto's own backup would have copied all 20,000)
        assert copy_spy.backed_up == [TOUCHED]
        assert copy_spy.item_copies - copies_before <= 2 * len(TOUCHED)
        # AND it committed or rolled back as a whole
        filler = ddb.get_item(TableName="big", Key={"pk": {"S": "filler-00042"}})["Item"]
        new = ddb.get_item(TableName="big", Key={"pk": {"S": "work-1"}}).get("Item")
        assert filler["v"] == ({"N": "42"} if fail else {"N": "-1"})
        assert (new is None) is fail
        assert ddb.describe_table(TableName="big")["Table"]["ItemCount"] == (
            LARGE_TABLE_ITEMS + (0 if fail else 1)
        )
    print(f"\n3-item transaction on {LARGE_TABLE_ITEMS} items: {elapsed_s * 1000:.1f} ms")


@pytest.mark.timeout(120)
def test_the_copy_spy_sees_moto_s_full_table_backup(
    copy_spy: _CopySpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the same large table, with moto's original transaction method put back
    from moto.dynamodb.models import DynamoDBBackend

    from jobguard.local import _transactions

    with in_process() as aws:
        ddb = aws.client("dynamodb")
        _create_table(ddb, "big")
        _fill_directly("big", aws.region, LARGE_TABLE_ITEMS)
        monkeypatch.setattr(DynamoDBBackend, "transact_write_items",
                            _transactions._original_transact)
        copies_before = copy_spy.item_copies

        # WHEN the same transaction runs
        ddb.transact_write_items(TransactItems=_small_transaction("big", fail=False))

        # THEN the spy counts every item of the table: it measures what the patch saves
        assert copy_spy.backed_up == []
        assert copy_spy.item_copies - copies_before >= LARGE_TABLE_ITEMS


def test_transaction_patch_is_reference_counted_and_restored() -> None:
    # GIVEN moto's own transaction method and module globals
    from moto.dynamodb import models

    original = models.DynamoDBBackend.transact_write_items
    original_copy = vars(models)["copy"]

    # WHEN emulators are nested
    with in_process():
        patched = models.DynamoDBBackend.transact_write_items
        assert patched is not original
        with in_process():
            assert models.DynamoDBBackend.transact_write_items is patched
        # THEN leaving the inner one keeps the patch for the outer one
        assert models.DynamoDBBackend.transact_write_items is patched

    # AND leaving the last one restores moto exactly
    assert models.DynamoDBBackend.transact_write_items is original
    assert vars(models)["copy"] is original_copy


@pytest.mark.server
@pytest.mark.timeout(60)
def test_local_aws_patches_transactions_while_running() -> None:
    # GIVEN moto's own transaction method
    from moto.dynamodb import models

    original = models.DynamoDBBackend.transact_write_items

    # WHEN a server runs THEN transactions are patched, and restored once it stops
    with LocalAWS() as aws:
        assert models.DynamoDBBackend.transact_write_items is not original
        aws.stop()
        assert models.DynamoDBBackend.transact_write_items is original
        aws.stop()  # a second stop does not unpatch twice
    assert models.DynamoDBBackend.transact_write_items is original
