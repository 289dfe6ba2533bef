"""The benchmark's write-unit accounting (``bench/write_units.py``).

The arithmetic by table, without an emulator; then the meter on the in-process emulator,
metering a ``PutItem`` and an ``UpdateItem`` of known sizes on the jobguard table.
"""

from __future__ import annotations

import pytest

from bench.write_units import (
    Action,
    Index,
    TableShape,
    WriteUnitMeter,
    action_units,
    attribute_bytes,
    index_units,
    item_bytes,
    read_units,
    size_units,
    write_actions,
)

UNRESOLVED = Index("unresolved", ("unresolved_pk", "unresolved_sk"))


def s(text: str) -> dict[str, str]:
    return {"S": text}


def sized(nbytes: int, **extra: dict[str, str]) -> dict[str, dict[str, str]]:
    """An item of exactly ``nbytes`` (pk + sk + a padding attribute ``p``)."""
    base = {"pk": s("J"), "sk": s("X"), **extra}
    pad = nbytes - item_bytes(base) - 1
    assert pad >= 0
    return {**base, "p": s("x" * pad)}


# -- sizes -------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "nbytes"), [
    (s("abc"), 3),
    (s("é"), 2),  # UTF-8 bytes, not characters
    ({"N": "7"}, 2),
    ({"N": "1234"}, 3),
    ({"N": "-12.5"}, 3),
    ({"B": b"\x00\x01\x02"}, 3),
    ({"BOOL": False}, 1),
    ({"NULL": True}, 1),
    ({"SS": ["a", "bc"]}, 3),
    ({"M": {}}, 3),
    ({"L": []}, 3),
    ({"M": {"ab": s("xyz")}}, 3 + 2 + 3 + 1),  # overhead + name + value + element byte
    ({"L": [s("x"), {"N": "1"}]}, 3 + (1 + 1) + (2 + 1)),
])
def test_attribute_bytes(value: dict, nbytes: int) -> None:
    assert attribute_bytes(value) == nbytes


def test_item_bytes_counts_names_and_values() -> None:
    assert item_bytes({"pk": s("JOB#a"), "n": {"N": "10"}}) == 2 + 5 + 1 + 2
    assert item_bytes(None) == 0
    assert item_bytes(sized(1500)) == 1500


@pytest.mark.parametrize(("nbytes", "units"), [
    (0, 1), (1, 1), (1024, 1), (1025, 2), (2048, 2), (2049, 3), (400 * 1024, 400),
])
def test_size_units_round_up_to_a_kb_at_least_one(nbytes: int, units: int) -> None:
    assert size_units(nbytes) == units


# -- one write -------------------------------------------------------------------------------


def test_a_write_costs_the_larger_of_before_and_after() -> None:
    small, large = sized(100), sized(1500)
    assert action_units("put", None, small, transactional=False) == 1
    assert action_units("update", small, large, transactional=False) == 2
    assert action_units("update", large, small, transactional=False) == 2  # shrinking too
    assert action_units("delete", large, None, transactional=False) == 2
    assert action_units("delete", None, None, transactional=False) == 1  # nothing there


def test_transactional_writes_and_condition_checks_count_twice() -> None:
    small, large = sized(100), sized(1500)
    assert action_units("update", small, small, transactional=True) == 2
    assert action_units("put", None, large, transactional=True) == 4
    assert action_units("check", large, large, transactional=True) == 4
    assert action_units("check", None, None, transactional=True) == 2


def test_a_refused_write_is_charged_at_its_size_before_without_index_writes() -> None:
    before = sized(1500, unresolved_pk=s("U#j"), unresolved_sk=s("claimed#w"))
    bigger = sized(3000)
    assert action_units("update", before, bigger, transactional=False,
                        indexes=[UNRESOLVED], applied=False) == 2
    assert action_units("update", before, bigger, transactional=True,
                        indexes=[UNRESOLVED], applied=False) == 4
    assert action_units("put", None, bigger, transactional=False, applied=False) == 1


# -- index entries ------------------------------------------------------------------------


