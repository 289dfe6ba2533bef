"""The claim engine's state and its writes: the job row as the run knows it, the
outcomes it records, and the one fenced job-row write that carries them with the open
claim and the checkpoint (completion facts first) (private; the base of
:class:`jobguard.claims.WorkClaims`).

Its one reason to change is how a run's outcomes are recorded and written (END, CKPT);
claiming a page is :mod:`jobguard.claims`', reconciling :mod:`jobguard._claim_reconcile`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ._bounds import bounded_text, check_cursor
from ._claim_reports import BatchReport
from ._claim_values import _describe
from ._redact import Redactor, error_text, redact_raised, redacted
from .clock import to_ms
from .errors import LeaseLostError, StoreError
from .workitems import (
    Commit,
    Completion,
    Fence,
    ItemRecord,
    ItemState,
    JobRow,
    OpenClaim,
    Unresolved,
)

if TYPE_CHECKING:
    from .claims import ClaimedItem
    from .dynamodb_items import DynamoItemStore

__all__ = ["ClaimOutcomes"]


_F = TypeVar("_F", bound=Callable[..., Any])


def _locked(method: _F) -> _F:
    """One call at a time per claim engine: items settled from several threads of one
    run must not interleave their writes of the job row."""
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(_F, call)


@dataclass
class _Claimed:
    """What the run knows of an item it claimed (for the outcome it will write)."""

    payload_hash: str | None
    attempts: int


class ClaimOutcomes:
    """The state of one run's claim engine and its outcome writes (see
    :class:`jobguard.claims.WorkClaims`, which is built on it)."""

    def __init__(
        self,
        run: Any,
        store: DynamoItemStore,
        config: Any,
        telemetry: Any,
        *,
        reconcile: Callable[[Any, ItemRecord], str | None] | None = None,
    ) -> None:
        self.run = run
        self.store = store
        self.config = config
        self.telemetry = telemetry
        self.reconcile = reconcile
        self.redact: Redactor | None = getattr(config, "redact", None)
        """The job's redaction hook: every error text this run writes or logs passes it."""
        self.fence = Fence(run.job, run.run_id, run.fence)
        self.claim_s = config.claim_for.total_seconds()
        self.skew_s = config.skew_margin.total_seconds()
        self.report = BatchReport(batch_size=config.batch_size)
        self.hold_next = False
        """Per-item flush: the next outcome, if it is a failed or uncertain row (the page's
        last item), waits for the next job-row write (the next page's claim, or the flush
        that carries the checkpoint), saving a request; a completion is always written
        when it is recorded."""
        self._clock = run.clock
        self._ttl_s = int(config.item_ttl.total_seconds())
        self._row: JobRow | None = None
        self._mine: dict[str, str] = {}
        """The run's open claim as the job row holds it: work id -> payload hash prefix."""
        self._claimed: dict[str, _Claimed] = {}
        self._ended: set[str] = set()
        """Claimed items whose outcome is recorded: dropped from the claim by the next
        job-row write (after their facts landed)."""
        self._facts: dict[str, Completion] = {}
        self._found_keys: set[str] = set()
        """Facts from reconciliation (counted ``reconciled``, not ``completed``)."""
        self._completed_keys: set[str] = set()
        """Facts from this run's own outcomes (counted ``completed``)."""
        self._written_facts = 0
        self._rows: dict[str, Unresolved] = {}
        self._sources: dict[str, str] = {}
        """Escaped or hashed keys -> the original source id (kept on ledger rows)."""
        self._checkpoint: tuple[int, str | None] | None = None
        self._deferred: dict[str, Any] = {}
        """Records left alone while a displaced run may still call for them (key ->
        record), with the latest moment that may happen in ``_held_until``."""
        self._held_until = 0
        self._open: list[ClaimedItem] = []
        """The items of the last page claimed (an outcome each before the run ends)."""
        self._closed = False
        self._left_failure: Exception | None = None
        """A write that failed while the claim loop was being left (a ``break``, or the
        handler's frame unwinding with an error), where no caller could be told: the
        run's close reports it (see :meth:`left_early`)."""
        self._lock = threading.RLock()

    # -- the job row ---------------------------------------------------------------------

    @_locked
    def start(self) -> JobRow:
        """The job row (checkpoint, open claim), read once per run."""
        if self._row is None:
            self._know(self.store.read_row(self.run.job))
        assert self._row is not None
        return self._row

    def _know(self, row: JobRow) -> None:
        if row.fence > self.fence.fence:
            raise LeaseLostError(self.run.job, self.run.run_id, self.fence.fence,
                                 f"the job row carries fence {row.fence}")
        self._row = row

    def _foreign(self) -> OpenClaim | None:
        """The open claim of another run (a lower fence: it can write nothing more)."""
        claim = self._row.claim if self._row is not None else None
        return claim if claim is not None and claim.run_id != self.run.run_id else None

    @_locked
    def advance(self, checkpoint: tuple[int, str | None]) -> None:
        """Move the checkpoint with the next job-row write (``(expected seq, cursor)``):
        the write that claims the next page, or the run's last flush."""
        check_cursor(self.run.job, checkpoint[1])
        self._checkpoint = checkpoint

    # -- outcomes ------------------------------------------------------------------------

    @_locked
    def settle(self, key: str, kind: str, *, destination_id: str | None = None,
               error: str | None = None, retryable: bool = False) -> None:
        """Record one claimed item's outcome: ``complete``, ``fail``, ``uncertain`` or
        ``release`` (the destination was never called: the claim is given back)."""
        info = self._claimed.get(key, _Claimed(None, 1))
        if kind == "complete":
            self.report.completed += 1
            self._completed_keys.add(key)
            assert destination_id is not None
            self._facts[key] = Completion(key, destination_id, self.run.run_id,
                                          self.fence.fence, payload_hash=info.payload_hash,
                                          attempts=info.attempts)
        elif kind in ("fail", "uncertain"):
            state = ItemState.FAILED if kind == "fail" else ItemState.UNCERTAIN
            if kind == "fail":
                self.report.failed += 1
            else:
                self.report.uncertain += 1
                self.telemetry.count("UncertainOutcomes")
            self._rows[key] = Unresolved(key, state, error=error,
                                         retryable=retryable and kind == "fail",
                                         payload_hash=info.payload_hash, attempts=info.attempts)
        elif kind == "release":
            self.report.remaining += 1
        else:
            raise ValueError(f"unknown outcome kind {kind!r}")
        self._ended.add(key)
        if self.config.flush == "item":
            # a completion is written when recorded; a page's last failed or uncertain
            # row rides on the next page's claim (``hold_next``: one job-row write
            # fewer; a crash before it leaves that item to reconcile, as a crash mid-item
            # does)
            try:
                self._write_facts()
                if kind in ("fail", "uncertain") and not self.hold_next:
                    self._commit({}, [])
            except Exception as exc:  # raised into the handler: its text through the hook
                redact_raised(exc, self.redact)
                raise
        self.hold_next = False

    @_locked
    def flush(self, checkpoint: tuple[int, str | None] | None = None) -> None:
        """Write what is recorded: completion facts, then the job row (the finished items
        dropped from the claim, the checkpoint, failed and uncertain rows)."""
        if self._closed:
            return  # the run ended: what it owed was written then
        if checkpoint is not None:
            self._checkpoint = checkpoint
        self._write_facts()
        if self._rows or self._checkpoint is not None or self._ended & self._mine.keys():
            self._commit({}, [])

    @_locked
    def left_early(self, exc: Exception) -> None:
        """Keep a write failure met while the claim loop was being left: raised there it
        would reach no caller (Python prints it, unredacted, and drops it). It is logged
        now (redacted), and :meth:`close`, which the run always calls next, writes what is
        still owed and then fails as the loop's end would have failed."""
        if self._left_failure is None:
            self._left_failure = exc
        self.telemetry.logger.warning(
            "outcomes not written as the claim loop was left; the run's close writes again",
            extra={"error": redacted(error_text(exc), self.redact)})

    @_locked
    def close(self, error: BaseException | None = None) -> None:
        """End the run's work, once: every item of the last page without an outcome gets
        one (handed out: ``uncertain``, the destination may have been called; never
        started: released), then what is recorded is written (:meth:`flush`). With
        ``error`` (the handler raised while the lease was held) the report says what was
        written. Later calls, and the claim iterator's own clean-up, write nothing."""
        if self._closed:
            return
        ending = "the run ended" + (f" ({type(error).__name__})" if error else "")
        for item in self._open:
            if item.outcome is None:
                if item.handed_out:
                    item.uncertain(f"{ending} before an outcome was recorded")
                else:
                    item.release()
        facts_before = self._written_facts
        rows = len(self._rows)
        checkpoint = self._checkpoint
        try:
            self.flush()
        except Exception as exc:
            if error is not None:
                facts = self._written_facts - facts_before
                self.report.written_on_failure = bounded_text(redacted(
                    (f"{facts} completions; " if facts else "")
                    + f"not the rest: {error_text(exc)}", self.redact), 500)
            raise
        finally:
            self._closed = True
        left = self._left_failure
        if error is not None or left is not None:
            facts = self._written_facts - facts_before
            parts = [f"{facts} completions" if facts else "",
                     f"{rows} failed/uncertain/rejected rows" if rows else "",
                     f"the checkpoint ({checkpoint[1]!r})" if checkpoint else ""]
            written = ", ".join(p for p in parts if p) or "nothing owed"
            if left is not None:
                written += ("; before, as the claim loop was left, a write failed: "
                            + (redacted(error_text(left), self.redact) or ""))
            self.report.written_on_failure = bounded_text(written, 500)
        if left is not None and error is None:
            # everything owed is written now, but the loop's end would have failed on
            # that write (a completion it could not record is uncertain now): so does
            # the run, as the handler would have seen it raised
            raise left

    @_locked
    def end_unwritten(self, error: BaseException) -> None:
        """The run ends by something that is not an error a run records (the process is
        ending: SystemExit, KeyboardInterrupt, a cancelled task): nothing more is written,
        and the report no longer counts the completions that were never written (the
        next run finds them claimed by a run that ended, and reconciles them)."""
        if self._closed:
            return
        self._closed = True
        unwritten = [k for k in self._facts if k in self._completed_keys]
        self.report.completed -= len(unwritten)
        self.report.reconciled -= len([k for k in self._facts if k in self._found_keys])
        self.report.written_on_failure = bounded_text(
            f"nothing: {type(error).__name__} ended the process"
            + (f"; {len(unwritten)} completions the destination holds were not recorded"
               if unwritten else ""), 500)

    @_locked
    def abandon(self) -> None:
        """The run lost its lease: nothing more is written, now or later."""
        self._closed = True

    def _write_facts(self) -> None:
        if not self._facts:
            return
        self.run.ensure_lease()  # a run past its deadline writes nothing more
        facts = [dataclasses.replace(f, source_id=self._sources.get(f.work_id))
                 if f.work_id in self._sources else f for f in self._facts.values()]
        try:
            self.store.write_facts(self.run.job, facts, now_ms=to_ms(self._clock.now()),
                                   ttl_s=self._ttl_s)
        except StoreError as exc:
            unwritten = set(getattr(exc, "work_ids", [f.work_id for f in facts]))
            written = [f for f in facts if f.work_id not in unwritten]
            if written:
                self.telemetry.count("ItemsCompleted", len(written))
            self._written_facts += len(written)
            self._unrecorded([f for f in facts if f.work_id in unwritten], exc)
            raise
        self._facts.clear()
        self._found_keys.clear()
        self._written_facts += len(facts)
        self.telemetry.count("ItemsCompleted", len(facts))

    def _unrecorded(self, facts: list[Completion], exc: StoreError) -> None:
        """Completions the store would not take (still unprocessed or throttled after
        every retry): the destination holds them, the ledger cannot say so. They become
        uncertain rows (reconciled before anything is redone) in the job-row write that
        drops them from the claim, never left claimed by a run that ends; the pending
        checkpoint is not written past them. The facts that did land stay completed
        (an unresolved row never replaces a completion)."""
        self._facts.clear()
        self._checkpoint = None
        for fact in facts:
            self._rows[fact.work_id] = Unresolved(
                fact.work_id, ItemState.UNCERTAIN, payload_hash=fact.payload_hash,
                attempts=fact.attempts, source_id=fact.source_id,
                error=_describe(f"completion not recorded ({exc}); the destination "
                                f"answered {fact.destination_id!r}", self.redact))
            if fact.work_id in self._found_keys:
                self.report.reconciled -= 1
            elif fact.work_id in self._completed_keys:
                self.report.completed -= 1
            self.report.uncertain += 1
        self._found_keys.clear()
        self.telemetry.count("UncertainOutcomes", len(facts))
        self._commit({}, [])

    def _commit(self, add: dict[str, str], extra_rows: list[Unresolved]) -> None:
        """One job-row write: the claim (what is still open, plus ``add``), the pending
        checkpoint, the recorded failed / uncertain rows and ``extra_rows``."""
        row = self.start()
        claim = {k: v for k, v in self._mine.items() if k not in self._ended}
        claim.update(add)
        rows = [dataclasses.replace(r, source_id=self._sources[r.work_id])
                if r.source_id is None and r.work_id in self._sources else r
                for r in (*self._rows.values(), *extra_rows)]
        mine_on_row = row.claim is not None and row.claim.run_id == self.run.run_id
        unchanged = (claim == (row.claim.items if mine_on_row and row.claim else {})
                     and (row.claim is None or mine_on_row))
        if unchanged and not rows and self._checkpoint is None:
            self._ended.clear()
            return
        self.run.ensure_lease()
        now_ms = to_ms(self._clock.now())
        done = self.store.commit(self.fence, Commit(
            expected=row, claim=claim or None,
            claim_expires_at_ms=now_ms + int(self.claim_s * 1000),
            checkpoint=self._checkpoint, rows=tuple(rows)), now_ms=now_ms)
        self._row = done.row
        self._mine = claim
        self._ended.clear()
        self._checkpoint = None
        failed = sum(r.state is ItemState.FAILED for r in self._rows.values())
        self._rows.clear()
        if failed:
            self.telemetry.count("ItemsFailed", failed)
        if done.completed:
            # Completed meanwhile (a run that lost its lease had its effect confirmed):
            # reported, the completion stands.
            self.report.superseded += len(done.completed)
            self.telemetry.count("CompletionsRejected", len(done.completed))
