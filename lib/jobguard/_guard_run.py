"""The run the guard starts once it holds the lease: heartbeat, handler, then release
(or the hand-off to a chain's next link) with the run record in one transaction,
and what the release found to do (wake a deferred message, re-send a follow-up,
invoke the next link). A part of :class:`jobguard.guard.GuardedJob`; changes when a
run's life or its ending does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ._bounds import bounded_extra, bounded_text
from ._guard_parts import GuardParts
from ._redact import error_text, redact_raised, redacted
from .clock import to_ms
from .errors import (
    ContinuationRefused,
    LeaseLostError,
    StoreError,
)
from .hooks import fire
from .ids import new_run_id
from .lease import Acquired, HandOff, Released
from .ports import ContinuationPort, TriggerQueuePort
from .records import Decision, RunRecord, RunStatus
from .requests import Release
from .run import Heartbeat, Run, _reset_current, _set_current
from .trigger_state import (
    Route,
    State,
    route_of,
)
from .triggers import (
    Trigger,
    TriggerKind,
    continuation_event,
    continuation_trigger_id,
    format_instant,
)


def _chain_extra(trigger: Trigger) -> dict[str, Any]:
    """A continuation's record names the link before it and its place in the chain."""
    if trigger.kind is not TriggerKind.CONTINUATION:
        return {}
    return {"continues": trigger.continues, "link": trigger.link}


class Runs(GuardParts):
    """Run the handler under the lease, and end the run (a part of ``GuardedJob``)."""

    def _deadline_base(self, acquired: Acquired, now_ms: int, now_mono: float) -> float:
        """The monotonic moment the run's lease counts from: when this attempt read the
        clock it put on the row (expiry - lease); earlier if the acquisition that landed
        was an earlier attempt, its expiry older than this attempt's clock says, so the
        local deadline (this + lease - skew margin) never outlives the row's expiry."""
        if acquired.expires_at_ms is None:
            return now_mono
        behind_ms = now_ms + self._lease_ms - acquired.expires_at_ms
        return now_mono - max(0, behind_ms) / 1000

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
        started = self.clock.monotonic()  # the injected clock: a test sees the duration it made
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
            try:
                run.close()
            except Exception as exc:  # jobguard's own write, not the handler's error
                redact_raised(exc, config.redact)
                raise
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
            trigger_ttl_s=trigger_ttl_s, trigger_item=acquired.trigger_item,
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
        rt.telemetry.milliseconds("RunDuration", (self.clock.monotonic() - started) * 1000)
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

        # (no service of its own: Powertools' Tracer keeps one configuration per process,
        # and a name given here would rename the function's own traces)
        return Tracer()