def test_index_entries_added_removed_and_rekeyed() -> None:
    plain = {"pk": s("I"), "sk": s("ITEM")}
    claimed = {**plain, "unresolved_pk": s("U#j#03"), "unresolved_sk": s("claimed#w")}
    failed = {**claimed, "unresolved_sk": s("failed#w")}
    assert index_units(None, plain, [UNRESOLVED]) == 0  # sparse: no entry
    assert index_units(None, claimed, [UNRESOLVED]) == 1  # added
    assert index_units(claimed, plain, [UNRESOLVED]) == 1  # removed
    assert index_units(claimed, None, [UNRESOLVED]) == 1  # item deleted
    assert index_units(claimed, failed, [UNRESOLVED]) == 2  # key change: delete + put
    assert index_units(claimed, {**claimed, "x": s("y")}, [UNRESOLVED]) == 0  # keys only
    assert index_units(None, claimed, []) == 0  # a table without indexes


def test_index_entry_rewritten_in_place_only_when_projected() -> None:
    every = Index("all", ("g",), "ALL")
    some = Index("some", ("g",), "INCLUDE", frozenset({"a"}))
    before = {"pk": s("1"), "g": s("k"), "a": s("1"), "b": s("1")}
    assert index_units(before, {**before, "b": s("2")}, [every]) == 1
    assert index_units(before, {**before, "b": s("2")}, [some]) == 0
    assert index_units(before, {**before, "a": s("2")}, [some]) == 1


def test_a_claim_in_a_transaction_pays_double_size_plus_the_index_entry() -> None:
    item = {"pk": s("I"), "sk": s("ITEM"), "unresolved_pk": s("U"), "unresolved_sk": s("c")}
    assert action_units("put", None, item, transactional=True, indexes=[UNRESOLVED]) == 3
    done = {"pk": s("I"), "sk": s("ITEM"), "state": s("completed")}
    assert action_units("update", item, done, transactional=True, indexes=[UNRESOLVED]) == 3


# -- what a request writes ------------------------------------------------------------------


def test_write_actions_of_each_operation() -> None:
    key = {"pk": s("J"), "sk": s("LEASE")}
    assert write_actions("UpdateItem", {"TableName": "t", "Key": key}) == [
        Action("t", "update", key=key)]
    assert write_actions("PutItem", {"TableName": "t", "Item": {**key, "a": s("1")}})[0].kind \
        == "put"
    assert write_actions("DeleteItem", {"TableName": "t", "Key": key})[0].kind == "delete"
    assert write_actions("GetItem", {"TableName": "t", "Key": key}) == []
    transaction = write_actions("TransactWriteItems", {"TransactItems": [
        {"ConditionCheck": {"TableName": "t", "Key": key, "ConditionExpression": "x"}},
        {"Put": {"TableName": "t", "Item": {**key, "sk": s("RUN#1")}}},
        {"Update": {"TableName": "u", "Key": key, "UpdateExpression": "SET a = :a"}},
        {"Delete": {"TableName": "t", "Key": key}},
    ]})
    assert [(a.table, a.kind, a.transactional) for a in transaction] == [
        ("t", "check", True), ("t", "put", True), ("u", "update", True), ("t", "delete", True)]
    batch = write_actions("BatchWriteItem", {"RequestItems": {"t": [
        {"PutRequest": {"Item": key}}, {"DeleteRequest": {"Key": key}}]}})
    assert [(a.kind, a.transactional) for a in batch] == [("put", False), ("delete", False)]


def test_a_put_takes_its_key_from_the_item() -> None:
    shape = TableShape.from_description({
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                      {"AttributeName": "sk", "KeyType": "RANGE"}],
        "GlobalSecondaryIndexes": [{
            "IndexName": "unresolved",
            "KeySchema": [{"AttributeName": "unresolved_pk", "KeyType": "HASH"},
                          {"AttributeName": "unresolved_sk", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "KEYS_ONLY"}}],
    })
    assert shape.indexes == (UNRESOLVED,)
    put = Action("t", "put", item={"pk": s("J"), "sk": s("RUN#1"), "a": s("x")})
    assert put.key_in(shape) == {"pk": s("J"), "sk": s("RUN#1")}


# -- reads -----------------------------------------------------------------------------------


