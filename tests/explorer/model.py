"""The reference model: what the README and DESIGN promise, checked against a history.

Written from the promises, not from the library: it never calls ``classify`` or the
store's lease logic. It is fed observations by the simulator (deliveries and what they
returned or raised, handler invocations, run records as they were written, the lease row
after every request, the checkpoint and item ledger, the destination's own counts, the
queue) and keeps its own notion of what is pending.

Invariants (each violation is ``(code, text)``; the code is what shrinking preserves):

- ``END``: every delivery ends in a recorded decision; a delivery the library failed
  without any injected fault is a violation; every run that ended has its record; every
  queued or coalesced trigger is run (or dead-lettered, or recorded paused), never
  silently dropped; every direct trigger gets a decision once faults stop.
- ``RERUN``: a trigger that is spent never runs again. Spent (README, "A trigger's
  states"): a run of it succeeded (any route; for a direct trigger also: a delivery that
  ran it returned success); REPLACE displaced its live run (``replaced``); the operator
  force-released its run (``released``). A direct trigger whose run failed, lost its
  lease or was taken over (``failed``/``lost``) MAY run again on a later delivery of the
  same trigger; a queued trigger or follow-up in those states MUST (END).
- ``ONCE``: no work id reaches the destination from two runs that both held the newest
  fence at the time.
- ``FENCE``: fences issued grow strictly; no write from a run is accepted once a higher
  fence was issued.
- ``CKPT``: the checkpoint never moves back and never passes an unfinished item.
- ``LIVE``: once faults stop, every pending trigger is decided within a bounded number
  of rounds, the queue drains, and a fresh tick runs.
- ``BOUND``: the lease row stays under 2 KB and holds a fixed set of attributes, never
  one per trigger (no attribute is named after a trigger delivered); its ``queued_n``
  equals the queued triggers still pending.
- ``DAMAGE``: a damaged lease row is reported as an error naming the attribute (never a
  crash, never a silent second fence).
- ``GARBAGE`` (issue 33, README "Bad input"): a message on the trigger queue that can
  never become a trigger is recorded ``rejected`` once and reported processed on its
  first delivery that meets no fault (``END/garbage-returned``, ``END/garbage-
  unrecorded``); the queued triggers behind it are served without waiting for its
  redrive budget: none is first delivered after it went to the dead-letter queue, unless
  every delivery of it met a fault (``LIVE/behind-garbage``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LEASE_ROW_MAX_BYTES = 2048
DIRECT_KINDS = ("tick", "manual", "rule")
MARK_DECISIONS = ("queued", "coalesced", "skipped", "dropped")
CRASHES = ("TypeError", "ValueError", "KeyError", "AttributeError", "IndexError",
           "AssertionError", "UnboundLocalError", "NameError", "RecursionError")


@dataclass
class Delivery:
    """One delivery of one trigger to the job (direct invoke, or one SQS record)."""

    n: int
    trigger_id: str
    kind: str  # tick | manual | queued | follow_up
    step: int
    actor: str = ""
    outcome: str | None = None  # ran | lease_lost | <decision> | deferred | error | killed
    run_id: str | None = None
    error: str | None = None
    faults: int = 0
    injected: int = 0
    """Faults injected into its own requests (``faults`` also counts disruptions)."""
    damaged: str | None = None
    """The lease row's damaged attributes while it was delivered (comma-separated)."""
    handler_failed: bool = False
    invoked: list[str] = field(default_factory=list)
    retried: bool = False
    """Its sender delivered the same event again after it failed (Lambda's async retry)."""
    clock_behind: bool = False
    """Its worker's clock was behind by more than the skew margin when it was delivered:
    a tick that is due may be ahead of that clock by more than the margin."""


@dataclass
class Invocation:
    run_id: str
    trigger_id: str
    kind: str
    fence: int
    step: int
    returned: bool = False
    actor: str = ""
    requested_by: str | None = None


@dataclass
class RecordWrite:
    step: int
    run_id: str
    trigger_id: str
    decision: str
    status: str
    kind: str


