"""The claim engine of a guarded run: pages, claims, outcomes, checkpoints, reconciliation.

It depends on the run only through what it is handed (no import of the run or the
guard), so ``run -> claims`` and ``batch -> claims, guard, run`` point one way.

It serves :meth:`jobguard.Run.claim` in any guarded handler and
:class:`jobguard.BatchJob` (whose docstring says how outcomes are flushed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from .dynamodb_items import DynamoItemStore

from ._bounds import bounded_text
from .clock import to_ms
from .errors import JobGuardError, LeaseLostError
from .workitems import (
    ClaimRequest,
    Fence,
    ItemRecord,
    ItemState,
    Settle,
    WorkId,
    is_outcome_unknown,
)

__all__ = ["BatchReport", "ClaimedItem", "Page", "SweepReport", "WorkClaims", "fingerprint",
           "remaining_ms", "sweep"]

R = TypeVar("R")
_MAX_ERROR = 1000


@dataclass(frozen=True)
class Page(Generic[R]):
    """One page of source records, and the cursor the next page starts from."""

    records: Sequence[R]
    next_cursor: str | None


@dataclass
class BatchReport:
    """What a run did with its work items (also written on its run record)."""

    batch_size: int = 0
    pages: int = 0
    selected: int = 0
    completed: int = 0
    already_done: int = 0
    failed: int = 0
    uncertain: int = 0
    reconciled: int = 0
    retried: int = 0
    conflicts: int = 0
    held: int = 0
    remaining: int = 0
    rejected: int = 0
    cursor_from: str | None = None
    cursor_to: str | None = None
    stopped: str | None = None
    conflict_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if v not in (None, [])}
        data["conflict_ids"] = self.conflict_ids[:20]
        return data


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
        """The destination confirmed the effect; ``destination_id`` proves it."""
        if not isinstance(destination_id, str) or not destination_id:
            raise JobGuardError(f"{self.key}: destination_id must be a non-empty string")
        self._record("complete", destination_id=destination_id)

    def fail(self, error: BaseException | str, *, retryable: bool = True) -> None:
        """The action failed with a known outcome (nothing happened at the destination)."""
        self._record("fail", error=_describe(error), retryable=retryable)

    def uncertain(self, error: BaseException | str) -> None:
        """The outcome is unknown: reconcile before anything is redone."""
        self._record("uncertain", error=_describe(error))

    def release(self) -> None:
        """Give the claim back: the destination was never called for this item."""
        self._record("release")

    def _record(self, kind: str, **details: Any) -> None:
        if self.outcome is not None:
            raise JobGuardError(f"{self.key}: outcome already recorded ({self.outcome})")
        self.outcome = kind
        self._claims.settle(Settle(work_id=self.key, kind=kind, **details))

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


def _describe(error: BaseException | str) -> str:
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return bounded_text(text, _MAX_ERROR) or ""


def fingerprint(record: Any) -> str | None:
    """A stable hash of a record's content (canonical JSON), or None if not JSON."""
    try:
        text = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class WorkClaims:
    """The claim engine of one run: claims a page, reconciles what is uncertain, and
    writes outcomes (with the checkpoint) under the run's fence."""

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
        self.fence = Fence(run.job, run.run_id, run.fence)
        self.claim_s = config.claim_for.total_seconds()
        self.skew_s = config.skew_margin.total_seconds()
        self.report = BatchReport(batch_size=config.batch_size)
        self._buffer: list[Settle] = []
        self.hold_next = False
        """Per-item flush: keep the next outcome for the flush that carries the
        checkpoint (the page's last item), saving a request per page."""
        self._clock = run.clock

    # -- claiming ------------------------------------------------------------------------

    def claim_page(
        self,
        records: Sequence[Any],
        work_id: Callable[[Any], WorkId],
        payload: Callable[[Any], str | None] = fingerprint,
    ) -> list[ClaimedItem]:
        """Claim every record of a page that still needs work.

        Completed items are skipped and counted; a completed or uncertain item whose
        payload differs is reported as a conflict; uncertain items and claims of a
        vanished holder are reconciled first (found: completed; not found: claimed for a
        safe retry).
        """
        self.run.ensure_lease()
        by_key: dict[str, tuple[WorkId, Any, str | None]] = {}
        for record in records:
            wid = work_id(record)
            if not isinstance(wid, WorkId):
                raise JobGuardError(f"work_id() must return a WorkId, got {type(wid).__name__}")
            digest = payload(record)
            if str(wid) in by_key:
                if by_key[str(wid)][2] != digest:
                    self._conflict(str(wid), "the same work id twice in a page, other payload")
                continue
            by_key[str(wid)] = (wid, record, digest)
        self.report.selected += len(by_key)
        now_ms = to_ms(self._clock.now())
        requests = [ClaimRequest(k, payload_hash=v[2]) for k, v in by_key.items()]
        result = self.store.claim(self.fence, requests, now_ms=now_ms,
                                  claim_ms=int(self.claim_s * 1000))
        claimed_mono = self._clock.monotonic()
        items = [ClaimedItem(self, by_key[k][0], by_key[k][1], 1, claimed_mono)
                 for k in result.done]
        second_chance: list[ClaimRequest] = []
        for key, row in result.refused.items():
            wid, record, digest = by_key[key]
            if row is None:
                continue
            if row.state is ItemState.COMPLETED:
                if row.payload_hash and digest and row.payload_hash != digest:
                    self._conflict(key, "completed earlier with a different payload")
                else:
                    self.report.already_done += 1
            elif row.state is ItemState.FAILED:
                self.report.failed += 1  # failed for good earlier: reported, not redone
            elif row.state is ItemState.CLAIMED and not self._vanished(row, now_ms):
                self.report.held += 1
            else:
                if row.payload_hash and digest and row.payload_hash != digest:
                    # reconciled as usual, but whichever payload the destination holds,
                    # the work id was reused for other content: say so
                    self._conflict(key, "left uncertain earlier with a different payload")
                if self._reconcile_one(wid, record, row, now_ms):
                    second_chance.append(ClaimRequest(key, payload_hash=digest,
                                                      after_uncertain=True))
        if second_chance:
            again = self.store.claim(self.fence, second_chance, now_ms=now_ms,
                                     claim_ms=int(self.claim_s * 1000))
            self.report.retried += len(again.done)
            self.telemetry.count("ItemsRetried", len(again.done))
            self.report.held += len(again.refused)
            items += [ClaimedItem(self, by_key[k][0], by_key[k][1], 2, claimed_mono)
                      for k in again.done]
        self.telemetry.count("BatchSize", len(by_key))
        return items

    def _vanished(self, row: ItemRecord, now_ms: int) -> bool:
        """A claim nobody can complete: a lower fence can no longer write (its lease is
        gone), or the claim simply expired."""
        return (row.fence is not None and row.fence < self.fence.fence) or row.claim_expired(
            now_ms, int(self.skew_s * 1000))

    def _reconcile_one(self, wid: WorkId, record: Any, row: ItemRecord, now_ms: int) -> bool:
        """Resolve an uncertain item (or a vanished claim). True: safe to redo."""
        ttl_s = int(self.config.item_ttl.total_seconds())
        if row.state is ItemState.CLAIMED:
            expired = self.store.settle(
                self.fence, [Settle(str(wid), "expire", observed_run_id=row.run_id,
                                    error=f"claim of run {row.run_id} (fence {row.fence}) "
                                          "vanished without an outcome")],
                now_ms=now_ms, ttl_s=ttl_s)
            if not expired.done:
                self.report.held += 1
                return False
        self.telemetry.count("UncertainOutcomes")
        if self.reconcile is None:
            self.report.uncertain += 1
            return False
        try:
            found = self.reconcile(record, row)
        except Exception as exc:  # noqa: BLE001 - stays uncertain, reported
            self.telemetry.logger.warning("reconcile failed", extra={
                "work_id": str(wid), "error": _describe(exc)})
            self.report.uncertain += 1
            return False
        if found:
            done = self.store.settle(self.fence, [Settle(str(wid), "found", destination_id=found)],
                                     now_ms=to_ms(self._clock.now()), ttl_s=ttl_s)
            if done.done:
                self.report.reconciled += 1
                self.telemetry.count("ReconciliationFindings")
            return False
        return True

    def _conflict(self, key: str, why: str) -> None:
        self.report.conflicts += 1
        self.report.conflict_ids.append(key)
        self.telemetry.count("PayloadConflicts")
        self.telemetry.logger.warning("work id reused with a different payload",
                                      extra={"work_id": key, "detail": why})

    # -- outcomes ------------------------------------------------------------------------

    def settle(self, outcome: Settle) -> None:
        if outcome.kind == "complete":
            self.report.completed += 1
        elif outcome.kind == "fail":
            self.report.failed += 1
        elif outcome.kind == "release":
            self.report.remaining += 1
        else:
            self.report.uncertain += 1
            self.telemetry.count("UncertainOutcomes")
        self._buffer.append(outcome)
        if self.config.flush == "item" and not self.hold_next:
            self.flush()
        self.hold_next = False

    def flush(self, checkpoint: tuple[int, str | None] | None = None) -> None:
        """Write buffered outcomes (and the checkpoint) under the fence."""
        if not self._buffer and checkpoint is None:
            return
        outcomes, self._buffer = self._buffer, []
        result = self.store.settle(
            self.fence, outcomes, now_ms=to_ms(self._clock.now()),
            ttl_s=int(self.config.item_ttl.total_seconds()), checkpoint=checkpoint,
        )
        if result.refused:
            # Someone else resolved these (a newer run reconciled them): reported, the
            # destination id stays whatever the ledger says.
            self.report.rejected += len(result.refused)
            self.telemetry.count("CompletionsRejected", len(result.refused))
        # One value per flush, not per item: a page of outcomes is one data point each.
        completed = sum(o.kind == "complete" for o in outcomes)
        failed = sum(o.kind == "fail" for o in outcomes)
        if completed:
            self.telemetry.count("ItemsCompleted", completed)
        if failed:
            self.telemetry.count("ItemsFailed", failed)

    def iterate(
        self,
        records: Iterable[Any],
        work_id: Callable[[Any], WorkId],
        *,
        batch_size: int | None = None,
        payload: Callable[[Any], str | None] = fingerprint,
    ) -> Iterator[ClaimedItem]:
        """Page through ``records``, yielding claimed items; flush after each page."""
        size = batch_size or self.config.batch_size
        page: list[Any] = []
        for record in records:
            page.append(record)
            if len(page) == size:
                yield from self._page_items(page, work_id, payload)
                page = []
        if page:
            yield from self._page_items(page, work_id, payload)

    def _page_items(self, page: list[Any], work_id: Callable[[Any], WorkId],
                    payload: Callable[[Any], str | None]) -> Iterator[ClaimedItem]:
        self.report.pages += 1
        items = self.claim_page(page, work_id, payload)
        try:
            for item in items:
                item.handed_out = True
                yield item
                if item.outcome is None:
                    item.uncertain("no outcome was recorded for this item")
        finally:
            # The caller stopped early: claims it never received are given back.
            for item in items:
                if item.outcome is None and not item.handed_out:
                    item.release()
            self.flush()


