"""Chaos: worker processes trigger one BatchJob again and again while a seeded controller
kills them, pauses them past their lease and loses their responses; then the job runs to
completion and ONCE, END, FENCE and CKPT are checked on the ledger, the destination, the
run log and the table's stream (every write, in the order DynamoDB applied it).

Faults (all drawn from ``random.Random(JOBGUARD_CHAOS_SEED)``, the controller's and one
per worker process):

- SIGKILL a worker (often the lease holder), then start a replacement;
- SIGSTOP a worker (often the holder) for longer than its lease, then SIGCONT it: a
  paused holder that wakes up after a takeover, whose writes must all be refused;
- lost responses, injected by a botocore ``after-call`` hook in the worker after a
  ``TransactWriteItems`` (failed / uncertain rows, release, decisions), an ``UpdateItem``
  (the claim and checkpoint, renewals), a ``BatchWriteItem`` (completions) or a
  destination write succeeded: either a ``ReadTimeoutError`` (the caller never learns the outcome)
  or a replay of the same request (an SDK retry of a committed write: the caller gets
  the retry's answer, refused by its own earlier write).

Scale with ``JOBGUARD_CHAOS_ITEMS`` / ``JOBGUARD_CHAOS_SECONDS`` (``make soak``).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore import xform_name
from botocore.exceptions import ReadTimeoutError

from jobguard import (
    BatchJob,
    ClaimedItem,
    ItemRecord,
    ItemState,
    JobConfig,
    OverlapPolicy,
    Page,
    SystemClock,
    WorkId,
    current_run,
    hooks,
)
from jobguard.clock import to_ms
from jobguard.dynamodb import DynamoJobStore, create_table, run_record
from jobguard.dynamodb_items import DynamoItemStore
from jobguard.local.emulator import ENDPOINT_LINE_PREFIX
from jobguard.workitems import is_outcome_unknown

from ._items import contacts

SEED = int(os.environ.get("JOBGUARD_CHAOS_SEED", "20261129"))
ITEMS = int(os.environ.get("JOBGUARD_CHAOS_ITEMS", "600"))
SECONDS = float(os.environ.get("JOBGUARD_CHAOS_SECONDS", "20"))
WORKERS = int(os.environ.get("JOBGUARD_CHAOS_WORKERS", "4"))

pytestmark = [pytest.mark.server,
              pytest.mark.timeout(int(180 + 3 * SECONDS + 0.08 * ITEMS))]

JOB = "crm-sync"
OPERATION = "create-note"
# 130: a page's lookup spans two BatchGetItem calls (100 + 30) and its completions six
# BatchWriteItem calls; a long page can hold the emulator long enough for the holder's
# renewals to miss its deadline.
BATCH_SIZES = (5, 10, 25, 40, 60, 130)
HEARTBEAT = timedelta(milliseconds=400)
SKEW = timedelta(milliseconds=200)
LONGEST_LEASE_S = 2.0

# Phases, shared with the workers through lock-free shared memory (a SIGKILLed worker
# must not be able to leave a lock held).
FAULTS, STOP = 0, 1
# Chance that a successful write loses its response, per kind (timeout, replay) and target:
# on the destination it leaves an item uncertain, to be reconciled by a later run.
P_LOST = {"ledger": 0.004, "destination": 0.01}


def work_id(index: int) -> str:
    return str(WorkId(f"contact-{index:05d}", OPERATION))


def index_of(work_id: str) -> int:
    return int(WorkId.parse(work_id).source_id.split("-", 1)[1])


# -- the destination -------------------------------------------------------------------


@dataclass
class Notes:
    """Notes keyed by work id (the idempotency key), with a durable log of every call.

    One UpdateItem per call applies the note only if absent (``if_not_exists``) and, in
    the same write, appends the call to the row's log: a call is counted whatever
    happens to its caller afterwards. Reconciliation lookups that found nothing are
    logged in a second table, so the test can tell a safe retry from a blind one.
    """

    client: Any  # the destination's writes (faults may be injected on it)
    notes: str
    lookups: str
    reads: Any = None  # lookups and the call log (no faults injected)

    @classmethod
    def create(cls, ddb: Any) -> Notes:
        from jobguard.destinations import DynamoDBDestination

        names = [DynamoDBDestination.create_table(ddb, f"{prefix}-{uuid.uuid4().hex[:8]}")
                 for prefix in ("notes", "lookups")]
        return cls(ddb, names[0], names[1], ddb)

    def put(self, key: str, text: str, caller: str) -> str:
        """Create the note once; every call is logged. Returns the note id stored."""
        response = self.client.update_item(
            TableName=self.notes,
            Key={"work_id": {"S": key}},
            UpdateExpression=(
                "SET note_id = if_not_exists(note_id, :note), #text = if_not_exists(#text, :text), "
                "created_by = if_not_exists(created_by, :caller), "
                "callers = list_append(if_not_exists(callers, :none), :call) ADD calls :one"
            ),
            ExpressionAttributeNames={"#text": "text"},
            ExpressionAttributeValues={
                ":note": {"S": uuid.uuid4().hex}, ":text": {"S": text},
                ":caller": {"S": caller}, ":none": {"L": []}, ":call": {"L": [{"S": caller}]},
                ":one": {"N": "1"},
            },
            ReturnValues="ALL_NEW",
        )
        return str(response["Attributes"]["note_id"]["S"])

    def find(self, key: str) -> str | None:
        item = self.reads.get_item(TableName=self.notes, Key={"work_id": {"S": key}},
                                   ConsistentRead=True).get("Item")
        return item["note_id"]["S"] if item else None

    def log(self, key: str, what: str, entry: str) -> None:
        self.reads.update_item(
            TableName=self.lookups, Key={"work_id": {"S": key}},
            UpdateExpression="ADD #what :entry", ExpressionAttributeNames={"#what": what},
            ExpressionAttributeValues={":entry": {"SS": [entry]}},
        )

    def rows(self, table: str) -> dict[str, dict[str, Any]]:
        return {row["work_id"]: row for row in scan(self.reads, table)}


class ChaosSync(BatchJob[dict]):
    """crm-sync over a fixed source: one note per contact."""

    def __init__(self, config: JobConfig, source: list[dict[str, Any]], notes: Notes,
                 **guard_options: Any) -> None:
        super().__init__(config, **guard_options)
        self.source = source
        self.notes = notes

    def select(self, cursor: str | None, limit: int) -> Page[dict]:
        start = 0 if cursor is None else int(cursor)
        rows = self.source[start:start + limit]
        return Page(rows, str(start + len(rows)))

    def work_id(self, record: dict) -> WorkId:
        return WorkId(record["id"], OPERATION)

    def process(self, record: dict, item: ClaimedItem) -> str:
        run = current_run()
        caller = f"{run.run_id}|{run.fence}|{item.attempt}|{uuid.uuid4().hex[:12]}"
        try:
            return self.notes.put(item.key, record["change"], caller)
        except Exception as exc:
            unknown = is_outcome_unknown(exc)
            self.notes.log(item.key, "errors", f"{caller}|{type(exc).__name__}|"
                                               f"{'unknown' if unknown else 'known'}")
            if not unknown:  # a known failure: the item may be claimed anew
                self.notes.log(item.key, "failed_by", run.run_id)
            raise

    def reconcile(self, record: dict | None, item: ItemRecord) -> str | None:
        found = self.notes.find(item.work_id)
        if found is None:
            self.notes.log(item.work_id, "not_found_by", current_run().run_id)
        return found


def job_config(table: str, rng: random.Random) -> JobConfig:
    return JobConfig(
        name=JOB, policy=OverlapPolicy.SKIP, table_name=table,
        lease=timedelta(milliseconds=rng.randrange(1500, int(LONGEST_LEASE_S * 1000) + 1, 100)),
        heartbeat_every=HEARTBEAT, skew_margin=SKEW,
        batch_size=rng.choice(BATCH_SIZES), flush="item" if rng.random() < 0.3 else "page",
        claim_for=timedelta(seconds=30), time_margin=timedelta(0),
        # Every trigger here has its own id: forget decided ones quickly, or the lease
        # row would carry thousands of trigger marks.
        stale_after=timedelta(seconds=5), dedup_window=timedelta(seconds=5),
    )


def manual(trigger_id: str) -> dict[str, Any]:
    return {"job": JOB, "manual": True, "trigger_id": trigger_id}


@dataclass
class Budget:
    """A Lambda context whose remaining time runs out after ``seconds``."""

    seconds: float
    started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        return int((self.started + self.seconds - time.monotonic()) * 1000)


# -- fault injection inside a worker ----------------------------------------------------


class LostResponses:
    """Loses the response of a write that succeeded (botocore ``after-call`` hook).

    ``timeout``: raise ``ReadTimeoutError`` as if the connection dropped after the
    server committed. ``replay``: send the same request again, as an SDK retry would,
    and hand the caller the retry's answer (refused by its own earlier write).
    """

    def __init__(self, rng: random.Random, phase: Any, log: JsonLog) -> None:
        self._rng = rng
        self._phase = phase
        self._log = log
        self._local = threading.local()
        self._lock = threading.Lock()

    def install(self, client: Any, operation: str, target: str) -> None:
        def remember(params: dict[str, Any], **_: Any) -> None:
            self._local.params = dict(params)

        def after_call(http_response: Any, model: Any, **_: Any) -> None:
            if (getattr(self._local, "replaying", False) or self._phase.value != FAULTS
                    or http_response.status_code >= 300):
                return
            with self._lock:
                roll = self._rng.random() / P_LOST[target]
            if roll < 1:
                self._log.write("lost", how="timeout", target=target)
                raise ReadTimeoutError(endpoint_url="injected")
            if roll < 2:
                self._log.write("lost", how="replay", target=target)
                self._local.replaying = True
                try:
                    getattr(client, xform_name(model.name))(**self._local.params)
                finally:
                    self._local.replaying = False

        client.meta.events.register(f"provide-client-params.dynamodb.{operation}", remember)
        client.meta.events.register(f"after-call.dynamodb.{operation}", after_call)


class JsonLog:
    """One JSON object a line, flushed at once (a SIGKILL loses at most a partial line)."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", buffering=1)

    def write(self, kind: str, **fields: Any) -> None:
        self._file.write(json.dumps({"kind": kind, **fields}) + "\n")

    @staticmethod
    def read(path: Path) -> Iterator[dict[str, Any]]:
        for line in path.read_text().splitlines():
            try:
                yield json.loads(line)
            except ValueError:
                continue  # cut short by SIGKILL


