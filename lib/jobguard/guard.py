"""The guard: what a trigger does, and the run it may start.

``guarded`` is a thin decorator over :class:`GuardedJob`, whose :meth:`GuardedJob.handle`
takes one trigger through: stale check, one conditional write to acquire the lease, and
either the run (heartbeat, handler, release + run record in one transaction) or the
decision the job's policy asks for (recorded in one transaction).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from . import _drills
from ._bounds import bounded_extra, bounded_text
from ._durations import human
from ._redact import error_text, redacted
from .clock import Clock, SystemClock, to_ms
from .config import TRIGGER_QUEUE_RETENTION, JobConfig, OverlapPolicy
from .errors import (
    ConfigError,
    ContinuationRefused,
    InvalidTriggerError,
    JobGuardError,
    LeaseLostError,
    NewerMessageError,
    SendError,
    StoreError,
)
from .hooks import fire
from .ids import new_run_id
from .lease import Acquired, HandOff, LeaseState, Released, backoff
from .ports import ContinuationPort, JobStore, TriggerQueuePort
from .records import Decision, Outcome, RunOrigin, RunRecord, RunStatus
from .requests import Acquisition, DecisionWrite, Release
from .run import Heartbeat, Run, _reset_current, _set_current
from .trigger_state import (
    TERMINAL,
    Next,
    Observed,
    Refused,
    Route,
    State,
    TriggerRecord,
    decide,
    landed_and_ended,
    late,
    names_hand_off,
    route_of,
)
from .triggers import (
    Trigger,
    TriggerKind,
    check_sqs_event,
    continuation_event,
    continuation_trigger_id,
    follow_up_trigger_id,
    format_instant,
    parse_event,
    parse_queue_message,
)

__all__ = ["GuardedJob", "forget_runtimes", "guarded"]

LAMBDA_MAX_EVENT_AGE = timedelta(hours=6)
"""The longest Lambda keeps retrying an asynchronous invocation (its default)."""

LAMBDA_MAX_RUN = timedelta(minutes=15)
"""The longest a Lambda invocation runs."""

Handler = Callable[[Any, Any], Any]
F = TypeVar("F", bound=Handler)

_MAX_ATTEMPTS = 8
_ERROR_CHARS = 1000

_DECISION_OF = {
    Next.SKIP: Decision.SKIPPED,
    Next.QUEUE: Decision.QUEUED,
    Next.DROP: Decision.DROPPED,
    Next.COALESCE: Decision.COALESCED,
    Next.ABSORB: Decision.COALESCED,
    Next.PAUSED: Decision.PAUSED,
    Next.DUPLICATE: Decision.DUPLICATE,
    Next.SUPERSEDE: Decision.SUPERSEDED,
}
_METRIC_OF = {
    Decision.SKIPPED: "TriggersSkipped",
    Decision.QUEUED: "TriggersQueued",
    Decision.COALESCED: "TriggersCoalesced",
    Decision.DROPPED: "TriggersDropped",
    Decision.STALE: "TriggersStale",
    Decision.PAUSED: "TriggersPaused",
    Decision.DUPLICATE: "TriggersDuplicate",
    Decision.SUPERSEDED: "TriggersSuperseded",
}


class _Deferred(JobGuardError):
    """A queued trigger or follow-up found the lease held; it waits on the queue."""

    def __init__(self, state: LeaseState) -> None:
        self.state = state
        super().__init__(f"job {state.job!r} is held by run {state.run_id}")


def _unlanded(job: str, trigger: Trigger, error: str) -> StoreError:
    """The error of a trigger none of whose acquisitions landed, the last one answered
    with an error (a throttle, a 5xx, no answer) and read back unapplied: the handler
    did not run, and the sender retries."""
    return StoreError(
        "acquire", job, f"trigger {trigger.trigger_id}: no attempt landed in "
        f"{_MAX_ATTEMPTS} tries, the last answered with an error and read back unapplied "
        f"({error}); the handler did not run")


def _default_owner() -> str:
    function = os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
    if not function:
        import socket

        function = socket.gethostname()
    instance = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME") or f"pid-{os.getpid()}"
    return f"{function}/{instance}"


@dataclass
class _Runtime:
    store: JobStore
    queue: TriggerQueuePort | None
    telemetry: Any
    config: JobConfig
    _items: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)
    _items_lock: threading.Lock = dataclasses.field(
        default_factory=threading.Lock, init=False, repr=False, compare=False)

    @property
    def items(self) -> Any:
        """The work-item ledger, made when a run first claims or recovers items: a run
        that claims none never imports it (tests/unit/test_cold_path.py). Made once per
        runtime under its own lock: two threads claiming at once share one store (from
        Python 3.12 ``cached_property`` has no lock and may build two; before, its lock
        was one for every instance, so one job's build held up another's)."""
        items = self._items
        if items is None:
            with self._items_lock:
                items = self._items
                if items is None:
                    from .dynamodb_items import DynamoItemStore

                    items = self._items = DynamoItemStore(self.store.table_name,
                                                          client=self.store.client)
        return items


class GuardedJob:
    """A Lambda handler guarded by a job's run policy and fenced lease.

    Use :func:`guarded` to build one; construct it directly to inject a store, a queue
    or a clock (tests, the local runner).

    Example:
        >>> job = GuardedJob(JobConfig(name="crm-sync"), lambda event, context: "done")
        >>> job({"job": "crm-sync", "scheduled_at": "2026-11-29T07:35:00Z"}, None)
        ... # doctest: +SKIP
    """

    def __init__(
        self,
        config: JobConfig,
        handler: Handler,
        *,
        store: JobStore | None = None,
        queue: TriggerQueuePort | None = None,
        clock: Clock | None = None,
        owner: str | None = None,
        serves_triggers: bool = True,
        continuation: ContinuationPort | None = None,
    ) -> None:
        self.config = config
        _drills.apply(config.name)  # drill fault switches: nothing unless JOBGUARD_DRILLS=1
        self.serves_triggers = serves_triggers
        """False for a service run (the reconciler's sweep): it does not do the job's
        regular work, so it never absorbs a pending follow-up."""
        self.handler = handler
        self.clock: Clock = clock or SystemClock()
        self.owner = owner or _default_owner()
        self._store = store
        self._queue = queue
        self._continuation = continuation
        """Starts the next link of a chain (``max_chain`` above 1); by default an
        asynchronous invoke of the function this runs in (none outside Lambda)."""
        self._runtime: _Runtime | None = None
        self._lease_ms = int(config.lease.total_seconds() * 1000)
        self._skew_ms = int(config.skew_margin.total_seconds() * 1000)
        functools.update_wrapper(self, handler)
        _LIVE.add(self)

    # -- wiring (once per container, at first invocation) ------------------------------

    def runtime(self) -> _Runtime:
        """Clients and store, built on first use from the config and the environment."""
        if self._runtime is None:
            from .observability import JobTelemetry

            store, queue = self._store, self._queue
            if store is None:
                from . import environment
                from ._clients import client
                from .dynamodb import DynamoJobStore

                # missing, empty or malformed: refused naming the variable, before a write
                table = environment.table_name(self.config.table_name)
                store = DynamoJobStore(table, client=client("dynamodb"))
            self._runtime = _Runtime(
                store=store, queue=queue, telemetry=JobTelemetry(self.config.name),
                config=self.config,
            )
        return self._runtime

    # -- entry point ---------------------------------------------------------------------

    def __call__(self, event: Any, context: Any) -> Any:
        if isinstance(event, dict) and isinstance(event.get("Records"), list):
            return self._handle_sqs(event, context)
        trigger = parse_event(
            event,
            job=self.config.name,
            policy=self.config.policy,
            request_id=getattr(context, "aws_request_id", None),
        )
        runtime = self.runtime()
        try:
            return self.handle(trigger, event, context)
        finally:
            runtime.telemetry.flush()

    def handle(self, trigger: Trigger, event: Any, context: Any) -> Any:
        """Take one parsed trigger through its decision; run the handler if it wins.

        The decision is :func:`jobguard.trigger_state.decide` (pure: the lease row and
        the trigger's item as last seen); each effect is one conditional write of the
        store, refused with what is there when the row moved, and decided again.

        Returns the handler's result when it ran, else the decision as a dict
        (:meth:`jobguard.Outcome.as_dict`).

        Raises:
            InvalidTriggerError: a tick or rule event scheduled further ahead of this
                worker's clock than the job's ``skew_margin`` (``scheduled_at``);
                nothing written.
        """
        rt = self.runtime()
        config = self.config
        now_mono = self.clock.monotonic()  # read with now: the row's expiry counts from it
        now = self.clock.now()
        now_ms = to_ms(now)
        run_id = own_run_id = new_run_id(now_ms)
        owed = False
        if trigger.scheduled_at is not None and not trigger.is_from_queue:
            # EventBridge delivers a tick (a rule event) at or after its time; only the
            # clocks' skew can put it ahead of this worker's. One further ahead was made
            # by hand: taken, it would be the scheduled tick's identity, run early, and
            # the schedule's own delivery would then be a duplicate.
            ahead = trigger.scheduled_at - now
            if ahead > config.skew_margin:
                raise InvalidTriggerError(
                    "scheduled_at",
                    f"{format_instant(trigger.scheduled_at)} is {human(ahead)} ahead of this "
                    f"worker's clock, more than the job's skew margin "
                    f"({human(config.skew_margin)}): a tick is delivered at or after its "
                    "scheduled time, so this event was not sent by a schedule (or this "
                    "worker's clock is behind)")
            if late(trigger, now, config):
                owed = self._owed(trigger, now_ms)
                if not owed:
                    return self._stale(trigger, run_id, now)

        route = route_of(trigger)
        # A consistent read of the lease row (small, a read unit) before any write: a
        # trigger that meets a held lease decides from it, and never sends the
        # acquisition, whose cancelled transaction would be billed by the job row's
        # size (the running run's open claim and the checkpoint).
        lease: LeaseState = rt.store.read_lease(config.name)
        fire("after_lease_read", job=config.name, trigger_id=trigger.trigger_id)
        item: TriggerRecord | None = None
        if route is Route.QUEUE:
            # what its message promises: queued (its run id and gate come with a refusal)
            item = TriggerRecord(trigger_id=trigger.trigger_id, state=State.QUEUED,
                                 route=Route.QUEUE, ttl_epoch_s=2**40)
        elif trigger.kind is TriggerKind.CONTINUATION and names_hand_off(lease, trigger):
            # what the hand-off the row names promises: its item `handed`, its run id
            item = TriggerRecord(trigger_id=trigger.trigger_id, state=State.HANDED,
                                 route=Route.DIRECT, run_id=lease.run_id, ttl_epoch_s=2**40)
        observed = Observed(lease=lease, item=item, owed=owed)
        trace: list[str] = []  # the steps decided, for the error when none holds
        unanswered: str | None = None  # the last attempt's error, read back unapplied
        for attempt in range(_MAX_ATTEMPTS):
            if attempt and observed.stale(trigger, now, config):
                # Stale by now (this delivery was held up between attempts): a tick never
                # runs past stale_after, so its item, kept that long, is always there to
                # say whether it already ran.
                return self._stale(trigger, run_id, now)
            lease = observed.lease
            step = decide(lease, observed.item, trigger, config, now_ms)
            trace.append(step.value)
            refused: Refused | None
            if step is Next.DEFER:
                raise _Deferred(lease)
            if trigger.kind is TriggerKind.CONTINUATION:
                # the link's run id, as the link before named it, while the row names the
                # hand-off; any other decision is this delivery's own (never written over
                # the record a takeover or a replacement wrote of the link)
                run_id = lease.run_id if names_hand_off(lease, trigger) and lease.run_id \
                    else own_run_id
            if step is Next.RUN:
                rt.telemetry.count("LeaseAcquireAttempts")
                acquired_mono = now_mono
                result = rt.store.acquire(self._acquisition(trigger, observed, run_id, now_ms))
                if isinstance(result, Acquired):
                    return self._run(trigger, run_id, result, now_ms,
                                     self._deadline_base(result, now_ms, acquired_mono),
                                     event, context, service=not self.serves_triggers)
                refused = result
                if landed_and_ended(run_id, refused):
                    # (while nothing names the id, it is kept: an attempt still in flight
                    # may land, and the next attempt must know the row as ours)
                    run_id = own_run_id = new_run_id(now_ms)
            else:
                outcome, refused = self._decide(trigger, step, lease, observed.item, run_id,
                                                now_ms, event)
                if outcome is not None:
                    return outcome
            assert refused is not None
            observed = observed.after(refused, step)
            unanswered = refused.unanswered
            if refused.conflict or unanswered:
                backoff(attempt)
            fire("after_lease_read", job=config.name, trigger_id=trigger.trigger_id)
            now_mono = self.clock.monotonic()
            now = self.clock.now()
            now_ms = to_ms(now)
        if unanswered:
            raise _unlanded(config.name, trigger, unanswered)
        item = observed.item
        raise StoreError(
            "acquire", config.name,
            f"no stable decision for trigger {trigger.trigger_id} after {_MAX_ATTEMPTS} tries "
            f"({' -> '.join(trace)}); lease row: holder {observed.lease.run_id}, fence "
            f"{observed.lease.fence}; trigger item: {item.state.value if item else 'absent'}")

    def run_exclusive(self, trigger: Trigger, *, wait: float, ignore_pause: bool = False,
                      event: Any = None, context: Any = None) -> Any:
        """Take the lease whatever the policy (waiting up to ``wait`` seconds for the
        holder to finish), run the handler, release. For recovery runs.

        Raises:
            LeaseBusyError: the lease was still held when the wait ran out.
        """
        from .errors import LeaseBusyError

        rt = self.runtime()
        deadline = self.clock.monotonic() + wait
        observed = Observed(lease=rt.store.expected_lease(self.config.name))
        conflicts = 0
        unanswered = 0  # attempts in a row whose answer was an error, read back unapplied
        while True:
            now_mono = self.clock.monotonic()
            now_ms = to_ms(self.clock.now())
            run_id = new_run_id(now_ms)
            lease = observed.lease
            held = lease.is_held(now_ms, self._skew_ms)
            paused = lease.paused_at_ms is not None and not ignore_pause
            if held or paused:
                left = deadline - self.clock.monotonic()
                if left <= 0 or paused:
                    raise LeaseBusyError(self.config.name, lease.run_id, lease.expires_at_ms,
                                         lease.paused_reason)
                time.sleep(min(left, 0.5))
                observed = dataclasses.replace(
                    observed, lease=rt.store.read_lease(self.config.name))
                continue
            acquired_mono = now_mono
            rt.telemetry.count("LeaseAcquireAttempts")
            result = rt.store.acquire(self._acquisition(
                trigger, observed, run_id, now_ms, exclusive=True, ignore_pause=ignore_pause))
            if isinstance(result, Acquired):
                return self._run(trigger, run_id, result, now_ms,
                                 self._deadline_base(result, now_ms, acquired_mono), event,
                                 context, service=True)
            observed = observed.after(result, Next.RUN)
            item = observed.item
            if result.trigger_failed and item is not None and item.state in TERMINAL:
                raise StoreError("acquire", self.config.name,
                                 f"trigger {trigger.trigger_id} already {item.state.value}")
            unanswered = unanswered + 1 if result.unanswered else 0
            if result.unanswered and unanswered >= _MAX_ATTEMPTS:
                raise _unlanded(self.config.name, trigger, result.unanswered)
            if result.conflict or result.unanswered:
                conflicts += 1
                backoff(conflicts)

    def _acquisition(self, trigger: Trigger, observed: Observed, run_id: str, now_ms: int, *,
                     exclusive: bool = False, ignore_pause: bool = False) -> Acquisition:
        """What an acquisition by ``run_id`` for ``trigger`` asks of the store, from what
        was observed; pure. ``exclusive``: a recovery's (:meth:`run_exclusive`), which
        takes the lease whatever the policy, never from a live run."""
        config = self.config
        lease, item = observed.lease, observed.item
        continuing = trigger.kind is TriggerKind.CONTINUATION
        route = Route.DIRECT if exclusive else route_of(trigger)
        policy = None if exclusive else config.policy
        return Acquisition(
            job=config.name, trigger_id=trigger.trigger_id, trigger_kind=trigger.kind.value,
            route=route, run_id=run_id, owner=self.owner, now_ms=now_ms,
            lease_ms=self._lease_ms, skew_ms=self._skew_ms, lease=lease, item=item,
            trigger_ttl_s=self._running_ttl(trigger, now_ms), high_water=observed.high_water,
            # (a continuation takes the hand-off, never a live run's lease)
            replace=policy is OverlapPolicy.REPLACE and not continuing,
            # a dead run's own trigger takes its turn back, ahead of the queue (and a
            # chain's next link, ahead of what waits behind the chain)
            queue_gate=policy is OverlapPolicy.QUEUE and route is Route.DIRECT
            and not continuing and not (item is not None and item.state is State.RUNNING),
            ignore_pause=ignore_pause,
            displaced=None if continuing else self._displaced_record(lease, now_ms),
            record_ttl_s=self._ttl(now_ms),
            # the holder it displaces is marked, unless its item could not be (then only
            # that holder: a new one is marked again)
            mark_displaced=lease.run_id is None or lease.run_id != observed.unmarkable,
            # (a chain's link, like a service run, carries the follow-up on: it runs once
            # after the chain)
            keep_follow_up=(exclusive or not self.serves_triggers or continuing)
            and not observed.follow_up_served,
            origin=self._origin(trigger),
        )

    # -- decisions -----------------------------------------------------------------------

    def _decide(
        self, trigger: Trigger, step: Next, lease: LeaseState, item: TriggerRecord | None,
        run_id: str, now_ms: int, event: Any,
    ) -> tuple[Any | None, Refused | None]:
        """Record a non-run decision: (outcome, None), or (None, what refused it)."""
        rt = self.runtime()
        config = self.config
        decision = _DECISION_OF[step]
        follow_up: tuple[str, int, int] | None = None
        detail = None
        route = route_of(trigger)
        if step is Next.COALESCE and lease.run_id:
            follow_up = (lease.follow_up or follow_up_trigger_id(config.name, lease.run_id),
                         lease.fence, self._queue_ttl(now_ms))
        elif step is Next.ABSORB:
            detail = "follow-up absorbed: a run started after the coalesced triggers"
        elif step is Next.DUPLICATE:
            detail = (f"trigger already {item.state.value}" if item is not None
                      else f"trigger is running as {lease.run_id}" if lease.run_id
                      else "trigger is not pending (its decision was undone or forgotten)")
            if item is not None and item.state is State.QUEUED and route is Route.DIRECT:
                # Queued, but its message may never have been sent (the send failed and
                # so did undoing the decision). Sending it again is always safe: the
                # same deduplication id, and only a delivery that finds it queued runs.
                self._trigger_queue().send(self._queued_message(trigger), event=event)
            elif item is not None and item.state is State.COALESCED and item.into \
                    and route is Route.DIRECT:
                # Its follow-up's message may never have been sent (the send failed, and
                # the holder released without the queue, or died): send it again, as
                # safely; a follow-up already run or absorbed ignores it.
                self._trigger_queue().send(Trigger(trigger.job, item.into,
                                                   TriggerKind.FOLLOW_UP))
        elif step is Next.PAUSED:
            detail = lease.paused_reason
            if trigger.kind is TriggerKind.CONTINUATION:
                detail = f"chain ended: job paused ({lease.paused_reason})"
        elif step is Next.SUPERSEDE:
            detail = (f"chain ended before this link started: the lease is "
                      f"{'held by ' + str(lease.run_id) if lease.run_id else 'free'} "
                      "(replaced, force-released, or taken over once the hand-off expired)")
        if step is Next.QUEUE or follow_up is not None:
            self._trigger_queue()  # no (or a malformed) queue URL: refused before any write
        record = self._decision_record(trigger, run_id, decision, lease, now_ms, detail=detail)
        refused = rt.store.record_decision(DecisionWrite(
            record=record, step=step, lease=lease, item=item, route=route, now_ms=now_ms,
            skew_ms=self._skew_ms, max_queued=config.max_queued,
            trigger_ttl_s=(self._queue_ttl(now_ms) if step is Next.QUEUE or route is Route.QUEUE
                           else self._retried_ttl(trigger, now_ms) if step is Next.COALESCE
                           else self._trigger_ttl(trigger, now_ms)),
            record_ttl_s=self._ttl(now_ms), follow_up=follow_up,
        ))
        if refused is not None:
            return None, refused
        # Recorded first, sent second: the trigger's item is the truth the consumer
        # checks; a message without a queued item is ignored.
        if step is Next.QUEUE:
            try:
                self._trigger_queue().send(self._queued_message(trigger), event=event)
            except SendError as exc:
                if not exc.maybe_applied:
                    rt.store.undo_queued(record, prior=item, now_ms=now_ms)
                # else the message may be on the queue (a lost response): the decision
                # stands, and the sender's retry finds the trigger queued and sends the
                # message again (the same deduplication id)
                raise
        elif follow_up is not None:
            try:
                self._trigger_queue().send(
                    Trigger(trigger.job, follow_up[0], TriggerKind.FOLLOW_UP))
            except StoreError:
                # The decision stands (the follow-up is named on the lease row, and the
                # holder's release sends it when it has the queue); the sender sees the
                # error and its retry, a duplicate, sends the follow-up again.
                raise
        rt.telemetry.count(_METRIC_OF[decision])
        if decision is Decision.QUEUED:
            rt.telemetry.count("QueueDepth", lease.queued_n + 1)
        rt.telemetry.logger.info(
            "trigger not run",
            extra={"decision": decision.value, "trigger_id": trigger.trigger_id,
                   "holder_run_id": lease.run_id, "holder_fence": lease.fence},
        )
        return self._outcome(record), None

    def _owed(self, trigger: Trigger, now_ms: int) -> bool:
        """A late redelivery of a tick this job already accepted onto its queue (queued,
        or coalesced into a follow-up): the first delivery may have died before sending
        the message, so this one is decided (a duplicate, which sends it again), not
        recorded stale. One read, for late deliveries of queued jobs only."""
        if not self.config.needs_queue:
            return False
        item = self.runtime().store.read_trigger(  # type: ignore[attr-defined]
            self.config.name, trigger.trigger_id)
        return item is not None and item.live(now_ms) and item.state in (
            State.QUEUED, State.COALESCED)

    def _stale(self, trigger: Trigger, run_id: str, now: Any) -> dict[str, Any]:
        assert trigger.scheduled_at is not None
        now_ms = to_ms(now)
        record = self._decision_record(
            trigger, run_id, Decision.STALE, None, now_ms,
            detail=f"delivered {now - trigger.scheduled_at} after its scheduled time "
            f"(stale_after {self.config.stale_after})",
        )
        # (never over a record of this delivery's own landed acquisition)
        rt = self.runtime()
        rt.store.put_run(record, self._ttl(now_ms), only_if_absent=True)
        # counted as every decision is: a job whose every tick is stale is invoked (its
        # fleet's liveness alarm stays quiet) and never runs; the fleet's stale alarm
        # watches this count
        rt.telemetry.count(_METRIC_OF[Decision.STALE])
        rt.telemetry.logger.info(
            "trigger not run",
            extra={"decision": Decision.STALE.value, "trigger_id": trigger.trigger_id,
                   "scheduled_at": format_instant(trigger.scheduled_at)})
        return self._outcome(record)

    @staticmethod
    def _queued_message(trigger: Trigger) -> Trigger:
        return Trigger(trigger.job, trigger.trigger_id, TriggerKind.QUEUED,
                       scheduled_at=trigger.scheduled_at, requested_by=trigger.requested_by,
                       delivery_id=trigger.delivery_id)

    def _decision_record(
        self, trigger: Trigger, run_id: str, decision: Decision, state: LeaseState | None,
        now_ms: int, *, detail: str | None = None,
    ) -> RunRecord:
        holder = state.run_id if state is not None else None
        return RunRecord(
            job=trigger.job,
            run_id=run_id,
            trigger_id=trigger.trigger_id,
            trigger_kind=trigger.kind.value,
            policy=self.config.policy.value,
            decision=decision,
            status=RunStatus(decision.value),
            started_at_ms=now_ms,
            ended_at_ms=now_ms,
            owner=self.owner,
            holder_run_id=holder,
            holder_fence=state.fence if state is not None and holder else None,
            scheduled_at=format_instant(trigger.scheduled_at) if trigger.scheduled_at else None,
            requested_by=trigger.requested_by,
            delivery_id=trigger.delivery_id,
            detail=bounded_text(detail),
            extra=_chain_extra(trigger),
        )

    def _outcome(self, record: RunRecord) -> dict[str, Any]:
        return Outcome(
            job=record.job,
            trigger_id=record.trigger_id,
            decision=record.decision,
            run_id=record.run_id,
            holder_run_id=record.holder_run_id,
            holder_fence=record.holder_fence,
            detail=record.detail,
        ).as_dict()

    def _origin(self, trigger: Trigger) -> RunOrigin:
        """What the run's record will say of how it came about (kept on its trigger's item
        while it runs: a force release writes its record from outside the run)."""
        return RunOrigin(
            policy=self.config.policy.value, requested_by=trigger.requested_by,
            scheduled_at=format_instant(trigger.scheduled_at) if trigger.scheduled_at
            else None, delivery_id=trigger.delivery_id)

    def _deadline_base(self, acquired: Acquired, now_ms: int, now_mono: float) -> float:
        """The monotonic moment the run's lease counts from: when this attempt read the
        clock it put on the row (expiry - lease); earlier if the acquisition that landed
        was an earlier attempt, its expiry older than this attempt's clock says, so the
        local deadline (this + lease - skew margin) never outlives the row's expiry."""
        if acquired.expires_at_ms is None:
            return now_mono
        behind_ms = now_ms + self._lease_ms - acquired.expires_at_ms
        return now_mono - max(0, behind_ms) / 1000

    def _displaced_record(self, lease: LeaseState, now_ms: int) -> RunRecord | None:
        """The record of the run whose lease an acquisition takes over (expired, or
        REPLACE), written in the acquisition's own transaction."""
        if lease.run_id is None:
            return None
        replaced = self.config.policy is OverlapPolicy.REPLACE and lease.is_held(
            now_ms, self._skew_ms)
        if lease.handed_from is not None:
            # a continuation that never started: the chain ends here, and says so
            return RunRecord(
                job=lease.job, run_id=lease.run_id, trigger_id=lease.trigger_id or "",
                trigger_kind=TriggerKind.CONTINUATION.value, policy=self.config.policy.value,
                decision=Decision.RAN,
                status=RunStatus.LEASE_LOST if replaced else RunStatus.ABANDONED,
                started_at_ms=lease.acquired_at_ms or now_ms,
                ended_at_ms=lease.heartbeat_at_ms, fence=lease.fence, owner=lease.owner,
                detail="continuation replaced by a newer trigger (REPLACE) before it started"
                if replaced else f"continuation never started: the hand-off expired at "
                f"{lease.expires_at_ms}; taken over",
                extra={"continues": lease.handed_from},
            )
        return RunRecord(
            job=lease.job, run_id=lease.run_id, trigger_id=lease.trigger_id or "",
            trigger_kind="", policy=self.config.policy.value, decision=Decision.RAN,
            status=RunStatus.LEASE_LOST if replaced else RunStatus.ABANDONED,
            started_at_ms=lease.acquired_at_ms or now_ms, ended_at_ms=lease.heartbeat_at_ms,
            fence=lease.fence, owner=lease.owner,
            detail="replaced by a newer trigger (REPLACE)" if replaced else
            f"lease expired at {lease.expires_at_ms} without release; taken over",
        )

    # -- the run ---------------------------------------------------------------------------

    def _run(
        self, trigger: Trigger, run_id: str, acquired: Acquired, now_ms: int,
        acquired_mono: float, event: Any, context: Any, *, service: bool = False,
    ) -> Any:
        rt = self.runtime()
        config = self.config
        fence = acquired.fence
        displaced: dict[str, Any] = {}
        if acquired.displaced_run_id is not None:
            displaced["displaced_run_id"] = acquired.displaced_run_id
            rt.telemetry.count("LeaseTakeovers")
            rt.telemetry.logger.warning("lease taken over", extra={
                "previous_run_id": acquired.displaced_run_id})
        heartbeat = Heartbeat(
            store=rt.store, job=config.name, run_id=run_id, fence=fence, lease=config.lease,
            every=config.heartbeat, skew_margin=config.skew_margin, clock=self.clock,
            acquired_monotonic=acquired_mono,
        ).start()
        run = Run(job=config.name, run_id=run_id, trigger=trigger, fence=fence,
                  owner=self.owner, heartbeat=heartbeat, clock=self.clock, services=rt)
        rt.telemetry.bind(run_id=run_id, trigger_id=trigger.trigger_id, fence=fence)
        token = _set_current(run)
        status = RunStatus.SUCCEEDED
        error: BaseException | None = None
        result: Any = None
        started = time.monotonic()
        try:
            fire("after_acquire", job=config.name, run_id=run_id, fence=fence)
            tracer = self._tracer()
            if tracer is not None:
                with tracer.provider.in_subsegment(f"## jobguard {config.name}") as segment:
                    segment.put_annotation("run_id", run_id)
                    segment.put_annotation("fence", fence)
                    result = self.handler(event, context)
            else:
                result = self.handler(event, context)
            run.close()
        except LeaseLostError as exc:
            status, error = RunStatus.LEASE_LOST, exc
            run.abandon()
        except BaseException as exc:  # recorded, then raised again below
            status, error = RunStatus.FAILED, exc
            if isinstance(exc, Exception):
                run.close(exc)  # what it earned, while the lease is still held
            else:
                run.end_unwritten(exc)  # the process is ending: its record says so
        finally:
            heartbeat.stop()
            _reset_current(token)
        if heartbeat.lost_reason is not None and status is not RunStatus.FAILED:
            status = RunStatus.LEASE_LOST
        if status is RunStatus.SUCCEEDED:
            figures = run.figures()
            if figures.get("failed", 0) or figures.get("uncertain", 0):
                # not hidden behind a green status: `runs --status incomplete`, an alarm
                status = RunStatus.INCOMPLETE
                rt.telemetry.count("RunsIncomplete")
        fire("before_release", job=config.name, run_id=run_id, fence=fence)
        ended_ms = to_ms(self.clock.now())
        detail = heartbeat.lost_reason if status is RunStatus.LEASE_LOST else None
        record = RunRecord(
            job=config.name, run_id=run_id, trigger_id=trigger.trigger_id,
            trigger_kind=trigger.kind.value, policy=config.policy.value,
            decision=Decision.RAN, status=status, started_at_ms=now_ms,
            ended_at_ms=max(ended_ms, now_ms), fence=fence, owner=self.owner,
            scheduled_at=format_instant(trigger.scheduled_at) if trigger.scheduled_at else None,
            requested_by=trigger.requested_by, delivery_id=trigger.delivery_id,
            error=None if error is None else bounded_text(
                redacted(error_text(error), config.redact)),
            detail=bounded_text(detail),
            extra=bounded_extra({**displaced, **run.figures(), **_chain_extra(trigger)}),
        )
        outcome = {RunStatus.FAILED: State.FAILED,
                   RunStatus.LEASE_LOST: State.LOST}.get(status, State.DONE)
        route = route_of(trigger)
        trigger_ttl_s = (self._queue_ttl(ended_ms) if route is Route.QUEUE
                         else self._trigger_ttl(trigger, ended_ms))
        released: Released | None = None
        handed_to: str | None = None
        continuation = None if service or status not in (
            RunStatus.SUCCEEDED, RunStatus.INCOMPLETE) else self._continuation_for(run)
        if continuation is not None:
            # Out of time with records left: the job goes to the next link at once, in
            # this release (the lease row names it; nobody else runs in between).
            next_run_id = new_run_id(ended_ms)
            handed = dataclasses.replace(record, extra={
                **record.extra, "continued_by": next_run_id, "link": trigger.link})
            next_trigger_id = continuation_trigger_id(config.name, run_id, trigger.link + 1)
            released = rt.store.hand_off(HandOff(
                job=config.name, run_id=run_id, fence=fence, trigger_id=trigger.trigger_id,
                record=handed, next_trigger_id=next_trigger_id, next_run_id=next_run_id,
                now_ms=handed.ended_at_ms or ended_ms,
                lease_ms=self._lease_ms, record_ttl_s=self._ttl(ended_ms),
                trigger_ttl_s=trigger_ttl_s,
                next_ttl_s=self._running_ttl(Trigger(config.name, "", TriggerKind.MANUAL),
                                             ended_ms)))
            if released is not None and released.released:
                record, handed_to = handed, next_run_id
        released = released if released is not None else rt.store.release(Release(
            job=config.name, run_id=run_id, fence=fence, trigger_id=trigger.trigger_id,
            outcome=outcome, record=record, record_ttl_s=self._ttl(ended_ms),
            trigger_ttl_s=trigger_ttl_s,
            keep_follow_up=service,
        ))
        if not released.released:
            if status is not RunStatus.FAILED:
                status = RunStatus.LEASE_LOST
            record = dataclasses.replace(
                record, status=status, detail=detail or "lease taken over before release"
            )
            rt.store.put_run(record, self._ttl(ended_ms), keep_operator_record=True)
        if handed_to is not None and continuation is not None:
            self._send_continuation(continuation, run_id, trigger.link + 1, handed_to,
                                    fence=fence)
        # The queue (and its SQS client) only when the release found something to do.
        queue = self._queue_if_configured() if released.wake_receipt or released.follow_up \
            else None
        if queue is not None and released.wake_receipt:
            queue.wake(released.wake_receipt)
        if queue is not None and released.follow_up:
            self._resend_follow_up(queue, released.follow_up)
        rt.telemetry.milliseconds("RunDuration", (time.monotonic() - started) * 1000)
        if status is RunStatus.SUCCEEDED and not service:
            # the dead-man alarm's heartbeat: the job did its work (a reconciler's sweep
            # or a recovery is not the job running)
            rt.telemetry.count("RunSucceeded")
        if status is RunStatus.LEASE_LOST:
            rt.telemetry.count("LeaseLost")
        rt.telemetry.logger.info("run ended", extra={"status": status.value})
        rt.telemetry.unbind("run_id", "trigger_id", "fence")
        if status is RunStatus.FAILED and error is not None:
            raise error
        if status is RunStatus.LEASE_LOST:
            if route is Route.QUEUE:
                # Lease loss is not success: the message must come back and run again.
                raise LeaseLostError(config.name, run_id, fence,
                                     record.detail or "lease lost")
            return {"jobguard": "lease_lost", "job": config.name, "run_id": run_id,
                    "fence": fence, "detail": record.detail}
        return result

    def _continuation_for(self, run: Run) -> ContinuationPort | None:
        """How to start the next link, if this run asked for one (a batch out of time)
        and the chain may grow (``max_chain``); None otherwise (and outside Lambda, with
        none given), the next trigger then resumes from the checkpoint."""
        if not run.continue_requested or run.lease_lost \
                or run.trigger.link >= self.config.max_chain:
            return None
        if self._continuation is None:
            from .continuation import LambdaContinuation, function_name

            function = function_name()
            if function is None:
                return None
            self._continuation = LambdaContinuation(function)
        return self._continuation

    def _send_continuation(self, port: ContinuationPort, run_id: str, link: int,
                           next_run_id: str, *, fence: int) -> None:
        """Invoke the next link. A failure is logged and counted, never raised: an invoke
        refused outright (:class:`ContinuationRefused`: nothing queued) withdraws the
        hand-off at once; any other leaves it to expire like a lease. Either way the next
        trigger takes over from the checkpoint (nothing lost, nothing done twice)."""
        rt = self.runtime()
        try:
            port.send(continuation_event(self.config.name, run_id, link))
        except Exception as exc:  # noqa: BLE001 - withdrawn or expiring; logged, counted
            error = redacted(error_text(exc), self.config.redact) or ""
            rt.telemetry.count("ContinuationsNotSent")
            withdrawn = isinstance(exc, ContinuationRefused) and self._withdraw(
                next_run_id, fence, error)
            rt.telemetry.logger.warning(
                "continuation not sent: " + (
                    "the hand-off withdrawn" if withdrawn else "the hand-off expires")
                + ", the next trigger takes over",
                extra={"next_run_id": next_run_id, "error": error})
            return
        rt.telemetry.count("RunsContinued")
        rt.telemetry.logger.info("continued", extra={"next_run_id": next_run_id,
                                                     "link": link})

    def _withdraw(self, next_run_id: str, fence: int, error: str) -> bool:
        """Free a hand-off whose invoke was refused; on a store error it stays, to
        expire like a lease (the run's outcome is already written: never raised)."""
        try:
            return self.runtime().store.withdraw_hand_off(
                self.config.name, next_run_id=next_run_id, fence=fence,
                now_ms=to_ms(self.clock.now()),
                reason=f"the continuation's invoke was refused ({error}); the next trigger "
                       "resumes from the checkpoint")
        except Exception:  # noqa: BLE001 - a store or SDK error: the hand-off expires
            return False

    def _resend_follow_up(self, queue: TriggerQueuePort, follow_up_id: str) -> None:
        """Send the pending follow-up's message again: the coalescing delivery may have
        failed to. Harmless if it did not: SQS drops a resend within 5 minutes, and later
        only a delivery that finds the follow-up queued runs."""
        try:
            queue.send(Trigger(self.config.name, follow_up_id, TriggerKind.FOLLOW_UP))
        except StoreError as exc:
            self.runtime().telemetry.logger.warning(
                "follow-up not re-sent: the next trigger absorbs it",
                extra={"follow_up": follow_up_id,
                       "error": redacted(str(exc), self.config.redact)})

    def _tracer(self) -> Any:
        from . import environment

        if not (self.config.tracing or environment.tracing()):
            return None
        from aws_lambda_powertools import Tracer

        return Tracer(service="jobguard")

    def _ttl(self, now_ms: int) -> int:
        return now_ms // 1000 + int(self.config.record_ttl.total_seconds())

    def _trigger_ttl(self, trigger: Trigger, now_ms: int) -> int:
        """How long a direct trigger's item is kept: while any copy of it can still
        arrive and not be stale (ticks: ``stale_after`` past their scheduled time),
        and at least ``dedup_window``."""
        base_ms = now_ms
        if trigger.scheduled_at is not None:
            base_ms = max(now_ms, to_ms(trigger.scheduled_at))
        window = max(self.config.dedup_window, self.config.stale_after)
        if trigger.scheduled_at is None:
            # a manual invoke: Lambda retries an asynchronous event for up to 6 hours
            # unless its function says less (the stack's does), and that last retry may
            # decide up to a function timeout (15 minutes at most) later: remember it
            # that long
            window = max(window, LAMBDA_MAX_EVENT_AGE + LAMBDA_MAX_RUN)
        return (base_ms + self._skew_ms) // 1000 + int(window.total_seconds())

    def _retried_ttl(self, trigger: Trigger, now_ms: int) -> int:
        """A coalesced trigger's item is kept as long as its sender may retry it: a
        delivery whose send of the follow-up failed is retried by Lambda (for up to 6
        hours, deciding up to a function timeout later), and only that retry, finding
        the trigger coalesced, sends the follow-up again when no release did. A late
        retry of a tick is then not stale but owed (:meth:`_owed`)."""
        retried = (now_ms + self._skew_ms) // 1000 + int(
            (LAMBDA_MAX_EVENT_AGE + LAMBDA_MAX_RUN).total_seconds())
        return max(self._trigger_ttl(trigger, now_ms), retried)

    def _running_ttl(self, trigger: Trigger, now_ms: int) -> int:
        """A running trigger's item must outlive its run (a run never lasts a day:
        Lambda stops it at 15 minutes), whatever ``dedup_window`` says."""
        return max(self._trigger_ttl(trigger, now_ms), now_ms // 1000 + 86_400)

    def _queue_ttl(self, now_ms: int) -> int:
        """A trigger on the queue is kept as long as its message can be delivered."""
        return now_ms // 1000 + int((TRIGGER_QUEUE_RETENTION + timedelta(days=1))
                                    .total_seconds())

    # -- SQS deliveries (queued triggers and follow-ups) -----------------------------------

    def _handle_sqs(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        from aws_lambda_powertools.utilities.batch import (
            SqsFifoPartialProcessor,
            process_partial_response,
        )

        check_sqs_event(event)  # a malformed envelope is refused whole, naming the field
        runtime = self.runtime()
        processor = SqsFifoPartialProcessor()
        # A deferred trigger is an expected "failure" (it waits on the queue), even
        # when it is the whole batch: report it, do not raise.
        processor.raise_on_entire_batch_failure = False

        def one(record: Any) -> Any:
            try:
                trigger, original = parse_queue_message(record.body, job=self.config.name)
            except NewerMessageError as exc:
                # a trigger a newer jobguard wrote (a deployment under way): not garbage,
                # so reported failed for a worker that reads it (or, if none ever does,
                # the DLQ and its alarm), never recorded rejected and deleted
                runtime.telemetry.logger.warning(
                    "trigger message from a newer jobguard: left on the queue",
                    extra={"version": exc.version, "message_id": record.message_id})
                raise
            except InvalidTriggerError as exc:
                return self._reject(record, exc)
            try:
                return self.handle(trigger, original, context)
            except _Deferred as deferred:
                self._defer(record.receipt_handle, deferred.state)
                raise

        try:
            response = process_partial_response(
                event=event, record_handler=one, processor=processor, context=context
            )
            return dict(response)
        finally:
            runtime.telemetry.flush()

    def _reject(self, message: Any, error: InvalidTriggerError) -> dict[str, Any]:
        """A trigger-queue message that can never become a trigger (not JSON, another
        shape, another job's message, a field that fails validation): recorded
        ``rejected`` with its reason, counted (``TriggerMessagesRejected``) and reported
        processed, so SQS deletes it and the triggers behind it in its FIFO group run now
        (redelivered, it would be refused the same way until the DLQ, holding them back
        for the whole redrive budget). A failure to record it (a throttled or timed-out
        put) raises: the message comes back and is rejected at its next delivery; the
        record is keyed on the message (:mod:`jobguard._rejected`), so however often it
        is delivered it is written once."""
        from ._rejected import rejected_record

        rt = self.runtime()
        now_ms = to_ms(self.clock.now())
        raw = message.raw_event
        record = rejected_record(
            job=self.config.name, policy=self.config.policy.value, owner=self.owner,
            message_id=message.message_id, body=message.body,
            attributes=raw.get("attributes") if isinstance(raw.get("attributes"), dict)
            else None, error=error, now_ms=now_ms, redact=self.config.redact)
        said = {"field": record.extra.get("field"), "error": record.error,
                "message_id": record.extra.get("message_id"), "run_id": record.run_id}
        # logged with the field (the batch utility keeps a record's failure quiet)
        rt.telemetry.logger.warning("malformed trigger message", extra=said)
        try:
            rt.store.put_run(record, self._ttl(now_ms), only_if_absent=True)
        except Exception as exc:
            rt.telemetry.logger.warning(
                "malformed trigger message not recorded: it comes back",
                extra={**said, "store_error": (redacted(error_text(exc), self.config.redact)
                                                or "")[:_ERROR_CHARS]})
            raise
        # counted on every delivery that deletes it: a redelivery of one already recorded
        # counts again, but a write whose answer was lost (then refused as a repeat)
        # still counts once, and the alarm never misses a message
        rt.telemetry.count("TriggerMessagesRejected")
        return self._outcome(record)

    def _defer(self, receipt: str, state: LeaseState) -> None:
        """Hide the message until the holder's lease would end, and ask the holder to
        wake it at release. If the holder is already gone, make it visible now."""
        rt, queue = self.runtime(), self._trigger_queue()
        now_ms = to_ms(self.clock.now())
        until_ms = (state.expires_at_ms or now_ms) + self._skew_ms - now_ms
        queue.defer(receipt, max(1, -(-until_ms // 1000)))
        if not (state.run_id and rt.store.set_wake(
                self.config.name, holder_run_id=state.run_id, receipt=receipt)):
            queue.defer(receipt, 0)

    def _queue_if_configured(self) -> TriggerQueuePort | None:
        """The trigger queue, or None where this function has none. A reconciler of a
        queued job is given its queue (``trigger_queue_url``): its release wakes and
        resends like the job's own. A recovery has none: a deferred message comes back
        by itself and a pending follow-up runs at the next trigger."""
        if (self.runtime().queue is None and not self.config.needs_queue
                and self.config.trigger_queue_url is None):
            return None
        try:
            return self._trigger_queue()
        except ConfigError:
            return None

    def _trigger_queue(self) -> TriggerQueuePort:
        """The job's trigger queue, built the first time a decision needs it."""
        rt = self.runtime()
        if rt.queue is None:
            from . import environment
            from ._clients import client
            from .triggerqueue import TriggerQueue

            url = environment.trigger_queue_url(self.config.trigger_queue_url,
                                                policy=self.config.policy.value)
            rt.queue = TriggerQueue(url, client=client("sqs"))
        return rt.queue


def _chain_extra(trigger: Trigger) -> dict[str, Any]:
    """A continuation's record names the link before it and its place in the chain."""
    if trigger.kind is not TriggerKind.CONTINUATION:
        return {}
    return {"continues": trigger.continues, "link": trigger.link}


_LIVE: weakref.WeakSet[GuardedJob] = weakref.WeakSet()
"""Every guarded job of this process (weakly): :func:`forget_runtimes` reaches them."""


def forget_runtimes() -> None:
    """Make every guarded job of this process build its store, queue and clients again
    from the environment at its next invocation (once per container on Lambda). For a
    test that points the environment at a new emulator: a module's ``@guarded``
    handler, called directly, then uses that test's table (the testing kit's sandbox
    calls it when it starts and stops). Injected stores and queues are kept."""
    for job in list(_LIVE):
        job._runtime = None  # noqa: SLF001 - this module's own objects


_RUNTIME_OPTIONS = ("store", "queue", "clock", "owner", "continuation")


def guarded(
    job: str | JobConfig,
    *,
    policy: OverlapPolicy | str = OverlapPolicy.SKIP,
    **options: Any,
) -> Callable[[F], GuardedJob]:
    """Guard an existing ``lambda_handler(event, context)`` with a job's run policy.

    The job is validated here, when the module is imported; a configuration that
    cannot be safe raises :class:`jobguard.ConfigError` naming the field. Table and
    queue come from ``JOBGUARD_TABLE`` / ``JOBGUARD_TRIGGER_QUEUE_URL`` (set by the
    stack) unless given as ``table_name=`` / ``trigger_queue_url=``.

    When the handler did not run, the wrapper returns a JSON-serializable dict naming
    the decision (``skipped``, ``queued``, ``coalesced``, ``dropped``, ``stale``,
    ``paused``, ``duplicate``) and the holder's run id.

    ``job`` may also be a whole :class:`JobConfig` (e.g. from a
    :class:`jobguard.definitions.JobDefinition`).

    Example:
        >>> from datetime import timedelta
        >>> from jobguard import OverlapPolicy, guarded
        >>> @guarded("crm-sync", policy=OverlapPolicy.COALESCE, lease=timedelta(minutes=5))
        ... def lambda_handler(event, context):
        ...     return sync_contacts()
    """
    if isinstance(job, JobConfig):
        runtime_only = {k: options.pop(k) for k in _RUNTIME_OPTIONS if k in options}
        if options:
            raise ConfigError("options", f"give either a JobConfig or options, not both: "
                              f"{sorted(options)}")
        config_given = job
        return lambda handler: GuardedJob(config_given, handler, **runtime_only)
    # A policy given as a string ("coalesce") is JobConfig's to convert and refuse.
    runtime_options = {k: options.pop(k) for k in _RUNTIME_OPTIONS if k in options}
    try:
        config = JobConfig(name=job, policy=policy, **options)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ConfigError("options", str(exc)) from None

    def decorate(handler: F) -> GuardedJob:
        return GuardedJob(config, handler, **runtime_options)

    return decorate

