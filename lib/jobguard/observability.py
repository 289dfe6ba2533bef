"""jobguard's log lines and metrics, created on first use, with the standard library
only: JSON lines in the shape Powertools' Logger writes, and EMF lines of jobguard's
own that never mix with (or flush) the user's own Powertools ``Metrics``. The Tracer
(Powertools) is imported only when a job asks for
tracing: it pulls in the X-Ray SDK (about half a second of cold start).

EMF dimensions decide what CloudWatch bills: every distinct (name, dimensions) pair with
data in an hour is one custom metric. A job's metrics carry ``job`` (and Powertools'
``service``): one metric per name per job. A job of a :class:`jobguard.cdk.JobFleet`
(``JOBGUARD_FLEET`` set) carries ``fleet`` instead, so the whole fleet shares one metric
per name, and the job's name rides in each EMF line as a property (``job``), which the
fleet's alarm texts query with CloudWatch Logs Insights to name the job.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

__all__ = ["AT_REST_METRICS", "FLEET_DIMENSION", "JOB_DIMENSION", "METRICS",
           "METRIC_MEANINGS", "NAMESPACE", "JobLogger", "JobTelemetry", "RUNS_NEAR_INTERVAL",
           "TRIGGERS_MET_ACTIVE_RUN"]

NAMESPACE = "JobGuard"
JOB_DIMENSION = "job"
FLEET_DIMENSION = "fleet"
RUNS_NEAR_INTERVAL = "RunsNearInterval"
"""Counted, in a fleet, for a run longer than the job's overlap threshold."""
TRIGGERS_MET_ACTIVE_RUN = "TriggersMetActiveRun"
"""Counted, in a fleet, with each skipped, queued or coalesced trigger: one metric for
the fleet's busy alarm (a metric-math sum of three would be billed three times)."""
_BUSY = frozenset({"TriggersSkipped", "TriggersQueued", "TriggersCoalesced"})

METRICS = (
    "LeaseAcquireAttempts", "TriggersSkipped", "TriggersQueued", "TriggersCoalesced",
    "TriggersDropped", "TriggersStale", "TriggersDuplicate", "TriggersPaused", "QueueDepth",
    "LeaseTakeovers", "RunsIncomplete", "RunDuration", "RunSucceeded", "LeaseLost",
    "TriggerMessagesRejected", "CheckpointLagItems", "ItemsRejected", "PayloadConflicts",
    "ItemsRetried", "BatchSize", "UncertainOutcomes", "ReconciliationFindings",
    "ItemsCompleted", "ItemsFailed", "CompletionsRejected", "SweepSucceeded",
    "RunsContinued", "ContinuationsNotSent", "TriggersSuperseded",
    RUNS_NEAR_INTERVAL, TRIGGERS_MET_ACTIVE_RUN,
)
"""Every metric name jobguard emits (a test reads the sources for them): the custom
metrics a deployment can be billed for, one per name and dimension value."""

