"""Job configuration: frozen, keyword-only, validated when built.

A configuration that cannot be safe is refused here, when the job is defined (at
import time of the handler module), not at 3 a.m. when two runs meet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from types import MappingProxyType

from ._bounds import batch_size_problem
from ._durations import human
from ._redact import check_redactor
from .errors import ConfigError
from .names import JOB_NAME_PATTERN, validate_job_name

__all__ = ["JOB_NAME_PATTERN", "MAX_FUNCTION_TIMEOUT", "SCHEDULER_REDELIVERY_WINDOW",
           "TRIGGER_QUEUE_RETENTION", "JobConfig", "OverlapPolicy", "validate_job_name"]

SCHEDULER_REDELIVERY_WINDOW = timedelta(hours=24)
"""EventBridge Scheduler retries a tick it could not deliver for up to 24 hours."""

MAX_FUNCTION_TIMEOUT = timedelta(minutes=15)
"""Lambda's longest timeout: no claim may outlive it."""

TRIGGER_QUEUE_RETENTION = timedelta(days=14)
"""How long a queued trigger or follow-up may wait in the job's SQS FIFO queue (the
stack sets SQS's maximum retention). Its receive count does not bound its age: a FIFO
message can wait unreceived behind the message ahead of it in its group."""


class OverlapPolicy(StrEnum):
    """What a trigger does when the job's lease is held by another run."""

    SKIP = "SKIP"
    """Record a skipped run naming the holder, and exit. For jobs whose next tick can
    safely cover the work (a sync that always reads "changed since checkpoint")."""

    QUEUE = "QUEUE"
    """Become one pending run (an SQS FIFO message, group = job). Pending runs start one
    at a time, in trigger order, after the active run. Past ``max_queued`` pending
    triggers, a trigger is recorded as dropped. For jobs where every trigger is a
    distinct request or time window (one export per period)."""

    COALESCE = "COALESCE"
    """Any number of triggers during an active run produce exactly one follow-up run,
    started soon after the active run ends (or once its lease expires, if it crashed).
    For refresh-style jobs where the goal is current data, not one run per trigger."""

    REPLACE = "REPLACE"
    """Take the lease with a higher fence; the old run notices at its next heartbeat or
    write and stops. For jobs where only the newest request matters."""


def _positive(field_name: str, value: object) -> timedelta:
    if not isinstance(value, timedelta):
        raise ConfigError(field_name, f"must be a datetime.timedelta, got {type(value).__name__}")
    if value <= timedelta(0):
        raise ConfigError(field_name, f"must be positive, got {human(value)}")
    return value


