"""crm-sync: one note per changed CRM contact, as a BatchJob.

The CRM's change feed is read page by page after the job's checkpoint; each change
becomes one note in the notes table, keyed by its work id (the idempotency key), so a
note can never be created twice. The stack sets the tables' names.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from handlers.jobs import CRM_SYNC, deployed
from jobguard import BatchJob, ClaimedItem, ItemRecord, Page, WorkId, aws_client
from jobguard.registry import register

if TYPE_CHECKING:
    from jobguard.destinations import DynamoDBDestination

CONTACTS_TABLE = "CRM_CONTACTS_TABLE"
NOTES_TABLE = "CRM_NOTES_TABLE"
FEED = "changes"


class CrmSync(BatchJob[dict[str, Any]]):
    """Changed contacts (a DynamoDB change feed, ``pk = "changes"``, ``seq`` ascending)
    to notes (a DynamoDB table keyed by work id)."""

    def __init__(self, **guard_options: Any) -> None:
        super().__init__(deployed(CRM_SYNC).config(), **guard_options)
        self._clients: dict[str, Any] = {}

    def select(self, cursor: str | None, limit: int) -> Page[dict[str, Any]]:
        query: dict[str, Any] = {
            "TableName": os.environ[CONTACTS_TABLE], "Limit": limit, "ConsistentRead": True,
            "KeyConditionExpression": "pk = :feed",
            "ExpressionAttributeValues": {":feed": {"S": FEED}},
        }
        if cursor:
            query["KeyConditionExpression"] += " AND seq > :after"
            query["ExpressionAttributeValues"][":after"] = {"S": cursor}
        response = self._ddb().query(**query)
        rows = [{"seq": i["seq"]["S"], "contact_id": i["contact_id"]["S"],
                 "change": i["change"]["S"]} for i in response.get("Items", [])]
        return Page(rows, rows[-1]["seq"] if rows else cursor)

    def work_id(self, record: dict[str, Any]) -> WorkId:
        return WorkId(f"{record['contact_id']}@{record['seq']}", "create-note")

    def cursor_of(self, record: dict[str, Any]) -> str:
        return str(record["seq"])

    def process(self, record: dict[str, Any], item: ClaimedItem) -> str:
        return self._notes().put(item.key, {"contact_id": record["contact_id"],
                                            "text": record["change"]})

    def reconcile(self, record: dict[str, Any] | None, item: ItemRecord) -> str | None:
        return self._notes().reconcile(item.work_id)

    def _ddb(self) -> Any:
        if "ddb" not in self._clients:  # built at first use, then kept for the container
            self._clients["ddb"] = aws_client("dynamodb")
        return self._clients["ddb"]

    def _notes(self) -> DynamoDBDestination:
        from jobguard.destinations import DynamoDBDestination  # botocore: at first use

        return DynamoDBDestination(os.environ[NOTES_TABLE], client=self._ddb())


crm_sync = register(CrmSync())
lambda_handler = crm_sync.handler()