METRIC_MEANINGS: Mapping[str, str] = {
    "LeaseAcquireAttempts": "A trigger tried to take the job's lease.",
    "TriggersSkipped": "SKIP: a trigger met an active run; recorded `skipped`, not run.",
    "TriggersQueued": "QUEUE: a trigger met an active run and waits on the job's trigger "
                      "queue.",
    "TriggersCoalesced": "COALESCE: a trigger met an active run and was folded into its one "
                         "follow-up run.",
    "TriggersDropped": "QUEUE: `max_queued` triggers were already pending; this one was "
                       "dropped and will not run.",
    "TriggersStale": "A trigger delivered more than `stale_after` after its scheduled time; "
                     "recorded, not run.",
    "TriggersDuplicate": "Another delivery of a trigger that already ran, is running or was "
                         "decided; not run again.",
    "TriggersPaused": "A trigger found the job paused; recorded, not run.",
    "QueueDepth": "QUEUE: the pending triggers on the job's queue, this one counted, each "
                  "time a trigger is queued.",
    "LeaseTakeovers": "A trigger took over an expired lease whose run vanished (the "
                      "abandoned run is recorded).",
    "RunsIncomplete": "A run returned with work items failed or uncertain (status "
                      "`incomplete`).",
    "RunDuration": "How long a run held the lease, from its acquisition to its end.",
    "RunSucceeded": "A run ended `succeeded` (the dead-man alarm counts these).",
    "LeaseLost": "A run lost its lease (a renewal refused or late) and stopped committing.",
    "TriggerMessagesRejected": "A message on the job's trigger queue that is no trigger of "
                               "it: recorded `rejected` and deleted.",
    "CheckpointLagItems": "Records a batch run selected past its checkpoint at its end: the "
                          "next run selects them again.",
    "ItemsRejected": "Source records no work id could be made for: nothing done for them.",
    "PayloadConflicts": "A work id claimed again with a different payload than it was first "
                        "claimed with.",
    "ItemsRetried": "Uncertain items that reconciliation did not find at the destination: "
                    "claimed again, to be redone.",
    "BatchSize": "Work items claimed at once (one claim of a page).",
    "UncertainOutcomes": "Work items whose outcome became, or still is, unknown.",
    "ReconciliationFindings": "Uncertain items whose effect reconciliation found at the "
                              "destination: recorded completed, not redone.",
    "ItemsCompleted": "Work items recorded completed.",
    "ItemsFailed": "Work items recorded failed (a known outcome).",
    "CompletionsRejected": "Completions a run did not write because the item had been "
                           "completed meanwhile (the first completion stands).",
    "SweepSucceeded": "A reconciler sweep ran to its end.",
    "RunsContinued": "A run that ran out of time handed the job to its next link (a "
                     "continuation).",
    "ContinuationsNotSent": "A continuation could not be invoked; the next trigger takes "
                            "over from the checkpoint.",
    "TriggersSuperseded": "A continuation delivered after its hand-off was gone; not run.",
    RUNS_NEAR_INTERVAL: "Fleet only: a run longer than its job's overlap threshold.",
    TRIGGERS_MET_ACTIVE_RUN: "Fleet only: a trigger skipped, queued or coalesced (one "
                             "metric for the fleet's busy alarm).",
}
"""What each of :data:`METRICS` counts or measures (the reference page shows it; a test
checks every name has one)."""

AT_REST_METRICS = ("LeaseAcquireAttempts", "RunDuration", "RunSucceeded", "BatchSize",
                   "ItemsCompleted")
"""What a healthy run that completes items emits (a test runs one): the custom metrics a
deployment is billed for at rest, per dimension value. The others have data only in the
hours something happens (a skip, a failure, a sweep)."""


class _Stdout:
    """Whatever ``sys.stdout`` is when a line is written, not what it was when the logger
    was made. A test runner that swaps stdout for one test (pytest's ``capsys``) closes
    what it swapped in; a handler still holding that stream fails on every later line,
    and logging's error report then prints the exception being handled, unredacted, to
    stderr. In Lambda stdout is never swapped, and this costs one lookup a line. The
    price: a handler that redirects stdout itself (``contextlib.redirect_stdout``, to
    quiet a library) also catches jobguard's lines written meanwhile.

    A process without a stdout (``sys.stdout`` None: started with fd 1 closed, a
    detached daemon) writes to stderr, as logging's handler made with no stream did
    before; with neither, the line is dropped rather than reported as an error."""

    @staticmethod
    def _stream() -> Any:
        return sys.stdout if sys.stdout is not None else sys.stderr

    def write(self, text: str) -> int:
        stream = self._stream()
        return stream.write(text) if stream is not None else 0

    def flush(self) -> None:
        stream = self._stream()
        if stream is not None:
            stream.flush()


_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "WARN": 30, "ERROR": 40,
           "CRITICAL": 50, "FATAL": 50}
