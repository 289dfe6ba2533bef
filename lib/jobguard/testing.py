"""The testing kit: your guarded handler on an in-process AWS, driven like AWS would.

Install ``jobguard[testing]``; its pytest plugin (:mod:`jobguard.pytest_plugin`) gives
the fixtures ``jobguard_sandbox`` (a :class:`Sandbox`), ``lambda_context`` and
``manual_clock``. Without pytest, use :meth:`Sandbox.start` as a context manager.

A :class:`Sandbox` is the embedded emulator (moto, every DynamoDB request serialized,
so conditional writes are atomic as on AWS) with the jobguard table created and
``JOBGUARD_TABLE`` set. :meth:`Sandbox.wire` takes your handler (a ``@guarded``
function or a ``BatchJob``) and returns a :class:`WiredJob` bound to that table, to
the job's own SQS FIFO trigger queue (created for ``QUEUE`` and ``COALESCE`` jobs) and
to the sandbox's :class:`ManualClock`. The wired job delivers what AWS delivers: a
Scheduler tick (:meth:`WiredJob.tick`), concurrent duplicate deliveries
(:meth:`WiredJob.duplicates`), a tick that arrives while a run holds the lease
(:meth:`WiredJob.holding`), and the trigger queue's messages through an SQS event
source mapping, once or redelivered (:meth:`WiredJob.deliver_queued`). What it left
behind is read back from the table: :meth:`WiredJob.runs`, :meth:`WiredJob.lease`,
:meth:`WiredJob.item`.

Example:
    >>> from datetime import timedelta
    >>> clock = ManualClock()
    >>> before = clock.now()
    >>> clock.advance(timedelta(minutes=6))  # every lease of 5 minutes has expired
    >>> clock.now() - before
    datetime.timedelta(seconds=360)
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .errors import ConfigError

if TYPE_CHECKING:
    from .dynamodb import DynamoJobStore
    from .guard import GuardedJob
    from .lease import LeaseState
    from .local.throughput import PartitionBudget, PartitionThroughput
    from .records import RunRecord
    from .workitems import ItemRecord

__all__ = ["Held", "LambdaContext", "ManualClock", "Sandbox", "WiredJob", "tick_event"]

_TABLE_ENV = "JOBGUARD_TABLE"


class ManualClock:
    """Wall and monotonic time that only move when :meth:`advance` is called.

    Shared by several workers (threads) it lets a test expire a lease without
    sleeping. ``offset`` makes one worker's wall clock run ahead (or behind) of
    another's view of the same clock: see :meth:`skewed`.
    """

    def __init__(self, start: datetime | None = None, *, _base: ManualClock | None = None,
                 _offset: timedelta = timedelta(0)) -> None:
        if start is not None and (not isinstance(start, datetime) or start.utcoffset() is None):
            raise TypeError(f"ManualClock(start=...) must be a datetime with a timezone, "
                            f"got {start!r}")
        self._base = _base
        self._offset = _offset
        self._lock = threading.Lock()
        self._now = start or datetime.now(UTC).replace(microsecond=0)
        self._mono = 1000.0

    def now(self) -> datetime:
        if self._base is not None:
            return self._base.now() + self._offset
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        if self._base is not None:
            return self._base.monotonic()
        with self._lock:
            return self._mono

    def advance(self, delta: timedelta) -> None:
        if not isinstance(delta, timedelta) or delta < timedelta(0):
            raise ValueError(f"advance() takes a timedelta >= 0 (time never runs back), "
                             f"got {delta!r}")
        if self._base is not None:
            self._base.advance(delta)
            return
        with self._lock:
            self._now += delta
            self._mono += delta.total_seconds()

    def skewed(self, offset: timedelta) -> ManualClock:
        """The same clock, as seen by a worker whose wall clock is off by ``offset``."""
        return ManualClock(_base=self, _offset=offset)


class LambdaContext:
    """What a handler reads of Lambda's context object: its request id (a new one per
    context, as per invocation), the function's name and ARN, its memory, and the time
    left before its timeout (counted on ``clock``'s monotonic time when given, so a
    :class:`ManualClock` moves it too).

    ``real_limit`` bounds the invocation in real seconds as well: once that much real
    time has passed, the time left is 0, as for a Lambda that timed out. A
    :class:`ManualClock` never moves by itself, so without it a run that never runs out
    of work (a ``select`` that never returns an empty page) would never end; the contexts
    of a :class:`WiredJob` have one (:attr:`Sandbox.real_limit`, 10 s).

    Example:
        >>> context = LambdaContext(timeout=timedelta(seconds=30))
        >>> 0 < context.get_remaining_time_in_millis() <= 30_000
        True
    """

    def __init__(self, *, function_name: str = "jobguard-test",
                 timeout: timedelta = timedelta(minutes=15), memory_limit_in_mb: int = 256,
                 clock: ManualClock | None = None, aws_request_id: str | None = None,
                 real_limit: timedelta | None = None) -> None:
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            raise ValueError(f"LambdaContext(timeout=...) must be a positive timedelta, "
                             f"got {timeout!r}")
        if real_limit is not None and (not isinstance(real_limit, timedelta)
                                       or real_limit <= timedelta(0)):
            raise ValueError(f"LambdaContext(real_limit=...) must be a positive timedelta "
                             f"or None, got {real_limit!r}")
        import time

        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_limit_in_mb
        self.invoked_function_arn = (
            f"arn:aws:lambda:us-east-1:000000000000:function:{function_name}")
        self.aws_request_id = aws_request_id or str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = f"local/{self.aws_request_id}"
        self._monotonic = clock.monotonic if clock is not None else time.monotonic
        self._deadline = self._monotonic() + timeout.total_seconds()
        self._real_limit_s = real_limit.total_seconds() if real_limit is not None else None
        self._real_deadline = (time.monotonic() + self._real_limit_s
                               if self._real_limit_s is not None else None)

    def get_remaining_time_in_millis(self) -> int:
        import time

        if self._real_deadline is not None and time.monotonic() >= self._real_deadline:
            return 0  # the kit's bound: out of time, as a Lambda that timed out
        return max(0, int((self._deadline - self._monotonic()) * 1000))

    def _restart_real_limit(self) -> None:
        """Count the real-time bound from now (the time a test held the run paused is
        the test's, not the run's)."""
        import time

        if self._real_limit_s is not None:
            self._real_deadline = time.monotonic() + self._real_limit_s


def tick_event(job: str, at: datetime, *, execution_id: str | None = None
               ) -> dict[str, Any]:
    """The event an EventBridge Scheduler tick delivers for ``job`` scheduled at ``at``
    (the stack's schedule input, ``<aws.scheduler.scheduled-time>`` filled in), with
    Scheduler's ``execution_id`` when one is given (the run record keeps it)."""
    if not isinstance(at, datetime) or at.utcoffset() is None:
        raise ValueError(f"a tick's time must be a datetime with a timezone, got {at!r}")
    event = {"job": job, "scheduled_at": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if execution_id is not None:
        event["execution_id"] = execution_id
    return event


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
            from ._durations import human

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
        from . import hooks

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
                from ._durations import human

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
        from .local.esm import deliver_once

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
        from .records import RunRecord

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
        from .dynamodb_items import DynamoItemStore

        items = DynamoItemStore(self.sandbox.table, client=self.sandbox.client("dynamodb"))
        return items.get(self.name, str(work_id))

    def _timeout(self) -> timedelta:
        claim_for: timedelta = self.guarded.config.claim_for
        return max(claim_for, timedelta(minutes=15))


class Sandbox:
    """The in-process emulator with the jobguard table created (see the module doc).

    Example:
        >>> with Sandbox.start() as sandbox:  # doctest: +SKIP
        ...     job = sandbox.wire(lambda_handler)
        ...     job.tick()["completed"]
    """

    real_limit: timedelta = timedelta(seconds=10)
    """How long one delivery may run in real time before its Lambda context says it is
    out of time (see :class:`LambdaContext`); set it on the sandbox for a longer run."""

    def __init__(self, emulator: Any, table: str, clock: ManualClock) -> None:
        from .dynamodb import DynamoJobStore

        self._emulator = emulator
        self.table = table
        self.clock = clock
        self.store: DynamoJobStore = DynamoJobStore(table, client=self.client("dynamodb"))
        self._queues: dict[str, str] = {}
        self._deferred: dict[str, list[tuple[datetime, str]]] = {}
        self._applied: dict[str, tuple[str, str, str | None]] = {}
        """Each variable a wired job's definition set: (job, value, value before)."""
        self._setenv: Callable[[str, str], None] | None = None
        """Sets a definition's variable (the plugin's: the test's monkeypatch, which then
        undoes it in order with the test's own changes), else ``os.environ``."""

    @classmethod
    @contextmanager
    def start(cls, *, clock: ManualClock | None = None, table: str | None = None,
              region: str = "us-east-1", set_table_env: bool = True,
              throughput: PartitionThroughput | PartitionBudget | None = None
              ) -> Iterator[Sandbox]:
        """The emulator for the ``with`` block: fake credentials, ``JOBGUARD_TABLE`` set
        (unless ``set_table_env`` is false: a suite that tests that variable itself),
        every boto3/botocore client made meanwhile (yours too) sent to it, and every
        guarded job's store built anew at its next call
        (:func:`jobguard.guard.forget_runtimes`), so a module's handler may also be
        called directly with :func:`tick_event`. The environment is restored on
        leaving (with every variable a wired job's definition set). One sandbox at a time:
        the emulator's state is the process's. ``throughput`` serves DynamoDB under
        per-partition limits (:mod:`jobguard.local.throughput`): a handler then meets
        throttling as a hot partition throttles it on AWS."""
        import importlib.util

        if importlib.util.find_spec("moto") is None:
            raise ImportError("the testing kit's sandbox needs the embedded emulator (moto): "
                              "pip install 'jobguard[testing]'")
        from .dynamodb import create_table
        from .guard import forget_runtimes
        from .local.emulator import in_process

        name = table or f"jobguard-{uuid.uuid4().hex[:8]}"
        with ExitStack() as stack:
            emulator = stack.enter_context(in_process(region=region, throughput=throughput))
            # a module's @guarded handler called directly builds its store anew: this
            # sandbox's table, not an earlier test's
            forget_runtimes()
            stack.callback(forget_runtimes)
            create_table(emulator.client("dynamodb"), name)
            if set_table_env:
                stack.callback(_restore, _TABLE_ENV, os.environ.get(_TABLE_ENV))
                os.environ[_TABLE_ENV] = name
            sandbox = cls(emulator, name, clock or ManualClock())
            stack.callback(sandbox._restore_environment)
            yield sandbox

    @property
    def throughput(self) -> PartitionBudget | None:
        """The partition budget (``start(throughput=...)``): what it charged and
        refused; None without one."""
        budget: PartitionBudget | None = getattr(self._emulator, "throughput", None)
        return budget

    def client(self, service: str) -> Any:
        """A client of the emulator (``dynamodb``, ``sqs``, ``s3``, ...)."""
        return self._emulator.client(service)

    def minute(self) -> datetime:
        """The clock's current minute: when a tick fired now was scheduled."""
        return self.clock.now().astimezone(UTC).replace(second=0, microsecond=0)

    def trigger_queue(self, job: str) -> str:
        """The job's SQS FIFO trigger queue (created once), as the stack makes it."""
        if job not in self._queues:
            self._queues[job] = self.client("sqs").create_queue(
                QueueName=f"{job[:60]}-{uuid.uuid4().hex[:8]}-triggers.fifo",
                Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"},
            )["QueueUrl"]
        return self._queues[job]

    def _surface_deferred(self, url: str, clock: ManualClock) -> None:
        """Make visible the messages of ``url`` deferred until a time ``clock`` passed."""
        from .triggerqueue import TriggerQueue

        deferred = self._deferred.get(url, [])
        now = clock.now()
        for entry in [d for d in deferred if d[0] <= now]:
            deferred.remove(entry)
            TriggerQueue(url, client=self.client("sqs")).wake(entry[1])

    def wire(self, handler: Any, *, clock: ManualClock | None = None) -> WiredJob:
        """``handler`` (a ``@guarded`` function, a ``GuardedJob``, or a ``BatchJob``)
        bound to this sandbox's table, the job's trigger queue and ``clock`` (default:
        the sandbox's: the wired job's default tick is that clock's minute). Your
        module's own object is left as it is. A ``@guarded`` handler under other
        decorators (Powertools' ``@logger.inject_lambda_context`` above it) is found
        through their ``__wrapped__``; the wired job calls the guarded handler itself,
        without the decorators above it.

        The job's own environment (``JobDefinition.environment``, which the stack sets on
        its function: a config made by ``JobDefinition.config()`` carries it) is set in
        ``os.environ`` from here until the sandbox closes, as the Lambda has it from its
        start. A variable already set to another value (by the test, the shell or another
        wired job's definition) is refused naming it: set a test's own value after
        ``wire()``."""
        from .batch import BatchJob
        from .guard import GuardedJob

        if isinstance(handler, BatchJob):
            handler = handler.handler()
        handler = _guarded_within(handler, GuardedJob)
        if isinstance(handler, type):
            raise TypeError(f"wire() takes a @guarded handler, a GuardedJob or a BatchJob, "
                            f"got the class {handler.__name__}: pass an instance")
        if not isinstance(handler, GuardedJob):
            raise TypeError(f"wire() takes a @guarded handler, a GuardedJob or a BatchJob, "
                            f"got {type(handler).__name__}")
        config = handler.config
        self._apply_environment(config.name, getattr(config, "environment", {}))
        url = self.trigger_queue(config.name) if config.needs_queue else None
        queue = (_KitQueue(url, client=self.client("sqs"), clock=clock or self.clock,
                           deferred=self._deferred.setdefault(url, []))
                 if url else None)
        wired = GuardedJob(config, handler.handler, store=self.store, queue=queue,
                           clock=clock or self.clock, serves_triggers=handler.serves_triggers)
        return WiredJob(self, wired, url, clock=clock)

    def _apply_environment(self, job: str, variables: Mapping[str, str]) -> None:
        """Set ``job``'s definition environment, refusing a variable set otherwise."""
        for key, value in variables.items():
            current = os.environ.get(key)
            if current is not None and current != value:
                by_job = self._applied.get(key)
                setter = (f"the definition of {by_job[0]!r}"
                          if by_job is not None and by_job[1] == current
                          else "this process (the test or the shell)")
                raise ConfigError(
                    "environment",
                    f"{key} is {current!r}, set by {setter}, but {job!r}'s definition sets "
                    f"{value!r}, which its Lambda sees: unset it, or set the test's own "
                    "value after wire()")
        for key, value in variables.items():
            if key not in self._applied:
                self._applied[key] = (job, value, os.environ.get(key))
            if self._setenv is not None:
                self._setenv(key, value)
            else:
                os.environ[key] = value

    def _restore_environment(self) -> None:
        for key, (_job, _value, before) in self._applied.items():
            _restore(key, before)
        self._applied.clear()


class _KitQueue:
    """The job's trigger queue, noting each deferral's end on the job's ManualClock (SQS
    counts a visibility timeout in real seconds, which a test's clock does not move)."""

    def __init__(self, url: str, *, client: Any, clock: ManualClock,
                 deferred: list[tuple[datetime, str]]) -> None:
        from .triggerqueue import TriggerQueue

        self._queue = TriggerQueue(url, client=client)
        self.url = url
        self._clock = clock
        self._deferred = deferred

    def defer(self, receipt: str, seconds: int) -> None:
        self._queue.defer(receipt, seconds)
        if seconds > 0:
            self._deferred.append((self._clock.now() + timedelta(seconds=seconds), receipt))

    def __getattr__(self, name: str) -> Any:  # send, wake, depth: the queue's own
        return getattr(self._queue, name)


def _guarded_within(handler: Any, kind: type) -> Any:
    """``handler``, or the guarded job found under its decorators' ``__wrapped__``."""
    seen: set[int] = set()
    found = handler
    while not isinstance(found, kind) and id(found) not in seen:
        seen.add(id(found))
        inner = getattr(found, "__wrapped__", None)
        if inner is None:
            return handler
        found = inner
    return found if isinstance(found, kind) else handler


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
