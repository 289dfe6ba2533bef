"""Scenarios for the embedded AWS emulator (jobguard.local.emulator).

moto's conditional writes are not atomic under concurrency; the emulator serialises
DynamoDB requests. These scenarios check that contended conditional writes have
exactly one winner, that SQS long polls do not hold the DynamoDB lock, and that the
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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
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
