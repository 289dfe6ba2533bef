"""The item ledger against a reference model, step by step (Hypothesis stateful testing).

Three simulated workers take cooperative steps (no threads) through the real stores
(``DynamoJobStore``, ``DynamoItemStore``) on the in-process emulator and a shared
``ManualClock`` (each worker's wall clock is off by less than the skew margin), each
following the ledger's protocol as ``WorkClaims`` does: take the lease (a takeover gets
a higher fence), heartbeat, release, look items up and claim the free ones (one fenced
write of the job row; a vanished run's open claim is replaced, its items written
uncertain), call the destination, record an outcome (a completion fact, unfenced; a
failed or uncertain row with the job row's write), reconcile (an uncertain item or a
vanished claim's: found completes it, not found makes it safe to claim), advance the
checkpoint, crash (forget everything), pause (keep stale state, act later), let time
pass, lose a response (the SDK's retry is refused by the write itself) and receive a
request again much later. A reference model predicts every answer and every row.

After every step: FENCE (a job-row write under a fence that is not the newest changes
nothing), ONCE (the destination is never called for a work id whose effect exists, and
every completion's proof is that effect), END so far (every ledger row and the open
claim are what the model explains; the unresolved index agrees), CKPT (the checkpoint
never moves back).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore import xform_name
from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from jobguard import (
    GuardedJob,
    ItemRecord,
    JobConfig,
    LeaseLostError,
    StoreError,
    WorkId,
)
from jobguard.callsites import Fault
from jobguard.clock import to_ms
from jobguard.dynamodb import DynamoJobStore, create_table, lease_state
from jobguard.dynamodb_items import DynamoItemStore, item_record, job_row
from jobguard.faults import Faults, Rule
from jobguard.ids import new_run_id
from jobguard.lease import Acquired
from jobguard.local.emulator import in_process
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.requests import Release, Take
from jobguard.testing import ManualClock
from jobguard.trigger_state import State
from jobguard.triggers import Trigger, TriggerKind
from jobguard.workitems import (
    Checkpoint,
    Commit,
    Completion,
    Fence,
    ItemState,
    JobRow,
    Unresolved,
)

JOB = "model-job"
ITEMS = tuple(str(WorkId(f"contact-{i}", "create-note")) for i in range(4))
WORKERS = ("a", "b", "c")
CLOCK_OFFSET_MS = {"a": -400, "b": 0, "c": 400}  # each within half the skew margin
LEASE_MS, SKEW_MS, CLAIM_MS = 10_000, 1_000, 20_000
TTL_S = 15 * 86_400
WRITES = ("UpdateItem", "TransactWriteItems", "BatchWriteItem")


@dataclass
class Row:
    """What the model says an item row holds (a completion fact, or failed / uncertain)."""

    state: str
    run_id: str
    fence: int
    destination_id: str | None = None
    retryable: bool = False


def seen(record: ItemRecord) -> Row:
    return Row(record.state.value, str(record.run_id), int(record.fence or 0),
               record.destination_id, record.retryable)


@dataclass
class Worker:
    """What one worker believes. Crashing resets it; pausing keeps it, stale."""

    name: str
    clock: ManualClock
    lease: Fence | None = None
    trigger_id: str = ""
    deadline: float = 0.0  # monotonic: last confirmed renewal sent + lease - skew margin
    row: JobRow | None = None  # the job row as it last wrote or read it
    version: int = -1  # the model's version of that row
    claims: dict[str, float] = field(default_factory=dict)  # its open claim: id -> at
    called: dict[str, str | None] = field(default_factory=dict)  # -> note id; None: unknown
    failed: set[str] = field(default_factory=set)  # called, refused before it was sent
    not_found: set[str] = field(default_factory=set)  # its reconciliation found nothing
    last: tuple[str, dict[str, Any]] | None = None  # its last write, to deliver again
    paused: bool = False

    def now_ms(self) -> int:
        return to_ms(self.clock.now())

    def may_call(self, work_id: str) -> bool:
        """Run.ensure_lease + ClaimedItem.ensure_claim: the local deadlines."""
        now = self.clock.monotonic()
        return (now < self.deadline and work_id in self.claims
                and now < self.claims[work_id] + (CLAIM_MS - SKEW_MS) / 1000)


class FakeDestination:
    """Notes by work id (the idempotency key), and a log of every call."""

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}
        self.calls: list[tuple[str, str, bool]] = []  # work id, caller, note existed

    def put(self, work_id: str, caller: str) -> str:
        self.calls.append((work_id, caller, work_id in self.notes))
        return self.notes.setdefault(work_id, f"note-{len(self.notes) + 1}")


class Recorder:
    """The last write request the stores sent (to deliver it again, much later)."""

    def __init__(self, client: Any) -> None:
        self.last: tuple[str, dict[str, Any]] | None = None
        client.meta.events.register("provide-client-params.dynamodb", self._remember)

    def _remember(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in WRITES:
            self.last = (model.name, dict(params))


class ItemLedgerModel(RuleBasedStateMachine):
    """Workers, the real stores on a fresh in-process emulator, and the model."""

    def __init__(self) -> None:
        super().__init__()
        self._emulator = in_process()
        emulator = self._emulator.__enter__()
        self.ddb = emulator.client("dynamodb")
        table = f"model-{uuid.uuid4().hex[:8]}"
        create_table(self.ddb, table)
        self.store = DynamoJobStore(table, client=self.ddb)
        self.items = DynamoItemStore(table, client=self.ddb)
        self.recorder = Recorder(self.ddb)
        self.clock = ManualClock()
        self.workers = {n: Worker(n, self.clock.skewed(timedelta(milliseconds=CLOCK_OFFSET_MS[n])))
                        for n in WORKERS}
        self.destination = FakeDestination()
        # the model
        self.rows: dict[str, Row] = {}
        self.claim: tuple[str, int, frozenset[str]] | None = None  # run, fence, items
        self.version = 0  # grows with every applied write of the job row's claim/checkpoint
        self.lease: tuple[str | None, int, int | None] = (None, 0, None)  # run, fence, expiry
        self.checkpoint = Checkpoint()
        self.high_water = (0, 0)
        self.triggers = 0

    def teardown(self) -> None:
        try:  # END: unresolved() holds exactly the claimed, failed and uncertain items
            unresolved = {r.work_id: r.state.value for r in self.items.unresolved(JOB)}
            expected = {w: r.state for w, r in self.rows.items() if r.state != "completed"}
            if self.claim is not None:
                expected.update({w: "claimed" for w in self.claim[2]
                                 if self.rows.get(w, Row("", "", 0)).state != "completed"})
            assert unresolved == expected
        finally:
            self._emulator.__exit__(None, None, None)

    # -- helpers -----------------------------------------------------------------------

    def holds(self, lease: Fence) -> bool:
        return self.lease[:2] == (lease.run_id, lease.fence)

    def table(self) -> dict[str, dict[str, Any]]:
        """Every row of the job (items, lease, job row) in one consistent batch read."""
        keys = [{"pk": {"S": f"ITEM#{JOB}#{w}"}, "sk": {"S": "ITEM"}} for w in ITEMS]
        keys += [{"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": sk}} for sk in ("LEASE", "FENCE")]
        found = self.ddb.batch_get_item(RequestItems={self.store.table_name: {
            "Keys": keys, "ConsistentRead": True}})["Responses"][self.store.table_name]
        return {f"{row['pk']['S']}|{row['sk']['S']}": row for row in found}

    def pick(self, data: Any, options: Any) -> Any:
        return data.draw(st.sampled_from(sorted(options)))

    def send(self, worker: Worker, call: Any, lost_response: bool) -> Any:
        """Send one store call; ``lost_response``: its first write is applied and its
        answer lost (the SDK sends it again and the caller gets that answer)."""
        if not lost_response:
            result = call()
        else:
            with Faults([Rule(Fault.LOST, nth=1)], seed=1, backoff_scale=0.001,
                        clients=[self.ddb]):
                result = call()
            event("a lost response was recognised by the write itself")
        worker.last = self.recorder.last
        return result

    # Who can take which step (preconditions: every step does something).

    def awake(self) -> list[str]:
        return [n for n, w in self.workers.items() if not w.paused]

    def holders(self) -> list[str]:
        """Awake workers that believe they hold the lease (some may be stale)."""
        return [n for n in self.awake() if self.workers[n].lease is not None]

    def callers(self) -> list[str]:
        return [n for n in self.holders() if any(
            w not in self.workers[n].called and self.workers[n].may_call(w)
            for w in self.workers[n].claims)]

    def settlers(self) -> list[str]:
        return [n for n in self.holders() if self.workers[n].claims]

    def repeaters(self) -> list[str]:
        return [n for n in self.awake() if self.workers[n].last is not None]

    # -- the job row: the model's prediction and the write ---------------------------------

    def commit(self, worker: Worker, *, claim: set[str], rows: list[Unresolved],
               checkpoint: tuple[int, str] | None, lost_response: bool) -> bool:
        """One job-row write (with ``rows``): applied iff the worker holds the newest
        fence and knows the row as it is; else LeaseLostError / StoreError and nothing
        changes. Returns whether it was applied."""
        assert worker.lease is not None and worker.row is not None
        lease, now_ms = worker.lease, worker.now_ms()
        before = self.table()
        change = Commit(expected=worker.row, claim=dict.fromkeys(claim, "") or None,
                        claim_expires_at_ms=now_ms + CLAIM_MS, checkpoint=checkpoint,
                        rows=tuple(rows))
        try:
            done = self.send(worker, lambda: self.items.commit(lease, change, now_ms=now_ms),
                             lost_response)
        except LeaseLostError:
            event("a job-row write under a stale fence was refused")
            assert not self.holds(lease), "a current fence was refused"
            assert self.table() == before
            return False
        except StoreError as exc:
            event("a job-row write over a row it did not know was refused")
            assert self.holds(lease) and worker.version != self.version, exc
            assert self.table() == before
            return False
        assert self.holds(lease), f"a write under stale fence {lease} was accepted"
        assert worker.version == self.version, "a write over a row it did not know landed"
        # applied: the model follows
        completed = set(done.completed)
        for r in rows:
            current = self.rows.get(r.work_id)
            if current is not None and current.state == "completed":
                assert r.work_id in completed, "an unresolved row went over a completion"
                continue
            assert r.work_id not in completed
            self.rows[r.work_id] = Row(r.state.value, lease.run_id, lease.fence, None,
                                       r.retryable)
        self.claim = (lease.run_id, lease.fence, frozenset(claim)) if claim else None
        if checkpoint is not None:
            seq, cursor = checkpoint
            assert self.checkpoint.seq == seq
            self.checkpoint = Checkpoint(cursor, seq + 1, lease.run_id, lease.fence)
            event("checkpoint advanced")
        self.version += 1
        worker.row, worker.version = done.row, self.version
        return True

    def know_row(self, worker: Worker) -> JobRow:
        """The worker reads the job row (a consistent read: the row as it is)."""
        worker.row, worker.version = self.items.read_row(JOB), self.version
        return worker.row

    def foreign(self, worker: Worker) -> tuple[str, int, frozenset[str]] | None:
        assert worker.lease is not None
        claim = self.claim
        return claim if claim is not None and claim[0] != worker.lease.run_id else None

    # -- the rules -----------------------------------------------------------------------

    @initialize()
    def first_run(self) -> None:
        self._acquire(self.workers[WORKERS[0]])

    @rule(data=st.data())
    def step(self, data: Any) -> None:
        """One step of one worker, or of the world. Each step is drawn (with weights)
        among those that can do something now; one rule rather than one per step, so
        that Hypothesis's swarm testing does not switch half of them off per example."""
        steps = [name for name, (weight, can) in STEPS.items() if can(self)
                 for _ in range(weight)]
        name = data.draw(st.sampled_from(steps), label="step")
        event(f"step: {name}")
        getattr(self, name)(data)

    # -- steps: the lease --------------------------------------------------------------

    def start_run(self, data: Any) -> None:
        """Trigger a run: take the lease (a takeover gets a higher fence) or learn the
        holder."""
        self._acquire(self.workers[self.pick(data, self.awake())])

    def _acquire(self, worker: Worker) -> None:
        self.triggers += 1
        trigger = Trigger(JOB, f"{JOB}@manual:{self.triggers}", TriggerKind.MANUAL)
        now_ms, sent = worker.now_ms(), self.clock.monotonic()
        run_id = new_run_id(now_ms)
        result = self.store.take(Take(trigger, run_id=run_id, owner=worker.name, now_ms=now_ms,
                                      lease_ms=LEASE_MS, skew_ms=SKEW_MS))
        holder, fence, expires = self.lease
        if holder is None or (expires is not None and expires < now_ms - SKEW_MS):
            assert isinstance(result, Acquired) and result.fence == fence + 1
            event("lease taken over" if holder else "lease acquired")
            self.lease = (run_id, fence + 1, now_ms + LEASE_MS)
            # a new run: whatever the worker believed about its previous one is gone
            self.workers[worker.name] = Worker(
                worker.name, worker.clock, Fence(JOB, run_id, fence + 1), trigger.trigger_id,
                sent + (LEASE_MS - SKEW_MS) / 1000)
        else:
            assert not isinstance(result, Acquired) and result.state.run_id == holder

    def heartbeat(self, worker: Worker) -> None:
        """One renewal: conditioned on run id and fence, so a stale holder cannot extend
        (it keeps believing, as a run with writes in flight would)."""
        assert worker.lease is not None
        now_ms, sent = worker.now_ms(), self.clock.monotonic()
        renewed = self.store.renew(JOB, run_id=worker.lease.run_id, fence=worker.lease.fence,
                                   now_ms=now_ms, lease_ms=LEASE_MS)
        assert renewed == self.holds(worker.lease)
        if renewed:
            # an expiry never moves backwards (a worker whose clock is behind)
            previous = self.lease[2] or 0
            self.lease = (worker.lease.run_id, worker.lease.fence,
                          max(previous, now_ms + LEASE_MS))
            worker.deadline = sent + (LEASE_MS - SKEW_MS) / 1000
        else:
            event("a stale renewal was refused")

    def release(self, data: Any) -> None:
        worker = self.workers[self.pick(data, self.holders())]
        assert worker.lease is not None
        lease, now_ms = worker.lease, worker.now_ms()
        record = RunRecord(job=JOB, run_id=lease.run_id, trigger_id=worker.trigger_id,
                           trigger_kind="manual", policy="SKIP", decision=Decision.RAN,
                           status=RunStatus.SUCCEEDED, started_at_ms=now_ms,
                           ended_at_ms=now_ms, fence=lease.fence)
        released = self.store.release(Release(JOB, run_id=lease.run_id, fence=lease.fence,
                                              trigger_id=worker.trigger_id, outcome=State.DONE,
                                              record=record, record_ttl_s=now_ms // 1000 + 86_400,
                                              trigger_ttl_s=now_ms // 1000 + 86_400))
        assert released.released == self.holds(lease)  # a stale holder cannot free it
        if released.released:
            self.lease = (None, lease.fence, None)  # the fence is kept
        self.workers[worker.name] = Worker(worker.name, worker.clock)

    # -- steps: work items ---------------------------------------------------------------

    def claim_items(self, data: Any) -> None:
        """Look a few items up and claim the free ones (absent, failed and retryable, or
        uncertain and not found by its own reconciliation: never an uncertain item
        blindly, nor one in a vanished run's claim). The write replaces a vanished run's
        claim: its items without a completion are written uncertain."""
        worker = self.workers[self.pick(data, self.holders())]
        assert worker.lease is not None
        ids = data.draw(st.lists(st.sampled_from(ITEMS), min_size=1, max_size=3, unique=True))
        lost_response = data.draw(st.booleans(), label="lost_response")
        found, row = self.items.lookup(JOB, ids, with_row=worker.row is None)
        if row is not None:
            worker.row, worker.version = row, self.version
        assert worker.row is not None
        known = worker.row.claim
        vanished = set(known.items) if known is not None and known.run_id != \
            worker.lease.run_id else set()
        free = set()
        for work_id in ids:
            record = found.get(work_id)
            if work_id in worker.claims or work_id in vanished:
                continue
            if record is None or (record.state is ItemState.FAILED and record.retryable):
                free.add(work_id)
            elif record.state is ItemState.UNCERTAIN and work_id in worker.not_found:
                free.add(work_id)
                worker.not_found.discard(work_id)  # consumed: look again before another
        rows = []
        if vanished:
            others, _ = self.items.lookup(JOB, sorted(vanished))
            for work_id in sorted(vanished):
                record = others.get(work_id)
                if record is None or record.state is ItemState.FAILED:
                    rows.append(Unresolved(work_id, ItemState.UNCERTAIN, error="vanished"))
        at = self.clock.monotonic()
        if self.commit(worker, claim=set(worker.claims) | free, rows=rows, checkpoint=None,
                       lost_response=lost_response):
            for work_id in free:
                worker.claims[work_id] = at
                worker.called.pop(work_id, None)
                worker.failed.discard(work_id)

    def call_destination(self, data: Any) -> None:
        """Only for an item the worker holds a claim on, within its local deadlines.
        ``lost``: the effect happens, the worker never learns it; ``refused``: a known
        failure before the request left (nothing happens)."""
        worker = self.workers[self.pick(data, self.callers())]
        assert worker.lease is not None
        work_id = self.pick(data, [w for w in worker.claims
                                   if w not in worker.called and worker.may_call(w)])
        outcome = data.draw(st.sampled_from(["ok", "lost", "refused"]), label="outcome")
        event(f"destination called, {outcome}")
        if outcome == "refused":
            worker.called[work_id] = None
            worker.failed.add(work_id)
            return
        note = self.destination.put(work_id, f"{worker.lease.run_id}/{worker.lease.fence}")
        worker.called[work_id] = note if outcome == "ok" else None

    def settle(self, data: Any) -> None:
        """Record the outcome the worker knows: a completion fact (written unfenced, then
        the item dropped from its claim), a failure, an uncertain outcome (called, answer
        unknown) or a release (never called), each with the job row's write; with the
        checkpoint or not."""
        worker = self.workers[self.pick(data, self.settlers())]
        assert worker.lease is not None
        work_id = self.pick(data, worker.claims)
        note = worker.called.get(work_id)
        lost_response = data.draw(st.booleans(), label="lost_response")
        rows: list[Unresolved] = []
        if work_id in worker.failed:
            rows = [Unresolved(work_id, ItemState.FAILED, error="refused", retryable=True)]
        elif note is not None:
            self._fact(worker, work_id, note, lost_response)
        elif work_id in worker.called:
            rows = [Unresolved(work_id, ItemState.UNCERTAIN, error="outcome unknown")]
        step = data.draw(st.sampled_from([0, 1, 2]), label="checkpoint step")
        checkpoint = None
        if step and worker.row is not None:
            read = worker.row.checkpoint
            checkpoint = (read.seq, str(int(read.cursor or 0) + step))
        if worker.row is None:
            self.know_row(worker)
        self.commit(worker, claim=set(worker.claims) - {work_id}, rows=rows,
                    checkpoint=checkpoint, lost_response=lost_response)
        worker.claims.pop(work_id, None)
        worker.called.pop(work_id, None)
        worker.failed.discard(work_id)

    def _fact(self, worker: Worker, work_id: str, note: str, lost_response: bool) -> None:
        """A completion fact: written whoever holds the lease (it states what the
        destination holds), over anything but a completion."""
        assert worker.lease is not None
        lease, now_ms = worker.lease, worker.now_ms()
        fact = Completion(work_id, note, lease.run_id, lease.fence)
        self.send(worker, lambda: self.items.write_facts(JOB, [fact], now_ms=now_ms,
                                                         ttl_s=TTL_S), lost_response)
        current = self.rows.get(work_id)
        if current is not None and current.state == "completed":
            assert current.destination_id == note  # the same fact, seen twice
        event("completion fact written" + ("" if self.holds(lease) else " by a stale run"))
        self.rows[work_id] = Row("completed", lease.run_id, lease.fence, note)

    # -- steps: reconciliation ---------------------------------------------------------------

    def reconcile(self, data: Any) -> None:
        """An uncertain item, or one in a vanished run's claim, is looked up at the
        destination: found completes it (a fact), not found makes it safe to claim."""
        worker = self.workers[self.pick(data, self.holders())]
        assert worker.lease is not None
        work_id = self.pick(data, ITEMS)
        observed = self.items.get(JOB, work_id)
        lost_response = data.draw(st.booleans(), label="lost_response")
        if observed is None or observed.state in (ItemState.COMPLETED, ItemState.FAILED):
            return
        if observed.state is ItemState.CLAIMED and (
                observed.run_id == worker.lease.run_id or (
                    observed.fence or 0) >= worker.lease.fence):
            return  # its own claim, or a newer run's: not vanished
        note = self.destination.notes.get(work_id)
        if note is None:
            event("reconciled: not found")
            if observed.state is ItemState.UNCERTAIN:
                worker.not_found.add(work_id)
        else:
            event("reconciled: found")
            self._fact(worker, work_id, note, lost_response)

    # -- steps: the checkpoint -------------------------------------------------------------

    def advance_checkpoint(self, data: Any) -> None:
        """Forward from the job row as the worker knows it (read now, if it never did),
        guarded by the sequence it read."""
        worker = self.workers[self.pick(data, self.holders())]
        step = data.draw(st.integers(1, 3), label="step")
        lost_response = data.draw(st.booleans(), label="lost_response")
        if worker.row is None or data.draw(st.booleans(), label="read again"):
            self.know_row(worker)
        assert worker.row is not None
        read = worker.row.checkpoint
        on_row = worker.row.claim
        if on_row is not None and worker.lease is not None and \
                on_row.run_id != worker.lease.run_id:
            return  # a vanished run's claim: the claim step replaces it (with its rows)
        self.commit(worker, claim=set(worker.claims), rows=[],
                    checkpoint=(read.seq, str(int(read.cursor or 0) + step)),
                    lost_response=lost_response)

    # -- steps: faults -----------------------------------------------------------------------

    def duplicate_delivery(self, data: Any) -> None:
        """The worker's last write arrives once more, late (a request delayed in the
        network): a job-row write is refused by the row's newer token, a completion fact
        is the same fact again. Nothing changes."""
        worker = self.workers[self.pick(data, self.repeaters())]
        assert worker.last is not None
        operation, params = worker.last
        event(f"late duplicate of a {operation}")
        before = self.table()
        try:
            getattr(self.ddb, xform_name(operation))(**params)
        except ClientError as exc:
            assert exc.response["Error"]["Code"] in (
                "ConditionalCheckFailedException", "TransactionCanceledException"), exc
        after = self.table()
        if operation == "BatchWriteItem":
            for key in before:  # a fact written again, identical (or over its own fact)
                if key.startswith("ITEM#") and key in after and before[key] != after[key]:
                    assert before[key].get("state", {}).get("S") == "completed", key
                    assert after[key]["destination_id"] == before[key]["destination_id"]
        else:
            assert after == before, "a late duplicate of a job-row write changed the table"

    def crash(self, data: Any) -> None:
        """The worker forgets everything; its lease and claims stay behind."""
        name = self.pick(data, WORKERS)
        self.workers[name] = Worker(name, self.workers[name].clock)

    def pause_or_wake(self, data: Any) -> None:
        """A paused worker does nothing (no heartbeat either); woken, it acts on what it
        believed before. The lease holder is the one most worth pausing."""
        paused = [n for n, w in self.workers.items() if w.paused]
        if paused and data.draw(st.booleans(), label="wake"):
            self.workers[self.pick(data, paused)].paused = False
            return
        holder = [n for n, w in self.workers.items()
                  if w.lease is not None and self.holds(w.lease) and not w.paused]
        name = self.pick(data, holder if holder and data.draw(st.booleans(), label="holder")
                         else WORKERS)
        self.workers[name].paused = True

    def advance_clock(self, data: Any) -> None:
        """Time passes. Awake holders renew first (their heartbeat); a paused or crashed
        holder does not, and its lease runs out. A long stall outlasts every lease."""
        for name in self.holders():
            self.heartbeat(self.workers[name])
        seconds = data.draw(st.sampled_from([0.5, 1, 2, 5, 25]), label="seconds")
        self.clock.advance(timedelta(seconds=seconds))

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def the_ledger_is_what_the_model_says(self) -> None:
        rows = self.table()
        ledger = {r.work_id: seen(r) for key, raw in rows.items() if key.startswith("ITEM#")
                  if (r := item_record(JOB, raw)) is not None}
        lease = lease_state(JOB, rows.get(f"JOB#{JOB}|LEASE"))
        stored = job_row(JOB, rows.get(f"JOB#{JOB}|FENCE"))
        raw_row = {k: TypeDeserializer().deserialize(v)
                   for k, v in rows.get(f"JOB#{JOB}|FENCE", {}).items()}
        # END so far: every row is one the model explains; the open claim too
        assert ledger == self.rows
        assert (lease.run_id, lease.fence, lease.expires_at_ms) == self.lease
        claim = (None if stored.claim is None else
                 (stored.claim.run_id, stored.claim.fence, frozenset(stored.claim.items)))
        assert claim == self.claim
        # FENCE: the job row carries the newest fence; a claim on it, one issued then
        assert stored.fence == self.lease[1] and int(raw_row.get("hw", 0)) == self.lease[1]
        # ONCE: never a call for an effect that exists; every proof is that effect
        repeated = [c for c in self.destination.calls if c[2]]
        assert not repeated, f"destination called for an existing effect: {repeated}"
        for work_id, row in self.rows.items():
            if row.state == "completed":
                assert row.destination_id == self.destination.notes[work_id]
        # CKPT: the checkpoint never moves back
        model = self.checkpoint
        checkpoint = stored.checkpoint
        assert (checkpoint.cursor, checkpoint.seq, checkpoint.run_id, checkpoint.fence) == (
            model.cursor, model.seq, model.run_id, model.fence)
        position = (checkpoint.seq, int(checkpoint.cursor or 0))
        assert position[0] >= self.high_water[0] and position[1] >= self.high_water[1]
        self.high_water = position


# step -> (weight, who can take it now)
STEPS: dict[str, tuple[int, Any]] = {
    "start_run": (3, ItemLedgerModel.awake),
    "claim_items": (4, ItemLedgerModel.holders),
    "call_destination": (5, ItemLedgerModel.callers),
    "settle": (4, ItemLedgerModel.settlers),
    "reconcile": (3, ItemLedgerModel.holders),
    "advance_checkpoint": (2, ItemLedgerModel.holders),
    "duplicate_delivery": (2, ItemLedgerModel.repeaters),
    "release": (1, ItemLedgerModel.holders),
    "crash": (1, lambda self: True),
    "pause_or_wake": (3, lambda self: True),
    "advance_clock": (3, lambda self: True),
}

ItemLedgerModel.TestCase.settings = settings(
    max_examples=25, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_item_ledger_model = ItemLedgerModel.TestCase


# -- regressions: bugs these tests found (now fixed in lib/), each in its minimal form -------


class LoseResponse:
    """The next successful ``operation`` loses its response and the SDK sends it again:
    the caller gets the retry's answer."""

    def __init__(self, client: Any, operation: str) -> None:
        self.client = client
        self.params: dict[str, Any] = {}
        self.armed = True
        client.meta.events.register(f"provide-client-params.dynamodb.{operation}",
                                    self._remember)
        client.meta.events.register(f"after-call.dynamodb.{operation}", self._replay)

    def _remember(self, params: dict[str, Any], **_: Any) -> None:
        if self.armed:
            self.params = dict(params)

    def _replay(self, http_response: Any, model: Any, **_: Any) -> None:
        if self.armed and http_response.status_code < 300:
            self.armed = False
            getattr(self.client, xform_name(model.name))(**self.params)


def test_a_takeover_whose_response_is_lost_still_records_the_displaced_run():
    with in_process() as emulator:
        ddb = emulator.client("dynamodb")
        table = f"model-{uuid.uuid4().hex[:8]}"
        create_table(ddb, table)
        store = DynamoJobStore(table, client=ddb)
        clock = ManualClock()
        # GIVEN run R1 holds the lease and vanishes without releasing it
        first = store.take(Take(Trigger(JOB, f"{JOB}@manual:r1", TriggerKind.MANUAL), run_id="R1",
                                owner="gone", now_ms=to_ms(clock.now()), lease_ms=10_000,
                                skew_ms=1_000))
        assert isinstance(first, Acquired)
        clock.advance(timedelta(seconds=12))

        # WHEN the next trigger takes the lease over, and the response to that write is
        # lost (the SDK sends it again; the retry is refused by the takeover itself)
        LoseResponse(ddb, "UpdateItem")
        config = JobConfig(name=JOB, table_name=table, lease=timedelta(seconds=10),
                           skew_margin=timedelta(seconds=1))
        job = GuardedJob(config, lambda event, context: "ran", store=store, clock=clock)
        assert job({"job": JOB, "manual": True, "trigger_id": "r2"}, None) == "ran"

        # THEN R1 is on the run log, as after any takeover
        assert store.read_lease(JOB).fence == 2
        displaced = store.get_run(JOB, "R1")
        assert displaced is not None and displaced.status is RunStatus.ABANDONED


def test_a_cancellation_without_reasons_is_an_error_not_a_silent_skip():
    with in_process() as emulator:
        ddb = emulator.client("dynamodb")
        table = f"model-{uuid.uuid4().hex[:8]}"
        create_table(ddb, table)
        store = DynamoJobStore(table, client=ddb)
        items = DynamoItemStore(table, client=ddb)
        acquired = store.take(Take(Trigger(JOB, f"{JOB}@manual:1", TriggerKind.MANUAL), run_id="R1",
                                   owner="w", now_ms=1_000, lease_ms=LEASE_MS, skew_ms=SKEW_MS))
        assert isinstance(acquired, Acquired)
        lease = Fence(JOB, "R1", acquired.fence)
        row = items.commit(lease, Commit(expected=items.read_row(JOB),
                                         claim=dict.fromkeys(ITEMS[:2], "")),
                           now_ms=1_000).row
        # ITEMS[0] is completed meanwhile (its fact: the destination holds it)
        items.write_facts(JOB, [Completion(ITEMS[0], "note-1", "R0", 1)], now_ms=1_000,
                          ttl_s=TTL_S)

        # GIVEN an endpoint that cancels a transaction without saying why
        ddb.meta.events.register(
            "after-call.dynamodb.TransactWriteItems",
            lambda parsed, **_: parsed.pop("CancellationReasons", None))

        # WHEN both are recorded uncertain (the completed one's row is refused)
        # THEN the store says so, rather than dropping one silently or writing neither
        change = Commit(expected=row, rows=tuple(
            Unresolved(w, ItemState.UNCERTAIN, error="x") for w in ITEMS[:2]))
        try:
            items.commit(lease, change, now_ms=1_000)
        except StoreError:
            return
        raise AssertionError("a cancelled transaction without reasons was taken as done")


class _TimeRunsOut:
    """A Lambda context with plenty of time for ``calls`` checks, then none."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def get_remaining_time_in_millis(self) -> int:
        self.calls -= 1
        return 900_000 if self.calls >= 0 else 0


def test_a_run_that_runs_out_of_time_leaves_no_item_claimed():
    from ._items import CrmSync, NotesTable, contacts

    with in_process() as emulator:
        ddb = emulator.client("dynamodb")
        table = f"model-{uuid.uuid4().hex[:8]}"
        create_table(ddb, table)
        store = DynamoJobStore(table, client=ddb)
        config = JobConfig(name=JOB, table_name=table, batch_size=10)
        job = CrmSync(config, contacts(10), NotesTable.create(ddb), store=store,
                      clock=ManualClock())

        # GIVEN a run whose Lambda runs out of time after 3 items of a 10-item page
        report = job.handler()({"job": JOB, "manual": True, "trigger_id": "t"},
                               _TimeRunsOut(calls=1 + 3))
        assert (report["stopped"], report["completed"], report["remaining"]) == ("time", 3, 7)

        # THEN the run has ended, and none of its items is left claimed by it
        items = DynamoItemStore(table, client=ddb)
        assert items.unresolved(JOB, states=[ItemState.CLAIMED]) == []


class _DeliveredThenUnreachable:
    """The next PutItem reaches DynamoDB (the write happens) but its response times out;
    botocore retries, and every retry fails to connect. The caller sees the last
    attempt's error, ``ConnectTimeoutError``, "known before the request was sent"."""

    def __init__(self, client: Any) -> None:
        self.attempts = 0
        client.meta.events.register_first("before-send.dynamodb.PutItem", self._retry)
        client.meta.events.register_last("before-send", self._first_attempt)

    def _first_attempt(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        if self.attempts == 0 and b"PutItem" in target:
            self.attempts = 1  # after the emulator applied it
            raise ReadTimeoutError(endpoint_url="https://destination.example")

    def _retry(self, **_: Any) -> None:
        if self.attempts:
            self.attempts += 1
            raise ConnectTimeoutError(endpoint_url="https://destination.example")


def test_a_call_whose_retries_end_in_a_connect_error_is_uncertain_not_failed():
    import boto3
    from botocore.config import Config

    from ._items import CrmSync, NotesTable, contacts

    with in_process() as emulator:
        ddb = emulator.client("dynamodb")
        table = f"model-{uuid.uuid4().hex[:8]}"
        create_table(ddb, table)
        store = DynamoJobStore(table, client=ddb)
        notes = NotesTable.create(ddb)
        sdk = boto3.session.Session().client("dynamodb", config=Config(
            retries={"mode": "standard", "max_attempts": 3}))
        flaky = _DeliveredThenUnreachable(sdk)
        config = JobConfig(name=JOB, table_name=table, batch_size=10)

        # GIVEN a destination call delivered once, whose retries could not connect
        job = CrmSync(config, contacts(1), NotesTable(sdk, notes.name), store=store,
                      clock=ManualClock())
        job.handler()({"job": JOB, "manual": True, "trigger_id": "first"}, None)
        key = str(WorkId("contact-00000", "create-note"))
        assert flaky.attempts > 1 and notes.find(key) is not None  # the note exists

        # THEN the item's outcome is unknown: reconciled before anything is redone
        row = DynamoItemStore(table, client=ddb).get(JOB, key)
        assert row is not None and row.state is ItemState.UNCERTAIN, row
