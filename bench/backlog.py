"""A backlog longer than a Lambda, drained by a chain (issue 30, part 1; ``make bench``).

10,000 source records, a ``BatchJob`` with pages of 100 and invocations whose time is
enough for 1,000 destination calls (each spends 1 s of a Lambda clock that starts at
1,000 s + the 10 s time margin): one tick starts the job, each run that stops for time
hands it to a continuation (``max_chain`` 20), and the continuation port here delivers
each link as soon as it is sent, as Lambda's asynchronous invoke does. On the in-process
emulator (moto, DynamoDB requests serialized); the destination is an in-memory map keyed
by work id (an idempotency key), which counts every call, so the figures are the
library's own.

``backlog_10k_runs``
    Runs in the chain that drained the 10,000 records: 10 of 1,000, then the 11th finds
    the source exhausted (a run out of time cannot know that nothing is left).
``backlog_10k_wall_s``
    Wall time from the tick to the last link's end (emulator included).

Beside them, checked (a bench that drains wrongly fails, it does not report): every
record reached the destination exactly once, every work item is completed, each link
names the one before it, and the lease is free at the end.

    PYTHONPATH=lib:. .venv/bin/python -m bench.backlog
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from jobguard import BatchJob, ClaimedItem, ItemRecord, JobConfig, Page, WorkId

__all__ = ["measure"]

JOB = "backlog"
RECORDS = 10_000
PER_RUN = 1_000
MARGIN_MS = 10_000


class Invocation:
    """A Lambda context with time for ``calls`` destination calls above the margin."""

    def __init__(self, calls: int) -> None:
        self.remaining_ms = MARGIN_MS + calls * 1_000 - 1
        self.aws_request_id = f"req-{id(self)}"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class Backlog(BatchJob[dict[str, Any]]):
    def __init__(self, config: JobConfig, **options: Any) -> None:
        super().__init__(config, **options)
        self.source = [{"id": f"r{i:05d}"} for i in range(RECORDS)]
        self.delivered: dict[str, int] = {}
        self.context: Invocation | None = None

    def select(self, cursor: str | None, limit: int) -> Page[dict[str, Any]]:
        start = int(cursor or 0)
        rows = self.source[start:start + limit]
        return Page(rows, str(start + len(rows)))

    def work_id(self, record: dict[str, Any]) -> WorkId:
        return WorkId(record["id"], "export")

    def process(self, record: dict[str, Any], item: ClaimedItem) -> str:
        assert self.context is not None
        self.context.remaining_ms -= 1_000
        self.delivered[item.key] = self.delivered.get(item.key, 0) + 1
        return item.key

    def reconcile(self, record: dict[str, Any] | None, item: ItemRecord) -> str | None:
        return item.work_id if item.work_id in self.delivered else None


class Port:
    """The continuation invoke, delivered at once (in order)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def send(self, event: dict[str, Any]) -> None:
        self.events.append(dict(event))


def measure() -> dict[str, Any]:
    """The two figures (the runs' log lines and metrics, on stdout in Lambda, dropped)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return _measure()


def _measure() -> dict[str, Any]:
    from jobguard.dynamodb import DynamoJobStore
    from jobguard.dynamodb_items import DynamoItemStore
    from jobguard.records import Decision
    from jobguard.testing import Sandbox

    with Sandbox.start(set_table_env=False) as sandbox:
        ddb = sandbox.client("dynamodb")
        store = DynamoJobStore(sandbox.table, client=ddb)
        port = Port()
        config = JobConfig(name=JOB, table_name=sandbox.table, batch_size=100,
                           lease=timedelta(minutes=2), max_chain=20)
        job = Backlog(config, store=store, continuation=port)
        handler = job.handler()
        tick = {"job": JOB, "scheduled_at": datetime.now(UTC).replace(
            microsecond=0).isoformat().replace("+00:00", "Z")}
        started = time.perf_counter()
        job.context = Invocation(PER_RUN)
        handler(tick, job.context)
        while port.events:
            job.context = Invocation(PER_RUN)
            handler(port.events.pop(0), job.context)
        wall_s = time.perf_counter() - started
        runs = sorted((r for r in store.list_runs(JOB, limit=100)
                       if r.decision is Decision.RAN), key=lambda r: r.fence or 0)
        keys = [str(WorkId(f"r{i:05d}", "export")) for i in range(RECORDS)]
        items = DynamoItemStore(sandbox.table, client=ddb)
        states = {r.state.value for r in items.get_many(JOB, keys).values()}
        assert sorted(job.delivered) == sorted(keys), "a record never reached the destination"
        assert set(job.delivered.values()) == {1}, "a record reached it twice"
        assert states == {"completed"}, states
        assert [r.extra.get("continues") for r in runs[1:]] == [r.run_id for r in runs[:-1]]
        assert store.read_lease(JOB).run_id is None
    return {"backlog_10k_runs": len(runs), "backlog_10k_wall_s": round(wall_s, 1)}


if __name__ == "__main__":
    print(json.dumps(measure()))