_LAMBDA_LEVELS = {"TRACE": 10, "DEBUG": 10, "INFO": 20, "WARN": 30, "ERROR": 40, "FATAL": 50}
_KEYS = threading.local()
"""The keys of the run the current thread serves (``JobTelemetry.bind``)."""


def _log_level(environ: Mapping[str, str]) -> int:
    """The level of jobguard's lines, from the variables Lambda and Powertools users set:
    Lambda's log-level control (``AWS_LAMBDA_LOG_LEVEL``) first, then
    ``POWERTOOLS_LOG_LEVEL`` (or its older name ``LOG_LEVEL``), else INFO. A name that is
    no level is refused, naming the variable (a typo would otherwise hide every line)."""
    from .errors import ConfigError

    for name, levels in (("AWS_LAMBDA_LOG_LEVEL", {**_LEVELS, **_LAMBDA_LEVELS}),
                         ("POWERTOOLS_LOG_LEVEL", _LEVELS), ("LOG_LEVEL", _LEVELS)):
        raw = environ.get(name)
        if raw:
            level = levels.get(raw.strip().upper())
            if level is None:
                raise ConfigError(name, f"{raw!r} is not a log level ("
                                  f"{', '.join(sorted(levels, key=levels.__getitem__))})")
            return level
    return _LEVELS["INFO"]


def _truthy(environ: Mapping[str, str], name: str) -> bool | None:
    """A yes/no variable as Powertools reads it (true, 1, yes, on / false, 0, no, off);
    None when unset. Anything else is refused naming the variable."""
    from .errors import ConfigError

    raw = environ.get(name)
    if raw is None or not raw.strip():
        return None
    word = raw.strip().lower()
    if word in ("y", "yes", "t", "true", "on", "1"):
        return True
    if word in ("n", "no", "f", "false", "off", "0"):
        return False
    raise ConfigError(name, f"{raw!r} is neither true nor false")


def _metrics_disabled(environ: Mapping[str, str]) -> bool:
    """``POWERTOOLS_METRICS_DISABLED`` (else ``POWERTOOLS_DEV``) true: no EMF line, as
    Powertools' own metrics in the same function (a sandbox or a test suite that
    publishes no custom metrics)."""
    disabled = _truthy(environ, "POWERTOOLS_METRICS_DISABLED")
    if disabled is not None:
        return disabled
    return bool(_truthy(environ, "POWERTOOLS_DEV"))


_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "taskName"}
_BASE_KEYS = frozenset({"level", "location", "message", "timestamp", "service"})


class _NotJobguard(logging.Filter):
    """On the root logger's handlers: jobguard's records are written once, by its own
    handler. Lambda's Python runtime puts a handler on the root logger before the
    function's code is imported, and a record propagating to it would be written a
    second time (as Powertools' Logger prevents for its own, the same way)."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - logging's name
        return not (record.name == "jobguard" or record.name.startswith("jobguard."))


class JsonFormatter(logging.Formatter):
    """One JSON object a line, in the shape Powertools' Logger writes (so log queries
    and the alarms' Logs Insights texts read jobguard's lines as before): ``level``,
    ``location`` (function:line), ``message``, ``timestamp``, ``service``, then the keys
    of the thread's run, then the line's own (``extra``), then ``exception`` and
    ``exception_name`` when there is one, and ``xray_trace_id`` under X-Ray.

    Written with the standard library only: Powertools' Logger and Metrics would add
    about 9 ms of imports to a cold start that has already imported botocore (the
    fastest of 7 fresh interpreters on 2 vCPU, with bytecode)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def formatTime(self, record: logging.LogRecord,  # noqa: N802 - logging's name
                   datefmt: str | None = None) -> str:
        when = time.localtime(record.created)
        return (time.strftime("%Y-%m-%d %H:%M:%S", when) + f",{int(record.msecs):03d}"
                + time.strftime("%z", when))

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "level": record.levelname,
            "location": f"{record.funcName}:{record.lineno}",
            "message": record.getMessage(),
            "timestamp": self.formatTime(record),
            "service": self.service,
        }
        # the run's keys, then the line's own; a key with no value is left out (a query
        # asks whether it is present), and none takes the place of the five above
        for k, v in (*getattr(_KEYS, "keys", {}).items(), *vars(record).items()):
            if v is not None and k not in _RECORD_ATTRIBUTES and k not in _BASE_KEYS:
                entry[k] = v
        if record.exc_info and record.exc_info[0] is not None:
            entry["exception"] = self.formatException(record.exc_info)
            entry["exception_name"] = record.exc_info[0].__name__
        trace = os.environ.get("_X_AMZN_TRACE_ID", "")
        if trace.startswith("Root="):
            entry["xray_trace_id"] = trace[5:].split(";", 1)[0]
        # text as it is (a search for a name finds it); control characters are escaped,
        # and so is all of a line holding a lone surrogate (bad data: stdout's UTF-8
        # would refuse it, and the line would be lost to a logging error)
        text = json.dumps(entry, separators=(",", ":"), default=str, ensure_ascii=False)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                text = json.dumps(entry, separators=(",", ":"), default=str)
        return text


