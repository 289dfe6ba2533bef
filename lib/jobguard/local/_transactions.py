"""DynamoDB: moto's ``TransactWriteItems`` backing up only the items it names.

Its one reason to change: moto's transaction internals (``DynamoDBBackend``'s method,
its ``copy`` of each table, its items and stream shards). While any emulator runs, the
patch below is applied (reference-counted), so a transaction costs the same on a table
of 100k items as on an empty one.
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

# one logger for the whole emulator, whichever part of it logs
_LOG = logging.getLogger("jobguard.local.emulator")

# moto's DynamoDBBackend.transact_write_items starts with copy.deepcopy(table) of every
# table the transaction names, to roll back on failure: O(table size) per transaction,
# whatever the transaction's size. While an emulator runs, that method is wrapped so the
# backup covers only the items the transaction names (their keys are in the request):
#
#   1. before: copy each named item, or note that it is absent (moto's own keying:
#      hash/range attribute values from a Put's Item or from the Key of the others);
#   2. run moto's method unchanged, except that its deepcopy of a Table returns the
#      live table (its "rollback" then assigns each table to itself: a no-op);
#   3. on any exception: put the copies back, delete the items that were absent, trim
#      the stream records the transaction appended, and re-raise.
#
# So validation, conditions and CancellationReasons (with ALL_OLD items) stay moto's.
# Transactions run under the DynamoDB lock, so nothing interleaves with steps 1-3
# (with serialize_dynamodb=False nothing is atomic anyway). If moto's internals are
# not what this relies on, the patch is not applied, or a call falls back to moto's
# original method, which is slow but correct.

# Guards the reference count and the originals below (each patch has its own guard).
_PATCH_GUARD = threading.Lock()
_transactions_depth = 0
_original_transact: Any = None
_original_models_copy: Any = None
_eliding_table_copy = threading.local()


class _ItemBackup(NamedTuple):
    """One item a transaction names, as it was before the transaction."""

    table_name: str
    hash_key: Any  # moto DynamoType
    range_key: Any  # moto DynamoType, or None for a table without a sort key
    item: Any  # deep copy of the moto Item, or None when it did not exist
    bucket_existed: bool  # tables with a sort key: whether items[hash_key] existed


class _StreamBackup(NamedTuple):
    """A touched table's stream shard and how many records it held before."""

    table_name: str
    shard: Any
    length: int


class _TableCopyElider:
    """Stands in for the ``copy`` module inside ``moto.dynamodb.models`` while patched.

    ``deepcopy`` of a Table returns the table itself, but only inside a patched
    transaction on this thread; everything else goes to the real ``copy`` module.
    """

    def __init__(self, table_type: type) -> None:
        self._table_type = table_type

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        if getattr(_eliding_table_copy, "active", False) and isinstance(value, self._table_type):
            return value
        return copy.deepcopy(value, memo)


def _snapshot_touched_items(
    backend: Any, transact_items: Sequence[Mapping[str, Any]], dynamo_type: type
) -> tuple[list[_ItemBackup], list[_StreamBackup]] | None:
    """Copies of the items a transaction names, or None if their keys cannot be told.

    Tables that do not exist are skipped: moto cancels any operation on them.
    """
    items: dict[tuple[str, Any, Any], _ItemBackup] = {}
    streams: dict[str, _StreamBackup] = {}
    try:
        for entry in transact_items:
            for op_type, op in entry.items():  # moto refuses entries with two ops
                try:
                    table = backend.get_table(op["TableName"])
                except Exception:  # moto's ResourceNotFound: nothing to back up
                    continue
                source = op["Item"] if op_type == "Put" else op["Key"]
                hash_key = dynamo_type(source[table.hash_key_attr])
                range_attr = table.range_key_attr
                range_key = dynamo_type(source[range_attr]) if range_attr is not None else None
                bucket = table.items.get(hash_key)
                current = bucket if range_key is None or bucket is None else bucket.get(range_key)
                key = (table.name, hash_key, range_key)
                if key not in items:
                    items[key] = _ItemBackup(
                        table.name, hash_key, range_key, copy.deepcopy(current), bucket is not None
                    )
                shard = table.stream_shard
                if shard is not None and table.name not in streams:
                    streams[table.name] = _StreamBackup(table.name, shard, len(shard.items))
    except Exception:  # a malformed request, or moto's internals changed
        _LOG.debug("transaction keys unclear: using moto's full-table backup", exc_info=True)
        return None
    return list(items.values()), list(streams.values())


def _restore_touched_items(
    backend: Any, items: Sequence[_ItemBackup], streams: Sequence[_StreamBackup]
) -> None:
    """Undo whatever a failed transaction did to the items it named."""
    for backup in items:
        table = backend.tables.get(backup.table_name)
        if table is None:
            continue
        if backup.range_key is None:
            if backup.item is None:
                table.items.pop(backup.hash_key, None)
            else:
                table.items[backup.hash_key] = backup.item
            continue
        bucket = table.items.get(backup.hash_key)
        if backup.item is not None:
            table.items.setdefault(backup.hash_key, {})[backup.range_key] = backup.item
        elif bucket is not None:
            bucket.pop(backup.range_key, None)
            if not bucket and not backup.bucket_existed:
                del table.items[backup.hash_key]
    for stream in streams:
        table = backend.tables.get(stream.table_name)
        if table is not None and table.stream_shard is stream.shard:
            del stream.shard.items[stream.length :]


def _with_item_level_rollback(original: Any, dynamo_type: type) -> Any:
    """moto's ``transact_write_items``, backing up only the items it names."""

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        snapshot = _snapshot_touched_items(self, transact_items, dynamo_type)
        if snapshot is None:
            original(self, transact_items)
            return
        _eliding_table_copy.active = True
        try:
            original(self, transact_items)
        except BaseException:
            _restore_touched_items(self, *snapshot)
            raise
        finally:
            _eliding_table_copy.active = False

    return transact_write_items


def _patch_transactions() -> None:
    """Make moto's transactions back up only the items they name (reference-counted)."""
    global _transactions_depth, _original_transact, _original_models_copy
    with _PATCH_GUARD:
        _transactions_depth += 1
        if _transactions_depth > 1:
            return
        try:
            from moto.dynamodb import models
            from moto.dynamodb.models.dynamo_type import DynamoType
            from moto.dynamodb.models.table import Table

            backend = models.DynamoDBBackend
            original = backend.transact_write_items
        except (ImportError, AttributeError):
            _LOG.warning("moto internals changed: transactions keep their full-table backup")
            return
        module_globals = vars(models)  # where moto's method looks up ``copy``
        if module_globals.get("copy") is not copy:
            _LOG.warning("moto internals changed: transactions keep their full-table backup")
            return
        _original_transact = original
        _original_models_copy = module_globals["copy"]
        module_globals["copy"] = _TableCopyElider(Table)
        backend.transact_write_items = (  # type: ignore[method-assign]
            _with_item_level_rollback(original, DynamoType)
        )


def _unpatch_transactions() -> None:
    global _transactions_depth, _original_transact, _original_models_copy
    with _PATCH_GUARD:
        _transactions_depth -= 1
        if _transactions_depth > 0 or _original_transact is None:
            return
        from moto.dynamodb import models

        models.DynamoDBBackend.transact_write_items = (  # type: ignore[method-assign]
            _original_transact
        )
        vars(models)["copy"] = _original_models_copy
        _original_transact = None
        _original_models_copy = None
