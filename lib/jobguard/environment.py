"""Environment variables jobguard reads, in one place, and the checks each one gets.

The CDK stack sets every one a function needs; a test reads both this list and the
synthesized template, so a variable cannot be added on one side only. A function reads
them through the helpers below, so a missing, empty or malformed value is refused with a
:class:`jobguard.ConfigError` naming the variable before anything is written (a table
name with a typo would otherwise surface as a DynamoDB error at the first lease write).

Example:
    >>> table_name(configured="jobguard-table")
    'jobguard-table'
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from .errors import ConfigError

__all__ = ["DRILLS", "FLEET", "FLEET_JOB_FUNCTION", "JOB_FUNCTION", "JOB_NAME", "OVERLAP_AFTER_MS",
           "RECONCILER_FUNCTION", "RECOVERY_CONFIRM_ABOVE",
           "RECOVERY_FUNCTION", "RECOVERY_MODULES", "TABLE", "TRACING", "TRIGGER_QUEUE_URL",
           "check_table_name", "check_trigger_queue_url", "confirm_above", "drills", "job_name",
           "optional", "recovery_modules", "table_name", "tracing", "trigger_queue_url"]

TABLE = "JOBGUARD_TABLE"
"""The DynamoDB table (leases, run records, the item ledger, checkpoints)."""

TRIGGER_QUEUE_URL = "JOBGUARD_TRIGGER_QUEUE_URL"
"""The job's SQS FIFO trigger queue (QUEUE and COALESCE jobs)."""

RECOVERY_MODULES = "JOBGUARD_RECOVERY_MODULES"
"""Comma-separated modules the recovery and reconciler functions import; each registers
its BatchJob(s) with one line (``jobguard.registry.register``)."""

RECOVERY_CONFIRM_ABOVE = "JOBGUARD_RECOVERY_CONFIRM_ABOVE"
"""Optional: recovery plans larger than this many items need the dry run's token
(default 100)."""

JOB_NAME = "JOBGUARD_JOB"
"""The job a reconciler function sweeps."""

TRACING = "JOBGUARD_TRACING"
"""``1``: trace runs with the Powertools Tracer (the stack sets it with X-Ray active
tracing, ``-c jobguard:tracing=true``), as :attr:`jobguard.JobConfig.tracing` does."""

FLEET = "JOBGUARD_FLEET"
"""Set by :class:`jobguard.cdk.JobFleet` on its jobs' functions: the fleet's name. The
job's metrics then carry the dimension ``fleet`` instead of ``job`` (one billed metric per
name for the whole fleet), and the job's name rides in each EMF line as a property."""

OVERLAP_AFTER_MS = "JOBGUARD_OVERLAP_AFTER_MS"
"""Set with :data:`FLEET` where the job has an overlap alarm: a run longer than this many
milliseconds also counts ``RunsNearInterval`` (the fleet's overlap alarm watches that
count, since one threshold cannot fit every job's interval)."""

DRILLS = "JOBGUARD_DRILLS"
"""Set to ``1`` only by a drill deployment (``-c jobguard:drills=true``: a drills
:class:`jobguard.cdk.LambdaBundle` sets it on every function); without it every drill
switch is ignored and a job keeps its own timings (:func:`drills`)."""

JOB_FUNCTION = (TABLE, TRIGGER_QUEUE_URL, TRACING)
"""Read by a guarded job's function (the queue only for QUEUE/COALESCE jobs)."""

FLEET_JOB_FUNCTION = (FLEET, OVERLAP_AFTER_MS)
"""Read too by the function of a job in a :class:`jobguard.cdk.JobFleet` (the overlap
threshold only where the job has an overlap alarm)."""

RECOVERY_FUNCTION = (TABLE, RECOVERY_MODULES, TRACING)
RECONCILER_FUNCTION = (TABLE, RECOVERY_MODULES, JOB_NAME, TRIGGER_QUEUE_URL, TRACING)
"""Read by a reconciler (the queue only for a QUEUE/COALESCE job's: its release's
follow-up)."""