@lru_cache(maxsize=1)
def _logger() -> logging.Logger:
    """jobguard's logger ``jobguard``, made on first use: JSON lines on stdout (what
    Lambda ships to CloudWatch), at the level the environment asks. Its handler and
    formatter are ``registered_handler`` and ``registered_formatter`` (as Powertools
    names its own), for whoever redirects or copies jobguard's lines."""
    logger = logging.getLogger("jobguard")
    formatter = JsonFormatter("jobguard")
    handler = logging.StreamHandler(_Stdout())
    handler.setFormatter(formatter)
    for old in [h for h in logger.handlers if getattr(h, "_jobguard", False)]:
        logger.removeHandler(old)
    handler._jobguard = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(_log_level(os.environ))
    for root_handler in logging.root.handlers:
        # (pytest's capture handler keeps the lines: caplog reads jobguard's records)
        if type(root_handler).__name__ != "LogCaptureHandler" and not any(
                isinstance(f, _NotJobguard) for f in root_handler.filters):
            root_handler.addFilter(_NotJobguard())
    logger.registered_handler = handler  # type: ignore[attr-defined]
    logger.registered_formatter = formatter  # type: ignore[attr-defined]
    return logger


class JobLogger:
    """jobguard's logger as one job writes to it: every line names its own ``job`` (a
    key appended per thread would name the thread's last run's job, or none in a fresh
    container: the recovery function and a test serve several jobs)."""

    def __init__(self, logger: logging.Logger, job: str) -> None:
        self._logger = logger
        self.job = job

    def _log(self, level: int, msg: str, extra: Any) -> None:
        # (stacklevel 3: the line's location is the caller of debug/info/...)
        self._logger.log(level, msg, extra={**(extra or {}), "job": self.job}, stacklevel=3)

    def debug(self, msg: str, *, extra: Any = None) -> None:
        self._log(logging.DEBUG, msg, extra)

    def info(self, msg: str, *, extra: Any = None) -> None:
        self._log(logging.INFO, msg, extra)

    def warning(self, msg: str, *, extra: Any = None) -> None:
        self._log(logging.WARNING, msg, extra)

    def error(self, msg: str, *, extra: Any = None) -> None:
        self._log(logging.ERROR, msg, extra)

    @staticmethod
    def thread_safe_append_keys(**keys: Any) -> None:
        """Keys on every line this thread writes, until removed."""
        _KEYS.keys = {**getattr(_KEYS, "keys", {}), **keys}

    @staticmethod
    def thread_safe_remove_keys(keys: list[str]) -> None:
        _KEYS.keys = {k: v for k, v in getattr(_KEYS, "keys", {}).items() if k not in keys}

    def __getattr__(self, name: str) -> Any:  # the rest is the shared logger's
        return getattr(self._logger, name)