def client(service: str = "dynamodb") -> Any:
    """A client with standard retries and a read timeout longer than any stall here.

    An SDK retry after a read timeout resends a request the server may still apply: a
    lost response. This test injects those itself (``LostResponses``) rather than leave
    them to the emulator's load, so that each one is counted and its effect checked.
    """
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(service, config=Config(
        retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=60))


def worker(slot: str, table: str, notes: Notes, phase: Any, logs: Path) -> None:
    """Trigger the job again and again until told to stop."""
    # EMF metrics and logs of hundreds of runs, line by line (a SIGKILL keeps them)
    sys.stdout = sys.stderr = (logs / f"{slot}.out").open("a", buffering=1)
    rng = random.Random(f"{SEED}:{slot}")
    log = JsonLog(logs / f"{slot}.jsonl")
    ledger, destination = client(), client()
    lost = LostResponses(random.Random(f"{SEED}:{slot}:lost"), phase, log)
    for operation in ("TransactWriteItems", "UpdateItem", "BatchWriteItem"):
        lost.install(ledger, operation, "ledger")
    lost.install(destination, "UpdateItem", "destination")
    notes = Notes(destination, notes.notes, notes.lookups, client())
    store = DynamoJobStore(table, client=ledger)
    source = contacts(ITEMS)
    acquired: dict[str, Any] = {}
    owner = f"chaos-{slot}/pid-{os.getpid()}"
    with hooks.on("after_acquire", lambda **ctx: acquired.update(ctx)):
        for n in itertools.count():
            if phase.value == STOP:
                break
            acquired.clear()
            job = ChaosSync(job_config(table, rng), source, notes, store=store, owner=owner)
            try:
                result = job.handler()(manual(f"{slot}.{n}"), Budget(rng.uniform(0.5, 5.0)))
            except Exception as exc:  # noqa: BLE001 - recorded; the run record says the rest
                log.write("error", error=type(exc).__name__, **acquired)
                continue
            if "decision" in result:
                log.write("decision", decision=result["decision"])
                time.sleep(rng.uniform(0.2, 0.6))  # pacing the next trigger, not a race
            elif "jobguard" in result:
                log.write(result["jobguard"], **acquired)
            else:
                log.write("ran", report=result, **acquired)
                time.sleep(rng.uniform(0.0, 0.1))


