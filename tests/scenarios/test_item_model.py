"""The item ledger against a reference model, step by step (Hypothesis stateful testing).

Three simulated workers take cooperative steps (no threads) through the real stores
(``DynamoJobStore``, ``DynamoItemStore``) on the in-process emulator and a shared
``ManualClock`` (each worker's wall clock is off by less than the skew margin): take the
lease (a takeover gets a higher fence), heartbeat, release, claim, call the destination,
record an outcome (complete, fail, uncertain), reconcile a vanished claim (``expire``,
then ``found`` or a claim ``after_uncertain``), advance the checkpoint, crash (forget
everything), pause (keep stale state, act later), let time pass, and receive duplicate
deliveries (a lost response: the same request twice, or once more much later). A
reference model predicts every answer and every row.

After every step: FENCE (a write under a fence that is not the lease row's changes
nothing), ONCE (the destination is never called for a work id whose effect exists, and
every completion's proof is that effect), END so far (every ledger row is the one the
model explains; the unresolved index agrees), CKPT (the checkpoint never moves back).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore import xform_name
from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError
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
from jobguard.clock import to_ms
from jobguard.dynamodb import DynamoJobStore, create_table, lease_state
from jobguard.dynamodb_items import DynamoItemStore, item_record
from jobguard.ids import new_run_id
from jobguard.lease import Acquired
from jobguard.local.emulator import in_process
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.testing import ManualClock
from jobguard.trigger_state import State
from jobguard.triggers import Trigger, TriggerKind
from jobguard.workitems import Checkpoint, ClaimRequest, Fence, ItemState, Settle

JOB = "model-job"
ITEMS = tuple(str(WorkId(f"contact-{i}", "create-note")) for i in range(4))
WORKERS = ("a", "b", "c")
CLOCK_OFFSET_MS = {"a": -400, "b": 0, "c": 400}  # each within half the skew margin
LEASE_MS, SKEW_MS, CLAIM_MS = 10_000, 1_000, 20_000
TTL_S = 15 * 86_400
CHECKPOINT = "\x00checkpoint"  # the key DynamoItemStore reports the checkpoint under


@dataclass
class Row:
    """What the model says a ledger row holds."""

    state: str
    run_id: str
    fence: int
    claim_expires_at_ms: int | None = None
    destination_id: str | None = None
    retryable: bool = False
    attempts: int = 0


def seen(record: ItemRecord) -> Row:
    return Row(record.state.value, str(record.run_id), int(record.fence or 0),
               record.claim_expires_at_ms, record.destination_id, record.retryable,
               record.attempts)


@dataclass
class Worker:
    """What one worker believes. Crashing resets it; pausing keeps it, stale."""

    name: str
    clock: ManualClock
    lease: Fence | None = None
    trigger_id: str = ""
    deadline: float = 0.0  # monotonic: last confirmed renewal sent + lease - skew margin
    claims: dict[str, float] = field(default_factory=dict)  # work id -> claimed at
    called: dict[str, str | None] = field(default_factory=dict)  # -> note id; None: unknown
    failed: set[str] = field(default_factory=set)  # called, refused before it was sent
    observed: dict[str, ItemRecord] = field(default_factory=dict)
    not_found: set[str] = field(default_factory=set)  # its reconciliation found nothing
    checkpoint: Checkpoint | None = None
    last: tuple[Any, ...] | None = None  # the last write, to deliver again
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


class ItemLedgerModel(RuleBasedStateMachine):
    """Workers, the real stores on a fresh in-process emulator, and the model."""

    def __init__(self) -> None:
        super().__init__()
        self._emulator = in_process()
        emulator = self._emulator.__enter__()
        ddb = emulator.client("dynamodb")
        table = f"model-{uuid.uuid4().hex[:8]}"
        create_table(ddb, table)
        self.store = DynamoJobStore(table, client=ddb)
        self.items = DynamoItemStore(table, client=ddb)
        self.clock = ManualClock()
        self.workers = {n: Worker(n, self.clock.skewed(timedelta(milliseconds=CLOCK_OFFSET_MS[n])))
                        for n in WORKERS}
        self.destination = FakeDestination()
        # the model
        self.rows: dict[str, Row] = {}
        self.lease: tuple[str | None, int, int | None] = (None, 0, None)  # run, fence, expiry
        self.checkpoint = Checkpoint()
        self.high_water = (0, 0)
        self.triggers = 0

    def teardown(self) -> None:
        try:  # END: the unresolved index holds exactly the claimed, failed, uncertain items
            unresolved = {r.work_id: r.state.value for r in self.items.unresolved(JOB)}
            assert unresolved == {w: r.state for w, r in self.rows.items()
                                  if r.state != "completed"}
        finally:
            self._emulator.__exit__(None, None, None)

    # -- helpers -----------------------------------------------------------------------

    def holds(self, lease: Fence) -> bool:
        return self.lease[:2] == (lease.run_id, lease.fence)

    def fenced(self, lease: Fence, send: Any) -> Any:
        """Send a write under ``lease``. FENCE: if the lease row does not carry that
        fence, the write raises LeaseLostError and changes nothing."""
        stale = not self.holds(lease)  # the model's lease row (checked after every step)
        before = self.table() if stale else None
        try:
            result = send()
        except LeaseLostError:
            event("a write under a stale fence was refused")
            assert stale, "a current fence was refused"
            assert self.table() == before
            return LeaseLostError
        assert not stale, f"a write under stale fence {lease} was accepted"
        return result

    def table(self) -> dict[str, dict[str, Any]]:
        """Every row of the job (items, lease, checkpoint) in one consistent batch read."""
        keys = [{"pk": {"S": f"ITEM#{JOB}#{w}"}, "sk": {"S": "ITEM"}} for w in ITEMS]
        keys += [{"pk": {"S": f"JOB#{JOB}"}, "sk": {"S": sk}} for sk in ("LEASE", "CHECKPOINT")]
        client = self.store.client
        found = client.batch_get_item(RequestItems={self.store.table_name: {
            "Keys": keys, "ConsistentRead": True}})["Responses"][self.store.table_name]
        return {f"{row['pk']['S']}|{row['sk']['S']}": row for row in found}

    def pick(self, data: Any, options: Any) -> Any:
        return data.draw(st.sampled_from(sorted(options)))

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

    # -- the model's predictions -------------------------------------------------------

    def expect_claim(self, lease: Fence, requests: list[ClaimRequest],
                     now_ms: int) -> set[str] | type[LeaseLostError]:
        if not self.holds(lease):
            return LeaseLostError
        done = set()
        for request in requests:
            row = self.rows.get(request.work_id)
            if request.after_uncertain:
                free = row is not None and row.state == "uncertain"
            else:  # absent, or failed and retryable (completed rows outlive the test)
                free = row is None or (row.state == "failed" and row.retryable)
            if free:
                self.rows[request.work_id] = Row(
                    "claimed", lease.run_id, lease.fence, now_ms + CLAIM_MS,
                    row.destination_id if row else None, False, (row.attempts if row else 0) + 1)
                done.add(request.work_id)
            elif row and row.state == "claimed" and (row.run_id, row.fence) == (
                    lease.run_id, lease.fence):
                event("a claim found its own earlier claim")
                done.add(request.work_id)  # its own claim: a lost response
        return done

    def expect_settle(self, lease: Fence, outcomes: list[Settle],
                      checkpoint: tuple[int, str] | None,
                      now_ms: int) -> tuple[set[str], bool] | type[LeaseLostError]:
        """Done work ids, and whether the checkpoint part is refused (StoreError)."""
        if not self.holds(lease):
            return LeaseLostError
        done = set()
        for o in outcomes:
            row = self.rows.get(o.work_id)
            ours = row is not None and row.state == "claimed" and (row.run_id, row.fence) == (
                lease.run_id, lease.fence)
            if o.kind in ("complete", "fail", "uncertain"):
                applies = ours
            elif o.kind == "found":
                applies = row is not None and row.state == "uncertain"
            else:  # expire
                applies = row is not None and row.state == "claimed" and (
                    row.run_id == o.observed_run_id)
            if applies:
                assert row is not None
                stamp = ({"run_id": lease.run_id, "fence": lease.fence}
                         if o.kind in ("found", "expire") else {})
                if o.kind in ("complete", "found"):
                    self.rows[o.work_id] = replace(row, state="completed",
                                                   destination_id=o.destination_id,
                                                   claim_expires_at_ms=None, **stamp)
                else:
                    self.rows[o.work_id] = replace(
                        row, state="failed" if o.kind == "fail" else "uncertain",
                        retryable=o.kind == "fail" and o.retryable, **stamp)
                event(f"settle {o.kind} applied")
                done.add(o.work_id)
            elif row is not None and (  # already there: its own write, response lost
                    (o.kind in ("complete", "found") and row.state == "completed"
                     and row.destination_id == o.destination_id)
                    or (o.kind == "fail" and row.state == "failed"
                        and row.run_id == lease.run_id)
                    or (o.kind in ("uncertain", "expire") and row.state == "uncertain"
                        and (o.kind == "expire" or row.run_id == lease.run_id))):
                event(f"settle {o.kind} found its own earlier write")
                done.add(o.work_id)
            else:
                event(f"settle {o.kind} refused")
        refused = False
        if checkpoint is not None:
            seq, cursor = checkpoint
            if self.checkpoint.seq == seq:
                self.checkpoint = Checkpoint(cursor, seq + 1, lease.run_id, lease.fence)
                event("checkpoint advanced")
            else:
                refused = not (self.checkpoint.run_id == lease.run_id
                               and self.checkpoint.cursor == cursor)
                event("checkpoint refused" if refused else "checkpoint found its own write")
        return done, refused

    # -- sending writes (also used by duplicate deliveries) ------------------------------

    def send_claim(self, lease: Fence, requests: list[ClaimRequest],
                   now_ms: int) -> set[str] | None:
        expected = self.expect_claim(lease, requests, now_ms)
        result = self.fenced(lease, lambda: self.items.claim(
            lease, requests, now_ms=now_ms, claim_ms=CLAIM_MS))
        if result is LeaseLostError:
            assert expected is LeaseLostError
            return None
        assert set(result.done) == expected
        assert set(result.refused) == {r.work_id for r in requests} - expected
        return expected

    def send_settle(self, lease: Fence, outcomes: list[Settle],
                    checkpoint: tuple[int, str] | None, now_ms: int) -> set[str] | None:
        expected = self.expect_settle(lease, outcomes, checkpoint, now_ms)

        def send() -> Any:
            try:
                return self.items.settle(lease, outcomes, now_ms=now_ms, ttl_s=TTL_S,
                                         checkpoint=checkpoint)
            except StoreError as exc:
                return exc

        result = self.fenced(lease, send)
        if result is LeaseLostError:
            assert expected is LeaseLostError
            return None
        assert expected is not LeaseLostError
        done, checkpoint_refused = expected
        if isinstance(result, StoreError):
            assert checkpoint_refused, result  # the outcomes landed all the same
            return done
        assert not checkpoint_refused
        assert set(result.done) - {CHECKPOINT} == done
        assert set(result.refused) == {o.work_id for o in outcomes} - done
        return done

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
        result = self.store.take(trigger, run_id=run_id, owner=worker.name, now_ms=now_ms,
                                    lease_ms=LEASE_MS, skew_ms=SKEW_MS)
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
        released = self.store.release(JOB, run_id=lease.run_id, fence=lease.fence,
                                      trigger_id=worker.trigger_id,
                                      outcome=State.DONE, record=record,
                                      record_ttl_s=now_ms // 1000 + 86_400,
                                      trigger_ttl_s=now_ms // 1000 + 86_400)
        assert released.released == self.holds(lease)  # a stale holder cannot free it
        if released.released:
            self.lease = (None, lease.fence, None)  # the fence is kept
        self.workers[worker.name] = Worker(worker.name, worker.clock)

    # -- steps: work items ---------------------------------------------------------------

    def claim(self, data: Any) -> None:
        """Claim a few items; or retry one its own reconciliation did not find (only
        those: an uncertain item is never retried blindly)."""
        worker = self.workers[self.pick(data, self.holders())]
        lost_response = data.draw(st.booleans(), label="lost_response")
        if worker.not_found and data.draw(st.booleans()):
            work_id = self.pick(data, worker.not_found)
            worker.not_found.discard(work_id)  # consumed: look again before another retry
            self._claim(worker, [ClaimRequest(work_id, after_uncertain=True)], lost_response)
            return
        ids = data.draw(st.lists(st.sampled_from(ITEMS), min_size=1, max_size=3, unique=True))
        self._claim(worker, [ClaimRequest(w) for w in ids], lost_response)

    def _claim(self, worker: Worker, requests: list[ClaimRequest], lost_response: bool) -> None:
        assert worker.lease is not None
        lease, now_ms, at = worker.lease, worker.now_ms(), self.clock.monotonic()
        worker.last = ("claim", lease, requests, now_ms)
        if lost_response:  # the first answer is lost; the SDK's retry answers
            self.send_claim(lease, requests, now_ms)
        done = self.send_claim(lease, requests, now_ms)
        for work_id in done or ():
            if work_id not in worker.claims:
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
        """Record the outcome the worker knows (complete, fail, or uncertain when the
        call's outcome is unknown or it never called), with the checkpoint or not."""
        worker = self.workers[self.pick(data, self.settlers())]
        work_id = self.pick(data, worker.claims)
        note = worker.called.get(work_id)
        if work_id in worker.failed:
            outcome = Settle(work_id, "fail", error="refused", retryable=True)
        elif note is not None:
            outcome = Settle(work_id, "complete", destination_id=note)
        else:
            outcome = Settle(work_id, "uncertain", error="outcome unknown")
        lost_response = data.draw(st.booleans(), label="lost_response")
        step = data.draw(st.sampled_from([0, 1, 2]), label="checkpoint step")
        checkpoint = None
        if step:
            read = worker.checkpoint or self.items.read_checkpoint(JOB)
            checkpoint = (read.seq, str(int(read.cursor or 0) + step))
        self._settle(worker, [outcome], checkpoint, lost_response)
        worker.claims.pop(work_id, None)
        worker.called.pop(work_id, None)
        worker.failed.discard(work_id)

    def _settle(self, worker: Worker, outcomes: list[Settle],
                checkpoint: tuple[int, str] | None, lost_response: bool) -> None:
        assert worker.lease is not None
        lease, now_ms = worker.lease, worker.now_ms()
        worker.last = ("settle", lease, outcomes, checkpoint, now_ms)
        before = self.checkpoint
        if lost_response:
            self.send_settle(lease, outcomes, checkpoint, now_ms)
        self.send_settle(lease, outcomes, checkpoint, now_ms)
        if checkpoint is not None and self.checkpoint != before:
            worker.checkpoint = self.checkpoint  # it knows its own advance

    # -- steps: reconciliation ---------------------------------------------------------------

    def look(self, data: Any) -> None:
        """A worker reads the checkpoint and some rows (stale by the time it acts?)."""
        worker = self.workers[self.pick(data, self.awake())]
        worker.checkpoint = self.items.read_checkpoint(JOB)
        ids = data.draw(st.lists(st.sampled_from(ITEMS), min_size=1, max_size=4, unique=True))
        rows = self.items.get_many(JOB, ids)
        for work_id in ids:
            if work_id in rows:
                worker.observed[work_id] = rows[work_id]
            else:
                worker.observed.pop(work_id, None)

    def reconcile(self, data: Any) -> None:
        """Act on a row as the worker saw it (reading it now if it never looked): a
        claim whose holder vanished (lower fence, or claim expired) becomes uncertain
        (``expire``); an uncertain item is looked up at the destination: found
        completes it, not found makes it safe to retry (see ``claim``)."""
        worker = self.workers[self.pick(data, self.holders())]
        assert worker.lease is not None
        work_id = self.pick(data, ITEMS)
        observed = worker.observed.pop(work_id, None) or self.items.get(JOB, work_id)
        now_ms = worker.now_ms()
        lost_response = data.draw(st.booleans(), label="lost_response")
        if observed is None or observed.state in (ItemState.COMPLETED, ItemState.FAILED):
            return
        if observed.state is ItemState.CLAIMED:
            if (observed.fence or 0) < worker.lease.fence or observed.claim_expired(
                    now_ms, SKEW_MS):
                self._settle(worker, [Settle(work_id, "expire", observed_run_id=observed.run_id,
                                             error="vanished")], None, lost_response)
                worker.claims.pop(work_id, None)
            return
        note = self.destination.notes.get(work_id)
        if note is None:
            event("reconciled: not found")
            worker.not_found.add(work_id)
        else:
            self._settle(worker, [Settle(work_id, "found", destination_id=note)], None,
                         lost_response)

    # -- steps: the checkpoint -------------------------------------------------------------

    def advance_checkpoint(self, data: Any) -> None:
        """Forward from what the worker last read (now, if never), guarded by the
        sequence it read."""
        worker = self.workers[self.pick(data, self.holders())]
        step = data.draw(st.integers(1, 3), label="step")
        lost_response = data.draw(st.booleans(), label="lost_response")
        read = worker.checkpoint or self.items.read_checkpoint(JOB)
        self._settle(worker, [], (read.seq, str(int(read.cursor or 0) + step)), lost_response)

    # -- steps: faults -----------------------------------------------------------------------

    def duplicate_delivery(self, data: Any) -> None:
        """The worker's last write arrives once more, late (a retry of a lost response)."""
        worker = self.workers[self.pick(data, self.repeaters())]
        assert worker.last is not None
        kind, lease, *request = worker.last
        event(f"late duplicate of a {kind}")
        if kind == "claim":
            requests, now_ms = request
            self.send_claim(lease, requests, now_ms)
        else:
            outcomes, checkpoint, now_ms = request
            self.send_settle(lease, outcomes, checkpoint, now_ms)

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
        checkpoint = {k: TypeDeserializer().deserialize(v)
                      for k, v in rows.get(f"JOB#{JOB}|CHECKPOINT", {}).items()}
        # END so far: every row is one the model explains (and the lease row too)
        assert ledger == self.rows
        assert (lease.run_id, lease.fence, lease.expires_at_ms) == self.lease
        # ONCE: never a call for an effect that exists; every proof is that effect
        repeated = [c for c in self.destination.calls if c[2]]
        assert not repeated, f"destination called for an existing effect: {repeated}"
        for work_id, row in self.rows.items():
            if row.state == "completed":
                assert row.destination_id == self.destination.notes[work_id]
        # CKPT: the checkpoint never moves back
        fence = checkpoint.get("fence")
        stored = (checkpoint.get("cursor"), int(checkpoint.get("seq", 0)),
                  checkpoint.get("run_id"), None if fence is None else int(fence))
        model = self.checkpoint
        assert stored == (model.cursor, model.seq, model.run_id, model.fence)
        position = (stored[1], int(stored[0] or 0))
        assert position[0] >= self.high_water[0] and position[1] >= self.high_water[1]
        self.high_water = position


# step -> (weight, who can take it now)
STEPS: dict[str, tuple[int, Any]] = {
    "start_run": (3, ItemLedgerModel.awake),
    "claim": (4, ItemLedgerModel.holders),
    "call_destination": (5, ItemLedgerModel.callers),
    "settle": (4, ItemLedgerModel.settlers),
    "look": (2, ItemLedgerModel.awake),
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
        first = store.take(Trigger(JOB, f"{JOB}@manual:r1", TriggerKind.MANUAL),
                              run_id="R1", owner="gone", now_ms=to_ms(clock.now()),
                              lease_ms=10_000, skew_ms=1_000)
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
        acquired = store.take(Trigger(JOB, f"{JOB}@manual:1", TriggerKind.MANUAL),
                                 run_id="R1", owner="w", now_ms=1_000, lease_ms=LEASE_MS,
                                 skew_ms=SKEW_MS)
        assert isinstance(acquired, Acquired)
        lease = Fence(JOB, "R1", acquired.fence)
        items.claim(lease, [ClaimRequest(ITEMS[0])], now_ms=1_000, claim_ms=CLAIM_MS)

        # GIVEN an endpoint that cancels a transaction without saying why
        ddb.meta.events.register(
            "after-call.dynamodb.TransactWriteItems",
            lambda parsed, **_: parsed.pop("CancellationReasons", None))

        # WHEN a claim of an item we hold and a free one is cancelled (ours refuses it)
        # THEN the store says so, rather than reporting neither as done nor as refused
        try:
            result = items.claim(lease, [ClaimRequest(ITEMS[0]), ClaimRequest(ITEMS[1])],
                                 now_ms=1_000, claim_ms=CLAIM_MS)
        except StoreError:
            return
        assert set(result.done) | set(result.refused) == {ITEMS[0], ITEMS[1]}


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
