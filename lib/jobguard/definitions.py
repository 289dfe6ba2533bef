"""Job definitions: the one source of truth for a deployment.

The CDK stack, the handlers, ``jobguard runbook`` and ``jobguard drill`` all read the
same :class:`JobDefinition`, so the schedule the stack creates, the policy the handler
applies and the runbook an operator reads cannot drift apart.

Example:
    >>> crm_sync = JobDefinition(
    ...     name="crm-sync", handler="handlers.crm_sync.lambda_handler",
    ...     schedule="rate(5 minutes)", policy=OverlapPolicy.COALESCE,
    ...     timeout=timedelta(minutes=4), lease=timedelta(minutes=2), batch_size=25,
    ...     overlap_alarm_share=0.75, description="One note per changed CRM contact.")
    >>> crm_sync.interval
    datetime.timedelta(seconds=300)
    >>> crm_sync.config().function_timeout
    datetime.timedelta(seconds=240)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Literal

from ._cron import longest_gap
from ._durations import human
from .config import JobConfig, OverlapPolicy, validate_job_name
from .environment import drills as _drill_deployment
from .errors import ConfigError

__all__ = ["AUTO_OVERLAP_SHARE", "DRILL_HEARTBEAT", "DRILL_LEASE", "DRILL_TIMEOUT",
           "AlarmWindow", "JobDefinition", "MAX_LAMBDA_TIMEOUT"]

MAX_LAMBDA_TIMEOUT = timedelta(minutes=15)
VISIBILITY_FACTOR = 6
"""AWS's advice for SQS event sources: visibility timeout >= 6x the function timeout."""
DRILL_LEASE = timedelta(seconds=12)
DRILL_HEARTBEAT = timedelta(seconds=3)
DRILL_TIMEOUT = timedelta(seconds=60)
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\(\S+ \S+ \S+ \S+ \S+ \S+\)$")
_HANDLER = re.compile(r"^[A-Za-z_][\w.]*\.[A-Za-z_]\w*$")
_UNITS = {"minute": 60, "hour": 3600, "day": 86400}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_ENV_PREFIXES = ("AWS_", "JOBGUARD_", "_")
RESERVED_ENV_NAMES = ("LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR")
"""Variables a job's ``environment`` may not set: Lambda's own, the ones the stack sets
from the definition, and those that steer boto3 (``AWS_ENDPOINT_URL``, ``AWS_PROFILE``):
the testing kit's ``wire()`` applies the environment inside the sealed test session."""
# CloudWatch evaluates an alarm over at most 7 days, and at most 1 day when its period is
# shorter than an hour (PutMetricAlarm: Period x EvaluationPeriods).
_ALARM_RANGE = timedelta(days=7)
_SHORT_PERIOD_RANGE = timedelta(days=1)
_HOUR = timedelta(hours=1)
AUTO = "auto"
AUTO_OVERLAP_SHARE = 0.8
"""The overlap alarm's share where ``overlap_alarm_share="auto"`` lets a run reach it."""


@dataclass(frozen=True)
class AlarmWindow:
    """How an alarm counts: ``periods`` consecutive periods of ``period``."""

    period: timedelta
    periods: int

    @property
    def span(self) -> timedelta:
        return self.period * self.periods