# -- what the table's stream says -------------------------------------------------------


def scan(ddb: Any, table: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
    from boto3.dynamodb.types import TypeDeserializer

    plain = TypeDeserializer()
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True,
                                                   **kwargs):
        for item in page["Items"]:
            yield {k: plain.deserialize(v) for k, v in item.items()}


def stream_records(ddb: Any, table: str) -> Iterator[dict[str, Any]]:
    """The table's stream, oldest first: each write's new image (a deletion: its key,
    with ``"removed": True``)."""
    from boto3.dynamodb.types import TypeDeserializer

    plain = TypeDeserializer()
    streams = client("dynamodbstreams")
    arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    while True:
        response = streams.get_records(ShardIterator=iterator, Limit=1000)
        if not response["Records"]:
            return
        for record in response["Records"]:
            change = record["dynamodb"]
            image = change.get("NewImage")
            if image is not None:
                yield {k: plain.deserialize(v) for k, v in image.items()}
            elif record["eventName"] == "REMOVE":
                yield {**{k: plain.deserialize(v) for k, v in change["Keys"].items()},
                       "removed": True}
        iterator = response["NextShardIterator"]


@dataclass
class StreamAudit:
    """Every write to the job's lease row, job row (claim, checkpoint) and item rows, in
    commit order."""

    acquisitions: dict[int, str] = field(default_factory=dict)  # fence -> run id
    taken_over: dict[str, str] = field(default_factory=dict)  # run never released -> taker
    writes_by: Counter[str] = field(default_factory=Counter)  # item + job-row writes
    checkpoints: list[tuple[int, int]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    history: dict[str, list[str]] = field(default_factory=dict)  # work id -> its writes
    claims: int = 0  # job-row writes of a claim or checkpoint
    stale_facts: int = 0  # completions written by a run that no longer held the lease

    @classmethod
    def of(cls, images: Iterator[dict[str, Any]], items: int) -> StreamAudit:
        audit = cls()
        holder: tuple[str | None, int] = (None, 0)
        state: dict[int, str] = {}
        proof: dict[str, str] = {}  # work id -> the destination id its completion names
        frontier = 0  # every item below it is finished
        seq, cursor, token = 0, 0, None
        for row in images:
            key = (row["pk"], row["sk"])
            if key == (f"JOB#{JOB}", "LEASE"):
                fence = int(row.get("fence", 0))
                if fence != holder[1]:
                    if fence != holder[1] + 1:
                        audit.violations.append(f"fence jumped {holder[1]} -> {fence}")
                    if holder[0] is not None:
                        audit.taken_over[holder[0]] = row["run_id"]
                    audit.acquisitions[fence] = row["run_id"]
                holder = (row.get("run_id"), fence)
                continue
            if row.get("removed"):
                if key[0].startswith(f"ITEM#{JOB}#") or key == (f"JOB#{JOB}", "FENCE"):
                    audit.violations.append(f"{key} was deleted")
                continue
            if key == (f"JOB#{JOB}", "FENCE"):
                if row.get("commit_token") == token:
                    continue  # an acquisition moving the fence mark (hw)
                token = row.get("commit_token")
                # FENCE: the claim and the checkpoint are written only by the holder, under
                # its fence (the token names the writer's fence)
                writer = int(str(token).split("-", 1)[0])
                audit.claims += 1
                audit.writes_by[audit.acquisitions.get(writer, str(writer))] += 1
                if (writer, int(row.get("hw", -1))) != (holder[1], holder[1]) \
                        or holder[0] is None:
                    audit.violations.append(f"the job row written under fence {writer} while "
                                            f"the lease was {holder}: {row}")
                if "seq" not in row or int(row["seq"]) == seq:
                    continue
                # CKPT: one step forward at a time, never past an unfinished item.
                new_seq, new_cursor = int(row["seq"]), int(row["cursor"])
                if new_seq != seq + 1 or new_cursor <= cursor:
                    audit.violations.append(
                        f"checkpoint moved ({seq}, {cursor}) -> ({new_seq}, {new_cursor})")
                while frontier < items and state.get(frontier) in ("completed", "failed"):
                    frontier += 1
                if new_cursor > frontier:
                    audit.violations.append(
                        f"checkpoint {new_cursor} passed unfinished item {work_id(frontier)} "
                        f"({state.get(frontier)})")
                seq, cursor = new_seq, new_cursor
                audit.checkpoints.append((seq, cursor))
                continue
            if not (key[0].startswith(f"ITEM#{JOB}#") and "state" in row):
                continue  # run records; the key-only row moto inserts before an update
            writer = (row.get("run_id"), int(row.get("fence", -1)))
            audit.writes_by[str(writer[0])] += 1
            work, index = row["work_id"], index_of(row["work_id"])
            audit.history.setdefault(work, []).append(
                f"{row['state']} by {writer} (lease {holder})")
            if row["state"] == "completed":
                # A completion is a fact: written by whoever saw it (a run that lost its
                # lease too), never changed once there, never undone
                audit.stale_facts += writer != holder
                if audit.acquisitions.get(writer[1]) != writer[0]:
                    audit.violations.append(f"{work} completed by {writer}, which never held "
                                            f"fence {writer[1]}")
                if proof.setdefault(work, row["destination_id"]) != row["destination_id"]:
                    audit.violations.append(f"{work} completed twice with other proofs: "
                                            f"{proof[work]}, {row['destination_id']}")
            else:
                # FENCE: a failed or uncertain row lands only while its writer holds the
                # lease, with its fence; never over a completion
                if writer != holder:
                    audit.violations.append(f"{work} written {row['state']} by {writer} while "
                                            f"the lease was {holder}: {row}")
                if state.get(index) == "completed":
                    audit.violations.append(f"{work} left completed: {row['state']}")
            state[index] = row["state"]
        return audit

    def unrecorded(self, runs: dict[str, Any]) -> set[str]:
        """Runs that held the lease but left no run record. The taker of an unreleased
        lease records the run it displaced, right after acquiring; only a taker killed in
        between (before its own first write) can leave that run unrecorded."""
        missing = set(self.acquisitions.values()) - set(runs)
        for run_id in missing:
            taker = self.taken_over.get(run_id)
            if taker is None or self.writes_by[taker]:
                self.violations.append(f"run {run_id} held the lease and left no record")
        return missing


# -- the controller ----------------------------------------------------------------------


@dataclass
class Pool:
    """The worker processes, by slot; a replacement gets a new slot name."""

    table: str
    notes: Notes
    phase: Any
    logs: Path
    ctx: Any = field(default_factory=lambda: mp.get_context("fork"))
    procs: dict[str, Any] = field(default_factory=dict)
    stopped: dict[str, float] = field(default_factory=dict)  # slot -> resume at (monotonic)
    started: int = 0

    def start(self) -> None:
        slot = f"w{self.started}"
        self.started += 1
        proc = self.ctx.Process(target=worker, daemon=True,
                                args=(slot, self.table, self.notes, self.phase, self.logs))
        proc.start()
        self.procs[slot] = proc

    def slot_of(self, owner: str | None) -> str | None:
        for slot, proc in self.procs.items():
            if owner == f"chaos-{slot}/pid-{proc.pid}":
                return slot
        return None

    def kill(self, slot: str) -> None:
        proc = self.procs.pop(slot)
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
        self.stopped.pop(slot, None)

    def pause(self, slot: str, seconds: float) -> None:
        os.kill(self.procs[slot].pid, signal.SIGSTOP)
        self.stopped[slot] = time.monotonic() + seconds

    def resume_due(self, *, all_of_them: bool = False) -> None:
        for slot, at in list(self.stopped.items()):
            if all_of_them or time.monotonic() >= at:
                os.kill(self.procs[slot].pid, signal.SIGCONT)
                del self.stopped[slot]

    def stop(self) -> None:
        self.phase.value = STOP
        self.resume_due(all_of_them=True)
        for slot, proc in list(self.procs.items()):
            proc.join(60)
            if proc.is_alive():  # pragma: no cover - a hung worker fails the test below
                os.kill(proc.pid, signal.SIGKILL)
                proc.join(10)
                raise AssertionError(f"worker {slot} did not stop")


@dataclass
class Faults:
    """What the controller did, and how long each phase took."""

    kills: int = 0
    kills_of_holder: int = 0
    pauses: int = 0
    paused_holders: list[str] = field(default_factory=list)  # their run ids
    seconds: float = 0.0
    drain_seconds: float = 0.0
    audit_seconds: float = 0.0


def apply_faults(pool: Pool, store: DynamoJobStore, items: DynamoItemStore,
                 rng: random.Random, samples: list[tuple[int, str | None]]) -> Faults:
    faults = Faults()
    deadline = time.monotonic() + SECONDS
    next_fault = time.monotonic() + rng.uniform(1.0, 2.0)
    while time.monotonic() < deadline:
        pool.resume_due()
        checkpoint = items.read_checkpoint(JOB)
        samples.append((checkpoint.seq, checkpoint.cursor))
        if checkpoint.cursor == str(ITEMS):
            break  # all done: nothing left for faults to hit
        if time.monotonic() >= next_fault:
            next_fault = time.monotonic() + rng.uniform(1.5, 3.5)
            lease = store.read_lease(JOB)
            holder = pool.slot_of(lease.owner) if lease.run_id else None
            workers = sorted(pool.procs)
            running = [w for w in workers if w not in pool.stopped]
            roll = rng.random()
            if roll < 0.3:  # SIGKILL (paused or not), often the holder; a replacement starts
                target = holder if holder and rng.random() < 0.6 else rng.choice(workers)
                faults.kills += 1
                faults.kills_of_holder += target == holder
                pool.kill(target)
                pool.start()
            elif roll < 0.65 and len(running) > 2:  # SIGSTOP past the longest lease
                target = holder if holder in running and rng.random() < 0.75 else rng.choice(
                    running)
                if target == holder:
                    faults.paused_holders.append(str(lease.run_id))
                faults.pauses += 1
                pool.pause(target, LONGEST_LEASE_S + SKEW.total_seconds() + rng.uniform(0.3, 1.2))
        time.sleep(0.2)  # the controller's sampling interval
    return faults


def drain(table: str, store: DynamoJobStore, items: DynamoItemStore,
          notes: Notes) -> list[dict[str, Any]]:
    """Run the job without faults until a run reports it exhausted the source and
    nothing is left unresolved."""
    ddb = client()
    reports: list[dict[str, Any]] = []
    # A long lease: a 99-item transaction on the emulator can outlast a 2 s lease's
    # renewals (they queue behind it), and the drain is not where faults belong.
    config = JobConfig(name=JOB, table_name=table, batch_size=50, flush="page",
                       lease=timedelta(seconds=60), skew_margin=SKEW,
                       claim_for=timedelta(seconds=60), stale_after=timedelta(seconds=5),
                       dedup_window=timedelta(seconds=5))
    job = ChaosSync(config, contacts(ITEMS), Notes(ddb, notes.notes, notes.lookups, ddb),
                    store=DynamoJobStore(table, client=ddb), owner="chaos-drain")
    for n in range(12):
        result = job.handler()(manual(f"drain.{n}"), None)
        if "decision" in result:  # a dead worker's lease: wait it out (a deadline, no race)
            held = store.read_lease(JOB)
            wait_ms = (held.expires_at_ms or 0) + SKEW / timedelta(milliseconds=1) - to_ms(
                SystemClock().now())
            time.sleep(max(0.0, wait_ms / 1000) + 0.01)
            continue
        reports.append(result)
        if result.get("stopped") == "exhausted" and not items.unresolved(JOB):
            return reports
    unresolved = items.unresolved(JOB)
    raise AssertionError(f"the job did not finish after {len(reports)} runs: last {reports[-1:]}, "
                         f"{len(unresolved)} unresolved, e.g. {unresolved[:3]}")


def run_log(ddb: Any, table: str) -> list[Any]:
    pages = ddb.get_paginator("query").paginate(
        TableName=table, ConsistentRead=True,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :run)",
        ExpressionAttributeValues={":pk": {"S": f"JOB#{JOB}"}, ":run": {"S": "RUN#"}})
    return [run_record(item) for page in pages for item in page["Items"]]


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An emulator server process of this test's own: the test grows it by thousands of
    items and a stream, more than the session's shared server should carry on for the
    other tests (or could shut down in the time its fixture allows)."""
    proc = subprocess.Popen([sys.executable, "-m", "jobguard.local.emulator", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"{ENDPOINT_LINE_PREFIX} endpoint="), line
        endpoint = line.strip().split("=", 1)[1]
        for name, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
                            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                            "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}.items():
            monkeypatch.setenv(name, value)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_chaos_kills_pauses_and_lost_responses_keep_once_end_fence_ckpt(emulator, tmp_path,
                                                                        capsys):
    began = time.monotonic()
    ddb = client()
    table = f"chaos-{uuid.uuid4().hex[:8]}"
    create_table(ddb, table)
    ddb.update_table(TableName=table, StreamSpecification={
        "StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
    notes = Notes.create(ddb)
    store = DynamoJobStore(table, client=ddb)
    items = DynamoItemStore(table, client=ddb)
    pool = Pool(table, notes, mp.get_context("fork").RawValue("i", FAULTS), tmp_path)

    # GIVEN workers triggering the job over and over, and a controller injecting faults
    for _ in range(WORKERS):
        pool.start()
    samples: list[tuple[int, str | None]] = []
    try:
        faults = apply_faults(pool, store, items, random.Random(SEED), samples)
    finally:
        pool.stop()
    faults.seconds = time.monotonic() - began

    # WHEN the faults stop and the job runs to completion
    drained = drain(table, store, items, notes)
    faults.drain_seconds = time.monotonic() - began - faults.seconds
    final = items.read_checkpoint(JOB)
    samples.append((final.seq, final.cursor))

    # THEN END: every item completed, none claimed, failed or uncertain, cursor at the end
    ids = [work_id(i) for i in range(ITEMS)]
    ledger = items.get_many(JOB, ids)
    assert Counter(r.state for r in ledger.values()) == {ItemState.COMPLETED: ITEMS}
    assert items.unresolved(JOB) == []
    assert final.cursor == str(ITEMS)

    # Every write to the table, in the order DynamoDB applied it; the run log.
    audit_began = time.monotonic()
    audit = StreamAudit.of(stream_records(ddb, table), ITEMS)
    faults.audit_seconds = time.monotonic() - audit_began
    runs = {r.run_id: r for r in run_log(ddb, table) if r.decision.value == "ran"}

    # ONCE: one note per work id, the ledger's proof is that note, and no item was called
    # twice except by a later run after its own reconciliation found nothing
    written = notes.rows(notes.notes)
    assert set(written) == set(ids)
    assert {w: ledger[w].destination_id for w in ids} == {w: written[w]["note_id"] for w in ids}
    calls = destination_calls(written, notes.rows(notes.lookups), audit.history)

    # FENCE: in commit order, every claim, checkpoint and failed or uncertain row carried
    # the fence of the run holding the lease at that moment, so none was written by a run
    # after a higher fence had been acquired (a paused holder waking up after a takeover
    # included); a completion, which only states what the destination holds, names a run
    # that held its fence ...
    unrecorded = audit.unrecorded(runs)
    assert audit.violations == []
    assert all(runs[r].fence == f for f, r in audit.acquisitions.items() if r in runs)
    # ... every completion names a run that really held the lease under that fence ...
    for row in scan(ddb, table, FilterExpression="begins_with(pk, :item)",
                    ExpressionAttributeValues={":item": {"S": f"ITEM#{JOB}#"}}):
        assert audit.acquisitions[int(row["fence"])] == row["run_id"]
        assert row["run_id"] in runs or row["run_id"] in unrecorded
    # ... and a run whose lease was taken over (killed or paused) never reports success
    displaced = Counter(runs[r].status.value if r in runs else "unrecorded"
                        for r in audit.taken_over)
    assert set(displaced) <= {"lease_lost", "abandoned", "failed", "unrecorded"}, displaced

    # CKPT: sampled after every step of the controller and at every write, the checkpoint
    # only moved forward (never past an unfinished item: see StreamAudit) to the end
    cursors = [(seq, int(cursor or 0)) for seq, cursor in samples]
    assert all(a[0] <= b[0] and a[1] <= b[1]
               for a, b in zip(cursors, cursors[1:], strict=False))
    assert audit.checkpoints[-1] == (final.seq, ITEMS)

    with capsys.disabled():
        print("\n" + summary(faults, audit, runs, unrecorded, calls, drained, tmp_path))


def destination_calls(written: dict[str, Any], lookups: dict[str, Any],
                      history: dict[str, list[str]]) -> Counter[str]:
    """Check ONCE on the destination's call log; count calls, replays, repeated items.

    A caller is ``run|fence|attempt|nonce``; a replayed request repeats its nonce.
    """
    figures: Counter[str] = Counter()
    for w, row in written.items():
        row = {**row, **lookups.get(w, {}), "ledger": history.get(w)}  # for the messages
        distinct = {c.rsplit("|", 1)[1]: c.split("|") for c in row["callers"]}
        figures["calls"] += len(distinct)
        figures["replayed"] += len(row["callers"]) - len(distinct)
        figures["called by two runs"] += len(distinct) > 1
        runs = [c[0] for c in distinct.values()]
        assert len(runs) == len(set(runs)), f"{w}: one run called the destination twice: {row}"
        fresh = [c for c in distinct.values() if c[2] == "1"]
        failed = row.get("failed_by", set())
        assert len(fresh) <= 1 + len(failed), f"{w}: claimed afresh and called twice: {row}"
        not_found = row.get("not_found_by", set())
        blind = [c for c in distinct.values() if c[2] != "1" and c[0] not in not_found]
        assert not blind, f"{w}: retried without a reconciliation that found nothing: {row}"
        assert row["callers"][0] == row["created_by"]
    return figures


def summary(faults: Faults, audit: StreamAudit, runs: dict[str, Any], unrecorded: set[str],
            calls: Counter[str], drained: list[dict[str, Any]], logs: Path) -> str:
    events = [e for path in sorted(logs.glob("*.jsonl")) for e in JsonLog.read(path)]
    lost = Counter(f"{e['how']}/{e['target']}" for e in events if e["kind"] == "lost")
    decisions = Counter(e["decision"] for e in events if e["kind"] == "decision")
    status = Counter(r.status.value for r in runs.values())
    refused = sum("no longer carries this fence" in (r.error or "") for r in runs.values())
    work: Counter[str] = Counter()
    for r in runs.values():
        for key in ("completed", "reconciled", "retried", "superseded", "remaining"):
            work[key] += int(r.extra.get(key, 0))
    paused = Counter(runs[r].status.value if r in runs else "unrecorded"
                     for r in faults.paused_holders if r in audit.taken_over)
    return (
        f"chaos seed={SEED} items={ITEMS} workers={WORKERS}: "
        f"kills={faults.kills} (holder {faults.kills_of_holder}), "
        f"pauses={faults.pauses} (holder {len(faults.paused_holders)}, taken over while "
        f"paused {dict(paused)}), lost responses {dict(sorted(lost.items()))} | "
        f"fences={len(audit.acquisitions)} runs {dict(sorted(status.items()))} "
        f"unrecorded={len(unrecorded)} writes refused by the fence={refused} "
        f"decisions {dict(sorted(decisions.items()))} | work {dict(work)} destination "
        f"{dict(calls)} | writes={sum(audit.writes_by.values())} "
        f"(job row {audit.claims}, completions by a stale run {audit.stale_facts}) "
        f"checkpoints={len(audit.checkpoints)} drain runs={len(drained)} | "
        f"faults {faults.seconds:.0f}s, drain {faults.drain_seconds:.0f}s, "
        f"stream {faults.audit_seconds:.0f}s"
    )


def test_the_emulator_serves_others_while_a_client_stalls_mid_request(server):
    import socket
    from urllib.parse import urlsplit

    import boto3
    from botocore.config import Config

    address = urlsplit(server["AWS_ENDPOINT_URL"])
    body = b'{"TableName": "no-such-table"}'
    head = (
        f"POST / HTTP/1.1\r\nHost: {address.netloc}\r\n"
        "X-Amz-Target: DynamoDB_20120810.DescribeTable\r\n"
        "Content-Type: application/x-amz-json-1.0\r\n"
        "Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/"
        "aws4_request, SignedHeaders=host, Signature=0\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    # GIVEN a client stopped after sending half of a DynamoDB request
    stalled = socket.create_connection((address.hostname, address.port))
    try:
        stalled.sendall(head + body[:8])
        other = boto3.session.Session().client("dynamodb", **{
            "endpoint_url": server["AWS_ENDPOINT_URL"], "region_name": "us-east-1",
            "aws_access_key_id": "testing", "aws_secret_access_key": "testing",
            "config": Config(read_timeout=3, retries={"mode": "standard", "max_attempts": 1})})
        # WHEN another client calls DynamoDB
        # THEN it is served
        assert "TableNames" in other.list_tables()
    finally:
        stalled.sendall(body[8:])
        stalled.recv(1024)
        stalled.close()
