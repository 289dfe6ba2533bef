"""The in-process emulator's per-partition throughput budget (``jobguard.local.throughput``).

GIVEN the emulator with a budget of 10 write units and 30 read units a second per
partition key (DynamoDB's 1,000 / 3,000 at 1/100 scale) on a clock the test moves:

- each request is charged the units DynamoDB bills, to the partition key it touches
  (size rounding, a write by its larger size, a refused conditional write at its size
  before, transactions twice, eventually consistent reads half, a query's items once);
- past a key's budget a single-item call is refused with
  ``ProvisionedThroughputExceededException`` and nothing is applied; a transaction is
  cancelled with ``ThrottlingError`` for its throttled action (botocore does not retry
  it); a batch leaves the throttled keys unprocessed; botocore retries a throttled call
  with backoff, and the retry lands once the bucket refilled;
- each key refills at its rate, never past one second of it, and one key's load never
  throttles another.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from bench.write_units import item_bytes as billed_bytes
from jobguard.dynamodb import create_table
from jobguard.local.emulator import in_process
from jobguard.local.throughput import (
    PartitionBudget,
    PartitionThroughput,
    item_bytes,
    read_units,
    write_units,
)

TABLE = "budget"
SCALED = PartitionThroughput().scaled(0.01)


def s(text: str) -> dict[str, str]:
    return {"S": text}


def sized(pk: str, sk: str, nbytes: int) -> dict[str, Any]:
    """An item of exactly ``nbytes`` as DynamoDB counts them."""
    base = {"pk": s(pk), "sk": s(sk)}
    return {**base, "p": s("x" * (nbytes - item_bytes(base) - 1))}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world() -> Iterator[tuple[Any, PartitionBudget, Clock]]:
    clock = Clock()
    budget = PartitionBudget(SCALED, clock=clock)
    with in_process(throughput=budget) as aws:
        ddb = aws.client("dynamodb")
        create_table(ddb, TABLE)
        yield ddb, budget, clock


def key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": s(pk), "sk": s(sk)}


def written(ddb: Any, pk: str, sk: str) -> bool:
    return "Item" in ddb.get_item(TableName=TABLE, Key=key(pk, sk))


# -- units ---------------------------------------------------------------------------


def test_units_are_counted_as_dynamodb_bills_them():
    job_row = {"pk": s("JOB#crm-sync"), "sk": s("FENCE"), "hw": {"N": "12"},
               "claim": {"M": {"contact-42:create-note": s("0123456789abcdef")}},
               "flags": {"L": [{"BOOL": True}, {"NULL": True}]}}
    # the same sizes as the benchmark's meter, which measured the write sizes
    assert item_bytes(job_row) == billed_bytes(job_row)
    assert item_bytes(sized("a", "b", 1024)) == 1024
    assert write_units(before=None, after=sized("a", "b", 1024)) == 1
    assert write_units(before=None, after=sized("a", "b", 1025)) == 2
    assert write_units(before=sized("a", "b", 3000), after=sized("a", "b", 10)) == 3
    assert write_units(before=None, after=None) == 1
    assert write_units(before=None, after=sized("a", "b", 1500), transactional=True) == 4
    assert read_units(4096, consistent=True) == 1
    assert read_units(4097, consistent=True) == 2
    assert read_units(4097, consistent=False) == 1
    assert read_units(0, consistent=False) == 0.5
    assert read_units(100, consistent=True, transactional=True) == 2


def test_each_request_is_charged_its_units_to_the_partition_key_it_touches(world):
    ddb, budget, clock = world
    ddb.put_item(TableName=TABLE, Item=sized("A", "1", 1500))
    assert budget.write_consumed == {(TABLE, "A"): 2}
    # an update is billed by the larger size: the item grew to 2.5 KB
    ddb.update_item(TableName=TABLE, Key=key("A", "1"), UpdateExpression="SET q = :q",
                    ExpressionAttributeValues={":q": s("y" * 1000)})
    assert budget.write_consumed[(TABLE, "A")] == 2 + 3
    # a refused conditional write is billed too, at the item's size before
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        ddb.put_item(TableName=TABLE, Item=sized("A", "1", 10),
                     ConditionExpression="attribute_not_exists(pk)")
    assert budget.write_consumed[(TABLE, "A")] == 2 + 3 + 3
    clock.now += 1  # A has 8 of its 10 units spent: a second later it takes 6 more
    # a transaction: each action twice, each on its own key
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": TABLE, "Item": sized("B", "1", 100)}},
        {"ConditionCheck": {"TableName": TABLE, "Key": key("A", "1"),
                            "ConditionExpression": "attribute_exists(pk)"}}])
    assert budget.write_consumed == {(TABLE, "A"): 8 + 6, (TABLE, "B"): 2}
    # reads: 4 KB units, eventually consistent half, a query's items counted together
    ddb.put_item(TableName=TABLE, Item=sized("C", "1", 3000))
    ddb.put_item(TableName=TABLE, Item=sized("C", "2", 3000))
    ddb.get_item(TableName=TABLE, Key=key("C", "1"), ConsistentRead=True)
    ddb.get_item(TableName=TABLE, Key=key("C", "2"))
    ddb.get_item(TableName=TABLE, Key=key("C", "none"), ConsistentRead=True)
    assert budget.read_consumed == {(TABLE, "C"): 1 + 0.5 + 1}
    ddb.query(TableName=TABLE, KeyConditionExpression="#pk = :pk",
              ExpressionAttributeNames={"#pk": "pk"}, ExpressionAttributeValues={":pk": s("C")},
              ConsistentRead=True)
    assert budget.read_consumed[(TABLE, "C")] == 2.5 + 2  # 6,000 bytes: two 4 KB units


def test_a_key_past_its_budget_is_refused_as_dynamodb_does_and_nothing_is_applied(world):
    ddb, budget, _ = world
    one_try = in_process_client_without_retries(ddb)
    for n in range(10):
        one_try.put_item(TableName=TABLE, Item=sized("A", str(n), 200))
    with pytest.raises(ClientError) as refused:
        one_try.put_item(TableName=TABLE, Item=sized("A", "late", 200))
    error = refused.value.response
    assert error["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "hot key" in error["Error"]["Message"]
    with budget.suspended():  # the test's own read, outside the budget
        assert not written(ddb, "A", "late")
    assert budget.write_consumed[(TABLE, "A")] == 10  # a refused request costs nothing
    assert budget.throttled == {"PutItem": 1} and budget.throttled_by_key == {"A": 1}


def test_each_key_refills_at_its_rate_never_past_one_second_of_it(world):
    ddb, budget, clock = world
    one_try = in_process_client_without_retries(ddb)
    for n in range(10):
        one_try.put_item(TableName=TABLE, Item=sized("A", str(n), 200))
    clock.now += 0.5  # half a second: 5 units
    for n in range(5):
        one_try.put_item(TableName=TABLE, Item=sized("A", f"half{n}", 200))
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        one_try.put_item(TableName=TABLE, Item=sized("A", "half5", 200))
    clock.now += 60  # a idle minute still refills one second's worth only
    assert budget.available(TABLE, "A") == (10, 30)
    for n in range(10):
        one_try.put_item(TableName=TABLE, Item=sized("A", f"full{n}", 200))
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        one_try.put_item(TableName=TABLE, Item=sized("A", "full10", 200))


def test_one_key_throttled_never_throttles_another(world):
    ddb, budget, _ = world
    one_try = in_process_client_without_retries(ddb)
    for n in range(10):
        one_try.put_item(TableName=TABLE, Item=sized("A", str(n), 200))
    with pytest.raises(ClientError):
        one_try.put_item(TableName=TABLE, Item=sized("A", "x", 200))
    for n in range(10):  # another key: a budget of its own
        one_try.put_item(TableName=TABLE, Item=sized("B", str(n), 200))
    create_table(ddb, "other")  # the same key in another table: its own partition too
    one_try.put_item(TableName="other", Item=sized("A", "0", 200))
    # reads have buckets of their own: the throttled key still reads
    assert budget.available(TABLE, "A")[1] == 30
    one_try.get_item(TableName=TABLE, Key=key("A", "0"), ConsistentRead=True)


def test_a_transaction_on_a_throttled_key_is_cancelled_with_a_throttling_reason(world):
    ddb, budget, _ = world
    for n in range(10):
        ddb.put_item(TableName=TABLE, Item=sized("A", str(n), 200))
    with pytest.raises(ClientError) as cancelled:
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": TABLE, "Item": sized("B", "1", 200)}},
            {"Update": {"TableName": TABLE, "Key": key("A", "0"),
                        "UpdateExpression": "SET q = :q",
                        "ExpressionAttributeValues": {":q": s("y")}}}])
    response = cancelled.value.response
    assert response["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in response["CancellationReasons"]] == ["None", "ThrottlingError"]
    assert "[None, ThrottlingError]" in response["Error"]["Message"]
    # not applied, not charged, and not retried by botocore (the caller decides)
    with budget.suspended():
        assert not written(ddb, "B", "1")
    assert (TABLE, "B") not in budget.write_consumed
    assert budget.sdk_retries == 0 and budget.throttled == {"TransactWriteItems": 1}


def test_a_batch_leaves_the_throttled_keys_unprocessed(world):
    ddb, budget, _ = world
    for n in range(10):
        ddb.put_item(TableName=TABLE, Item=sized("A", str(n), 200))
    answer = ddb.batch_write_item(RequestItems={TABLE: [
        {"PutRequest": {"Item": sized("A", "x", 200)}},
        {"PutRequest": {"Item": sized("B", "x", 200)}}]})
    assert answer["UnprocessedItems"] == {TABLE: [{"PutRequest": {"Item": sized("A", "x", 200)}}]}
    with budget.suspended():
        assert written(ddb, "B", "x") and not written(ddb, "A", "x")
    assert budget.write_consumed[(TABLE, "B")] == 1
    one_try = in_process_client_without_retries(ddb)
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):  # none admitted
        one_try.batch_write_item(RequestItems={TABLE: [
            {"PutRequest": {"Item": sized("A", "y", 200)}}]})
    # reads: the same, on the read buckets
    for _ in range(30):
        ddb.get_item(TableName=TABLE, Key=key("B", "x"), ConsistentRead=True)
    got = ddb.batch_get_item(RequestItems={TABLE: {"Keys": [key("A", "0"), key("B", "x")],
                                                   "ConsistentRead": True}})
    assert [i["sk"] for i in got["Responses"][TABLE]] == [s("0")]
    assert got["UnprocessedKeys"][TABLE]["Keys"] == [key("B", "x")]
    assert got["UnprocessedKeys"][TABLE]["ConsistentRead"] is True


def test_botocore_retries_a_throttled_call_with_backoff_and_the_retry_lands(world):
    ddb, budget, clock = world
    for n in range(10):
        ddb.put_item(TableName=TABLE, Item=sized("A", str(n), 200))

    def backoff_passes(request: Any, **_: Any) -> None:
        # the SDK slept before this attempt: the partition refilled meanwhile
        if b"attempt=1" not in bytes(str(request.headers.get("amz-sdk-request")), "ascii"):
            clock.now += 1

    ddb.meta.events.register_first("before-send.dynamodb.PutItem", backoff_passes)
    answer = ddb.put_item(TableName=TABLE, Item=sized("A", "late", 200))
    assert answer["ResponseMetadata"]["RetryAttempts"] == 1
    assert budget.throttled == {"PutItem": 1} and budget.sdk_retries == 1
    with budget.suspended():
        assert written(ddb, "A", "late")


def test_limits_are_checked_when_built():
    with pytest.raises(ValueError, match="write_units_per_s"):
        PartitionThroughput(write_units_per_s=0)
    with pytest.raises(ValueError, match="read_units_per_s"):
        PartitionThroughput(read_units_per_s=-3)
    with pytest.raises(ValueError, match="factor"):
        PartitionThroughput().scaled(0)
    assert PartitionThroughput(10, 30) == SCALED


def in_process_client_without_retries(ddb: Any) -> Any:
    """A client of the same emulator that sends each call once (a refusal surfaces)."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "dynamodb", region_name=ddb.meta.region_name,
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}))