@dataclass(frozen=True, kw_only=True)
class JobDefinition:
    """Everything deployment, operation and drills need to know about one job."""

    name: str
    """The job name (also its lease, its queue's group and its alarms' prefix)."""
    handler: str
    """The Lambda handler, ``module.function`` relative to the code asset root."""
    schedule: str
    """An EventBridge Scheduler expression: ``rate(5 minutes)`` or ``cron(...)``."""
    policy: OverlapPolicy
    """What a trigger does while a run is active (see the README's run policy table)."""
    timeout: timedelta
    """The Lambda timeout. Claims must fit in it; the trigger queue's visibility
    timeout is six times it."""
    lease: timedelta = timedelta(minutes=5)
    heartbeat_every: timedelta | None = None
    skew_margin: timedelta = timedelta(seconds=5)
    """Clock skew tolerated between workers (:attr:`jobguard.JobConfig.skew_margin`)."""
    claim_for: timedelta | None = None
    """How long a work item's claim lasts; the function timeout when not given (a claim
    must fit in it)."""
    item_ttl: timedelta = timedelta(days=15)
    """How long completed work items are remembered: at least the job's redelivery
    window (:attr:`jobguard.JobConfig.redelivery_window`)."""
    batch_size: int = 25
    memory_mb: int = 256
    max_queued: int = 10
    max_chain: int = 1
    """The longest chain of continuation runs (:attr:`jobguard.JobConfig.max_chain`);
    above 1 the function may invoke itself."""
    stale_after: timedelta = timedelta(hours=1)
    overlap_alarm_share: float | Literal["auto"] | None = "auto"
    """Alarm when a run's duration exceeds this share of the schedule interval (of the
    timeout, for a cron schedule). It must be reachable: a run still going at the
    timeout is killed before it reports its duration, and a batch stops taking items
    ``time_margin`` before, so share x interval must be below timeout - time_margin; a
    share given that is not is refused. None: no overlap alarm, for a job whose runs
    cannot last until its next tick. ``"auto"`` (the default): 0.8 where a run can reach
    it, else no overlap alarm (a ``rate()`` job whose timeout is shorter than its interval
    cannot meet its next tick); see :meth:`overlap_share`."""
    skipped_alarm_count: int = 3
    """Alarm after this many skipped triggers in a row (evaluation periods)."""
    cron_interval: timedelta | None = None
    """For a ``cron()`` schedule: the longest time between two ticks. Derived from the
    expression when its ticks repeat every week (hours, minutes, days of the week);
    required otherwise (a monthly schedule, ``L``, ``#``), and refused for ``rate()``."""
    no_success_alarm_intervals: int | None = 3
    """The dead-man alarm: no successful run for this many schedule intervals (more when
    two full-length runs need longer). Missing data counts as breaching. CloudWatch looks
    back at most 7 days (1 day with intervals under an hour); None for a schedule it
    cannot watch (monthly), which you then watch some other way."""
    paused_alarm_after: timedelta = timedelta(days=1)
    """Alarm when the job's ticks have found it paused for this long."""
    reconciler_schedule: str | None = None
    """If set, a scheduled reconciler sweeps this job's unresolved items."""
    sweeps_unresolved: bool = False
    """The handler reads the job's unresolved items itself (``store.unresolved``, as
    report-export takes up earlier unfinished periods): its function may then query the
    ``unresolved`` index and batch-read items (:attr:`jobguard.callsites.Path.SWEEP`);
    other job functions may not."""
    description: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    """Extra environment variables for the job's function (its destination, say)."""
    redact: Callable[[str], str] | None = None
    """Applied to every error text and record excerpt before it is written or logged
    (:attr:`jobguard.JobConfig.redact`)."""

    def __post_init__(self) -> None:
        validate_job_name(self.name)
        if not isinstance(self.handler, str) or not _HANDLER.fullmatch(self.handler):
            raise ConfigError("handler", f"{self.handler!r} must look like module.function")
        for name in ("schedule", "reconciler_schedule"):
            value = getattr(self, name)
            if value is None and name == "reconciler_schedule":
                continue
            if not isinstance(value, str) or not (
                    _RATE.fullmatch(value) or _CRON.fullmatch(value)):
                raise ConfigError(
                    name, f"{value!r} must be 'rate(N minutes|hours|days)' or 'cron(6 fields)'"
                )
        if not isinstance(self.timeout, timedelta) or not (
                timedelta(seconds=1) <= self.timeout <= MAX_LAMBDA_TIMEOUT):
            raise ConfigError("timeout", f"must be between 1 s and 15 min, got {self.timeout!r}")
        if isinstance(self.memory_mb, bool) or not isinstance(self.memory_mb, int) \
                or not 128 <= self.memory_mb <= 10240:
            raise ConfigError("memory_mb", f"must be 128-10240, got {self.memory_mb!r}")
        share = self.overlap_alarm_share
        if share is not None and share != AUTO and (
                isinstance(share, bool) or not isinstance(share, int | float)
                or not 0 < share <= 1):
            raise ConfigError("overlap_alarm_share",
                              f"must be a number in (0, 1], 'auto' or None, got {share!r}")
        if (isinstance(self.skipped_alarm_count, bool)
                or not isinstance(self.skipped_alarm_count, int) or self.skipped_alarm_count < 1):
            raise ConfigError("skipped_alarm_count",
                              f"must be an integer >= 1, got {self.skipped_alarm_count!r}")
        if not isinstance(self.sweeps_unresolved, bool):
            raise ConfigError("sweeps_unresolved",
                              f"must be True or False, got {self.sweeps_unresolved!r}")
        if not isinstance(self.description, str):
            raise ConfigError("description", f"must be a string, got {self.description!r}")
        self.config()  # every JobConfig rule applies here too, naming the field
        self.overlap_threshold(self.timeout)  # an overlap alarm that can fire
        self._check_alarm_settings()

    @property
    def interval(self) -> timedelta | None:
        """The schedule's interval for ``rate()`` schedules (None for cron)."""
        match = _RATE.fullmatch(self.schedule)
        if not match:
            return None
        unit = match.group(2).rstrip("s")
        return timedelta(seconds=int(match.group(1)) * _UNITS[unit])

    @property
    def tick_gap(self) -> timedelta:
        """The longest time between two ticks: the ``rate()`` interval, or for ``cron()``
        :attr:`cron_interval` or what the expression says (see :mod:`jobguard._cron`)."""
        if self.interval is not None:
            return self.interval
        if self.cron_interval is not None:
            return self.cron_interval
        derived = longest_gap(self.schedule)
        if derived is None:  # refused when the definition is built
            raise ConfigError("cron_interval", f"required for {self.schedule!r}")
        return derived

    def overlap_share(self, function_timeout: timedelta | None = None) -> float | None:
        """The overlap alarm's share (see :attr:`overlap_alarm_share`) with a function
        of ``function_timeout`` (default: :attr:`timeout`): the share given, or for
        ``"auto"`` :data:`AUTO_OVERLAP_SHARE` where a run can reach it and None (no
        overlap alarm) where it cannot."""
        share = self.overlap_alarm_share
        if share is None or isinstance(share, int | float):
            return None if share is None else float(share)  # checked when defined
        timeout = self.timeout if function_timeout is None else function_timeout
        longest = timeout - self.config().time_margin
        fits = (self.interval or self.timeout) * AUTO_OVERLAP_SHARE < longest
        return AUTO_OVERLAP_SHARE if fits else None

    def overlap_threshold(self, function_timeout: timedelta) -> timedelta | None:
        """The run duration the overlap alarm fires above, or None (no overlap alarm).

        Raises:
            ConfigError: naming ``overlap_alarm_share`` when no run can last that long
                (``function_timeout`` minus the job's time margin).
        """
        share = self.overlap_share(function_timeout)
        if share is None:
            return None
        yardstick = self.interval or self.timeout
        threshold = yardstick * share
        longest = function_timeout - self.config().time_margin
        if threshold >= longest:
            pace = "interval" if self.interval else "timeout"
            raise ConfigError(
                "overlap_alarm_share",
                f"({share}) puts the overlap alarm at a run of {threshold} "
                f"({share:.0%} of the {yardstick} {pace}), but no run reports "
                f"a duration past {longest} (the {function_timeout} timeout kills it first; "
                f"a batch stops taking items {self.config().time_margin} before): the alarm "
                f"could never fire. Use a share below {longest / yardstick:.2f}, or None if a "
                "run of this job cannot last until its next tick")
        return threshold

    def no_success_window(self) -> AlarmWindow | None:
        """The dead-man alarm's window: one period per tick, for
        :attr:`no_success_alarm_intervals` ticks, or more where a healthy job's successes
        can be further apart (at least 2: a success comes at the end of a run, up to a
        timeout after its tick). None when the job has none."""
        if self.no_success_alarm_intervals is None:
            return None
        gap = self.tick_gap
        # Successes come at the end of runs: two in a row are less than an interval and a
        # run's timeout apart (the next run starts at the next tick, or right after
        # the last one ends, and lasts at most the timeout). A window that quiet gap
        # can cover is not a stopped job.
        healthy = (gap + self.timeout) // gap + 1
        window = AlarmWindow(gap, max(self.no_success_alarm_intervals, healthy))
        limit = _SHORT_PERIOD_RANGE if gap < _HOUR else _ALARM_RANGE
        if window.span > limit:
            raise ConfigError(
                "no_success_alarm_intervals",
                f"the dead-man alarm would watch {window.periods} intervals of {gap} "
                f"({window.span}; at least {healthy}, as a healthy run may end a {self.timeout} "
                f"timeout after its tick), but CloudWatch evaluates an alarm over at most "
                f"{limit}{' for periods under an hour' if gap < _HOUR else ''}: "
                + (f"use at most {limit // gap} intervals" if limit // gap >= healthy else
                   "set it to None and watch this job's runs some other way"))
        return window

    def paused_window(self) -> AlarmWindow:
        """The paused-too-long alarm's window: periods of two ticks (at least an hour),
        so that each holds a tick however a tick's time falls against the period's
        boundary, covering :attr:`paused_alarm_after`."""
        period = min(max(_HOUR, 2 * self.tick_gap), _ALARM_RANGE)
        periods = max(1, math.ceil(self.paused_alarm_after / period))
        return AlarmWindow(period, periods)

    def _check_alarm_settings(self) -> None:
        if self.cron_interval is not None:
            if self.interval is not None:
                raise ConfigError("cron_interval", f"only for cron() schedules: "
                                  f"{self.schedule!r} says its interval itself")
            if (not isinstance(self.cron_interval, timedelta)
                    or self.cron_interval < timedelta(minutes=1)
                    or self.cron_interval % timedelta(minutes=1)):
                raise ConfigError("cron_interval", "must be a whole number of minutes, "
                                  f"got {self.cron_interval!r}")
            derived = longest_gap(self.schedule)
            if derived is not None and self.cron_interval < derived:
                raise ConfigError(
                    "cron_interval",
                    f"({self.cron_interval}) is shorter than the {derived} between two ticks "
                    f"of {self.schedule!r}: the dead-man alarm would fire between healthy ticks")
        elif self.interval is None and longest_gap(self.schedule) is None:
            raise ConfigError(
                "cron_interval",
                f"required: the longest time between two ticks of {self.schedule!r} cannot be "
                "derived (only weekly-repeating hours, minutes and days of the week are), and "
                "the dead-man alarm needs it")
        count = self.no_success_alarm_intervals
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                  or count < 1):
            raise ConfigError("no_success_alarm_intervals",
                              f"must be an integer >= 1 or None, got {count!r}")
        paused = self.paused_alarm_after
        if not isinstance(paused, timedelta) or not (
                timedelta(minutes=1) <= paused <= _ALARM_RANGE):
            raise ConfigError("paused_alarm_after",
                              f"must be 1 minute to 7 days (CloudWatch's longest alarm "
                              f"window), got {paused!r}")
        self.no_success_window()
        self.paused_window()

    def config(self, **overrides: Any) -> JobConfig:
        """The :class:`JobConfig` the handler guards itself with."""
        options: dict[str, Any] = {
            "name": self.name,
            "policy": self.policy,
            "lease": self.lease,
            "heartbeat_every": self.heartbeat_every,
            "batch_size": self.batch_size,
            "max_queued": self.max_queued,
            "max_chain": self.max_chain,
            "stale_after": self.stale_after,
            "dedup_window": max(timedelta(hours=2), self.stale_after),
            "function_timeout": self.timeout,
            "claim_for": (self.claim_for if self.claim_for is not None
                          else min(self.timeout, MAX_LAMBDA_TIMEOUT)),
            "skew_margin": self.skew_margin,
            "item_ttl": self.item_ttl,
            "redact": self.redact,
        }
        options.update(overrides)
        self._check_environment()  # here too: the dict may have changed since defined
        config = JobConfig(**options)
        # what the stack sets on the function, for the testing kit's sandbox to apply
        object.__setattr__(config, "environment", MappingProxyType(dict(self.environment)))
        return config

    def _check_environment(self) -> None:
        if not isinstance(self.environment, dict) or not all(
                isinstance(k, str) and _ENV_NAME.fullmatch(k) and isinstance(v, str)
                for k, v in self.environment.items()):
            raise ConfigError("environment", "must map variable names (letters, digits, '_') "
                              f"to strings, got {self.environment!r}")
        for key in self.environment:
            if key.startswith(RESERVED_ENV_PREFIXES) or key in RESERVED_ENV_NAMES:
                raise ConfigError("environment", f"job {self.name!r} may not set {key!r}: "
                                  "the stack and Lambda set it")

    def for_drills(self) -> JobDefinition:
        """The same job with its clock compressed for ``jobguard drill``.

        A drill that waits out a lease should take seconds, not minutes: the lease is
        :data:`DRILL_LEASE` (heartbeat :data:`DRILL_HEARTBEAT`) and the function timeout
        :data:`DRILL_TIMEOUT`. Everything else (policy, batch size, schedule, every
        validation rule) is unchanged. Only a deployment made with ``-c
        jobguard:drills=true`` uses it; the handlers pick it when their function's
        environment says so (:meth:`as_deployed`).
        """
        share = self.overlap_alarm_share
        if isinstance(share, int | float):  # "auto" fits the drill timeout itself
            longest = DRILL_TIMEOUT - self.config().time_margin
            if (self.interval or DRILL_TIMEOUT) * share >= longest:
                share = None  # a drill run cannot last until the next tick
        return dataclasses.replace(self, timeout=DRILL_TIMEOUT, lease=DRILL_LEASE,
                                   heartbeat_every=DRILL_HEARTBEAT, overlap_alarm_share=share)

    def as_deployed(self) -> JobDefinition:
        """This job as its function was deployed: :meth:`for_drills` when the function's
        environment enables drills (``JOBGUARD_DRILLS=1``), else itself.

        Example:
            >>> JobDefinition(name="x", handler="m.f", schedule="rate(1 hour)",
            ...               policy=OverlapPolicy.SKIP, timeout=timedelta(minutes=1),
            ...               lease=timedelta(seconds=30)).as_deployed().lease
            datetime.timedelta(seconds=30)
        """
        return self.for_drills() if _drill_deployment() else self

    def check_deployment(
        self,
        *,
        function_timeout: timedelta,
        queue_visibility_timeout: timedelta | None = None,
        queue_retention: timedelta | None = None,
    ) -> JobConfig:
        """Refuse infrastructure that would make this job unsafe; return its config.

        The CDK constructs call this at synth time with what they actually deploy, so a
        definition is checked again against the real function and queue, not trusted:
        every :class:`JobConfig` rule with ``function_timeout`` (lease longer than two
        heartbeats, skew margin shorter than lease - heartbeat, claim within the timeout,
        item TTL at least the redelivery window); the trigger queue's visibility timeout
        at least six function timeouts; its retention at most the item TTL.

        Raises:
            ConfigError: naming the field, saying what would go wrong.

        Example:
            >>> job = JobDefinition(name="j", handler="h.f", schedule="rate(5 minutes)",
            ...                     policy=OverlapPolicy.QUEUE, timeout=timedelta(minutes=1),
            ...                     overlap_alarm_share=None)
            >>> job.check_deployment(function_timeout=timedelta(minutes=1),
            ...                      queue_visibility_timeout=timedelta(minutes=5))
            Traceback (most recent call last):
            ...
            jobguard.errors.ConfigError: queue_visibility_timeout: ...
        """
        config = self.config(function_timeout=function_timeout)  # every JobConfig rule
        self.overlap_threshold(function_timeout)  # an overlap alarm this timeout lets fire
        if not config.needs_queue:
            return config
        if queue_visibility_timeout is not None:
            minimum = function_timeout * VISIBILITY_FACTOR
            if queue_visibility_timeout < minimum:
                raise ConfigError(
                    "queue_visibility_timeout",
                    f"({human(queue_visibility_timeout)}) must be at least {VISIBILITY_FACTOR}x "
                    f"the function timeout ({human(minimum)}): SQS would deliver a trigger "
                    "again while its run is still working on it")
        if queue_retention is not None and config.item_ttl < queue_retention:
            raise ConfigError(
                "item_ttl",
                f"({config.item_ttl}) must be at least the trigger queue's retention "
                f"({queue_retention}): a trigger that waited that long would redo items "
                "whose completion was already forgotten")
        return config

    @property
    def queue_visibility_timeout(self) -> timedelta:
        """Six times the function timeout (AWS's advice for SQS event sources)."""
        return self.timeout * VISIBILITY_FACTOR
