"""report-export: one CSV object per hourly reporting period in S3, each exactly once.

Policy QUEUE: every tick names its own period, so a tick that arrives during a run waits
on the job's trigger queue and runs after it, in order; none is skipped or folded.

A run's period is the hour its trigger names: a tick's (or a queued tick's, or a rule's)
scheduled time truncated to the hour, so the 10:00 tick exports ``10:00-11:00``. A manual
trigger has no scheduled time: it exports the hour named by its ``period`` field
(``{"job": "report-export", "manual": true, "period": "2026-11-29T10:00Z"}``), or, without
one, the previous full hour at the time the run starts. A ``period`` that is not an
ISO-8601 time with a timezone fails the run with an :class:`InvalidTriggerError` naming
``period``.

Each period is one work item (``report@2026-11-29T10:00Z:export``), claimed before the
object is written and settled with its S3 version id; the object key is ``reports/`` +
the work id and is never overwritten. A run also takes up earlier periods left failed
or uncertain (up to :data:`CATCH_UP`; the claim reconciles each against the bucket
first, so nothing is written twice): a queued trigger whose run failed is not delivered
again, and a retry can arrive while a crashed run's lease still stands. The run fails,
so that its trigger is retried, unless every period it claimed is confirmed at the
destination. The stack sets ``REPORT_BUCKET``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from handlers.jobs import REPORT_EXPORT, deployed
from jobguard import InvalidTriggerError, WorkId, aws_client, current_run, guarded

if TYPE_CHECKING:
    from jobguard.destinations import S3Destination

BUCKET = "REPORT_BUCKET"
PREFIX = "reports/"
PERIOD = timedelta(hours=1)
OPERATION = "export"
CATCH_UP = 24
"""At most this many earlier unfinished periods are taken up by one run (a day's worth)."""
_FORMAT = "%Y-%m-%dT%H:%MZ"

_clients: dict[str, Any] = {}


class ExportUnconfirmed(RuntimeError):
    """A period this run claimed is not confirmed at the destination (failed or
    uncertain); the run fails so that its trigger is retried."""


def period_of(scheduled_at: datetime | None, event: Any, now: datetime) -> datetime:
    """The start of the period a trigger names (see the module's docstring)."""
    if scheduled_at is None:
        raw = event.get("period") if isinstance(event, dict) else None
        if raw is None:
            return _hour(now) - PERIOD
        try:
            scheduled_at = datetime.fromisoformat(str(raw))
        except ValueError:
            raise InvalidTriggerError("period", f"{raw!r} is not an ISO-8601 time") from None
        if scheduled_at.utcoffset() is None:
            raise InvalidTriggerError("period", f"{raw!r} has no timezone")
    return _hour(scheduled_at)


def report_body(start: datetime) -> bytes:
    """The export of the period starting at ``start``: the same bytes every time."""
    end = start + PERIOD
    return (f"period_start,period_end,job\n{start:{_FORMAT}},{end:{_FORMAT}},"
            f"{REPORT_EXPORT.name}\n").encode()


def work_id(period: str) -> WorkId:
    return WorkId(f"report@{period}", OPERATION)


@guarded(deployed(REPORT_EXPORT).config())
def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    run = current_run()
    period = f"{period_of(run.trigger.scheduled_at, event, run.clock.now()):{_FORMAT}}"
    claims = run.work_claims()
    earlier = [WorkId.parse(row.work_id).source_id.removeprefix("report@")
               for row in claims.store.unresolved(run.job, limit=CATCH_UP)]
    exports = destination()
    for item in run.claim(list(dict.fromkeys([*sorted(earlier), period])), work_id=work_id,
                          reconcile=lambda _record, row: exports.reconcile(row.work_id)):
        with item:
            start = datetime.strptime(item.record, _FORMAT).replace(tzinfo=UTC)
            version = exports.put(item.key, report_body(start), content_type="text/csv")
            item.complete(destination_id=version)
    report = claims.report
    if report.failed or report.uncertain or report.held or report.conflicts:
        raise ExportUnconfirmed(f"not every period is confirmed in s3: {report.as_dict()}")
    return {"period": period, **report.as_dict()}


def destination() -> S3Destination:
    """The bucket as an :class:`S3Destination` (``REPORT_BUCKET``, prefix ``reports/``)."""
    from jobguard.destinations import S3Destination  # botocore: at first use

    if "s3" not in _clients:  # built at first use, then kept for the container
        _clients["s3"] = aws_client("s3")
    return S3Destination(os.environ[BUCKET], client=_clients["s3"], prefix=PREFIX)


def _hour(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
