"""Load under injected faults, on the embedded emulator: ``jobguard local --faults SPEC``.

Many triggers across several jobs of the crm-sync shape (a source of changed contacts,
one note per contact in a :class:`~jobguard.destinations.DynamoDBDestination`), fired by
several threads with random overlaps and duplicate deliveries, while
:class:`jobguard.faults.Faults` injects throttling, 5xx, timeouts and lost responses
into every AWS call site. Queued triggers and follow-ups are delivered by the local
event source mapping. Afterwards each job gets one clean run (the next tick), and the
invariants are checked against the ledger, the run log and the destination:

- ONCE: every note's put reached the destination once (lost responses included: the
  SDK's resend is refused by the conditional write and counts for nothing new);
- END: every item completed; none claimed, none uncertain after the clean run;
- FENCE: writes carrying an old fence are refused;
- CKPT: the checkpoint never moved backwards and never passed an unfinished item.

Example:
    >>> summary = run_load(triggers=1000, jobs=5, fault_rate=0.1, seed=1)  # doctest: +SKIP
    >>> summary["violations"]  # doctest: +SKIP
    []
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..batch import BatchJob, ClaimedItem, Page
from ..config import JobConfig, OverlapPolicy
from ..destinations import DynamoDBDestination
from ..workitems import ItemRecord, ItemState, WorkId

__all__ = ["Invariants", "NotesJob", "World", "check_invariants", "main", "run_load"]

POLICIES = (OverlapPolicy.SKIP, OverlapPolicy.QUEUE, OverlapPolicy.COALESCE,
            OverlapPolicy.REPLACE, OverlapPolicy.SKIP)


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


# An item has ended once completed, or failed with a known outcome (reported on the run
# record; replayed by a recovery). Claimed and uncertain items are unfinished.
_ENDED = (ItemState.COMPLETED, ItemState.FAILED)


@dataclass
class Invariants:
    """What the checks found: empty ``violations`` means every invariant held."""

    violations: list[str] = field(default_factory=list)
    checked: Counter[str] = field(default_factory=Counter)

    def require(self, name: str, ok: bool, message: str) -> None:
        self.checked[name] += 1
        if not ok:
            self.violations.append(f"{name}: {message}")


def check_invariants(world: World, job: str, work_ids: list[str], notes: dict[str, str],
                     puts: Counter[str], checkpoints: list[tuple[int, str | None]],
                     *, stale: tuple[str, int] | None = None,
                     found: Invariants | None = None) -> Invariants:
    """ONCE, END, FENCE and CKPT for one job whose source is ``work_ids``, in order.

    ``puts`` counts the destination puts that reached the emulator, per work id;
    ``checkpoints`` the (seq, cursor) observed over time; ``stale`` a (run id, fence)
    that no longer holds the lease, to try writing with.
    """
    from ..dynamodb_items import DynamoItemStore
    from ..errors import LeaseLostError
    from ..workitems import Commit, Fence, Unresolved

    inv = found or Invariants()
    items = DynamoItemStore(world.table, client=world.ddb)
    rows = items.get_many(job, work_ids)
    for work_id in work_ids:
        row = rows.get(work_id)
        inv.require("END", row is not None and row.state in _ENDED,
                    f"{job} {work_id} is {row.state.value if row else 'absent'}")
        inv.require("ONCE", puts.get(work_id, 0) <= 1,
                    f"{job} {work_id}: {puts.get(work_id)} puts reached the destination")
        if row is not None and row.state is ItemState.COMPLETED:
            inv.require("ONCE", notes.get(work_id) == row.destination_id,
                        f"{job} {work_id}: ledger says {row.destination_id}, destination "
                        f"{notes.get(work_id)}")
    claimed = items.unresolved(job, states=[ItemState.CLAIMED, ItemState.UNCERTAIN])
    inv.require("END", not claimed,
                f"{job}: unresolved {[(r.work_id, r.state.value) for r in claimed][:5]}")
    seqs = [seq for seq, _ in checkpoints]
    inv.require("CKPT", seqs == sorted(seqs), f"{job}: checkpoint seq went back {seqs}")
    final = items.read_checkpoint(job)
    inv.require("CKPT", final.cursor == f"{len(work_ids):06d}",
                f"{job}: final checkpoint {final.cursor}, source has {len(work_ids)}")
    if stale is not None:
        # A stale run's claim, failure record and checkpoint are refused (its completion
        # facts are not fenced: they state what the destination holds)
        run_id, fence = stale
        lease = Fence(job, run_id, fence)
        now = items.read_row(job)
        for attempt, change in (
                ("claim", Commit(expected=now, claim={"stale:create-note": ""})),
                ("failure", Commit(expected=now, rows=(Unresolved(
                    work_ids[0], ItemState.FAILED, error="stale", retryable=True),))),
                ("checkpoint", Commit(expected=now, checkpoint=(now.checkpoint.seq, "0")))):
            try:
                items.commit(lease, change, now_ms=0)
                inv.require("FENCE", False, f"{job}: a {attempt} with fence {fence} was applied")
            except LeaseLostError:
                inv.require("FENCE", True, "")
        inv.require("FENCE", items.get(job, "stale:create-note") is None,
                    f"{job}: a stale claim left a row")
    return inv


def checkpoint_cursor_ok(world: World, job: str, work_ids: list[str]) -> tuple[int, bool]:
    """The checkpoint now, and whether every item before it is completed."""
    from ..dynamodb_items import DynamoItemStore

    items = DynamoItemStore(world.table, client=world.ddb)
    checkpoint = items.read_checkpoint(job)
    upto = int(checkpoint.cursor or 0)
    rows = items.get_many(job, work_ids[:upto])
    done = all(r.state in _ENDED for r in rows.values()) and len(rows) == upto
    return checkpoint.seq, done


def puts_reached(faults: Any, key_attribute: str = "work_id") -> Counter[str]:
    """Destination puts that reached the emulator, per work id (from the harness's log)."""
    counts: Counter[str] = Counter()
    for call in faults.calls_at("destination.dynamodb.put"):
        if call.reached:
            counts[call.params["Item"][key_attribute]["S"]] += 1
    return counts


# -- the load --------------------------------------------------------------------------


class _Budget:
    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def run_load(*, triggers: int = 1000, jobs: int = 5, items_per_job: int = 40,
             fault_spec: str | None = None, fault_rate: float = 0.1, seed: int = 1,
             threads: int = 8, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Fire ``triggers`` ticks across ``jobs`` jobs under faults; check the invariants.

    Returns the summary (also what ``jobguard local --json`` prints).
    """
    from .. import hooks
    from ..dynamodb import DynamoJobStore
    from ..errors import JobGuardError
    from ..faults import Faults
    from ..triggerqueue import TriggerQueue
    from ..triggers import format_instant
    from .emulator import in_process
    from .esm import deliver_once

    say = log or (lambda text: None)
    spec = fault_spec if fault_spec is not None else f"any={fault_rate}"
    rng = random.Random(seed)
    with in_process():
        world = World.create()
        store = DynamoJobStore(world.table, client=world.ddb)
        notes = DynamoDBDestination(world.notes_table, client=world.ddb)
        names = [f"job{j}" for j in range(jobs)]
        configs: dict[str, JobConfig] = {}
        handlers: dict[str, Any] = {}
        queues: dict[str, str] = {}
        sources = {name: contacts(items_per_job, f"{name}-contact") for name in names}
        for j, name in enumerate(names):
            policy = POLICIES[j % len(POLICIES)]
            queue_url = world.fifo_queue(name) if policy in (
                OverlapPolicy.QUEUE, OverlapPolicy.COALESCE) else None
            configs[name] = JobConfig(
                name=name, policy=policy, table_name=world.table, trigger_queue_url=queue_url,
                batch_size=5, lease=timedelta(seconds=6), skew_margin=timedelta(seconds=1),
                max_queued=50)
            queue = TriggerQueue(queue_url, client=world.sqs) if queue_url else None
            handlers[name] = NotesJob(configs[name], sources[name], notes, store=store,
                                      queue=queue).handler()
            if queue_url:
                queues[name] = queue_url
        base = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
        plan: list[tuple[str, dict[str, Any]]] = []
        for n in range(triggers):
            name = rng.choice(names)
            # Ticks a minute apart per job; about one in ten is delivered again.
            minute = rng.randrange(max(1, triggers // jobs))
            event = {"job": name, "scheduled_at": format_instant(base + timedelta(minutes=minute))}
            plan.append((name, event))
            if rng.random() < 0.1 and n + 1 < triggers:
                plan.append((name, dict(event)))
        plan = plan[:triggers]
        decisions: Counter[str] = Counter()
        errors: Counter[str] = Counter()
        checkpoints: dict[str, list[tuple[int, str | None]]] = {name: [] for name in names}
        ckpt_violations: list[str] = []
        lock = threading.Lock()
        cursor = {"next": 0}

        faults = Faults.parse(spec, seed=seed, backoff_scale=0.01,
                              clients=[world.ddb, world.sqs])

        def observe(job: str, **_: Any) -> None:
            with faults.suspended():
                seq, ok = checkpoint_cursor_ok(world, job, [
                    str(WorkId(r["id"], "create-note")) for r in sources[job]])
            with lock:
                checkpoints[job].append((seq, None))
                if not ok:
                    ckpt_violations.append(f"CKPT: {job} checkpoint passed an unfinished item")

        def deliver(name: str) -> None:
            if name in queues:
                try:
                    deliver_once(world.sqs, queues[name], handlers[name], visibility_s=2)
                except Exception as exc:  # noqa: BLE001 - the mapping would retry
                    with lock:
                        errors[f"delivery:{type(exc).__name__}"] += 1

        def worker() -> None:
            while True:
                with lock:
                    n = cursor["next"]
                    cursor["next"] += 1
                if n >= len(plan):
                    return
                name, event = plan[n]
                try:
                    result = handlers[name](event, _Budget())
                    what = (result.get("decision") or result.get("jobguard") or "ran"
                            if isinstance(result, dict) and "jobguard" in result else "ran")
                except (JobGuardError, Exception) as exc:  # noqa: BLE001 - the sender retries
                    what = "error"
                    with lock:
                        errors[type(exc).__name__] += 1
                with lock:
                    decisions[str(what)] += 1
                if n % 3 == 0:
                    deliver(name)

        started = time.perf_counter()
        with faults, hooks.on("after_claim", observe):
            pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join()
            elapsed = time.perf_counter() - started
            faults.rules.clear()  # the faults end; the system settles
            say(f"{len(plan)} triggers in {elapsed:.1f} s; settling")
            # Queues drain (visibility may hide a deferred message for a few seconds).
            for name in queues:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    if not deliver_once(world.sqs, queues[name], handlers[name],
                                        wait_s=1, visibility_s=2):
                        lease = store.read_lease(name)
                        if lease.queued_n <= 0 and lease.follow_up is None:
                            break
            # The next tick of every job: a clean run once any lease ends.
            finals: dict[str, Any] = {}
            for name in names:
                final_id = f"final-{uuid.uuid4().hex}"
                tick: dict[str, Any] = {"job": name, "manual": True, "trigger_id": final_id}
                trigger_id = f"{name}@manual:{final_id}"
                for _ in range(80):
                    lease = store.read_lease(name)
                    item = store.read_trigger(name, trigger_id)
                    if item is not None and item.state.value == "done":
                        finals[name] = lease
                        break
                    if item is None or item.state.value in ("failed", "lost", "running"):
                        handlers[name](tick, _Budget())
                    elif name in queues:  # queued behind others: the mapping delivers it
                        deliver_once(world.sqs, queues[name], handlers[name], visibility_s=2)
                    time.sleep(0.1)
            inv = Invariants()
            for violation in ckpt_violations:
                inv.violations.append(violation)
            reached = puts_reached(faults)
            stored = world.notes()
            runs: Counter[str] = Counter()
            items_done = failed_items = 0
            from ..dynamodb_items import DynamoItemStore

            store_items = DynamoItemStore(world.table, client=world.ddb)
            for name in names:
                work_ids = [str(WorkId(r["id"], "create-note")) for r in sources[name]]
                lease = store.read_lease(name)
                records = store.list_runs(name, limit=1000)
                runs.update(r.status.value for r in records)
                stale = next(((r.run_id, r.fence) for r in records
                              if r.fence is not None and r.fence < lease.fence), None)
                check_invariants(world, name, work_ids, stored, reached, checkpoints[name],
                                 stale=stale, found=inv)
                failed_items += len(store_items.unresolved(name, states=[ItemState.FAILED]))
                items_done += len(work_ids)
                inv.require("END", name in finals, f"{name}: no clean run after the faults")
        injected = faults.summary()
        by_kind: Counter[str] = Counter()
        for call in faults.injected:
            by_kind[call.fault.value if call.fault else "-"] += 1
        return {
            "triggers": len(plan),
            "jobs": jobs,
            "threads": threads,
            "seed": seed,
            "faults": spec,
            "seconds": round(elapsed, 2),
            "decisions_per_s": round(len(plan) / elapsed, 1),
            "decisions": dict(sorted(decisions.items())),
            "errors_surfaced": dict(sorted(errors.items())),
            "runs": dict(sorted(runs.items())),
            "runs_ran": sum(v for k, v in runs.items()
                            if k in ("succeeded", "incomplete", "failed", "lease_lost",
                                     "abandoned")),
            "items": items_done,
            "items_failed_reported": failed_items,
            "calls": len(faults.calls),
            "faults_injected": sum(by_kind.values()),
            "faults_by_kind": dict(sorted(by_kind.items())),
            "fault_rate": round(sum(by_kind.values()) / max(1, len(faults.calls)), 3),
            "checks": dict(sorted(inv.checked.items())),
            "violations": inv.violations,
            "injected_by_site": injected,
        }


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - thin wrapper
    from ..cli import main as cli_main

    return cli_main(["local", *(argv or [])])
