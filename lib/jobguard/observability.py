"""Powertools Logger and Metrics for jobguard, created on first use.

Metrics use ``EphemeralMetrics`` so jobguard's EMF blob never mixes with (or flushes)
the user's own Powertools ``Metrics``. The Tracer is imported only when a job asks for
tracing: it pulls in the X-Ray SDK (about half a second of cold start).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["JobLogger", "JobTelemetry", "NAMESPACE"]

NAMESPACE = "JobGuard"


@lru_cache(maxsize=1)
def _logger() -> Any:
    from aws_lambda_powertools import Logger

    return Logger(service="jobguard")


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

    def __init__(self, job: str) -> None:
        from aws_lambda_powertools.metrics import EphemeralMetrics

        self.job = job
        self.logger = JobLogger(_logger(), job)
        self._metrics = EphemeralMetrics(namespace=NAMESPACE, service="jobguard")
        self._has_metrics = False

    def count(self, name: str, value: float = 1) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        self._start()
        self._metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)

    def milliseconds(self, name: str, value: float) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        self._start()
        self._metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)

    def _start(self) -> None:
        # The job dimension goes on with the first value, so that every EMF blob carries
        # it (Powertools may flush on its own before ours).
        if not self._has_metrics:
            self._metrics.add_dimension(name="job", value=self.job)
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