class Model:
    """Consumes a history's observations; collects violations."""

    def __init__(self, *, policy: str, skew_ms: int) -> None:
        self.policy = policy
        self.skew_ms = skew_ms
        self.violations: list[tuple[str, str]] = []
        self.hw_fence = 0
        self.calls: dict[str, list[tuple[str, int]]] = {}
        self.fence_owner: dict[int, str] = {}
        self.deliveries: list[Delivery] = []
        self.invocations: dict[str, Invocation] = {}
        self.records: list[RecordWrite] = []
        self.operator_steps: list[int] = []
        self.release_steps: list[int] = []
        self.follow_up_sends: list[int] = []
        """Steps at which a follow-up's message was sent (SQS accepted it)."""
        """Steps at which a run released the lease itself (its release resends a pending
        follow-up)."""
        """Steps at which an operator ended a lease (release --force, repair)."""
        self.spent: dict[str, str] = {}
        self.checkpoint: tuple[int, int] = (0, -1)
        self.dest: dict[str, list[tuple[str, int, bool]]] = {}
        self._said: set[str] = set()
        self.far_future: set[str] = set()
        self.spent_reason: dict[str, str] = {}
        self.spent_step: dict[str, int] = {}
        self.acquired_step: dict[str, int] = {}
        self.absorbed_at: dict[str, int] = {}
        """Runs whose acquisition took a pending follow-up off the lease row (the run
        that starts after coalesced triggers serves them), by step."""
        self.released_runs: dict[str, int] = {}
        """Runs an operator's ``release --force`` ended, by step (not a repair's)."""
        self.now_step = 0
        """The simulator's step counter (set before each observation)."""
        self.handed_at: dict[str, int] = {}
        """Continuations a link handed its job to (the pre-assigned run id), by step."""
        self.garbage: dict[str, list[str]] = {}
        """Messages on the trigger queue that are no trigger, by message id: how each of
        their deliveries ended (``rejected``, ``returned``, ``returned-faulted``,
        ``killed``)."""

    def violate(self, code: str, text: str, key: str = "") -> None:
        """``code`` is ``INVARIANT/what``; ``key`` refines it for shrinking (no ids)."""
        sig = f"{code}:{key}" if key else code
        if text not in self._said:
            self._said.add(text)
            self.violations.append((sig, text))

    # -- online observations ---------------------------------------------------------------

    def lease_changed(self, before: dict[str, Any], after: dict[str, Any], *, step: int,
                      true_now_ms: int, clock_offset_ms: int = 0) -> None:
        """The lease row after a request (plain values; {} when absent). ``clock_offset_ms``
        is how far the writer's wall clock is from the true one."""
        run_before, run_after = before.get("run_id"), after.get("run_id")
        fence = after.get("fence")
        if run_before is not None and run_after is None and after.get("released_by") == "run":
            self.release_steps.append(step)
        handed = run_after is not None and after.get("handed_from") == run_before \
            and run_before is not None
        # a chain's next link takes the lease from its hand-off under the run id the
        # hand-off named: an acquisition too (fence + 1)
        continued = (run_after is not None and run_after == run_before
                     and before.get("handed_from") is not None
                     and after.get("handed_from") is None and fence != before.get("fence"))
        if handed:
            self.handed_at[str(run_after)] = step
        self._chain_checks(before, after, run_before, run_after, handed, continued,
                           true_now_ms, clock_offset_ms)
        if run_after is not None and (run_after != run_before or continued) and not handed:
            self.acquired_step.setdefault(str(run_after), step)
            if before.get("follow_up") and not after.get("follow_up"):
                self.absorbed_at.setdefault(str(run_after), step)
            # an acquisition: it must carry a fence never issued before
            if not isinstance(fence, int):
                self.violate("FENCE/no-fence",
                             f"run {run_after} took the lease with fence {fence!r}")
            elif fence <= self.hw_fence:
                self.violate("FENCE/reissued", f"fence {fence} issued to run {run_after} but fence "
                             f"{self.hw_fence} was already issued "
                             f"(to {self.fence_owner.get(self.hw_fence)})")
            # README ("Clocks"): what holds is promised while clocks differ by less than
            # the skew margin. A writer whose clock is further off may judge a live lease
            # expired and take it over (its holder's trigger then ends `lost`, which MAY
            # run again) instead of replacing it: neither outcome is promised there.
            if (run_before is not None and self.policy == "REPLACE"
                    and abs(clock_offset_ms) <= self.skew_ms):
                expires = before.get("expires_at_ms")
                if isinstance(expires, int) and expires >= true_now_ms:
                    trigger = before.get("trigger_id")
                    # a redelivery of the same trigger taking over its own live run is
                    # that trigger still running (README: its run, if the lease is then
                    # lost, runs again), not a trigger replaced by a newer one
                    if isinstance(trigger, str) and trigger != after.get("trigger_id"):
                        self.spent.setdefault(trigger, f"displaced by REPLACE at step {step}")
                        self.spent_step.setdefault(trigger, step)
                        self.spent_reason.setdefault(trigger, "displaced")
        if isinstance(fence, int) and fence > self.hw_fence:
            self.hw_fence = fence
            if run_after is not None:
                self.fence_owner[fence] = str(run_after)

    def _chain_checks(self, before: dict[str, Any], after: dict[str, Any],
                      run_before: Any, run_after: Any, handed: bool, continued: bool,
                      true_now_ms: int, clock_offset_ms: int) -> None:
        """CHAIN (issue 30): a chain holds its job like one run. A link takes the lease
        only from the hand-off that names it (``CHAIN/link-without-hand-off``); nothing
        else takes a live hand-off but a REPLACE trigger (``CHAIN/overlap``), while clocks
        keep the README's promise."""
        trigger = after.get("trigger_id")
        taken = run_after is not None and (run_after != run_before or continued) \
            and not handed
        if taken and isinstance(trigger, str) and "@continue:" in trigger and not (
                continued and before.get("trigger_id") == trigger):
            self.violate("CHAIN/link-without-hand-off",
                         f"continuation {trigger} took the lease as {run_after} from "
                         f"{run_before} (trigger {before.get('trigger_id')}), not from its "
                         "hand-off")
        if taken and not continued and before.get("handed_from") is not None \
                and self.policy != "REPLACE" and abs(clock_offset_ms) <= self.skew_ms:
            expires = before.get("expires_at_ms")
            if isinstance(expires, int) and expires >= true_now_ms:
                self.violate("CHAIN/overlap",
                             f"run {run_after} took the lease from the live hand-off of "
                             f"{before.get('handed_from')} to {run_before}")

    def lease_names(self, after: dict[str, Any]) -> None:
        """README: the lease row "holds a fixed set of attributes ..., never one per
        trigger". An attribute whose name carries a delivered trigger's id is one."""
        if any(sig == "BOUND/row-per-trigger" for sig, _ in self.violations):
            return
        triggers = {d.trigger_id for d in self.deliveries}
        for name in after:
            hit = next((t for t in triggers if t in name), None)
            if hit is not None:
                self.violate("BOUND/row-per-trigger", f"the lease row has an attribute "
                             f"{name[:80]!r} for trigger {hit} (a fixed set is promised)")
                return

    def lease_size(self, size: int, step: int) -> None:
        if size > LEASE_ROW_MAX_BYTES and not any(
                sig == "BOUND/row-size" for sig, _ in self.violations):
            self.violate("BOUND/row-size",
                         f"the lease row is {size} B (bound {LEASE_ROW_MAX_BYTES} B)")

    def write_applied(self, *, run_id: str | None, fence: int | None, what: str,
                      step: int) -> None:
        """A write carrying a run's fence was accepted by the table."""
        if fence is not None and fence < self.hw_fence:
            self.violate("FENCE/stale-write",
                         f"{what} of run {run_id} (fence {fence}) was accepted after "
                         f"fence {self.hw_fence} was issued")

    def record_written(self, rec: RecordWrite) -> None:
        self.records.append(rec)
        if rec.decision == "ran" and rec.status in ("succeeded", "incomplete"):
            self.spent.setdefault(rec.trigger_id, f"run {rec.run_id} succeeded")
            self.spent_step.setdefault(rec.trigger_id, rec.step)
            self.spent_reason.setdefault(rec.trigger_id, "succeeded")

    def force_released(self, trigger_id: str, run_id: str, *, step: int,
                       recorded: bool = True) -> None:
        """The operator's ``release --force`` of run ``run_id`` landed: its trigger is
        ``released``, terminal (observed from the operator's side, not from the record
        the library writes). ``recorded``: README, the run's record then says
        ``released_by_operator`` (who and why) for good; a repair of a damaged row
        promises no record."""
        self.operator_steps.append(step)
        if recorded:
            self.released_runs.setdefault(run_id, step)
        self.spent.setdefault(trigger_id, f"its run {run_id} was force-released by the "
                              "operator")
        self.spent_step.setdefault(trigger_id, step)
        self.spent_reason.setdefault(trigger_id, "released")

    def invoked(self, inv: Invocation, delivery: Delivery | None) -> None:
        why = self.spent.get(inv.trigger_id)
        acquired = self.acquired_step.get(inv.run_id, inv.step)
        if why is not None and self.spent_step.get(inv.trigger_id, -1) < acquired:
            # spent before this run took the lease (a takeover of a run presumed dead,
            # decided while that run was still out, is the lease's documented hint)
            kind = "far-future-tick" if "@2062-" in inv.trigger_id else inv.kind
            reason = why.split(":")[0] if ":" in why else why.split()[0]
            self.violate("RERUN/ran-again", f"trigger {inv.trigger_id} ran again as "
                         f"{inv.run_id} (step {inv.step}) after it was spent: {why}",
                         key=f"{kind}:{self.spent_reason.get(inv.trigger_id, reason)}")
        self.invocations[inv.run_id] = inv
        if delivery is not None:
            delivery.invoked.append(inv.run_id)

    def delivery_ended(self, d: Delivery) -> None:
        if d.outcome == "killed":
            return
        if d.outcome in ("ran", "lease_lost") or (d.outcome == "error" and d.invoked
                                                  and d.error and "injected handler" in d.error):
            pass
        # new protocol: only success spends a direct trigger (lease_lost / failed MAY run
        # again on a later delivery of the same trigger)
        if d.outcome == "ran" and d.kind in DIRECT_KINDS:
            for run_id in d.invoked:
                inv = self.invocations.get(run_id)
                if inv is not None and inv.trigger_id == d.trigger_id:
                    self.spent.setdefault(d.trigger_id, f"its run {run_id} returned "
                                          f"{d.outcome} to delivery #{d.n}")
                    self.spent_step.setdefault(d.trigger_id, self.now_step)
                    self.spent_reason.setdefault(d.trigger_id, f"returned-{d.outcome}")
        if d.outcome == "error" and d.error is not None and d.error.startswith(
                "InvalidTriggerError: scheduled_at") and "@2062-" in d.trigger_id:
            d.outcome = "refused"  # a tick too far ahead may be refused, naming the field
            return
        if d.outcome == "error" and d.error is not None and d.clock_behind and \
                d.error.startswith("InvalidTriggerError: scheduled_at") and \
                "ahead of this worker's clock" in d.error:
            # README ("Clocks"): a worker whose clock is behind by more than the skew
            # margin refuses the tick that is due, naming the field; it stays an error,
            # so its sender retries it (_retry_undecided), as Lambda does
            return
        if d.outcome == "error" and d.error is not None:
            name = d.error.split(":", 1)[0]
            if name in CRASHES:
                self.violate("END/crash", f"delivery #{d.n} of {d.trigger_id} crashed: {d.error}",
                             key=name)
            elif d.damaged is not None and not d.injected:
                # (a delivery one of whose own requests failed by injection may fail with
                # that error: the damage did not stop it; so may one whose run's local
                # deadline passed under a clock jump, with no renewal in between)
                timed_out = (d.faults > d.injected and name == "LeaseLostError"
                             and "local lease deadline passed" in d.error)
                if not any(a in d.error for a in d.damaged.split(",")) \
                        and not d.handler_failed and not timed_out:
                    self.violate("DAMAGE/unnamed",
                                 f"delivery #{d.n} of {d.trigger_id} on a lease row "
                                 f"whose {d.damaged} is damaged failed without naming it: "
                                 f"{d.error}")
            elif d.faults == 0 and not d.handler_failed:
                self.violate("END/failed-unfaulted", f"delivery #{d.n} of {d.trigger_id} "
                             f"({d.kind}) failed with no fault injected: {d.error}",
                             key=f"{d.kind}:{' '.join(d.error.split()[:4])}")

    def checkpoint_moved(self, seq: int, cursor: int, unfinished_before: list[str],
                         step: int) -> None:
        if (seq, cursor) < self.checkpoint:
            self.violate("CKPT/backwards", f"checkpoint went back from {self.checkpoint} to "
                         f"{(seq, cursor)}")
        if unfinished_before:
            self.violate("CKPT/past-unfinished", f"checkpoint {cursor} passed unfinished items "
                         f"{unfinished_before[:3]}")
        self.checkpoint = max(self.checkpoint, (seq, cursor))

    def destination_called(self, work_id: str, run_id: str, fence: int, *,
                           excused: bool = False) -> None:
        """A run issued a destination call for ``work_id`` (when it sent it: a call the
        scheduler holds is in flight). README (REPLACE without a second call): a run
        whose lease a newer run took can call nothing once the newer one may call: a
        newer run leaves the displaced run's open claim alone until its deadline. So a
        lower fence never calls after a higher one did. ``excused``: outside the
        README's promise (a worker's clock off by more than the skew margin, a lease row
        damaged by hand)."""
        calls = self.calls.setdefault(work_id, [])
        newer = [i for i, (_, f) in enumerate(calls) if f > fence]
        own = [i for i, (r, _) in enumerate(calls) if r == run_id]
        # a run's later call of the same work id is its SDK retrying the call it sent
        # first (a 5xx, a lost answer): in flight since before the newer run's call, the
        # README's one exception (a destination that refuses a second write keeps one)
        in_flight = bool(own) and bool(newer) and own[0] < newer[0]
        if newer and not excused and not in_flight:
            self.violate("ONCE/displaced-called-after", f"{work_id}: run {run_id} (fence "
                         f"{fence}) called the destination after a run of fence "
                         f"{max(newer)} had", key="replace")
        calls.append((run_id, fence))

    def destination_reached(self, work_id: str, run_id: str, fence: int) -> None:
        stale = fence < self.hw_fence
        reaches = self.dest.setdefault(work_id, [])
        reaches.append((run_id, fence, stale))
        fresh_runs = {r for r, _, s in reaches if not s}
        if len(fresh_runs) > 1:
            self.violate("ONCE/two-runs", f"{work_id} reached the destination from runs "
                         f"{sorted(fresh_runs)}, each holding the newest fence")

    def garbage_delivered(self, message_id: str, outcome: str) -> None:
        """A delivery of a message that is no trigger ended: ``rejected`` (reported
        processed), ``returned`` (a batch item failure, no fault in its requests),
        ``returned-faulted`` (one of its requests met a fault: the record may not have
        been written, so back it comes) or ``killed``."""
        self.garbage.setdefault(message_id, []).append(outcome)
        if outcome == "returned":
            self.violate("END/garbage-returned", f"message {message_id}, which can never "
                         "become a trigger, was returned to the queue by a delivery that met "
                         "no fault: it comes back until the DLQ, the triggers behind it "
                         "waiting")

    def served_behind_garbage(self, trigger_id: str, garbage: list[str]) -> None:
        """The first delivery of queued trigger ``trigger_id``'s message, which was behind
        the messages ``garbage`` (no triggers, now in the dead-letter queue) in its FIFO
        group. Excused only where every delivery of such a message met a fault or a kill
        (its record may not have been written: back it came, as promised)."""
        waited = [g for g in garbage if "returned" in self.garbage.get(g, [])]
        if waited:
            self.violate("LIVE/behind-garbage", f"queued trigger {trigger_id} was first "
                         f"delivered only after message {waited[0]}, no trigger, went to "
                         "the DLQ (its whole redrive budget) although a delivery of it met "
                         "no fault")

    def garbage_checks(self, *, states: dict[str, str], recorded: dict[str, int]) -> None:
        """Once the queue drained: each message that is no trigger and left the queue
        (``deleted``) has exactly one ``rejected`` record; ``states``: message id -> its
        state on the queue, ``recorded``: message id -> its ``rejected`` records."""
        for message_id, state in sorted(states.items()):
            n = recorded.get(message_id, 0)
            if state == "deleted" and n != 1:
                self.violate("END/garbage-unrecorded" if n == 0 else
                             "END/garbage-recorded-twice",
                             f"message {message_id}, no trigger, left the queue with {n} "
                             "`rejected` records (one is promised)")

    # -- after the faults stopped --------------------------------------------------------

    def pending_queued(self, runs: list[dict[str, Any]], dlq_triggers: set[str]) -> list[str]:
        """Queued triggers (a ``queued`` record) not yet run to success, dead-lettered,
        recorded paused or ended by the operator (README: a force-released run's trigger
        is ``released`` and never runs again; observed from the operator's side)."""
        queued = {r["trigger_id"] for r in runs if r["decision"] == "queued"}
        done = {r["trigger_id"] for r in runs if r["decision"] == "ran"
                and r["status"] in ("succeeded", "incomplete")}
        paused = {r["trigger_id"] for r in runs if r["decision"] == "paused"}
        released = {t for t, why in self.spent_reason.items() if why == "released"}
        return sorted(t for t in queued if t not in done and t not in dlq_triggers
                      and t not in paused and t not in released)

    def coalesced_checks(self, *, dlq: list[tuple[str, int]], final: bool = False,
                         failed_events: frozenset[str] = frozenset()) -> None:
        """Once the queue drained (before any sender retried): every coalesced trigger
        was followed by a run that started after it (or its follow-up was recorded
        paused, or dead-lettered). One exception waits for the senders' retries
        (``final``): the coalescing delivery failed (its sender retries it, and the
        retry sends the follow-up again) and no run released the lease after it (the
        holder died, or an operator ended the lease: the operator's command has no
        queue), so no release was there to send it again. When Lambda no longer retries
        that delivery either (older than its maximum event age: ``failed_events``), it is
        on the function's failed-ticks queue, alarmed, as a dead-lettered one is."""
        last_run_step = max((inv.step for inv in self.invocations.values()), default=-1)
        for rec in self.records:
            if rec.decision != "coalesced" or rec.kind == "follow_up":
                continue  # a follow-up "coalesced" is one absorbed by a later run
            # (or a run released after it and its send of the follow-up failed too: only
            # the coalescing sender's retry sends it again)
            released = any(step > rec.step for step in self.release_steps)
            resent = any(step > rec.step for step in self.follow_up_sends)
            # (a delivery killed in the middle is retried by its sender as a failed one is)
            if not final and not (released and resent) and any(
                    d.trigger_id == rec.trigger_id and d.outcome in ("error", "killed")
                    for d in self.deliveries):
                continue
            # README ("Operators are transitions too"): a run an operator force-released
            # takes the coalesced triggers it had served with it (recover its range)
            ended_by_operator = any(
                step > rec.step and run in self.released_runs
                for run, step in self.absorbed_at.items())
            covered = last_run_step > rec.step or ended_by_operator or any(
                r.decision == "paused" and r.step > rec.step for r in self.records) or any(
                step > rec.step for _, step in dlq) or (final and rec.trigger_id in failed_events)
            if not covered:
                self.violate("END/coalesced-never-followed", f"coalesced trigger "
                             f"{rec.trigger_id} (step {rec.step}) was not followed by a run "
                             "once the queue drained")

    def settle_checks(self, *, runs: list[dict[str, Any]], dlq: list[tuple[str, int]],
                      queue_live: list[str], undecided: list[str], queued_n: int,
                      invocations_after: dict[str, int],
                      failed_events: frozenset[str] = frozenset()) -> None:
        """END and BOUND once the queue has drained (before the fresh tick).

        ``failed_events``: direct triggers a failed delivery of which Lambda no longer
        retried (older than its maximum event age): on the function's failed-ticks queue,
        alarmed, as the SQS DLQ's are; a queued one still counts on the lease row until
        the operator replays it (README runbook)."""
        dlq_triggers = {t for t, _ in dlq} | set(failed_events)
        by_id = {r["run_id"]: r for r in runs}
        # every decision a delivery returned is in the run log
        for d in self.deliveries:
            if d.outcome not in (None, "ran", "lease_lost", "error", "killed", "deferred") \
                    and d.run_id and d.run_id not in by_id:
                self.violate("END/decision-unrecorded",
                             f"delivery #{d.n} of {d.trigger_id} returned "
                             f"{d.outcome} as run {d.run_id}, which has no record")
        # README: a force-released run's record is `released_by_operator`, naming who
        # and why, and still the run's story (its trigger kind, the policy, who asked);
        # nothing written later (its own release, a redelivery's decision) replaces it
        for run_id in self.released_runs:
            rec = by_id.get(run_id)
            if rec is None or rec.get("status") != "released_by_operator":
                self.violate("END/operator-record-lost", f"run {run_id} was force-released "
                             "by the operator but its record says "
                             f"{(rec or {}).get('decision')}/{(rec or {}).get('status')}",
                             key=str((rec or {}).get("status")))
                continue
            inv = self.invocations.get(run_id)
            told = (rec.get("trigger_kind"), rec.get("policy"), rec.get("requested_by"))
            if inv is not None and told != (inv.kind, self.policy, inv.requested_by):
                self.violate("END/operator-record-lost", f"run {run_id} of {inv.trigger_id} "
                             f"({inv.kind}, {self.policy}, requested by {inv.requested_by}) "
                             f"was force-released, and its record says {told}",
                             key="story")
        # every run whose delivery returned has its record
        for d in self.deliveries:
            if d.outcome in ("ran", "lease_lost"):
                for run_id in d.invoked:
                    rec = by_id.get(run_id)
                    if rec is None or rec["decision"] != "ran":
                        self.violate("END/no-run-record", f"run {run_id} of {d.trigger_id} "
                                     f"ended ({d.outcome}, delivery #{d.n}) but has no run "
                                     "record", key=d.outcome or "")
        # at most one mark decision per trigger
        seen: dict[tuple[str, str], int] = {}
        for r in runs:
            if r["decision"] in MARK_DECISIONS:
                key = (r["trigger_id"], r["decision"])
                seen[key] = seen.get(key, 0) + 1
        for (trigger, decision), n in sorted(seen.items()):
            if n > 1:
                self.violate("END/recorded-twice", f"trigger {trigger} was recorded "
                             f"{decision} {n} times", key=decision)
        # queued triggers: run, dead-lettered or paused, never dropped silently
        pending = self.pending_queued(runs, dlq_triggers)
        for t in pending:
            story = _story(t, runs)
            self.violate("END/queued-never-ran", f"queued trigger {t} never ran to the end; "
                         f"its records: {story}; message "
                         f"{'still queued' if t in queue_live else 'gone'}", key=story)
        for t in undecided:
            self.violate("LIVE/undecided", f"direct trigger {t} got no decision once faults "
                         "stopped")
        if queue_live:
            self.violate("LIVE/queue-not-drained", f"the trigger queue did not drain: "
                         f"{queue_live}")
        waiting = set(self.pending_queued(runs, set())) & set(failed_events)
        if queued_n != len(pending) + len(waiting):
            self.violate("BOUND/queued_n", f"the lease row says queued_n={queued_n} but "
                         f"{len(pending)} queued triggers are pending"
                         + (f" and {len(waiting)} wait on the failed-ticks queue"
                            if waiting else ""))


AGED_MS = 3_600_000
"""A trigger's record written this long after its previous one is marked ``+1h`` in its
story: by then a mark kept only a dedup window (hours, at least ``stale_after``, default
1 h) may have aged out, where a record minutes after the last was not aged out but
deleted (``known.py`` tells issue 14's #8 from #1 by it)."""


def _story(trigger_id: str, runs: list[dict[str, Any]]) -> str:
    """The trigger's records, oldest first, as ``decision[:status]`` (no ids), each
    written over :data:`AGED_MS` after the one before marked ``+1h``."""
    mine = sorted((r for r in runs if r["trigger_id"] == trigger_id),
                  key=lambda r: (r.get("started_at_ms") or 0, r["run_id"]))
    steps: list[str] = []
    last_ms: int | None = None
    for r in mine:
        text = r["decision"] if r["decision"] != "ran" else f"ran:{r['status']}"
        at = r.get("started_at_ms")
        if isinstance(at, int) and last_ms is not None and at - last_ms >= AGED_MS:
            text += "+1h"
        if isinstance(at, int):
            last_ms = at
        if not steps or steps[-1] != text:
            steps.append(text)
    return ">".join(steps) or "none"
