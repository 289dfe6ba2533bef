"""What a load runs on: the crm-sync shaped job and the emulator's tables and queues.

Its one reason to change: the job under load (:class:`NotesJob`: one note per changed
contact in a :class:`~jobguard.destinations.DynamoDBDestination`) and the world it runs in
(:class:`World`: the jobguard table, the notes table, production client settings).
:mod:`jobguard.local.load` runs the load on it; :mod:`jobguard.local._load_checks`
checks what it left.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..batch import BatchJob, ClaimedItem, Page
from ..config import JobConfig
from ..destinations import DynamoDBDestination
from ..workitems import ItemRecord, WorkId

__all__ = ["NotesJob", "World", "contacts"]


def contacts(n: int, prefix: str = "contact") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}-{i:05d}", "change": f"email changed #{i}"} for i in range(n)]


class NotesJob(BatchJob[dict[str, Any]]):
    """The crm-sync shape: one note per changed contact, cursor = index in the source."""

    def __init__(self, config: JobConfig, source: list[dict[str, Any]],
                 notes: DynamoDBDestination, **guard_options: Any) -> None:
        super().__init__(config, **guard_options)
        self.source = source
        self.notes = notes

    def select(self, cursor: str | None, limit: int) -> Page[dict[str, Any]]:
        start = 0 if cursor is None else int(cursor)
        rows = self.source[start:start + limit]
        return Page(rows, f"{start + len(rows):06d}")

    def work_id(self, record: dict[str, Any]) -> WorkId:
        return WorkId(record["id"], "create-note")

    def process(self, record: dict[str, Any], item: ClaimedItem) -> str:
        return self.notes.put(item.key, {"text": record["change"]})

    def reconcile(self, record: dict[str, Any] | None, item: ItemRecord) -> str | None:
        return self.notes.reconcile(item.work_id)


@dataclass
class World:
    """One emulator's table, notes table and clients (production client settings)."""

    ddb: Any
    sqs: Any
    table: str
    notes_table: str

    @classmethod
    def create(cls) -> World:
        """Tables in the running emulator (inside :func:`~jobguard.local.emulator.in_process`)."""
        import botocore.session

        from .._clients import config
        from ..dynamodb import create_table

        session = botocore.session.get_session()
        ddb: Any = session.create_client("dynamodb", config=config())
        sqs: Any = session.create_client("sqs", config=config())
        table = f"jobguard-{uuid.uuid4().hex[:8]}"
        create_table(ddb, table)
        from ..destinations import DynamoDBDestination

        notes = DynamoDBDestination.create_table(ddb, f"notes-{uuid.uuid4().hex[:8]}")
        return cls(ddb, sqs, table, notes)

    def fifo_queue(self, job: str) -> str:
        url: str = self.sqs.create_queue(
            QueueName=f"{job}-{uuid.uuid4().hex[:6]}.fifo",
            Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"})["QueueUrl"]
        return url

    def notes(self) -> dict[str, str]:
        """work id -> destination id, as stored."""
        found: dict[str, str] = {}
        kwargs: dict[str, Any] = {"TableName": self.notes_table, "ConsistentRead": True}
        while True:
            page = self.ddb.scan(**kwargs)
            for item in page["Items"]:
                found[item["work_id"]["S"]] = item["destination_id"]["S"]
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
