"""A handler wired to a sandbox, driven as AWS drives it: :class:`WiredJob`.

Its one reason to change: what a test can deliver to a job (a tick, duplicates, a tick
that meets a held lease, the trigger queue's messages) and read back (its runs, lease and
items). :meth:`jobguard.testing.Sandbox.wire` makes one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .invocation import LambdaContext, tick_event

if TYPE_CHECKING:
    from ..guard import GuardedJob
    from ..lease import LeaseState
    from ..records import RunRecord
    from ..workitems import ItemRecord
    from .clock import ManualClock
    from .sandbox import Sandbox

__all__ = ["Held", "WiredJob"]


@dataclass
class Held:
    """The run :meth:`WiredJob.holding` started: its result (or exception) once the
    ``with`` block has ended and the run finished."""

    result: Any = None
    error: BaseException | None = None
    run_id: str | None = None
    fence: int | None = None


@dataclass
class WiredJob:
    """Your handler bound to a :class:`Sandbox`: call it like Lambda would."""

    sandbox: Sandbox
    guarded: GuardedJob
    queue_url: str | None = None
    clock: ManualClock | None = None
    """The job's clock (``wire(clock=...)``), default the sandbox's: its minute is the
    default tick, its time the Lambda contexts' time."""
    _contexts: list[LambdaContext] = field(default_factory=list, repr=False)

    @property
    def name(self) -> str:
        return self.guarded.config.name

    def __call__(self, event: Any, context: Any = None) -> Any:
        """Invoke the handler with ``event`` (any event: a tick, a manual invoke, an SQS
        batch) and a fresh :class:`LambdaContext` unless one is given."""
        return self.guarded(event, context if context is not None else self.context())

    def context(self) -> LambdaContext:
        """A new Lambda context (new request id) with this job's timeout, on the job's
        clock, bounded by :attr:`Sandbox.real_limit` of real time."""
        return LambdaContext(function_name=self.name, clock=self._clock(),
                             timeout=self._timeout(), real_limit=self.sandbox.real_limit)

    def minute(self) -> datetime:
        """The job's clock's current minute: when a tick fired now was scheduled."""
        return self._clock().now().astimezone(UTC).replace(second=0, microsecond=0)

    def _clock(self) -> ManualClock:
        return self.clock if self.clock is not None else self.sandbox.clock

    def _tick_at(self, at: datetime | None) -> dict[str, Any]:
        """The tick Scheduler delivers now for ``at``: never one ahead of the job's clock
        by more than its skew margin (the guard refuses such an event: no schedule sends
        it)."""
        at = at or self.minute()
        event = tick_event(self.name, at)
        skew = self.guarded.config.skew_margin
        if at - self._clock().now() > skew:
            from .._durations import human

            raise ValueError(
                f"at={event['scheduled_at']} is ahead of the job's clock "
                f"({self._clock().now():%Y-%m-%dT%H:%M:%SZ}) by more than its skew margin "
                f"({human(skew)}): EventBridge Scheduler never delivers a tick before its "
                "time, and the guard refuses one that comes early. Move the clock first "
                "(jobguard_sandbox.clock.advance(...)) and tick then; to send such an "
                "event on purpose, call the job with tick_event(...)")
        return event

    def tick(self, at: datetime | None = None, *, context: Any = None) -> Any:
        """Deliver the Scheduler tick scheduled at ``at`` (default: the clock's current
        minute). The same ``at`` again is another delivery of the same tick: a
        duplicate. Scheduler delivers a tick at or after its time: ``at`` ahead of the
        job's clock (beyond its skew margin) is a ``ValueError``; advance the clock."""
        return self(self._tick_at(at), context)

    def duplicates(self, at: datetime | None = None, *, times: int = 3) -> list[Any]:
        """Deliver the tick at ``at`` ``times`` times at once (threads released together,
        as Scheduler's and Lambda's retries can arrive), and return every answer."""
        if not isinstance(times, int) or times < 2:
            raise ValueError(f"duplicates(times=...) must be an int >= 2, got {times!r}")
        event = self._tick_at(at)
        barrier = threading.Barrier(times)
        answers: list[Any] = [None] * times

        def deliver(index: int) -> None:
            context = self.context()
            barrier.wait()
            try:
                answers[index] = self.guarded(event, context)
            except BaseException as exc:  # noqa: BLE001 - handed back to the test
                answers[index] = exc

        threads = [threading.Thread(target=deliver, args=(i,)) for i in range(times)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return answers

    @contextmanager
    def holding(self, at: datetime | None = None, *, event: Any = None,
                timeout: timedelta = timedelta(seconds=30)) -> Iterator[Held]:
        """Start a run (the tick at ``at``, or ``event``) in a thread and hold it right
        after it acquired the lease, for the length of the ``with`` block: whatever the
        block delivers meets a held lease. On leaving, the run goes on and is joined;
        :class:`Held` has its result. Its heartbeat is not frozen (a paused worker, not
        a dead one): advance the clock past the lease to stage a takeover instead."""
        from .. import hooks

        held = Held()
        tick = self._tick_at(at) if event is None else None
        acquired, resume = threading.Event(), threading.Event()
        owner: list[int] = []
        context = self.context()

        def on_acquire(**ctx: Any) -> None:
            if ctx.get("job") == self.name and owner and threading.get_ident() == owner[0]:
                held.run_id, held.fence = ctx.get("run_id"), ctx.get("fence")
                acquired.set()
                resume.wait(timeout.total_seconds() * 4)
                context._restart_real_limit()

        def first() -> None:
            owner.append(threading.get_ident())
            try:
                held.result = self(event if event is not None else tick, context)
            except BaseException as exc:  # noqa: BLE001 - handed back to the test
                held.error = exc
            finally:
                acquired.set()

        with hooks.on("after_acquire", on_acquire):
            thread = threading.Thread(target=first, name=f"held-{self.name}")
            thread.start()
            try:
                from .._durations import human

                if not acquired.wait(timeout.total_seconds()):
                    raise AssertionError(f"the run of {self.name!r} did not acquire the lease "
                                         f"within {human(timeout)}")
                if held.run_id is None:
                    raise AssertionError(
                        f"the trigger of {self.name!r} did not run, so nothing holds the lease "
                        f"(it answered {held.result!r}, error {held.error!r}): a tick already "
                        f"delivered is a duplicate; give holding() a new at=")
                yield held
            finally:
                resume.set()
                thread.join(timeout.total_seconds())

    def deliver_queued(self, *, redeliver: bool = False, limit: int = 20) -> int:
        """Deliver the messages waiting on the job's trigger queue (queued triggers,
        follow-ups) to the handler as the SQS event source mapping does, one at a time,
        until none is visible or ``limit`` were delivered; returns how many. With
        ``redeliver``, each message is delivered twice before it is deleted (SQS's
        at-least-once delivery: a visibility timeout that ran out, a delete that was
        lost). A message the handler deferred (a follow-up that met a run's lease is kept
        invisible for the lease's remaining time) is made visible again once the
        :class:`ManualClock` has passed that time, as SQS would after that many seconds:
        advance the clock past a dead holder's lease and deliver again."""
        if self.queue_url is None:
            raise ValueError(f"{self.name!r} has no trigger queue (policy "
                             f"{self.guarded.config.policy.value}): nothing is queued")
        from ..local.esm import deliver_once

        delivered = 0
        while delivered < limit:
            self.sandbox._surface_deferred(self.queue_url, self._clock())
            if not deliver_once(self.sandbox.client("sqs"), self.queue_url, self,
                                context=self.context(), times=2 if redeliver else 1):
                break
            delivered += 1
        return delivered

    def queued(self) -> int:
        """Messages on the job's trigger queue (visible and in flight)."""
        if self.queue_url is None:
            return 0
        attributes = self.sandbox.client("sqs").get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())

    def runs(self) -> list[RunRecord]:
        """The job's run log, oldest first: one record per decision (runs and non-runs).
        Records that started at the same instant (a :class:`ManualClock` that was not
        advanced between them) are in no particular order among themselves. A row that
        is not a readable run record (one a test wrote by hand) is left out:
        ``sandbox.store.list_runs(name)`` names it (a ``DamagedRun``)."""
        from ..records import RunRecord

        rows = self.sandbox.store.list_runs(self.name, limit=1000)
        return [r for r in reversed(rows) if isinstance(r, RunRecord)]

    def decisions(self) -> list[str]:
        """Each run record's decision, oldest first (``ran``, ``skipped``, ...)."""
        return [r.decision.value for r in self.runs()]

    def lease(self) -> LeaseState:
        """The job's lease row as it is now (holder, fence, expiry)."""
        return self.sandbox.store.read_lease(self.name)

    def item(self, work_id: str) -> ItemRecord | None:
        """The item ledger's record of ``work_id`` (``WorkId`` or its text)."""
        from ..dynamodb_items import DynamoItemStore

        items = DynamoItemStore(self.sandbox.table, client=self.sandbox.client("dynamodb"))
        return items.get(self.name, str(work_id))

    def _timeout(self) -> timedelta:
        claim_for: timedelta = self.guarded.config.claim_for
        return max(claim_for, timedelta(minutes=15))
