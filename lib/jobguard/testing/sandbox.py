"""The sandbox: the in-process emulator set up for a test, and handlers wired to it.

Its one reason to change: what a test's AWS is made of (the emulator, the jobguard
table, each job's trigger queue, the environment set and restored) and how a handler is
bound to it (:meth:`Sandbox.wire`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .clock import ManualClock
from .job import WiredJob

if TYPE_CHECKING:
    from ..dynamodb import DynamoJobStore
    from ..local.throughput import PartitionBudget, PartitionThroughput

__all__ = ["Sandbox"]

_TABLE_ENV = "JOBGUARD_TABLE"


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
        from ..dynamodb import DynamoJobStore

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
        from ..dynamodb import create_table
        from ..guard import forget_runtimes
        from ..local.emulator import in_process

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
        from ..triggerqueue import TriggerQueue

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
        from ..batch import BatchJob
        from ..guard import GuardedJob

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
        from ..triggerqueue import TriggerQueue

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
