"""A source of records and a destination that would show a duplicate, for item tests."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobguard import BatchJob, ClaimedItem, ItemRecord, JobConfig, Page, WorkId


def contacts(n: int) -> list[dict[str, Any]]:
    return [{"id": f"contact-{i:05d}", "change": f"email changed #{i}"} for i in range(n)]


@dataclass
class NotesTable:
    """A destination table of notes keyed by work id (its idempotency key), plus a
    log of every call that reached it, so a test can count effects."""

    ddb: Any
    name: str
    calls: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def create(cls, ddb: Any) -> NotesTable:
        from jobguard.destinations import DynamoDBDestination

        return cls(ddb, DynamoDBDestination.create_table(ddb, f"notes-{uuid.uuid4().hex[:8]}"))

    def put(self, work_id: str, text: str) -> str:
        """Create the note once per work id; a repeat returns the existing note id."""
        with self.lock:
            self.calls.append(work_id)
        note_id = uuid.uuid4().hex
        try:
            self.ddb.put_item(
                TableName=self.name,
                Item={"work_id": {"S": work_id}, "note_id": {"S": note_id},
                      "text": {"S": text}},
                ConditionExpression="attribute_not_exists(work_id)",
            )
        except self.ddb.exceptions.ConditionalCheckFailedException:
            existing = self.find(work_id)
            assert existing is not None
            return existing
        return note_id

    def find(self, work_id: str) -> str | None:
        item = self.ddb.get_item(TableName=self.name, Key={"work_id": {"S": work_id}},
                                 ConsistentRead=True).get("Item")
        return item["note_id"]["S"] if item else None

    def all(self) -> dict[str, str]:
        items = self.ddb.scan(TableName=self.name, ConsistentRead=True)["Items"]
        return {i["work_id"]["S"]: i["note_id"]["S"] for i in items}


class CrmSync(BatchJob[dict]):
    """The crm-sync shape: one note per changed contact."""

    def __init__(self, config: JobConfig, source: list[dict[str, Any]], notes: NotesTable,
                 *, before_call: Callable[[ClaimedItem], None] | None = None,
                 **guard_options: Any) -> None:
        super().__init__(config, **guard_options)
        self.source = source
        self.notes = notes
        self.before_call = before_call
        self.processed: list[str] = []

    def select(self, cursor: str | None, limit: int) -> Page[dict]:
        start = 0 if cursor is None else int(cursor)
        rows = self.source[start:start + limit]
        return Page(rows, str(start + len(rows)))

    def work_id(self, record: dict) -> WorkId:
        return WorkId(record["id"], "create-note")

    def process(self, record: dict, item: ClaimedItem) -> str:
        if self.before_call is not None:
            self.before_call(item)
        self.processed.append(item.key)
        return self.notes.put(item.key, record["change"])

    def reconcile(self, record: dict | None, item: ItemRecord) -> str | None:
        return self.notes.find(item.work_id)
