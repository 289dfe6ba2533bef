"""Powertools Logger and Metrics for jobguard, created on first use.

Metrics use ``EphemeralMetrics`` so jobguard's EMF blob never mixes with (or flushes)
the user's own Powertools ``Metrics``. The Tracer is imported only when a job asks for
tracing: it pulls in the X-Ray SDK (about half a second of cold start).

EMF dimensions decide what CloudWatch bills: every distinct (name, dimensions) pair with
data in an hour is one custom metric. A job's metrics carry ``job`` (and Powertools'
``service``): one metric per name per job. A job of a :class:`jobguard.cdk.JobFleet`
(``JOBGUARD_FLEET`` set) carries ``fleet`` instead, so the whole fleet shares one metric
per name, and the job's name rides in each EMF line as a property (``job``), which the
fleet's alarm texts query with CloudWatch Logs Insights to name the job.
"""

from __future__ import annotations

import sys
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


@lru_cache(maxsize=1)
def _logger() -> Any:
    from aws_lambda_powertools import Logger

    return Logger(service="jobguard", stream=_Stdout())  # type: ignore[arg-type]


class JobLogger:
    """jobguard's Powertools Logger as one job writes to it: every line names its own
    ``job`` (a key appended per thread would name the thread's last run's job, or none
    in a fresh container: the recovery function and a test serve several jobs)."""

    def __init__(self, logger: Any, job: str) -> None:
        self._logger = logger
        self.job = job

    def _log(self, level: str, msg: str, extra: Any) -> None:
        getattr(self._logger, level)(msg, extra={**(extra or {}), "job": self.job},
                                     stacklevel=4)

    def debug(self, msg: str, *, extra: Any = None) -> None:
        self._log("debug", msg, extra)

    def info(self, msg: str, *, extra: Any = None) -> None:
        self._log("info", msg, extra)

    def warning(self, msg: str, *, extra: Any = None) -> None:
        self._log("warning", msg, extra)

    def error(self, msg: str, *, extra: Any = None) -> None:
        self._log("error", msg, extra)

    def __getattr__(self, name: str) -> Any:  # the rest is the shared logger's
        return getattr(self._logger, name)


class JobTelemetry:
    """Logger and metrics of one job, with run keys appended while a run is active."""

    def __init__(self, job: str, environ: Mapping[str, str] | None = None) -> None:
        from aws_lambda_powertools.metrics import EphemeralMetrics

        from . import environment

        self.job = job
        self.logger = JobLogger(_logger(), job)
        self._metrics = EphemeralMetrics(namespace=NAMESPACE, service="jobguard")
        self._has_metrics = False
        self.fleet = environment.optional(environment.FLEET, environ)
        overlap = environment.optional(environment.OVERLAP_AFTER_MS, environ)
        self._overlap_after_ms = _milliseconds(overlap) if overlap is not None else None

    def count(self, name: str, value: float = 1) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        self._start()
        self._metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        if self.fleet is not None and name in _BUSY:
            self._metrics.add_metric(name=TRIGGERS_MET_ACTIVE_RUN, unit=MetricUnit.Count,
                                     value=value)

    def milliseconds(self, name: str, value: float) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        self._start()
        self._metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)
        if (name == "RunDuration" and self._overlap_after_ms is not None
                and value > self._overlap_after_ms):
            self.count(RUNS_NEAR_INTERVAL)

    def _start(self) -> None:
        # The dimension goes on with the first value, so that every EMF blob carries it
        # (Powertools may flush on its own before ours); in a fleet the job is a property.
        if not self._has_metrics:
            if self.fleet is None:
                self._metrics.add_dimension(name=JOB_DIMENSION, value=self.job)
            else:
                self._metrics.add_dimension(name=FLEET_DIMENSION, value=self.fleet)
                self._metrics.add_metadata(key=JOB_DIMENSION, value=self.job)
            self._has_metrics = True

    def flush(self) -> None:
        """Emit the EMF blob for this invocation (stdout, read by CloudWatch)."""
        if self._has_metrics:
            self._metrics.flush_metrics()
            self._has_metrics = False

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