@dataclass(frozen=True, kw_only=True)
class JobConfig:
    """How one job is guarded.

    Example:
        >>> from datetime import timedelta
        >>> JobConfig(name="crm-sync", policy=OverlapPolicy.COALESCE,
        ...           lease=timedelta(minutes=5)).heartbeat
        datetime.timedelta(seconds=100)
    """

    name: str
    """Job name; one lease per job. Letters, digits, ``_``, ``.``, ``-``."""

    policy: OverlapPolicy = OverlapPolicy.SKIP
    """What a second trigger does while a run is active."""

    lease: timedelta = timedelta(minutes=5)
    """How long a lease lasts without renewal. Longer than a heartbeat interval times
    two, short enough that a crashed worker's job becomes eligible again soon."""

    heartbeat_every: timedelta | None = None
    """How often the background heartbeat renews the lease. Defaults to lease / 3."""

    skew_margin: timedelta = timedelta(seconds=5)
    """Clock skew tolerated between workers. An expired lease is taken over only once it
    has been expired for longer than this; a worker stops this long before its lease
    ends by its own monotonic clock."""

    stale_after: timedelta = timedelta(hours=1)
    """A tick delivered longer than this after its scheduled time is recorded as
    ``stale`` and not run (a retry long after the fact)."""

    dedup_window: timedelta = timedelta(hours=2)
    """How long a directly delivered trigger's item is kept at least, so that a duplicate
    delivery is recognised (a tick's is kept until ``stale_after`` past its scheduled
    time if that is later; a trigger on the queue is kept for the queue's retention).
    At least ``stale_after`` (older ticks are stale anyway)."""

    max_queued: int = 10
    """``QUEUE`` only: the bound on pending triggers; past it a trigger is dropped."""

    record_ttl: timedelta = timedelta(days=30)
    """How long finished run records are kept (DynamoDB TTL)."""

    table_name: str | None = None
    """DynamoDB table. Defaults to the ``JOBGUARD_TABLE`` environment variable."""

    trigger_queue_url: str | None = None
    """SQS FIFO trigger queue (``QUEUE``/``COALESCE``). Defaults to
    ``JOBGUARD_TRIGGER_QUEUE_URL``."""

    tracing: bool = False
    """Trace runs with the Powertools Tracer (imports the X-Ray SDK lazily)."""

    batch_size: int = 25
    """Work items claimed (and settled) per page, 1-1000. Claims and outcomes go in
    transactions of up to 99 items; see :class:`jobguard.BatchJob`."""

    flush: str = "page"
    """When outcomes are written: ``"page"`` (one transaction per 99 items, with the
    checkpoint) or ``"item"`` (right after each destination call). Per page is cheaper;
    per item narrows what a crash leaves uncertain to the one item in flight."""

    claim_for: timedelta = timedelta(minutes=15)
    """How long a claim lasts. A claim past this with no recorded outcome is
    ``uncertain``: its worker vanished. At most ``function_timeout`` when that is set."""

    item_ttl: timedelta = timedelta(days=15)
    """How long completed work items are remembered (DynamoDB TTL). At least
    :attr:`redelivery_window`: a trigger delivered again after its items were forgotten
    would redo them. Unresolved items never expire."""

    time_margin: timedelta = timedelta(seconds=10)
    """Stop taking new items when the Lambda has less than this left, and checkpoint."""

    max_chain: int = 1
    """The most runs one chain may have (the run a trigger started is the first, 1-100).
    Above 1, a :class:`jobguard.BatchJob` run that stops for time (less than
    ``time_margin`` left) hands the job at once to a continuation run of its own
    function instead of leaving the rest to the next tick; the chain holds the job like
    one run. 1 (the default): no continuation. The function needs
    ``lambda:InvokeFunction`` on itself (the construct grants it when above 1)."""

    function_timeout: timedelta | None = None
    """The Lambda's timeout, when known (the stack passes it): claims must fit in it."""

    redact: Callable[[str], str] | None = None
    """A function every error text and record excerpt passes through before jobguard
    writes or logs it (a run's ``error``, an item's ``last_error``, a rejected record's
    excerpt, their log lines): the text in, the text to keep out, e.g. a token masked.
    If it raises (or returns no string), ``<redaction failed: ExceptionType>`` is
    written instead of the text. The exception the handler raised is not touched: it
    is raised again, to Lambda (see :mod:`jobguard._redact`)."""

    environment: Mapping[str, str] = field(
        init=False, repr=False, compare=False, default_factory=lambda: MappingProxyType({}))
    """The job function's own environment variables: its
    :attr:`jobguard.definitions.JobDefinition.environment`, which the stack sets on the
    function (empty for a config not made by :meth:`JobDefinition.config`). Read only:
    the testing kit's sandbox applies them to a wired job, as the Lambda has them."""

    _heartbeat: timedelta = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        validate_job_name(self.name)
        if not isinstance(self.policy, OverlapPolicy):
            try:
                object.__setattr__(self, "policy", OverlapPolicy(str(self.policy).upper()))
            except ValueError:
                names = ", ".join(p.value for p in OverlapPolicy)
                raise ConfigError(
                    "policy", f"unknown policy {self.policy!r}; one of {names}"
                ) from None
        lease = _positive("lease", self.lease)
        heartbeat = (
            lease / 3
            if self.heartbeat_every is None
            else _positive("heartbeat_every", self.heartbeat_every)
        )
        if lease <= 2 * heartbeat:
            raise ConfigError(
                "heartbeat_every",
                f"lease ({human(lease)}) must be longer than two heartbeats "
                f"(2 x {human(heartbeat)}): one lost renewal must not lose the lease",
            )
        skew = self.skew_margin
        if not isinstance(skew, timedelta) or skew < timedelta(0):
            raise ConfigError("skew_margin", "must be a non-negative datetime.timedelta")
        if skew >= lease - heartbeat:
            raise ConfigError(
                "skew_margin",
                f"must be shorter than lease - heartbeat ({human(lease - heartbeat)}); "
                "otherwise the worker's local deadline passes before its next renewal",
            )
        stale = _positive("stale_after", self.stale_after)
        window = _positive("dedup_window", self.dedup_window)
        if window < stale:
            raise ConfigError(
                "dedup_window",
                f"must be at least stale_after ({human(stale)}): a duplicate delivery "
                "younger than stale_after would otherwise run again",
            )
        if (
            not isinstance(self.max_queued, int)
            or isinstance(self.max_queued, bool)
            or self.max_queued < 1
        ):
            raise ConfigError("max_queued", f"must be an integer >= 1, got {self.max_queued!r}")
        ttl = _positive("record_ttl", self.record_ttl)
        if ttl < window:
            raise ConfigError("record_ttl", f"must be at least dedup_window ({human(window)})")
        problem = batch_size_problem(self.batch_size)
        if problem is not None:
            raise ConfigError("batch_size", problem)
        if self.flush not in ("page", "item"):
            raise ConfigError("flush", f"must be 'page' or 'item', got {self.flush!r}")
        claim = _positive("claim_for", self.claim_for)
        if self.function_timeout is not None:
            timeout = _positive("function_timeout", self.function_timeout)
            if claim > timeout:
                raise ConfigError(
                    "claim_for",
                    f"({human(claim)}) must fit in the function timeout ({human(timeout)}): "
                    "a claim that outlives its worker is held by nobody, and its item waits "
                    "that long before it is reconciled",
                )
        elif claim > MAX_FUNCTION_TIMEOUT:
            raise ConfigError(
                "claim_for",
                f"({human(claim)}) must fit in a Lambda function's longest timeout "
                f"({human(MAX_FUNCTION_TIMEOUT)}): a claim that outlives its worker is held "
                "by nobody",
            )
        item_ttl = _positive("item_ttl", self.item_ttl)
        if item_ttl < self.redelivery_window:
            raise ConfigError(
                "item_ttl",
                f"({human(item_ttl)}) must be at least the redelivery window "
                f"({human(self.redelivery_window)}: {self._redelivery_reason()}): a trigger "
                "delivered again after its completed items expired would redo them",
            )
        chain = self.max_chain
        if not isinstance(chain, int) or isinstance(chain, bool) or not 1 <= chain <= 100:
            raise ConfigError("max_chain", "must be a whole number 1-100 (1: no continuation; "
                              f"100 runs of 15 minutes is 25 hours), got {chain!r}")
        margin = self.time_margin
        if not isinstance(margin, timedelta) or margin < timedelta(0):
            raise ConfigError("time_margin", "must be a non-negative datetime.timedelta")
        if self.function_timeout is not None and margin >= self.function_timeout:
            raise ConfigError(
                "time_margin",
                f"({human(margin)}) must be shorter than the function timeout "
                f"({human(self.function_timeout)}): a run would stop before taking its first "
                "item",
            )
        from .environment import check_table_name, check_trigger_queue_url

        if self.table_name is not None:
            check_table_name(self.table_name, field="table_name")
        if self.trigger_queue_url is not None:
            check_trigger_queue_url(self.trigger_queue_url, field="trigger_queue_url")
        if not isinstance(self.tracing, bool):
            raise ConfigError("tracing", f"must be True or False, got {self.tracing!r}")
        check_redactor(self.redact)
        object.__setattr__(self, "_heartbeat", heartbeat)

    @property
    def heartbeat(self) -> timedelta:
        """The effective heartbeat interval."""
        return self._heartbeat

    @property
    def redelivery_window(self) -> timedelta:
        """The longest time after which a trigger of this job can still arrive and run.

        The longest of: EventBridge Scheduler's 24 h of retries
        (:data:`SCHEDULER_REDELIVERY_WINDOW`); ``dedup_window`` (a duplicate is
        recognised that long, and it is at least ``stale_after``, past which a tick is
        recorded stale and not run); and, for ``QUEUE``/``COALESCE`` jobs, the trigger
        queue's retention (:data:`TRIGGER_QUEUE_RETENTION`, 14 days), because a queued
        trigger is not subject to ``stale_after`` and a FIFO message can wait unreceived
        behind its group for as long as SQS keeps it (so visibility x receive count does
        not bound it). ``item_ttl`` must be at least this.
        """
        window = max(SCHEDULER_REDELIVERY_WINDOW, self.dedup_window)
        if self.needs_queue:
            window = max(window, TRIGGER_QUEUE_RETENTION)
        return window

    def _redelivery_reason(self) -> str:
        if self.needs_queue and self.redelivery_window == TRIGGER_QUEUE_RETENTION:
            return f"a {self.policy.value} trigger may wait that long in its SQS queue"
        if self.redelivery_window == SCHEDULER_REDELIVERY_WINDOW:
            return "EventBridge Scheduler retries a tick that long"
        return "dedup_window"

    @property
    def needs_queue(self) -> bool:
        """Whether this policy uses the job's SQS FIFO trigger queue."""
        return self.policy in (OverlapPolicy.QUEUE, OverlapPolicy.COALESCE)