_MAX_VALUES = 100
"""Values of one metric in one EMF line, and metrics in one line: CloudWatch's limits
(a full one is written out, and the next value starts a new line)."""


class JobTelemetry:
    """Logger and metrics of one job, with run keys appended while a run is active.

    Metrics are one EMF line a flush (CloudWatch embedded metric format, on stdout),
    kept apart from the user's own Powertools ``Metrics``: jobguard's line never mixes
    with, nor flushes, theirs."""

    def __init__(self, job: str, environ: Mapping[str, str] | None = None) -> None:
        from . import environment

        self.job = job
        self.logger = JobLogger(_logger(), job)
        self._values: dict[str, list[float]] = {}
        self._units: dict[str, str] = {}
        self._lock = threading.Lock()
        self._disabled = _metrics_disabled(os.environ)  # process-wide, as the log level
        self.fleet = environment.optional(environment.FLEET, environ)
        overlap = environment.optional(environment.OVERLAP_AFTER_MS, environ)
        self._overlap_after_ms = _milliseconds(overlap) if overlap is not None else None

    @property
    def _has_metrics(self) -> bool:
        return bool(self._values)

    def count(self, name: str, value: float = 1) -> None:
        self._add(name, "Count", value)
        if self.fleet is not None and name in _BUSY:
            self._add(TRIGGERS_MET_ACTIVE_RUN, "Count", value)

    def milliseconds(self, name: str, value: float) -> None:
        self._add(name, "Milliseconds", value)
        if (name == "RunDuration" and self._overlap_after_ms is not None
                and value > self._overlap_after_ms):
            self.count(RUNS_NEAR_INTERVAL)

    def _add(self, name: str, unit: str, value: float) -> None:
        with self._lock:
            values = self._values.get(name)
            if values is None and len(self._values) >= _MAX_VALUES or (
                    values is not None and len(values) >= _MAX_VALUES):
                self._write()
                values = None
            if values is None:
                values = self._values[name] = []
            self._units[name] = unit
            values.append(float(value))

    def flush(self) -> None:
        """Emit the EMF line for this invocation (stdout, read by CloudWatch)."""
        with self._lock:
            self._write()

    def _write(self) -> None:
        """The values so far as one EMF line; kept for the next flush if the write
        fails. With metrics disabled, dropped."""
        if not self._values:
            return
        if self._disabled:
            self._values, self._units = {}, {}
            return
        # The job is the dimension (with the service); in a fleet, the fleet is, and the
        # job a property of the line.
        dimension = (JOB_DIMENSION, self.job) if self.fleet is None else (
            FLEET_DIMENSION, self.fleet)
        line: dict[str, Any] = {"_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [[dimension[0], "service"]],
                "Metrics": [{"Name": n, "Unit": self._units[n]} for n in self._values],
            }]},
            dimension[0]: dimension[1], "service": "jobguard"}
        if self.fleet is not None:
            line[JOB_DIMENSION] = self.job
        line.update(self._values)
        stream = _Stdout()
        stream.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
        stream.flush()
        self._values, self._units = {}, {}

    def bind(self, **keys: Any) -> None:
        # Thread-local keys: the run's keys never leak into another thread's logs (the
        # job is on every line by JobLogger, never appended).
        self.logger.thread_safe_append_keys(**keys)

    def unbind(self, *keys: str) -> None:
        self.logger.thread_safe_remove_keys(list(keys))


def _milliseconds(raw: str) -> float:
    from .errors import ConfigError

    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        from . import environment

        raise ConfigError(environment.OVERLAP_AFTER_MS, f"{raw!r} is not a positive number "
                          "of milliseconds (the stack sets it from the job's overlap alarm)")
    return value