def test_read_units_per_item_of_a_consistent_read_half_for_an_eventual_one() -> None:
    key = {"pk": s("J"), "sk": s("FENCE")}
    get = {"TableName": "t", "Key": key, "ConsistentRead": True}
    assert read_units("GetItem", get, {"Item": sized(5000)}) == {"t": 2.0}  # 4 KB units
    assert read_units("GetItem", get, {}) == {"t": 1.0}  # no item: still one
    assert read_units("GetItem", {**get, "ConsistentRead": False}, {"Item": sized(10)}) == {
        "t": 0.5}
    keys = [{"pk": s(f"I{i}"), "sk": s("ITEM")} for i in range(5)]
    batch = {"RequestItems": {"t": {"Keys": keys, "ConsistentRead": True}}}
    found = {"Responses": {"t": [sized(100), sized(9000)]}}
    assert read_units("BatchGetItem", batch, found) == {"t": 1 + 3 + 3}  # 3 keys not there
    left = {**found, "UnprocessedKeys": {"t": {"Keys": keys[:1]}}}
    assert read_units("BatchGetItem", batch, left) == {"t": 1 + 3 + 2}  # not read: not paid
    query = {"TableName": "t", "ConsistentRead": True}
    assert read_units("Query", query, {"Items": [sized(3000), sized(3000)]}) == {"t": 2.0}
    assert read_units("Query", {"TableName": "t"}, {"Items": []}) == {"t": 0.5}
    assert read_units("PutItem", {"TableName": "t"}, {}) == {}


# -- on the emulator ------------------------------------------------------------------------


def test_meter_on_the_in_process_emulator() -> None:
    from jobguard.dynamodb import create_table
    from jobguard.local.emulator import in_process

    meter = WriteUnitMeter()
    meter.install()
    try:
        with in_process() as aws:
            ddb = aws.client("dynamodb")  # built after install: metered
            create_table(ddb, "wcu")
            key = {"pk": s("JOB#j"), "sk": s("LEASE")}
            with meter.metering(aws):
                # 1,500 bytes: 2 units
                ddb.put_item(TableName="wcu", Item=sized(1500, pk=s("JOB#j"), sk=s("LEASE")))
                # grows to 2,500 bytes (3 units) and enters the sparse index (+1)
                ddb.update_item(
                    TableName="wcu", Key=key,
                    UpdateExpression="SET q = :q, unresolved_pk = :u, unresolved_sk = :v",
                    ExpressionAttributeValues={":q": s("y" * 958), ":u": s("U#j#00"),
                                               ":v": s("claimed#w")})
            assert item_bytes(ddb.get_item(TableName="wcu", Key=key)["Item"]) == 2500
            assert meter.operations() == {"PutItem.put LEASE": 2, "UpdateItem.update LEASE": 4}

            # refused: charged at its size before (2,500 bytes)
            with meter.metering(aws), pytest.raises(
                    ddb.exceptions.ConditionalCheckFailedException):
                ddb.delete_item(TableName="wcu", Key=key,
                                ConditionExpression="attribute_not_exists(pk)")
            assert meter.operations() == {"DeleteItem.delete LEASE (refused)": 3}

            run = {"pk": s("JOB#j"), "sk": s("RUN#1")}
            check = {"ConditionCheck": {"TableName": "wcu", "Key": key,
                                        "ConditionExpression": "attribute_exists(pk)"}}
            with meter.metering(aws):  # 2 x 3 (the 2,500-byte check) + 2 x 1 (the put)
                ddb.transact_write_items(TransactItems=[
                    check, {"Put": {"TableName": "wcu", "Item": run}}])
            assert meter.operations() == {"TransactWriteItems.check LEASE": 6,
                                          "TransactWriteItems.put RUN": 2}
            with meter.metering(aws), pytest.raises(
                    ddb.exceptions.TransactionCanceledException):  # cancelled: still charged
                ddb.transact_write_items(TransactItems=[check, {"Put": {
                    "TableName": "wcu", "Item": run,
                    "ConditionExpression": "attribute_not_exists(pk)"}}])
            assert meter.operations() == {"TransactWriteItems.check LEASE (refused)": 6,
                                          "TransactWriteItems.put RUN (refused)": 2}

            with meter.metering(aws):  # a consistent read of the 2,500-byte item: 1 unit
                ddb.get_item(TableName="wcu", Key=key, ConsistentRead=True)
            assert meter.read_operations() == {"GetItem LEASE": 1.0}
            assert meter.operations() == {}

            unmetered = meter.side_client(aws)
            with meter.metering(aws):
                unmetered.delete_item(TableName="wcu", Key=key)
            assert meter.total() == 0
    finally:
        meter.uninstall()
