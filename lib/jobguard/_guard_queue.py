"""The guard's trigger-queue side: an SQS batch of queued triggers and follow-ups
(each handled as one trigger; one deferred while the lease is held waits on the
queue), a malformed message recorded ``rejected``, and the queue client built when
first needed. A part of :class:`jobguard.guard.GuardedJob`; changes when the
trigger queue's handling does.
"""

from __future__ import annotations

from typing import Any

from ._guard_parts import GuardParts
from ._redact import error_text, redacted
from .clock import to_ms
from .errors import (
    ConfigError,
    InvalidTriggerError,
    JobGuardError,
    NewerMessageError,
)
from .lease import LeaseState
from .ports import TriggerQueuePort
from .triggers import (
    check_sqs_event,
    parse_queue_message,
)

_ERROR_CHARS = 1000


class _Deferred(JobGuardError):
    """A queued trigger or follow-up found the lease held; it waits on the queue."""

    def __init__(self, state: LeaseState) -> None:
        self.state = state
        super().__init__(f"job {state.job!r} is held by run {state.run_id}")


class QueueDeliveries(GuardParts):
    """Handle the trigger queue's deliveries (a part of ``GuardedJob``)."""

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
