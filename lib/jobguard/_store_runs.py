"""Run records: written (put_run), and read back (a job's run log, the runs of a time
range, one run).

Changes when the run log is written or read differently: the put's conditions, paging,
how a damaged row is named instead of raised. The record's fields are
:mod:`jobguard.records`' and its row reader :mod:`jobguard._run_rows`'.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ._dynamo import code as _code
from ._run_rows import read_run_row
from ._store_table import StoreTable
from .callsites import RETRY, SURFACE, Path, call_site
from .errors import DamagedRowError, StoreError
from .ids import run_id_bounds
from .records import DamagedRun, Decision, RunLog, RunRecord, RunStatus
from .schema import (
    PARTITION_KEY,
    RUN_PREFIX,
    SORT_KEY,
    job_pk,
    run_sk,
)

# -- call sites (see jobguard.callsites) --------------------------------------------

PUT_RUN = call_site(
    "dynamodb.put_run", "dynamodb", "PutItem", "RunRecords.put_run",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note=("stale/duplicate records surface to the sender; so does a rejected trigger "
          "message's (SQS delivers it again); never written over another record of the "
          "run (a repeat of a landed put is refused by it)"),
    paths=(Path.RUN,),
)

LIST_RUNS = call_site(
    "dynamodb.list_runs", "dynamodb", "Query", "RunRecords.list_runs",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (CLI, status)",
    paths=(Path.OPERATOR,),
)

RUNS_BETWEEN = call_site(
    "dynamodb.runs_between", "dynamodb", "Query", "RunRecords.runs_between",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read, paged (CLI `timeline`, the drills page)",
    paths=(Path.OPERATOR,),
)

GET_RUN = call_site(
    "dynamodb.get_run", "dynamodb", "GetItem", "RunRecords.get_run",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read (CLI)",
    paths=(Path.OPERATOR,),
)


class RunRecords(StoreTable):
    """A job's run log: put_run, list_runs, runs_between, get_run."""

    def put_run(self, record: RunRecord, ttl_epoch_s: int, *, only_if_absent: bool = False,
                keep_operator_record: bool = False) -> bool:
        """Write a run record. With ``only_if_absent``, never overwrite an existing one;
        with ``keep_operator_record``, never overwrite one an operator's release wrote."""
        params: dict[str, Any] = {}
        if only_if_absent:
            params["ConditionExpression"] = "attribute_not_exists(#sk)"
            params["ExpressionAttributeNames"] = {"#sk": SORT_KEY}
        elif keep_operator_record:
            params["ConditionExpression"] = "attribute_not_exists(#sk) OR #st <> :op"
            params["ExpressionAttributeNames"] = {"#sk": SORT_KEY, "#st": "status"}
            params["ExpressionAttributeValues"] = {
                ":op": {"S": RunStatus.RELEASED_BY_OPERATOR.value}}
        try:
            self._client.put_item(
                TableName=self.table_name, Item=self._run_item(record, ttl_epoch_s), **params
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise StoreError("put_run", record.job, str(exc)) from exc
        return True

    def list_runs(self, job: str, *, limit: int = 50) -> list[RunRecord | DamagedRun]:
        """A job's run log, newest first, at most ``limit`` rows. The active run is shown
        as ``running``. A row that is not a readable run record is a :class:`DamagedRun`
        in its place (its key and what is wrong), never raised: one damaged row hides
        nothing else.

        Reads page after page until ``limit`` rows (a page ends at 1 MB: a few large
        records, a long error each, fill one before ``limit`` is reached).
        """
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :run)",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
            "ExpressionAttributeValues": {":pk": {"S": job_pk(job)},
                                          ":run": {"S": RUN_PREFIX}},
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        rows: list[RunRecord | DamagedRun] = []
        while len(rows) < limit:
            response = self._client.query(**kwargs, Limit=limit - len(rows))
            rows += [read_run_row(item) for item in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                break
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        try:
            lease = self.read_lease(job)
        except DamagedRowError:  # named by `jobguard status`; the run log is still read
            return rows[:limit]
        if lease.run_id and not any(r.run_id == lease.run_id for r in rows):
            handed = lease.handed_from is not None  # the next link, not started yet
            active = RunRecord(
                job=job, run_id=lease.run_id, trigger_id=lease.trigger_id or "",
                trigger_kind="continuation" if handed else "", policy="",
                decision=Decision.RAN, status=RunStatus.RUNNING,
                started_at_ms=lease.acquired_at_ms or 0, fence=lease.fence,
                owner=None if handed else lease.owner,
                detail="handed: the continuation has not started yet" if handed else None,
                extra={"continues": lease.handed_from} if handed else {},
            )
            rows.insert(0, active)
        return rows[:limit]

    def runs_between(self, job: str, *, from_ms: int, to_ms: int,
                     lookback_ms: int = 3_600_000, max_records: int = 200_000) -> RunLog:
        """The run records of runs started between ``from_ms - lookback_ms`` and
        ``to_ms`` (run ids sort by start time), oldest first, every page read.

        The lookback finds runs that started before the range and were still going in
        it (a Lambda runs at most 15 minutes); the caller keeps those that overlap. A
        row that is not a readable run record is named in ``unreadable``, not raised,
        so one damaged record never hides the rest. Reads the run log only: the item
        ledger's layout is not assumed (a run's item counts are on its record).

        Example:
            >>> log = store.runs_between("crm-sync", from_ms=t0, to_ms=t1)  # doctest: +SKIP
            >>> [r.status.value for r in log.records]  # doctest: +SKIP
            ['succeeded', 'coalesced', 'succeeded']
        """
        if to_ms < from_ms:
            raise ValueError(f"to_ms ({to_ms}) is before from_ms ({from_ms})")
        low, high = run_id_bounds(from_ms - max(0, lookback_ms), to_ms)
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
            "ExpressionAttributeValues": {":pk": {"S": job_pk(job)},
                                          ":low": {"S": run_sk(low)},
                                          ":high": {"S": run_sk(high)}},
            "ConsistentRead": True,
        }
        records: list[RunRecord] = []
        damaged: list[DamagedRun] = []
        while True:
            response = self._client.query(**kwargs)
            for item in response.get("Items", []):
                read = read_run_row(item)
                if isinstance(read, DamagedRun):
                    damaged.append(read)
                else:
                    records.append(read)
            if len(records) >= max_records:
                return RunLog(tuple(records[:max_records]), tuple(damaged), truncated=True)
            if "LastEvaluatedKey" not in response:
                return RunLog(tuple(records), tuple(damaged))
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def get_run(self, job: str, run_id: str) -> RunRecord | DamagedRun | None:
        """The run record of ``run_id``; a :class:`DamagedRun` when its row is not a
        readable one; None when there is no row."""
        response = self._client.get_item(
            TableName=self.table_name,
            Key={PARTITION_KEY: {"S": job_pk(job)}, SORT_KEY: {"S": run_sk(run_id)}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return read_run_row(item) if item else None
