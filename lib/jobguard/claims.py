"""The claim engine of a guarded run: pages, claims, outcomes, checkpoints, reconciliation.

It depends on the run only through what it is handed (no import of the run or the
guard), so ``run -> claims`` and ``batch -> claims, guard, run`` point one way.

It serves :meth:`jobguard.Run.claim` in any guarded handler and
:class:`jobguard.BatchJob` (whose docstring says how outcomes are flushed).

This module is the claim and page flow (:class:`WorkClaims`' ``claim_page`` and
``iterate``, :class:`ClaimedItem`); the engine's state and outcome writes are in
:mod:`jobguard._claim_outcomes`, reconciliation, sweeps and resolutions in
:mod:`jobguard._claim_reconcile` (both bases of :class:`WorkClaims`), the reports in
:mod:`jobguard._claim_reports` and a record's identity and an outcome's values in
:mod:`jobguard._claim_values`; every name others import is exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ._bounds import bounded_text, check_batch_size
from ._claim_outcomes import _Claimed, _locked
from ._claim_reconcile import ClaimReconcile
from ._claim_reports import BatchReport, Page, ResolveReport, SweepReport
from ._claim_values import (
    _describe,
    _held_until,
    destination_id_problem,
    fingerprint,
    identify,
    kept_source,
    payload_hash,
    rejection,
    remaining_ms,
)
from ._redact import redact_raised
from .clock import to_ms
from .errors import JobGuardError, LeaseLostError
from .workitems import (
    DamagedItem,
    ItemRecord,
    ItemState,
    Unresolved,
    WorkId,
    claim_hash,
    is_outcome_unknown,
    payload_differs,
)

__all__ = ["BatchReport", "ClaimedItem", "Page", "RejectedPageError", "ResolveReport",
           "SweepReport", "WorkClaims",
           "destination_id_problem", "fingerprint", "payload_hash", "remaining_ms", "sweep"]


class ClaimedItem:
    """A work item this run holds. Record exactly one outcome.

    Use it as a context manager: an exception leaving the block records the outcome
    for you (an outcome-unknown error: ``uncertain``; any other: ``failed``,
    retryable), and so does leaving it without an outcome (``uncertain``: the
    destination may have been called).

    Example:
        >>> for item in current_run().claim(records, work_id=note_id):  # doctest: +SKIP
        ...     with item:
        ...         item.complete(destination_id=create_note(item.record, key=item.key))
    """

    def __init__(self, claims: WorkClaims, work_id: WorkId, record: Any, attempt: int,
                 claimed_mono: float) -> None:
        self._claims = claims
        self.work_id = work_id
        self.record = record
        self.attempt = attempt
        self._deadline = claimed_mono + claims.claim_s - claims.skew_s
        self.outcome: str | None = None
        self.handed_out = False

    @property
    def key(self) -> str:
        """The idempotency key to give the destination: ``str(work_id)``."""
        return str(self.work_id)

    def ensure_claim(self) -> None:
        """Raise unless this run may still call the destination for this item."""
        self._claims.run.ensure_lease()
        if self._claims.run.clock.monotonic() >= self._deadline:
            raise LeaseLostError(self._claims.run.job, self._claims.run.run_id,
                                 self._claims.run.fence, f"claim on {self.key} expired")

    def complete(self, *, destination_id: str) -> None:
        """The destination confirmed the effect; ``destination_id`` proves it.

        Raises:
            JobGuardError: ``destination_id`` is not a string of 1 to 1,024 bytes; the
                item is recorded uncertain first (the destination was called, its proof
                cannot be kept), and reconciled before anything is redone.
        """
        problem = destination_id_problem(destination_id)
        if problem is not None:
            if self.outcome is None:
                self.uncertain(f"destination_id {problem}")
            raise JobGuardError(f"{self.key}: destination_id {problem}")
        self._record("complete", destination_id=destination_id)

    def fail(self, error: BaseException | str, *, retryable: bool = True) -> None:
        """The action failed with a known outcome (nothing happened at the destination)."""
        self._record("fail", error=_describe(error, self._claims.redact),
                     retryable=retryable)

    def uncertain(self, error: BaseException | str) -> None:
        """The outcome is unknown: reconcile before anything is redone."""
        self._record("uncertain", error=_describe(error, self._claims.redact))

    def release(self) -> None:
        """Give the claim back: the destination was never called for this item."""
        self._record("release")

    def _record(self, kind: str, **details: Any) -> None:
        if self.outcome is not None:
            raise JobGuardError(f"{self.key}: outcome already recorded ({self.outcome})")
        self.outcome = kind
        self._claims.settle(self.key, kind, **details)

    def __enter__(self) -> ClaimedItem:
        self.ensure_claim()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None:
            if self.outcome is None:
                self.uncertain("the block ended without recording an outcome")
            return False
        if isinstance(exc, LeaseLostError) or self.outcome is not None:
            return False
        if not isinstance(exc, Exception):
            # SystemExit, KeyboardInterrupt, cancellation: the call may have reached the
            # destination. Recorded uncertain (reconciled before any redo), never swallowed.
            self.uncertain(exc)
            return False
        if is_outcome_unknown(exc):
            self.uncertain(exc)
        else:
            self.fail(exc, retryable=True)
        return True  # recorded: the run goes on with the next item


_BUG_PAGE = 10
"""A page of at least this many records (or a full page, if pages are smaller) all
rejected for one reason is a bug in the job's code, not a stranger's data."""


class RejectedPageError(JobGuardError):
    """Every record of a page was rejected for the same reason: that is a bug in the
    job's ``work_id()`` or ``payload()`` (a renamed field, ids of another type), not a
    stranger's data, and passing the page would skip the whole source.

    Attributes:
        job: the job name.
        records: the page's size.
        reason: the error every record met.
    """

    def __init__(self, job: str, records: int, reason: str) -> None:
        self.job, self.records, self.reason = job, records, reason
        super().__init__(
            f"job {job!r}: every record of a page of {records} was rejected with the same "
            f"error ({reason}): a bug in work_id() or payload() (a renamed field, ids of "
            "another type), or a source whose records all lack what it reads; nothing of "
            "the page was passed: fix the code or the source")


class WorkClaims(ClaimReconcile):
    """The claim engine of one run: looks a page up, reconciles what is uncertain, claims
    the rest in one fenced write of the job row, and writes outcomes: completion facts
    first, then the job row (the page dropped from the claim, the checkpoint moved, the
    failed and uncertain rows beside it).

    Writes are pipelined: a page's outcomes and the checkpoint past it ride on the write
    that claims the next page, so a page costs one job-row write whatever its size.

    Built on :class:`~jobguard._claim_reconcile.ClaimReconcile` (vanished and displaced
    claims, sweeps, resolutions), itself on
    :class:`~jobguard._claim_outcomes.ClaimOutcomes` (the state, outcomes and writes).
    """

    # -- claiming ------------------------------------------------------------------------

    @_locked
    def claim_page(
        self,
        records: Sequence[Any],
        work_id: Callable[[Any], WorkId],
        payload: Callable[[Any], str | None] = fingerprint,
        *,
        replay_failed: bool = False,
        again: bool = False,
        after_cursor: str | None = None,
    ) -> list[ClaimedItem]:
        """Claim every record of a page that still needs work.

        Completed items are skipped and counted; a completed or uncertain item whose
        payload differs is reported as a conflict; uncertain items, and the items of a
        vanished run's open claim, are reconciled first (found: completed; not found:
        claimed for a safe retry). ``replay_failed`` (recovery) claims failed items that
        are not retryable too.

        Items a displaced run may still call the destination for (the open claim of a
        lower fence while the job row's ``hold_until_ms`` is ahead, or an uncertain row
        ``held_until_ms`` then) are left alone: counted ``deferred``, written as
        uncertain rows (reconciled only after that moment), and handed back by
        :meth:`after_holds`. ``again``: the records were selected before (not counted
        again). ``after_cursor``: where the page was selected (said on rejected rows).

        Raises:
            RejectedPageError: every record of a page of two or more was rejected for the
                same reason: a bug in ``work_id()`` or ``payload()`` (a renamed field,
                ids of another type), not a stranger's data. Nothing of the page is
                written or passed; the run fails, and every later one, until it is fixed.
        """
        self.run.ensure_lease()
        if self._closed:
            raise JobGuardError("the run has ended: nothing more can be claimed")
        by_key: dict[str, tuple[WorkId, Any, str | None]] = {}
        rejected: dict[str, Unresolved] = {}
        reasons: set[str] = set()
        for record in records:
            try:
                wid, digest = identify(record, work_id, payload)
            except Exception as exc:  # noqa: BLE001 - one record never stops a job
                reasons.add(_describe(exc, self.redact))
                refused = rejection(record, exc, self._ttl_s, after_cursor=after_cursor,
                                    redact=self.redact)
                rejected.setdefault(refused.work_id, refused)
                continue
            if str(wid) in by_key:
                if by_key[str(wid)][2] != digest:
                    self._conflict(str(wid), "the same work id twice in a page, other payload")
                continue
            by_key[str(wid)] = (wid, record, digest)
            kept = kept_source(wid)
            if kept is not None:
                self._sources[str(wid)] = kept
        if not by_key and len(reasons) == 1 \
                and len(records) >= max(2, min(_BUG_PAGE, self.config.batch_size)):
            raise RejectedPageError(self.run.job, len(records), reasons.pop())
        if not again:
            self.report.selected += len(by_key) + len(rejected)
        self._rejected(list(rejected.values()))
        self._write_facts()  # earlier pages' completions first: this lookup sees them
        found = self._lookup(list(by_key))
        now_ms = to_ms(self._clock.now())
        now_s = now_ms // 1000
        foreign = self._foreign()
        hold = self._hold(now_ms)
        claim: dict[str, tuple[int, str | None, int]] = {}  # key -> attempt, hash, attempts
        rows: list[Unresolved] = []
        covered: set[str] = set()
        for key, (_, record, digest) in by_key.items():
            row = found.get(key)
            vanished = foreign is not None and key in foreign.items
            if key in self._rows or (key in self._mine and key not in self._ended):
                self.report.held += 1  # this run holds it already (another page, iterator)
                continue
            if isinstance(row, DamagedItem):
                # what it says cannot be known: done (skip) and absent (redo) are both
                # guesses; left as it is, counted uncertain, named for an operator
                self._damaged(row)
                covered.add(key)
                continue
            if row is not None and row.state is ItemState.COMPLETED and row.live(now_s):
                if payload_differs(row.payload_hash, digest):
                    self._conflict(key, "completed earlier with a different payload")
                else:
                    self.report.already_done += 1
                covered.add(key)
                continue
            if row is not None and row.state is ItemState.FAILED and not vanished:
                if row.retryable or replay_failed:
                    claim[key] = (1, digest, row.attempts)
                else:
                    self.report.failed += 1  # failed for good earlier: reported, not redone
                continue
            live_row = row is not None and row.live(now_s)
            if not vanished and not (live_row and row is not None and row.state in (
                    ItemState.UNCERTAIN, ItemState.CLAIMED)):
                claim[key] = (1, digest, row.attempts if live_row and row else 0)
                continue
            # Uncertain, or claimed by a run that can write nothing more: reconcile first,
            # unless that run was displaced alive and may still call the destination.
            covered.add(key)
            held_row = (row is not None and row.state is ItemState.UNCERTAIN
                        and _held_until(row) > now_ms)
            if (vanished and hold is not None) or held_row:
                until = max(hold if vanished and hold is not None else 0,
                            _held_until(row) if row is not None else 0)
                self._defer(key, record, until)
                if vanished and foreign is not None and (
                        row is None or row.state is not ItemState.UNCERTAIN
                        or _held_until(row) < until):
                    # the row says how long: the claim naming it goes with our next write
                    stored_hash = row.payload_hash if row is not None else None
                    rows.append(self._vanished_row(
                        key, foreign, stored_hash or foreign.items.get(key) or None,
                        row.attempts if row is not None else 0, held_until=until))
                continue
            observed = (foreign.record(self.run.job, key) if vanished and foreign is not None
                        and (row is None or row.state is not ItemState.UNCERTAIN) else row)
            assert observed is not None
            attempts = row.attempts if row is not None else 0
            stored = row.payload_hash if row is not None and row.payload_hash else (
                observed.payload_hash)
            if payload_differs(stored, digest):
                # reconciled as usual, but whichever payload the destination holds, the
                # work id was reused for other content: say so
                self._conflict(key, "left uncertain earlier with a different payload")
            outcome = self._reconcile_one(record, observed)
            if isinstance(outcome, str):
                self._found(key, outcome, stored or digest, attempts)
            elif outcome:
                claim[key] = (2, digest, attempts)
                self.report.retried += 1
                self.telemetry.count("ItemsRetried")
            else:
                self.report.uncertain += 1
                if row is None or row.state is not ItemState.UNCERTAIN:
                    rows.append(self._vanished_row(key, foreign, stored, attempts))
        rows += self._foreign_rows(found, covered | set(claim), now_s, held_until=hold)
        rows += rejected.values()
        self._write_facts()  # found ones: before the write that drops a vanished claim
        # the claims' deadline counts from before the write: the row says they expire
        # claim_for after a moment no earlier than this (CKPT, and the hold of a REPLACE)
        claimed_mono = self._clock.monotonic()
        self._commit({k: claim_hash(h) for k, (_, h, _) in claim.items()}, rows)
        for key, (_, digest, attempts) in claim.items():
            self._claimed[key] = _Claimed(digest, attempts + 1)
        self.telemetry.count("BatchSize", len(by_key))
        self._open = [ClaimedItem(self, by_key[k][0], by_key[k][1], attempt, claimed_mono)
                      for k, (attempt, _, _) in claim.items()]
        return list(self._open)

    def _rejected(self, rows: list[Unresolved]) -> None:
        """Count and log records no work id could be made for (their rows ride on the
        page's job-row write): the page and the checkpoint go past them."""
        if not rows:
            return
        self.report.rejected += len(rows)
        if self.report.rejected_first is None:
            self.report.rejected_first = bounded_text(f"{rows[0].work_id}: {rows[0].error}",
                                                      500)
        self.telemetry.count("ItemsRejected", len(rows))
        for row in rows:
            self.telemetry.logger.warning("record rejected: no work id", extra={
                "work_id": row.work_id, "error": row.error})

    def _damaged(self, row: DamagedItem) -> None:
        """Count and log an item whose row is not a readable item (left as it is)."""
        self.report.uncertain += 1
        if self.report.damaged_first is None:
            self.report.damaged_first = bounded_text(str(row), 500)
        self.telemetry.logger.error("item row damaged: left as it is", extra={
            "work_id": row.work_id, "problem": row.problem})

    def _conflict(self, key: str, why: str) -> None:
        self.report.conflicts += 1
        self.report.conflict_ids.append(key)
        self.telemetry.count("PayloadConflicts")
        self.telemetry.logger.warning("work id reused with a different payload",
                                      extra={"work_id": key, "detail": why})

    def iterate(
        self,
        records: Iterable[Any],
        work_id: Callable[[Any], WorkId],
        *,
        batch_size: int | None = None,
        payload: Callable[[Any], str | None] = fingerprint,
    ) -> Iterator[ClaimedItem]:
        """Page through ``records``, yielding claimed items. A page's outcomes ride on
        the write that claims the next page; the last are written when the records end
        (or the caller stops)."""
        size = check_batch_size(batch_size) if batch_size is not None \
            else self.config.batch_size
        page: list[Any] = []
        closed_early = False
        try:
            try:
                for record in records:
                    page.append(record)
                    if len(page) == size:
                        yield from self._page_items(page, work_id, payload)
                        page = []
                if page:
                    yield from self._page_items(page, work_id, payload)
            except GeneratorExit:
                closed_early = True  # a break, or the handler's frame unwinding with an error
                raise
            finally:
                if not self.run.lease_lost:
                    try:
                        self.flush()
                    except Exception as exc:
                        if not closed_early:
                            raise
                        self.left_early(exc)  # raised here, it would reach no caller
        except JobGuardError as exc:
            # jobguard's own failure (a write), raised into the handler's loop: its text
            # through the hook, as every text jobguard writes or logs (an error of the
            # job's own, from its records or thrown in, goes on as it was raised)
            redact_raised(exc, self.redact)
            raise

    def _page_items(self, page: list[Any], work_id: Callable[[Any], WorkId],
                    payload: Callable[[Any], str | None]) -> Iterator[ClaimedItem]:
        self.report.pages += 1
        items = self.claim_page(page, work_id, payload)
        left = False
        try:
            for item in items:
                item.handed_out = True
                try:
                    yield item
                except GeneratorExit:
                    left = True  # a break, or the handler's frame unwinding with an error
                    raise
                if item.outcome is None:
                    item.uncertain("no outcome was recorded for this item")
        finally:
            # The caller stopped early: claims it never received are given back; one it
            # received without an outcome may have reached the destination.
            try:
                for item in items:
                    if item.outcome is None and not self.run.lease_lost:
                        if item.handed_out:
                            item.uncertain("the caller stopped before recording an outcome")
                        else:
                            item.release()
            except Exception as exc:  # a per-item flush's write
                if not left:
                    raise
                self.left_early(exc)  # raised here, it would reach no caller


def sweep(run: Any, reconcile: Callable[[Any, ItemRecord], str | None],
          *, limit: int = 1000) -> SweepReport:
    """Reconcile a job's unresolved items against the destination, under ``run``'s fence.

    Finds the open claim of a vanished run and the failed and uncertain rows (the sparse
    index, each confirmed by a consistent read), then: an item found at the destination
    is completed (a reconciliation finding); one not found becomes a retryable failure
    (safe to redo by the next run or a recovery); one whose lookup fails stays uncertain.
    Failed items are counted, not touched, and so are rows that are not readable items
    (``damaged``: an operator looks). ``reconcile`` is called with ``record=None``.
    One write of completion facts and one of the job row (with the rows) for the lot.

    Example:
        >>> report = sweep(current_run(), job.reconcile)  # doctest: +SKIP
    """
    claims: WorkClaims = run.work_claims()
    report = claims.sweep(reconcile, limit=limit)
    run.stats.update({f"sweep_{k}": v for k, v in report.as_dict().items()})
    return report
