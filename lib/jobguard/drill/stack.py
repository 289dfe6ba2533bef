"""A deployed jobguard stack, driven exactly as AWS would drive it.

Ticks are asynchronous invokes with EventBridge Scheduler's payload (the scheduled time
and execution id filled in); queued triggers travel through the stack's SQS queues and
event source mappings; recovery is an invoke of the recovery Lambda. Everything a drill
checks is read back through the AWS APIs: run records, lease rows and the item ledger
from the jobguard table, notes from the notes table, exports from the bucket.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..deployment import Deployment, reconciler_output_key
from ..dynamodb import DynamoJobStore
from ..dynamodb_items import DynamoItemStore
from ..lease import LeaseState
from ..records import RunRecord, RunStatus
from ..triggers import format_instant
from ..workitems import Checkpoint, ItemRecord

__all__ = ["DeployedStack", "JobHandle", "tick_payload"]


def tick_payload(job: str, policy: str, at: datetime, execution_id: str) -> dict[str, str]:
    """What the stack's schedule sends (``jobguard.cdk.guarded_job.tick_input``), with
    the placeholders filled as Scheduler fills them on AWS."""
    return {"job": job, "scheduled_at": format_instant(at), "execution_id": execution_id,
            "policy": policy}


@dataclass(frozen=True)
class JobHandle:
    name: str
    policy: str
    function: str
    queue_url: str | None
    drills: bool = True
    """The deployment honours drill switches for this job (its output's ``drills``)."""


class DeployedStack:
    """Clients and read-backs for one deployed stack, found through its outputs
    (:class:`jobguard.deployment.Deployment`): the table, each job's function, queue and
    policy, its reconciler, the recovery function."""

    def __init__(self, session: Any, deployment: Deployment, *,
                 endpoint: str | None = None) -> None:
        from botocore.config import Config

        config = Config(retries={"max_attempts": 5, "mode": "standard"},
                        read_timeout=120, connect_timeout=5)

        def make(service: str) -> Any:
            return session.client(service, endpoint_url=endpoint, config=config)

        self.deployment = deployment
        self.name = deployment.stack
        self.outputs = deployment.outputs
        self.ddb = make("dynamodb")
        self.lambda_ = make("lambda")
        self.sqs = make("sqs")
        self.s3 = make("s3")
        self.table = deployment.table
        self.store = DynamoJobStore(self.table, client=self.ddb)
        self.items = DynamoItemStore(self.table, client=self.ddb)
        self.jobs = {name: JobHandle(name, job.policy, job.function, job.queue_url, job.drills)
                     for name, job in deployment.jobs.items()}

    @property
    def recovery_function(self) -> str:
        if not self.deployment.recovery_function:
            raise LookupError(f"stack {self.name!r} has no RecoveryFunctionName output")
        return self.deployment.recovery_function

    # -- driving -------------------------------------------------------------------------

    def tick(self, job: str, at: datetime, *, execution_id: str | None = None) -> str:
        """One Scheduler delivery of ``job``'s tick at ``at`` (an async invoke)."""
        handle = self.jobs[job]
        execution_id = execution_id or str(uuid.uuid4())
        payload = tick_payload(job, handle.policy, at, execution_id)
        self.lambda_.invoke(FunctionName=handle.function, InvocationType="Event",
                            Payload=json.dumps(payload).encode())
        return execution_id

    def invoke(self, function: str, payload: dict[str, Any], *,
               qualifier: str | None = None) -> dict[str, Any]:
        """A synchronous invoke (of the alias or version ``qualifier`` names, if given);
        the function's answer (or its error) as a dict."""
        where = {"FunctionName": function} | ({"Qualifier": qualifier} if qualifier else {})
        response = self.lambda_.invoke(**where, InvocationType="RequestResponse",
                                       Payload=json.dumps(payload).encode())
        body = response["Payload"].read()
        answer: dict[str, Any] = json.loads(body) if body else {}
        if response.get("FunctionError"):
            answer = {"function_error": response["FunctionError"], **answer}
        return answer

    def reconciler(self, job: str) -> str:
        """The job's reconciler function (its ``<Job>ReconcilerFunctionName`` output)."""
        found = self.deployment.reconcilers.get(job)
        if found is None:
            raise LookupError(f"no reconciler function for {job}: stack {self.name!r} has no "
                              f"{reconciler_output_key(job)} output")
        return found

    # -- reading back ----------------------------------------------------------------------

    def lease(self, job: str) -> LeaseState:
        return self.store.read_lease(job)

    def runs(self, job: str, since_ms: int = 0) -> list[RunRecord]:
        records = self.store.list_runs(job, limit=500)  # a damaged row is no run: left out
        return sorted((r for r in records
                       if isinstance(r, RunRecord) and r.started_at_ms >= since_ms),
                      key=lambda r: r.started_at_ms)

    def checkpoint(self, job: str) -> Checkpoint:
        return self.items.read_checkpoint(job)

    def ledger(self, job: str, work_ids: Sequence[str]) -> dict[str, ItemRecord]:
        return self.items.get_many(job, list(work_ids))

    def items_of_runs(self, job: str, run_ids: Sequence[str]) -> list[ItemRecord]:
        """The job's ledger rows last written by one of ``run_ids`` (claimed, completed,
        failed, uncertain): for the drills of any deployed job, whose work ids only its
        code knows. A consistent Scan of the table filtered to the job's item
        partitions: a drill deployment's table is a test table, small by design."""
        from ..dynamodb_items import item_record
        from ..schema import item_pk

        wanted = sorted(set(run_ids))
        found: list[ItemRecord] = []
        for start in range(0, len(wanted), 90):  # IN takes at most 100 operands
            chunk = wanted[start:start + 90]
            values: dict[str, Any] = {":prefix": {"S": item_pk(job, "")}}
            values.update({f":r{i}": {"S": r} for i, r in enumerate(chunk)})
            request: dict[str, Any] = {
                "TableName": self.table, "ConsistentRead": True,
                "FilterExpression": f"begins_with(#pk, :prefix) AND #run IN "
                                    f"({', '.join(f':r{i}' for i in range(len(chunk)))})",
                "ExpressionAttributeNames": {"#pk": "pk", "#run": "run_id"},
                "ExpressionAttributeValues": values,
            }
            while True:
                page = self.ddb.scan(**request)
                found += [r for r in (item_record(job, raw) for raw in page.get("Items", []))
                          if r is not None]
                if "LastEvaluatedKey" not in page:
                    break
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found

    def queue_depth(self, job: str) -> int:
        url = self.jobs[job].queue_url
        if not url:
            return 0
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages",
                                          "ApproximateNumberOfMessagesNotVisible",
                                          "ApproximateNumberOfMessagesDelayed"])["Attributes"]
        return sum(int(v) for v in attrs.values())

    # -- waiting -----------------------------------------------------------------------------

    def wait(self, what: str, condition: Callable[[], Any], *, timeout_s: float = 90,
             every_s: float = 0.25) -> Any:
        """Poll ``condition`` until it is truthy; a TimeoutError names ``what``."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout_s:.0f} s for {what}")
            time.sleep(every_s)

    def settled(self, job: str, since_ms: int) -> bool:
        """No run in progress, nothing waiting in the queue, the lease released."""
        if self.lease(job).run_id is not None:
            return False
        if self.queue_depth(job):
            return False
        return not any(r.status is RunStatus.RUNNING for r in self.runs(job, since_ms))

    def wait_settled(self, job: str, since_ms: int, *, timeout_s: float = 120) -> None:
        # Twice in a row, a moment apart: a follow-up may be in flight between the two.
        def twice() -> bool:
            if not self.settled(job, since_ms):
                return False
            time.sleep(1.0)
            return self.settled(job, since_ms)

        self.wait(f"{job} to settle", twice, timeout_s=timeout_s)

    def wait_lease_free(self, job: str, skew_ms: int) -> LeaseState:
        """Until the holder's lease has been expired for longer than the skew margin."""
        def free() -> LeaseState | None:
            lease = self.lease(job)
            now = int(time.time() * 1000)
            if lease.expires_at_ms is None or lease.expires_at_ms < now - skew_ms - 250:
                return lease
            return None

        lease: LeaseState = self.wait(f"{job}'s lease to expire", free, timeout_s=120,
                                      every_s=0.5)
        return lease

    def wait_run(self, job: str, since_ms: int, predicate: Callable[[RunRecord], bool],
                 what: str, *, timeout_s: float = 90) -> RunRecord:
        """The first finished run record (oldest first) that matches ``predicate``."""
        def found() -> RunRecord | None:
            return next((r for r in self.runs(job, since_ms)
                         if r.status is not RunStatus.RUNNING and predicate(r)), None)

        record: RunRecord = self.wait(what, found, timeout_s=timeout_s)
        return record


def now_utc() -> datetime:
    return datetime.now(UTC)
