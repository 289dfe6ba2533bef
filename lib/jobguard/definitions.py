"""Job definitions: the one source of truth for a deployment.

The CDK stack, the handlers, ``jobguard runbook`` and ``jobguard drill`` all read the
same :class:`JobDefinition`, so the schedule the stack creates, the policy the handler
applies and the runbook an operator reads cannot drift apart.

Example:
    >>> crm_sync = JobDefinition(
    ...     name="crm-sync", handler="handlers.crm_sync.lambda_handler",
    ...     schedule="rate(5 minutes)", policy=OverlapPolicy.COALESCE,
    ...     timeout=timedelta(minutes=4), lease=timedelta(minutes=2), batch_size=25,
    ...     description="One note per changed CRM contact.")
    >>> crm_sync.interval
    datetime.timedelta(seconds=300)
    >>> crm_sync.config().function_timeout
    datetime.timedelta(seconds=240)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .config import JobConfig, OverlapPolicy, validate_job_name
from .errors import ConfigError

__all__ = ["JobDefinition", "MAX_LAMBDA_TIMEOUT"]

MAX_LAMBDA_TIMEOUT = timedelta(minutes=15)
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\(\S+ \S+ \S+ \S+ \S+ \S+\)$")
_HANDLER = re.compile(r"^[A-Za-z_][\w.]*\.[A-Za-z_]\w*$")
_UNITS = {"minute": 60, "hour": 3600, "day": 86400}


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
    batch_size: int = 25
    memory_mb: int = 256
    max_queued: int = 10
    stale_after: timedelta = timedelta(hours=1)
    overlap_alarm_share: float = 0.8
    """Alarm when a run's duration exceeds this share of the schedule interval."""
    skipped_alarm_count: int = 3
    """Alarm after this many skipped triggers in a row (evaluation periods)."""
    reconciler_schedule: str | None = None
    """If set, a scheduled reconciler sweeps this job's unresolved items."""
    description: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    """Extra environment variables for the job's function (its destination, say)."""

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
        if not isinstance(self.memory_mb, int) or not 128 <= self.memory_mb <= 10240:
            raise ConfigError("memory_mb", f"must be 128-10240, got {self.memory_mb!r}")
        if not 0 < self.overlap_alarm_share <= 1:
            raise ConfigError("overlap_alarm_share", "must be in (0, 1]")
        if not isinstance(self.skipped_alarm_count, int) or self.skipped_alarm_count < 1:
            raise ConfigError("skipped_alarm_count", "must be an integer >= 1")
        self.config()  # every JobConfig rule applies here too, naming the field

    @property
    def interval(self) -> timedelta | None:
        """The schedule's interval for ``rate()`` schedules (None for cron)."""
        match = _RATE.fullmatch(self.schedule)
        if not match:
            return None
        unit = match.group(2).rstrip("s")
        return timedelta(seconds=int(match.group(1)) * _UNITS[unit])

    def config(self, **overrides: Any) -> JobConfig:
        """The :class:`JobConfig` the handler guards itself with."""
        options: dict[str, Any] = {
            "name": self.name,
            "policy": self.policy,
            "lease": self.lease,
            "heartbeat_every": self.heartbeat_every,
            "batch_size": self.batch_size,
            "max_queued": self.max_queued,
            "stale_after": self.stale_after,
            "dedup_window": max(timedelta(hours=2), self.stale_after),
            "function_timeout": self.timeout,
            "claim_for": min(self.timeout, timedelta(minutes=15)),
        }
        options.update(overrides)
        return JobConfig(**options)

    @property
    def queue_visibility_timeout(self) -> timedelta:
        """Six times the function timeout (AWS's advice for SQS event sources)."""
        return self.timeout * 6