def test_the_testing_kit_sandbox_serves_a_guarded_job_under_the_budget(monkeypatch):
    """GIVEN a guarded job in the testing kit's sandbox under a budget of 12 write units a
    second, and a run that spent them WHEN the next tick comes within the same second
    THEN its acquisition is cancelled for the throttle, jobguard backs off as for a
    throttle (seconds, not a conflict's milliseconds), and the tick runs once the
    partition refilled; when the partition stays spent for all eight tries, the tick
    fails to the sender with nothing half-written, and the sender's retry runs it."""
    from datetime import timedelta
    from types import SimpleNamespace

    from jobguard import JobConfig, guarded
    from jobguard import lease as lease_module
    from jobguard.errors import StoreError
    from jobguard.testing import Sandbox

    clock = Clock()
    budget = PartitionBudget(PartitionThroughput(write_units_per_s=12), clock=clock)
    waits: list[float] = []
    refill = {"on": True}

    def sleep(seconds: float) -> None:  # jobguard's backoff: the budget's time passes
        waits.append(seconds)
        if refill["on"]:
            clock.now += seconds

    monkeypatch.setattr(lease_module, "time", SimpleNamespace(sleep=sleep))
    with Sandbox.start(throughput=budget) as sandbox:
        assert sandbox.throughput is budget

        @guarded(JobConfig(name="capacity-demo", table_name=sandbox.table,
                           lease=timedelta(minutes=5)))
        def handler(event: Any, context: Any) -> str:
            return "done"

        job = sandbox.wire(handler)
        assert job.tick() == "done"
        # a run: acquisition and release, 12 units, all on the job's own partition key
        # (its lease, job row, trigger and run rows share it)
        assert budget.write_consumed == {(sandbox.table, "JOB#capacity-demo"): 12}
        assert waits == []
        # the next minute's tick within the same second: the partition is spent, and
        # the acquisition lands after a throttle's backoff (the first at least 0.05 s)
        sandbox.clock.advance(timedelta(minutes=1))
        assert job.tick() == "done"
        assert budget.throttled["TransactWriteItems"] >= 1
        assert waits and min(waits) >= 0.05, waits
        assert [r.decision.value for r in job.runs()] == ["ran", "ran"]
        # a partition that stays spent: eight tries, seven waits, then the error
        refill["on"], waits[:] = False, []
        budget.charge({(sandbox.table, "JOB#capacity-demo"): 12}, {})  # whatever was left
        sandbox.clock.advance(timedelta(minutes=1))
        with pytest.raises(StoreError, match="acquire"):
            job.tick()  # jobguard retried the cancelled acquisition, then gave up
        low, high = lease_module.THROTTLE_SPAN_S
        assert len(waits) == 7 and low <= sum(waits) <= high, waits
        assert [r.decision.value for r in job.runs()] == ["ran"] * 2  # nothing half-written
        refill["on"] = True  # the sender's retry, later, runs it
        assert job.tick() == "done"
        assert [r.decision.value for r in job.runs()] == ["ran"] * 3