@dataclass
class SweepReport:
    """What a reconciliation sweep over a job's unresolved items found."""

    examined: int = 0
    found: int = 0
    not_found: int = 0
    still_uncertain: int = 0
    failed: int = 0
    held: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def sweep(run: Any, reconcile: Callable[[Any, ItemRecord], str | None],
          *, limit: int = 1000) -> SweepReport:
    """Reconcile a job's unresolved items against the destination, under ``run``'s fence.

    Finds claimed (of a vanished holder), failed and uncertain items through the sparse
    index, confirms each with a consistent read, then: a vanished claim becomes
    uncertain; an uncertain item found at the destination is completed (a
    reconciliation finding); one not found becomes a retryable failure (safe to redo by
    the next run or a recovery); one whose lookup fails stays uncertain. Failed items
    are counted, not touched. ``reconcile`` is called with ``record=None``.

    Example:
        >>> report = sweep(current_run(), job.reconcile)  # doctest: +SKIP
    """
    claims: WorkClaims = run.work_claims()
    store, fence = claims.store, claims.fence
    ttl_s = int(claims.config.item_ttl.total_seconds())
    report = SweepReport()
    now_ms = to_ms(run.clock.now())
    for row in store.unresolved(run.job, limit=limit):
        run.ensure_lease()
        report.examined += 1
        if row.state is ItemState.FAILED:
            report.failed += 1
            continue
        if row.state is ItemState.CLAIMED:
            if not claims._vanished(row, now_ms):  # noqa: SLF001 - same rule as claiming
                report.held += 1
                continue
            expired = store.settle(fence, [Settle(row.work_id, "expire",
                                                  observed_run_id=row.run_id)],
                                   now_ms=now_ms, ttl_s=ttl_s)
            if not expired.done:
                report.held += 1
                continue
        try:
            found = reconcile(None, row)
        except Exception as exc:  # noqa: BLE001 - stays uncertain, reported
            claims.telemetry.logger.warning("reconcile failed", extra={
                "work_id": row.work_id, "error": _describe(exc)})
            report.still_uncertain += 1
            continue
        outcome = (Settle(row.work_id, "found", destination_id=found) if found
                   else Settle(row.work_id, "not_found"))
        done = store.settle(fence, [outcome], now_ms=to_ms(run.clock.now()), ttl_s=ttl_s)
        if not done.done:
            report.held += 1
        elif found:
            report.found += 1
            claims.telemetry.count("ReconciliationFindings")
        else:
            report.not_found += 1
    run.stats.update({f"sweep_{k}": v for k, v in report.as_dict().items()})
    return report


def remaining_ms(context: Any) -> float:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return float(remaining()) if callable(remaining) else float("inf")
