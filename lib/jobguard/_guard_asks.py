"""What the guard asks of the store, from what it observed: the acquisition request
(:class:`jobguard.requests.Acquisition`), the record of a run it displaces, and how
long each item is kept (TTLs). Pure: no request is sent here. A part of
:class:`jobguard.guard.GuardedJob`; changes when an acquisition must carry something
new or an item's lifetime changes.
"""

from __future__ import annotations

from datetime import timedelta

from ._guard_parts import GuardParts
from .clock import to_ms
from .config import TRIGGER_QUEUE_RETENTION, OverlapPolicy
from .lease import LeaseState
from .observed import Observed
from .records import Decision, RunOrigin, RunRecord, RunStatus
from .requests import Acquisition
from .trigger_state import (
    Route,
    State,
    route_of,
)
from .triggers import (
    Trigger,
    TriggerKind,
    format_instant,
)

LAMBDA_MAX_EVENT_AGE = timedelta(hours=6)
"""The longest Lambda keeps retrying an asynchronous invocation (its default)."""

LAMBDA_MAX_RUN = timedelta(minutes=15)
"""The longest a Lambda invocation runs."""


class Asks(GuardParts):
    """Build what the store is asked (a part of ``GuardedJob``)."""

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

    def _origin(self, trigger: Trigger) -> RunOrigin:
        """What the run's record will say of how it came about (kept on its trigger's item
        while it runs: a force release writes its record from outside the run)."""
        return RunOrigin(
            policy=self.config.policy.value, requested_by=trigger.requested_by,
            scheduled_at=format_instant(trigger.scheduled_at) if trigger.scheduled_at
            else None, delivery_id=trigger.delivery_id)

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
