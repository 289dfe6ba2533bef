"""The guard's decisions that run nothing: each recorded with the trigger's new state
and its run record in one transaction (skip, queue, coalesce, drop, pause, absorb,
duplicate, supersede), and a late tick recorded ``stale``. A part of
:class:`jobguard.guard.GuardedJob`; changes when a non-run decision's effects do.
"""

from __future__ import annotations

from typing import Any

from ._bounds import bounded_text
from ._guard_parts import GuardParts
from ._guard_run import _chain_extra
from .clock import to_ms
from .errors import (
    SendError,
    StoreError,
)
from .lease import LeaseState
from .records import Decision, Outcome, RunRecord, RunStatus
from .requests import DecisionWrite
from .trigger_state import (
    Next,
    Refused,
    Route,
    State,
    TriggerRecord,
    route_of,
)
from .triggers import (
    Trigger,
    TriggerKind,
    follow_up_trigger_id,
    format_instant,
)

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


class Decisions(GuardParts):
    """Record a decision that runs nothing (a part of ``GuardedJob``)."""

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
                # so did undoing the decision). Sending it again is safe: the queue
                # decision's own deduplication id (its run id), and only a delivery that
                # finds it queued runs; a later decision's message is never dropped for it.
                self._trigger_queue().send(self._queued_message(trigger), event=event,
                                           decision=item.run_id)
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
                self._trigger_queue().send(self._queued_message(trigger), event=event,
                                           decision=record.run_id)
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
