"""One crm-sync run in the middle of which AWS misbehaves, and what it left behind.

GIVEN run R0 (fence 1) claimed item 0, created its note and vanished; WHEN the next tick
starts run R1 (a COALESCE job, 8 contacts, batch 4) under the fault rules, and during
R1's second item its heartbeat renews, a second tick arrives (coalesced into a
follow-up) and the follow-up message is delivered at once (deferred, wake receipt left
on the lease row); R1 releases (waking it), the queue is drained, and any trigger whose
sender got an error is delivered again (as Lambda's retries would); THEN the faults end,
the next tick runs clean, and ONCE / END / FENCE / CKPT are checked with the run log.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from jobguard import JobConfig, OverlapPolicy, current_run, hooks
from jobguard.batch import ClaimedItem
from jobguard.callsites import Fault
from jobguard.destinations import DynamoDBDestination, S3Destination
from jobguard.dynamodb import DynamoJobStore
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.faults import Faults, Rule
from jobguard.local.emulator import in_process
from jobguard.local.esm import deliver_once
from jobguard.local.load import (
    Invariants,
    NotesJob,
    World,
    check_invariants,
    checkpoint_cursor_ok,
    contacts,
    puts_reached,
)
from jobguard.records import RunRecord
from jobguard.requests import Take
from jobguard.testing import ManualClock
from jobguard.triggerqueue import TriggerQueue
from jobguard.triggers import Trigger, TriggerKind, format_instant
from jobguard.workitems import Commit, Fence, ItemRecord, WorkId

JOB = "crm-sync"
LEASE = timedelta(seconds=60)
SKEW = timedelta(seconds=5)
N_ITEMS = 8


@dataclass
class Outcome:
    faults: Faults
    invariants: Invariants
    runs: list[RunRecord]
    r1: RunRecord | None
    first_answers: dict[str, Any]
    errors: dict[str, BaseException] = field(default_factory=dict)
    lease_during: Any = None
    fences: list[int] = field(default_factory=list)
    items_after_r1: dict[str, Any] = field(default_factory=dict)
    checkpoint_seqs: list[int] = field(default_factory=list)
    t2_id: str = ""

    def records_for(self, trigger_id: str) -> list[RunRecord]:
        return [r for r in self.runs if r.trigger_id == trigger_id]


class _Ctx:
    def get_remaining_time_in_millis(self) -> int:
        return 900_000


class S3NotesJob(NotesJob):
    """The same job, its notes written as S3 objects (``If-None-Match: *``)."""

    def __init__(self, config: JobConfig, source: list[dict[str, Any]], exports: S3Destination,
                 **guard_options: Any) -> None:
        super().__init__(config, source, None, **guard_options)  # type: ignore[arg-type]
        self.exports = exports

    def process(self, record: dict[str, Any], item: ClaimedItem) -> str:
        return self.exports.put(item.key, record["change"].encode(), content_type="text/plain")

    def reconcile(self, record: dict[str, Any] | None, item: ItemRecord) -> str | None:
        return self.exports.reconcile(item.work_id)


BUCKET_PREFIX = "notes/"


def _bucket(world: World) -> tuple[Any, str]:
    """A versioned bucket (every write is a version: a second effect would show)."""
    import uuid

    import botocore.session

    from jobguard._clients import config

    s3 = botocore.session.get_session().create_client("s3", config=config())
    bucket = f"notes-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return s3, bucket


def _objects(s3: Any, bucket: str) -> tuple[dict[str, str], Counter[str]]:
    """work id -> the current object's version id, and versions per work id."""
    listed = s3.list_object_versions(Bucket=bucket)
    versions: Counter[str] = Counter()
    current: dict[str, str] = {}
    for entry in [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]:
        work_id = entry["Key"].removeprefix(BUCKET_PREFIX)
        versions[work_id] += 1
        if entry.get("IsLatest") and "VersionId" in entry:
            current[work_id] = entry["VersionId"]
    return current, versions


def work_ids() -> list[str]:
    return [str(WorkId(r["id"], "create-note")) for r in contacts(N_ITEMS)]