# DynamoDB's own rule for table names (3-255 of these characters), or a table ARN.
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_TABLE_ARN = re.compile(r"^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/[A-Za-z0-9_.-]{3,255}$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _read(name: str, environ: Mapping[str, str] | None) -> str | None:
    return (os.environ if environ is None else environ).get(name)


def optional(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable ``name``, or None when it is unset or blank."""
    raw = _read(name, environ)
    return raw.strip() if raw is not None and raw.strip() else None


def check_table_name(value: object, *, field: str = TABLE) -> str:
    """Return ``value`` if it is a DynamoDB table name (or table ARN), else refuse it."""
    if not isinstance(value, str) or not (_TABLE_NAME.fullmatch(value)
                                          or _TABLE_ARN.fullmatch(value)):
        raise ConfigError(field, f"{value!r} is not a DynamoDB table name (3-255 letters, "
                          "digits, '_', '.', '-') or table ARN: every lease and run record "
                          "write would fail")
    return value


def check_trigger_queue_url(value: object, *, field: str = TRIGGER_QUEUE_URL) -> str:
    """Return ``value`` if it is an SQS FIFO queue URL, else refuse it."""
    parts = urlsplit(value) if isinstance(value, str) else None
    if (parts is None or parts.scheme not in ("http", "https") or not parts.netloc
            or not isinstance(value, str) or value != value.strip()
            or not parts.path.rstrip("/").split("/")[-1].endswith(".fifo")):
        raise ConfigError(field, f"{value!r} is not the URL of an SQS FIFO queue "
                          "(https://.../<account>/<name>.fifo): queued and coalesced "
                          "triggers keep their order only on a FIFO queue")
    return value


def table_name(configured: str | None = None,
               environ: Mapping[str, str] | None = None) -> str:
    """The jobguard table: ``configured`` (``JobConfig.table_name``), else ``JOBGUARD_TABLE``.

    Raises:
        ConfigError: naming ``JOBGUARD_TABLE`` when it is missing, empty or malformed.
    """
    if configured is not None:
        return check_table_name(configured, field="table_name")
    raw = _read(TABLE, environ)
    if raw is None or not raw.strip():
        raise ConfigError(TABLE, "no table: set JOBGUARD_TABLE (the stack does) or "
                          "JobConfig.table_name")
    return check_table_name(raw)


def trigger_queue_url(configured: str | None = None, *, policy: str = "QUEUE",
                      environ: Mapping[str, str] | None = None) -> str:
    """The job's trigger queue: ``configured``, else ``JOBGUARD_TRIGGER_QUEUE_URL``.

    Raises:
        ConfigError: naming ``JOBGUARD_TRIGGER_QUEUE_URL`` when it is missing, empty or
            not a FIFO queue URL.
    """
    if configured is not None:
        return check_trigger_queue_url(configured, field="trigger_queue_url")
    raw = _read(TRIGGER_QUEUE_URL, environ)
    if raw is None or not raw.strip():
        raise ConfigError(TRIGGER_QUEUE_URL, f"policy {policy} needs the job's SQS FIFO "
                          "trigger queue: set JOBGUARD_TRIGGER_QUEUE_URL (the stack does) or "
                          "JobConfig.trigger_queue_url")
    return check_trigger_queue_url(raw)


def recovery_modules(environ: Mapping[str, str] | None = None) -> list[str]:
    """The job modules named by ``JOBGUARD_RECOVERY_MODULES`` (comma-separated).

    Raises:
        ConfigError: naming ``JOBGUARD_RECOVERY_MODULES`` when it names no module or
            something that is not a module name (a relative or spaced name).
    """
    raw = _read(RECOVERY_MODULES, environ) or ""
    modules = [m.strip() for m in raw.split(",") if m.strip()]
    if not modules:
        raise ConfigError(RECOVERY_MODULES, "no modules to load: set it to the job modules, "
                          "comma-separated; recovery would know no job")
    for module in modules:
        if not _MODULE.fullmatch(module):
            raise ConfigError(RECOVERY_MODULES, f"{module!r} is not a module name "
                              "(e.g. handlers.crm_sync)")
    return modules


def confirm_above(default: int, environ: Mapping[str, str] | None = None) -> int:
    """``JOBGUARD_RECOVERY_CONFIRM_ABOVE``, or ``default`` when unset.

    Raises:
        ConfigError: naming the variable when it is empty, not an integer, or below 1
            (a threshold below one would be a silent "always confirm" or a typo).
    """
    raw = _read(RECOVERY_CONFIRM_ABOVE, environ)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(RECOVERY_CONFIRM_ABOVE, f"must be an integer >= 1, got {raw!r}; "
                          "without it no recovery could be checked against the "
                          "confirmation threshold") from None
    if value < 1:
        raise ConfigError(RECOVERY_CONFIRM_ABOVE, f"must be an integer >= 1, got {raw!r}")
    return value


def job_name(environ: Mapping[str, str] | None = None) -> str:
    """The job a reconciler sweeps (``JOBGUARD_JOB``), a valid job name.

    Raises:
        ConfigError: naming ``JOBGUARD_JOB`` when it is missing or not a job name.
    """
    from .names import validate_job_name

    raw = _read(JOB_NAME, environ)
    if raw is None or not raw.strip():
        raise ConfigError(JOB_NAME, "no job: set it to the job this reconciler sweeps")
    return validate_job_name(raw, field_name=JOB_NAME)


def tracing(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``JOBGUARD_TRACING`` asks for tracing (``1``/``true``; unset is off).

    Raises:
        ConfigError: naming ``JOBGUARD_TRACING`` when it is neither on nor off.
    """
    raw = (_read(TRACING, environ) or "").strip().lower()
    if raw in ("", "0", "false"):
        return False
    if raw in ("1", "true"):
        return True
    raise ConfigError(TRACING, f"must be 1 or 0, got {raw!r}")


def drills(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this function is a drill deployment's (``JOBGUARD_DRILLS`` is ``1``): it
    then runs on the drill clock (:meth:`jobguard.definitions.JobDefinition.as_deployed`)
    and honours its job's drill switches (:mod:`jobguard._drills`). Anything else is off."""
    return _read(DRILLS, environ) == "1"
