"""``BatchJob``: write ``select``, ``work_id``, ``process`` and ``reconcile``; the runner
pages, claims, processes, checkpoints and resumes (the engine is :mod:`jobguard.claims`).

Outcomes are written per page or per item (``JobConfig.flush``). Per page, a page's
completion facts go 25 to a request, and its failed items, the checkpoint past it and
the claim of the next page ride on one write of the job row (~0.06 requests and ~1.1
write units per item at batch size 100). Per item, each completion is written when it
is recorded (one request per item), so a crash leaves only the item in flight to
reconcile, and not the page's completions that were not written yet.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from ._bounds import check_cursor
from .claims import (
    BatchReport,
    ClaimedItem,
    Page,
    SweepReport,
    WorkClaims,
    fingerprint,
    remaining_ms,
    sweep,
)
from .errors import LeaseLostError
from .hooks import fire
from .workitems import ItemRecord, OutcomeUnknown, WorkId, is_outcome_unknown

__all__ = ["BatchJob", "BatchReport", "ClaimedItem", "Page", "SweepReport", "WorkClaims", "sweep"]

R = TypeVar("R")


class BatchJob(Generic[R]):
    """A scheduled job written as four functions; jobguard runs it safely.

    Subclass and implement :meth:`select`, :meth:`work_id`, :meth:`process` and
    :meth:`reconcile`; then ``lambda_handler = MyJob(config).handler()``.

    Each run reads the job's checkpoint, selects a page of ``batch_size`` records from
    it (one fenced write of the job row), reconciles what is uncertain, processes what
    is claimed (checking its lease and claim before every destination call), writes
    the page's completion facts and then, with the claim of the next page, the
    checkpoint past it, and repeats until the source is exhausted or the Lambda's
    remaining time drops below ``time_margin``. The checkpoint never moves backwards
    and never passes an unfinished item.

    Example:
        >>> class CrmSync(BatchJob[dict]):
        ...     def select(self, cursor, limit):
        ...         rows = crm.changed_contacts(after=cursor, limit=limit)
        ...         return Page(rows, rows[-1]["id"] if rows else cursor)
        ...     def work_id(self, record):
        ...         return WorkId(record["id"], "create-note")
        ...     def process(self, record, item):
        ...         return notes.put(item.key, {"text": record["change"]})
        ...     def reconcile(self, record, item):
        ...         return notes.reconcile(item.work_id)
        >>> lambda_handler = CrmSync(JobConfig(name="crm-sync")).handler()  # doctest: +SKIP
    """

    def __init__(self, config: Any, **guard_options: Any) -> None:
        self.config = config
        self._guard_options = guard_options

    # -- the four functions ----------------------------------------------------------------

    def select(self, cursor: str | None, limit: int) -> Page[R]:
        """A page of at most ``limit`` source records after ``cursor`` (None: start)."""
        raise NotImplementedError

    def work_id(self, record: R) -> WorkId:
        """The stable identity of the action this record asks for."""
        raise NotImplementedError

    def process(self, record: R, item: ClaimedItem) -> str:
        """Apply the action at the destination with ``item.key`` as its idempotency key;
        return the destination id. Raise :class:`OutcomeUnknown` (or let a timeout
        propagate) when the outcome cannot be known."""
        raise NotImplementedError

    def reconcile(self, record: R | None, item: ItemRecord) -> str | None:
        """Look the action up at the destination: its destination id, or None if it did
        not happen. ``record`` is None in a sweep over unresolved items."""
        raise NotImplementedError

    def cursor_of(self, record: R) -> str | None:
        """The record's position, comparable with cursors as strings. Lets recovery cut
        a cursor range exactly at its bounds; without it, ranges follow page bounds."""
        return None

    def cursor_at(self, at: Any) -> str:
        """The cursor of a point in time, for recovery by ``time_from``/``time_to``."""
        from .errors import ConfigError

        raise ConfigError("time_from", f"job {self.config.name!r} does not map times to "
                          "cursors (implement cursor_at); recover by cursor_from/cursor_to")

    def process_one(self, run: Any, item: ClaimedItem) -> None:
        """Check the lease and the claim, call :meth:`process`, record the outcome."""
        fire("before_item", job=run.job, run_id=run.run_id, work_id=item.key)
        item.handed_out = True  # from here the destination may be called
        item.ensure_claim()
        try:
            destination_id = self.process(item.record, item)
            fire("after_process", job=run.job, run_id=run.run_id, work_id=item.key)
        except LeaseLostError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified, recorded, the run goes on
            if isinstance(exc, OutcomeUnknown) or is_outcome_unknown(exc):
                item.uncertain(exc)
            else:
                item.fail(exc, retryable=True)
        else:
            item.complete(destination_id=destination_id)

    def _after_holds(self, run: Any, claims: WorkClaims, context: Any,
                     margin_ms: float) -> bool:
        """The items a displaced run could still call for (REPLACE), once it no longer
        can: reconciled (found: completed, never called again) and the rest done, if
        the invocation has the time; else the next run does it. True when none is left
        unfinished."""
        records = claims.after_holds(context, margin_ms)
        if not records:
            return claims.report.deferred == 0
        report = claims.report
        unfinished_before = report.held + report.uncertain + report.deferred
        items = claims.claim_page(records, self.work_id, self.payload, again=True)
        for index, item in enumerate(items):
            if remaining_ms(context) < margin_ms:
                for unstarted in items[index:]:
                    unstarted.release()
                claims.report.stopped = "time"
                break
            claims.hold_next = index == len(items) - 1
            self.process_one(run, item)
        return (report.stopped != "time"
                and report.held + report.uncertain + report.deferred == unfinished_before)

    def payload(self, record: R) -> str | None:
        """A hash of what the action would write (detects a work id reused with other
        content). Defaults to a hash of the record's canonical JSON."""
        return fingerprint(record)

    # -- wiring --------------------------------------------------------------------------------

    def handler(self) -> Any:
        """The Lambda handler: a guarded run of this job."""
        from .guard import GuardedJob

        def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
            from .run import current_run

            return self.run(current_run(), context).as_dict()

        return GuardedJob(self.config, lambda_handler, **self._guard_options)

    def run(self, run: Any, context: Any) -> BatchReport:
        """One run: page from the checkpoint until done or out of time.

        Pipelined: a finished page's checkpoint is written with the claim of the next
        page (one job-row write per page), after the finished page's completions."""
        claims: WorkClaims = run.work_claims(reconcile=self.reconcile)
        report: BatchReport = claims.report
        checkpoint = claims.start().checkpoint
        cursor, seq = checkpoint.cursor, checkpoint.seq
        report.cursor_from = report.cursor_to = cursor
        advancing = True
        blocked = False
        lag_items = 0
        margin_ms = self.config.time_margin.total_seconds() * 1000
        while True:
            if remaining_ms(context) < margin_ms:
                report.stopped = "time"
                break
            page = self.select(cursor, self.config.batch_size)
            if not page.records:
                report.stopped = "exhausted"
                break
            check_cursor(run.job, page.next_cursor)  # before the page is claimed
            report.pages += 1
            unfinished_before = report.held + report.uncertain
            deferred_before = report.deferred
            items = claims.claim_page(page.records, self.work_id, self.payload,
                                      after_cursor=cursor)
            fire("after_claim", job=run.job, run_id=run.run_id, work_ids=[i.key for i in items])
            for index, item in enumerate(items):
                if remaining_ms(context) < margin_ms:
                    for unstarted in items[index:]:
                        unstarted.release()  # never started: no claim left behind
                    report.stopped = "time"
                    break
                claims.hold_next = index == len(items) - 1
                self.process_one(run, item)
            page_done = (report.stopped is None
                         and report.held + report.uncertain == unfinished_before)
            held_back = report.deferred > deferred_before
            if advancing and page_done and not held_back:
                claims.advance((seq, page.next_cursor))  # with the next write of the job row
                seq += 1
                cursor = page.next_cursor
                report.cursor_to = cursor
            else:
                # The checkpoint stays before this page: the next run comes back here and
                # skips what is completed. Later pages are still worked on. (Held back
                # only by a displaced run's items: it may move on once they are done.)
                blocked = blocked or not page_done
                advancing = False
                lag_items += len(page.records)
                cursor = page.next_cursor
            if report.stopped:
                break
        if self._after_holds(run, claims, context, margin_ms) and not advancing \
                and not blocked and report.stopped != "time":
            # every page was finished but for the displaced run's items, now done too
            claims.advance((seq, cursor))
            report.cursor_to = cursor
            lag_items = 0
        claims.flush()  # the last page's completions, then its outcomes and checkpoint
        if report.stopped == "time":
            # records may be left: a continuation takes them up at once (max_chain)
            run.continue_requested = True
        # Items selected past the checkpoint: the next run will select them again.
        run.telemetry_count("CheckpointLagItems", lag_items)
        return report