def run_scenario(rules: list[Rule], *, destination: str = "dynamodb") -> Outcome:
    """The run above; ``destination="s3"`` writes the notes as objects in a bucket."""
    with in_process():
        world = World.create()
        store = DynamoJobStore(world.table, client=world.ddb)
        items = DynamoItemStore(world.table, client=world.ddb)
        notes = DynamoDBDestination(world.notes_table, client=world.ddb)
        s3: Any = None
        if destination == "s3":
            s3, bucket = _bucket(world)
            exports = S3Destination(bucket, client=s3, prefix=BUCKET_PREFIX)
        clock = ManualClock()
        url = world.fifo_queue(JOB)
        config = JobConfig(name=JOB, policy=OverlapPolicy.COALESCE, table_name=world.table,
                           trigger_queue_url=url, batch_size=4, lease=LEASE, skew_margin=SKEW)
        ids = work_ids()

        # GIVEN R0 claimed item 0, created its note, and vanished
        from jobguard.clock import to_ms

        r0 = store.take(Take(Trigger(JOB, f"{JOB}@manual:r0", TriggerKind.MANUAL), run_id="R0",
                             owner="gone/pid-0", now_ms=to_ms(clock.now()),
                             lease_ms=int(LEASE.total_seconds() * 1000), skew_ms=5000))
        assert not hasattr(r0, "state")
        items.commit(Fence(JOB, "R0", 1), Commit(
            expected=items.read_row(JOB), claim={ids[0]: ""},
            claim_expires_at_ms=to_ms(clock.now()) + 900_000), now_ms=to_ms(clock.now()))
        if s3 is not None:
            exports.put(ids[0], b"by R0")
        else:
            notes.put(ids[0], {"text": "by R0"})
        clock.advance(LEASE + SKEW + timedelta(seconds=1))

        queue = TriggerQueue(url, client=world.sqs)
        job: NotesJob = (
            S3NotesJob(config, contacts(N_ITEMS), exports, store=store, queue=queue, clock=clock)
            if s3 is not None else
            NotesJob(config, contacts(N_ITEMS), notes, store=store, queue=queue, clock=clock))
        handler = job.handler()
        # the previous minute's tick and this minute's (a tick is never ahead of the clock)
        t1 = {"job": JOB, "scheduled_at": format_instant(clock.now() - timedelta(minutes=1))}
        t2 = {"job": JOB, "scheduled_at": format_instant(clock.now())}
        answers: dict[str, Any] = {}
        errors: dict[str, BaseException] = {}
        seen: dict[str, Any] = {"items": 0}
        seqs: list[int] = []
        cursors: list[str | None] = []
        ckpt_ok: list[bool] = []
        faults = Faults(rules, seed=7, backoff_scale=0.001,
                        clients=[c for c in (world.ddb, world.sqs, s3) if c is not None])

        def deliver(name: str, event: Any) -> None:
            try:
                answers.setdefault(name, handler(event, _Ctx()))
            except Exception as exc:  # noqa: BLE001 - the sender sees it, and retries
                errors.setdefault(name, exc)
                answers.setdefault(name, None)

        def drain(name: str) -> None:
            try:
                deliver_once(world.sqs, url, handler, context=_Ctx())
            except Exception as exc:  # noqa: BLE001 - the mapping retries
                errors.setdefault(name, exc)

        def during_r1(**ctx: Any) -> None:
            seen["items"] += 1
            if seen["items"] != 2:
                return
            run = current_run()
            with faults.suspended():
                seen["lease"] = store.read_lease(JOB)
            run.heartbeat.renew_once()
            deliver("t2", t2)
            drain("follow_up_early")

        def observe(**ctx: Any) -> None:
            with faults.suspended():
                seq, cursor, ok = checkpoint_cursor_ok(world, JOB, ids)
            seqs.append(seq)
            cursors.append(cursor)
            ckpt_ok.append(ok)

        with faults, hooks.on("before_item", during_r1), hooks.on("after_claim", observe):
            deliver("t1", t1)
            r1_run_id = None
            with faults.suspended():
                r1_run_id = store.read_lease(JOB).last_run_id or store.read_lease(JOB).run_id
                items_after_r1 = items.get_many(JOB, ids)
            for _ in range(3):
                drain("follow_up")
            # The senders of failed deliveries retry (Lambda's async retries).
            for name, event in (("t1", t1), ("t2", t2)):
                if name in errors:
                    clock.advance(LEASE + SKEW + timedelta(seconds=1))
                    deliver(f"{name}_retry", event)
            for _ in range(3):
                drain("follow_up_late")
            faults.rules.clear()  # the faults end here; the calls are still logged
            # THEN the next tick runs clean, once any lease left behind has ended
            clock.advance(LEASE + SKEW + timedelta(seconds=1))
            t3 = {"job": JOB, "scheduled_at": format_instant(clock.now())}
            final = handler(t3, _Ctx())
            observe()
        runs = list(reversed(store.list_runs(JOB, limit=200)))
        t1_id = f"{JOB}@{t1['scheduled_at']}"
        r1 = next((r for r in runs if r.trigger_id == t1_id and r.decision.value == "ran"
                   and r.status.value != "abandoned"), None)
        del r1_run_id
        lease = store.read_lease(JOB)
        stored, reached = world.notes(), puts_reached(faults)
        if s3 is not None:
            # The bucket is the destination: one version per work id (a second effect
            # would be a second version), and each put that reached S3 counted.
            stored, versions = _objects(s3, bucket)
            reached = Counter(c.params["Key"].removeprefix(BUCKET_PREFIX)
                              for c in faults.calls_at("destination.s3.put") if c.reached)
            for work_id in ids:
                reached[work_id] = max(reached[work_id], versions[work_id])
        inv = check_invariants(world, JOB, ids, stored, reached,
                               list(zip(seqs, cursors, strict=True)), found=Invariants(),
                               stale=(r1.run_id, r1.fence) if r1 and r1.fence else None)
        for ok in ckpt_ok:
            inv.require("CKPT", ok, "the checkpoint passed an unfinished item")
        inv.require("END", lease.run_id is None, f"the lease is still held by {lease.run_id}")
        inv.require("END", isinstance(final, dict) and "jobguard" not in final,
                    f"the clean run did not run: {final}")
        return Outcome(faults, inv, runs, r1, answers, errors, seen.get("lease"),
                       [r.fence for r in runs if r.fence], items_after_r1, seqs,
                       f"@{t2['scheduled_at']}")


def counts(runs: list[RunRecord]) -> Counter[str]:
    return Counter(r.status.value for r in runs)


FAULTS = list(Fault)
