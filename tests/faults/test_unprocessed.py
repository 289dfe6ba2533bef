"""Break-cost review of issue 12: BatchWriteItem / BatchGetItem answers with
unprocessed entries (DynamoDB returns them under throttling; moto never does, so a
botocore hook takes entries out of the request and hands them back as unprocessed)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobguard import ItemState, JobConfig, WorkId
from jobguard.dynamodb_items import DynamoItemStore
from tests.scenarios._items import CrmSync, NotesTable, contacts

JOB = "crm-sync"


def _config(aws: Any, **overrides: Any) -> JobConfig:
    options: dict[str, Any] = {"name": JOB, "table_name": aws.table, "batch_size": 30,
                               "lease": timedelta(seconds=60)}
    options.update(overrides)
    return JobConfig(**options)


class Unprocess:
    """Drop the last ``n`` puts of the first ``calls`` BatchWriteItem requests and
    answer them as UnprocessedItems."""

    def __init__(self, n: int, calls: int = 1) -> None:
        self.n, self.calls, self.held = n, calls, None
        self.seen = 0

    def params(self, params: dict[str, Any], **_: Any) -> None:
        self.held = None
        if self.seen >= self.calls:
            return
        self.seen += 1
        (table, requests), = params["RequestItems"].items()
        keep, self.held = requests[:-self.n], (table, requests[-self.n:])
        params["RequestItems"] = {table: keep}

    def after(self, parsed: dict[str, Any], **_: Any) -> None:
        if self.held is not None:
            table, dropped = self.held
            parsed.setdefault("UnprocessedItems", {})[table] = dropped


def test_unprocessed_completions_are_sent_again_before_the_page_is_dropped(aws, clock):
    """GIVEN a page of 25 whose first BatchWriteItem comes back with 5 puts unprocessed
    WHEN the run finishes
    THEN all 25 completions are in the ledger (ONCE/END), the claim is dropped, the
    checkpoint past the page."""
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(_config(aws, batch_size=25), contacts(25), notes, store=aws.store,
                  clock=clock)
    hook = Unprocess(5)
    aws.ddb.meta.events.register("provide-client-params.dynamodb.BatchWriteItem", hook.params)
    aws.ddb.meta.events.register("after-call.dynamodb.BatchWriteItem", hook.after)
    try:
        report = job.handler()({"job": JOB, "manual": True, "trigger_id": "t"}, None)
    finally:
        aws.ddb.meta.events.unregister("provide-client-params.dynamodb.BatchWriteItem",
                                       hook.params)
        aws.ddb.meta.events.unregister("after-call.dynamodb.BatchWriteItem", hook.after)
    assert hook.seen == 1
    assert report["completed"] == 25
    items = DynamoItemStore(aws.table, client=aws.ddb)
    ids = [str(WorkId(c["id"], "create-note")) for c in contacts(25)]
    rows = items.get_many(JOB, ids)
    assert {r.state for r in rows.values()} == {ItemState.COMPLETED} and len(rows) == 25
    assert items.read_row(JOB).claim is None and items.read_checkpoint(JOB).cursor == "25"


def test_completions_the_table_never_takes_are_not_counted_completed(aws, clock, metrics):
    """GIVEN a page of 25 whose every BatchWriteItem answer hands the last 5 puts back
    unprocessed WHEN the run gives up on them THEN ItemsCompleted counts the 20 the table
    took (not one per write, not the 5 it never took), and those 5 are not completed in
    the ledger."""
    notes = NotesTable.create(aws.ddb)
    job = CrmSync(_config(aws, batch_size=25), contacts(25), notes, store=aws.store,
                  clock=clock)
    hook = Unprocess(5, calls=10_000)
    aws.ddb.meta.events.register("provide-client-params.dynamodb.BatchWriteItem", hook.params)
    aws.ddb.meta.events.register("after-call.dynamodb.BatchWriteItem", hook.after)
    metrics()
    try:
        job.handler()({"job": JOB, "manual": True, "trigger_id": "t"}, None)
    except Exception:  # noqa: BLE001 - how the run ends is not what this checks
        pass
    finally:
        aws.ddb.meta.events.unregister("provide-client-params.dynamodb.BatchWriteItem",
                                       hook.params)
        aws.ddb.meta.events.unregister("after-call.dynamodb.BatchWriteItem", hook.after)
    assert metrics().get("ItemsCompleted") == 20
    rows = DynamoItemStore(aws.table, client=aws.ddb).get_many(
        JOB, [str(WorkId(c["id"], "create-note")) for c in contacts(25)])
    assert sum(r.state is ItemState.COMPLETED for r in rows.values()) == 20


def _write_facts_answered(aws: Any, code: str) -> tuple[int, Any]:
    """Write one completion fact while DynamoDB answers every BatchWriteItem with the
    error ``code``: the requests sent and the FactsNotWrittenError raised."""
    from botocore.exceptions import ClientError

    from jobguard._item_writes import FactsNotWrittenError
    from jobguard.workitems import Completion

    sent: list[int] = []

    def answer(**_: Any) -> None:
        sent.append(1)
        raise ClientError({"Error": {"Code": code, "Message": "refused"},
                           "ResponseMetadata": {"HTTPStatusCode": 400}}, "BatchWriteItem")

    store = DynamoItemStore(aws.table, client=aws.ddb)
    facts = [Completion("contact-1:create-note", "note-1", "run-1", 1)]
    aws.ddb.meta.events.register("before-call.dynamodb.BatchWriteItem", answer)
    try:
        store.write_facts(JOB, facts, now_ms=1_000, ttl_s=2_000_000_000)
    except FactsNotWrittenError as exc:
        return len(sent), exc
    finally:
        aws.ddb.meta.events.unregister("before-call.dynamodb.BatchWriteItem", answer)
    raise AssertionError(f"a write of completion facts answered {code} was not raised")


def test_a_refused_completion_write_is_not_tried_again(aws):
    """GIVEN the table refuses a write of completion facts for good (a validation error,
    not a throttle or a 5xx) WHEN the facts are written THEN the error is raised after
    that one request, naming the facts not written: sending it again cannot succeed,
    and only transient errors are retried."""
    sent, refused = _write_facts_answered(aws, "ValidationException")
    assert sent == 1
    assert refused.work_ids == ["contact-1:create-note"] and "ValidationException" in str(
        refused)


def test_a_write_throttled_to_the_end_of_its_retries_says_the_throttle(aws, monkeypatch):
    """GIVEN every write of completion facts is throttled WHEN the facts are written
    THEN the store tries 12 times (11 waits between), then raises naming the facts and
    the last error DynamoDB gave (what the run's record and the operator read), chained
    to it; no wait after the last try."""
    from botocore.exceptions import ClientError

    from jobguard import _item_writes

    waits: list[int] = []
    monkeypatch.setattr(_item_writes, "_backoff", waits.append)
    sent, refused = _write_facts_answered(aws, "ProvisionedThroughputExceededException")
    assert sent == 12 and waits == list(range(11))
    assert refused.work_ids == ["contact-1:create-note"]
    assert "ProvisionedThroughputExceededException" in str(refused)
    assert isinstance(refused.__cause__, ClientError)
