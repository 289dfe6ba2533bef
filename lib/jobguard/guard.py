"""The guard: what a trigger does, and the run it may start.

``guarded`` is a thin decorator over :class:`GuardedJob`, whose :meth:`GuardedJob.handle`
takes one trigger through: stale check, one conditional write to acquire the lease, and
either the run (heartbeat, handler, release + run record in one transaction) or the
decision the job's policy asks for (recorded in one transaction).

This module holds the decision loop (``handle``, ``run_exclusive``) and the wiring; the
job's other parts live beside it, one reason to change each: what is asked of the store
(``_guard_asks``), the decisions that run nothing (``_guard_decisions``), the run and its
ending (``_guard_run``), the trigger queue's deliveries (``_guard_queue``).
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
from typing import TYPE_CHECKING, Any, TypeVar

from . import _drills
from ._durations import human
from ._guard_asks import Asks
from ._guard_decisions import Decisions
from ._guard_queue import QueueDeliveries, _Deferred
from ._guard_run import Runs
from .clock import Clock, SystemClock, to_ms
from .config import JobConfig, OverlapPolicy
from .errors import (
    ConfigError,
    InvalidTriggerError,
    StoreError,
)
from .hooks import fire
from .ids import new_run_id
from .lease import Acquired, LeaseState, backoff
from .observed import Observed, landed_and_ended, late
from .ports import ContinuationPort, JobStore, TriggerQueuePort
from .trigger_state import (
    TERMINAL,
    Next,
    Refused,
    Route,
    State,
    TriggerRecord,
    decide,
    names_hand_off,
    route_of,
)
from .triggers import (
    Trigger,
    TriggerKind,
    format_instant,
    parse_event,
)

__all__ = ["GuardedJob", "forget_runtimes", "guarded"]



Handler = Callable[[Any, Any], Any]
F = TypeVar("F", bound=Handler)

_MAX_ATTEMPTS = 8



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


_PARTS = (Decisions, Asks, Runs, QueueDeliveries)
if TYPE_CHECKING:
    class _Parts(Decisions, Asks, Runs, QueueDeliveries):
        """What the type checker sees: the job is its parts."""
else:
    _Parts = object


def _composed(cls: type[Any]) -> type[Any]:
    """Give the job its parts' methods (one module each) as its own: its bases, a public
    fact (tests/unit/api_pin.json), stay what they were."""
    for part in _PARTS:
        for name, value in vars(part).items():
            if not name.startswith("__") and name not in vars(cls) \
                    and (callable(value) or isinstance(value, staticmethod)):
                setattr(cls, name, value)
    return cls


@_composed
class GuardedJob(_Parts):
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
            if attempt == _MAX_ATTEMPTS - 1:
                break  # (no wait after the last try)
            if refused.conflict or unanswered:
                backoff(attempt, throttled=refused.throttled)
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
            f"{observed.lease.fence}; trigger item: {item.state.value if item else 'absent'}"
            + ("; the last refused for the partition's throttle (ThrottlingError: its "
               "write capacity is spent, see docs/capacity.md)"
               if refused is not None and refused.throttled else ""))

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
        conflicts = throttles = 0  # refusals in a row by other transactions, by the throttle
        unanswered = 0  # attempts in a row whose answer was an error, read back unapplied
        while True:
            now_mono = self.clock.monotonic()
            now_ms = to_ms(self.clock.now())
            run_id = new_run_id(now_ms)
            lease = observed.lease
            held = lease.is_held(now_ms, self._skew_ms)
            paused = lease.paused_at_ms is not None and not ignore_pause
            if held or paused:
                conflicts = throttles = 0
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
                throttles += result.throttled
                if conflicts >= _MAX_ATTEMPTS and self.clock.monotonic() >= deadline:
                    # a partition throttled for good (or transactions that keep
                    # colliding) past the wait ends it, naming the cause, as a held
                    # lease does
                    raise StoreError(
                        "acquire", self.config.name,
                        f"trigger {trigger.trigger_id}: the last {conflicts} tries refused, "
                        f"{throttles} for the partition's throttle (ThrottlingError: its "
                        f"write capacity is spent, see docs/capacity.md) and "
                        f"{conflicts - throttles} by concurrent transactions or unanswered; "
                        "the handler did not run")
                backoff(min(conflicts, _MAX_ATTEMPTS) - 1, throttled=result.throttled)
            else:
                conflicts = throttles = 0

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

