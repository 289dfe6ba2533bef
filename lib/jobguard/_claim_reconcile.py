"""Reconciling what a run cannot take for done or for absent: uncertain items, the open
claim of a run that vanished or was displaced (and the hold until it can no longer call
the destination), a sweep of a job's unresolved items, and an operator's resolution
(private; a base of :class:`jobguard.claims.WorkClaims`).

Its one reason to change is how an unresolved item is settled (reconcile, sweep,
resolve, the REPLACE hold); claiming a page is :mod:`jobguard.claims`'.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._bounds import bounded_text
from ._claim_outcomes import ClaimOutcomes, _locked
from ._claim_reports import ResolveReport, SweepReport
from ._claim_values import _MAX_ERROR, _describe, _held_until, _reconciled, remaining_ms
from .clock import to_ms
from .hooks import fire
from .workitems import (
    Completion,
    DamagedItem,
    ItemRecord,
    ItemState,
    OpenClaim,
    Unresolved,
)

__all__ = ["ClaimReconcile"]


class ClaimReconcile(ClaimOutcomes):
    """The reconciling half of :class:`jobguard.claims.WorkClaims`: a vanished or
    displaced run's claim, uncertain items, sweeps and resolutions."""

    # -- a vanished run's claim, uncertain items ------------------------------------------

    def _lookup(self, work_ids: list[str]) -> dict[str, ItemRecord]:
        """The items' rows, the job row with them on a run's first page, and the rows
        of a vanished claim's other items."""
        first = self._row is None
        found, row = self.store.lookup(self.run.job, work_ids, with_row=first)
        if first:
            assert row is not None
            self._know(row)
        foreign = self._foreign()
        if foreign is not None:
            asked = set(work_ids)
            extra = [w for w in foreign.items if w not in asked]
            if extra:
                more, _ = self.store.lookup(self.run.job, extra)
                found.update(more)
        self._remember(found.values())
        return found

    def _remember(self, rows: Iterable[ItemRecord]) -> None:
        """Keep the original source ids rows hold (escaped or hashed keys): every row
        this run writes for them keeps it too."""
        for row in rows:
            if row.source_id:
                self._sources.setdefault(row.work_id, row.source_id)

    def _vanished_row(self, key: str, foreign: OpenClaim | None, stored: str | None,
                      attempts: int, *, held_until: int | None = None) -> Unresolved:
        who = (f"claim of run {foreign.run_id} (fence {foreign.fence}) vanished without an "
               "outcome" if foreign is not None and key in foreign.items
               else "outcome unknown; reconciliation did not tell")
        if held_until is not None and foreign is not None:
            who = (f"claim of run {foreign.run_id} (fence {foreign.fence}), displaced while "
                   f"alive: it may call the destination until {held_until} (epoch ms); "
                   "reconciled after that")
        return Unresolved(key, ItemState.UNCERTAIN, error=who, payload_hash=stored,
                          attempts=attempts + 1, held_until_ms=held_until)

    def _hold(self, now_ms: int) -> int | None:
        """Until when the run of the open claim of a lower fence may still call the
        destination (a REPLACE took its lease while it was alive), or None: it cannot."""
        row = self._row
        if (row is None or self._foreign() is None or row.hold_until_ms is None
                or row.hold_until_ms <= now_ms):
            return None
        return row.hold_until_ms

    def _defer(self, key: str, record: Any, until: int) -> None:
        if key not in self._deferred:
            self.report.deferred += 1
        self._deferred[key] = record
        self._held_until = max(self._held_until, until)

    @_locked
    def after_holds(self, context: Any, margin_ms: float) -> list[Any]:
        """The records left alone while a displaced run could still call for them, once
        it no longer can: at once if that moment has passed; after waiting for it if the
        invocation has the time (``context``'s remaining time less ``margin_ms``); else
        none (their uncertain rows wait for the next run, which reconciles them then).
        Claim them with ``claim_page(records, ..., again=True)``."""
        if not self._deferred:
            return []
        until = self._held_until
        if to_ms(self._clock.now()) < until:
            left = remaining_ms(context)
            wait_ms = until - to_ms(self._clock.now())
            if left == float("inf") or left - margin_ms < wait_ms:
                return []
            real_end = time.monotonic() + wait_ms / 1000 + 1
            while to_ms(self._clock.now()) < until and time.monotonic() < real_end:
                fire("holding", job=self.run.job, run_id=self.run.run_id, until_ms=until)
                ahead_ms = until - to_ms(self._clock.now())
                if ahead_ms > 0:
                    time.sleep(min(1.0, ahead_ms / 1000))
                self.run.ensure_lease()
            if to_ms(self._clock.now()) < until:
                return []
        records = list(self._deferred.values())
        self.report.deferred -= len(records)
        self._deferred.clear()
        return records

    def _foreign_rows(self, found: dict[str, ItemRecord], covered: set[str],
                      now_s: int, *, held_until: int | None = None) -> list[Unresolved]:
        """A vanished run's claimed items nothing here resolved: uncertain rows (its
        claim is dropped by the next job-row write, and they must stay findable)."""
        foreign = self._foreign()
        if foreign is None:
            return []
        rows = []
        for key, prefix in foreign.items.items():
            if key in covered:
                continue
            row = found.get(key)
            if row is not None and row.live(now_s) and (
                    row.state is ItemState.COMPLETED
                    or (row.state is ItemState.UNCERTAIN
                        and (held_until is None or _held_until(row) >= held_until))):
                # completed (final), or already uncertain (and held long enough: the
                # vanished run may be retrying an uncertain item, and call for it until
                # the hold)
                continue
            rows.append(self._vanished_row(key, foreign, row.payload_hash if row else prefix,
                                           row.attempts if row else 0,
                                           held_until=held_until))
        return rows

    def _reconcile_one(self, record: Any, observed: ItemRecord) -> str | bool:
        """An uncertain item: its destination id (found), True (not found: safe to
        redo) or False (no answer: stays uncertain)."""
        self.telemetry.count("UncertainOutcomes")
        if self.reconcile is None:
            return False
        try:
            found = _reconciled(self.reconcile(record, observed))
        except Exception as exc:  # noqa: BLE001 - stays uncertain, reported
            self.telemetry.logger.warning("reconcile failed", extra={
                "work_id": observed.work_id, "error": _describe(exc, self.redact)})
            return False
        return found if found else True

    def _found(self, key: str, destination_id: str, payload_hash: str | None,
               attempts: int) -> None:
        self._facts[key] = Completion(key, destination_id, self.run.run_id, self.fence.fence,
                                      payload_hash=payload_hash, attempts=max(attempts, 1))
        self._found_keys.add(key)
        self.report.reconciled += 1
        self.telemetry.count("ReconciliationFindings")

    # -- sweeps and resolutions -------------------------------------------------------------

    @_locked
    def sweep(self, reconcile: Callable[[Any, ItemRecord], str | None], *,
              limit: int = 1000) -> SweepReport:
        """See :func:`sweep`."""
        self.start()
        report = SweepReport()
        now_ms = to_ms(self._clock.now())
        hold = self._hold(now_ms)
        rows: list[Unresolved] = []
        covered: set[str] = set()
        unresolved = self.store.unresolved(self.run.job, limit=limit, now_ms=now_ms)
        self._remember(unresolved)
        for row in unresolved:
            self.run.ensure_lease()
            report.examined += 1
            if isinstance(row, DamagedItem):
                report.damaged += 1  # not reconciled, not overwritten: an operator looks
                covered.add(row.work_id)
                self.telemetry.logger.error("item row damaged: left as it is", extra={
                    "work_id": row.work_id, "problem": row.problem})
                continue
            if row.state is ItemState.FAILED:
                report.failed += 1
                continue
            if row.state is ItemState.CLAIMED and row.run_id == self.run.run_id:
                report.held += 1  # this run's own claim
                continue
            if (row.state is ItemState.CLAIMED and hold is not None) or (
                    row.state is ItemState.UNCERTAIN and (row.held_until_ms or 0) > now_ms):
                report.held += 1  # a displaced run may still call for it: not yet
                continue
            covered.add(row.work_id)
            try:
                destination_id = _reconciled(reconcile(None, row))
            except Exception as exc:  # noqa: BLE001 - stays uncertain, reported
                self.telemetry.logger.warning("reconcile failed", extra={
                    "work_id": row.work_id, "error": _describe(exc, self.redact)})
                report.still_uncertain += 1
                if row.state is ItemState.CLAIMED:
                    rows.append(self._vanished_row(row.work_id, self._foreign(),
                                                   row.payload_hash, row.attempts))
                continue
            if destination_id:
                self._found(row.work_id, destination_id, row.payload_hash, row.attempts)
                report.found += 1
            else:
                rows.append(Unresolved(row.work_id, ItemState.FAILED, retryable=True,
                                       error="not found at the destination",
                                       payload_hash=row.payload_hash,
                                       attempts=max(row.attempts, 1)))
                report.not_found += 1
        foreign = self._foreign()
        if foreign is not None:
            # the vanished claim's items beyond the limit, or completed: as their rows say
            rest = [w for w in foreign.items if w not in covered]
            found, _ = self.store.lookup(self.run.job, rest) if rest else ({}, None)
            self._remember(found.values())
            rows += self._foreign_rows(found, covered, now_ms // 1000, held_until=hold)
        self._write_facts()  # before the write that drops a vanished claim
        self._commit({}, rows)
        return report

    @_locked
    def resolve(self, work_ids: Sequence[str], *, destination_id: str | None,
                reason: str) -> ResolveReport:
        """An operator's finding for unresolved items (see :func:`jobguard.recovery.resolve`):
        found at the destination (``destination_id``: completed with it) or not found
        (a retryable failure: safe to redo). Only uncertain or failed items, and those of
        a vanished run's open claim, are resolved; completed ones are left as they are."""
        self.run.ensure_lease()
        report = ResolveReport()
        wanted = list(dict.fromkeys(work_ids))
        found = self._lookup(wanted)
        now_ms = to_ms(self._clock.now())
        now_s = now_ms // 1000
        foreign = self._foreign()
        hold = self._hold(now_ms)
        rows: list[Unresolved] = []
        covered: set[str] = set()
        for key in wanted:
            row = found.get(key)
            vanished = foreign is not None and key in foreign.items
            if row is not None and row.state is ItemState.COMPLETED and row.live(now_s):
                report.already_completed.append(key)
                continue
            if destination_id is None and ((vanished and hold is not None) or (
                    row is not None and _held_until(row) > now_ms)):
                # not found *yet*: a displaced run may still call the destination for it
                # until its deadline; a retryable failure now would have it done twice
                report.held.append(key)
                continue
            if not vanished and (row is None or not row.live(now_s)):
                report.unknown.append(key)  # never claimed: nothing to resolve
                continue
            if not vanished and row is not None and row.state is ItemState.CLAIMED:
                report.unknown.append(key)  # an old-layout claim of a live run
                continue
            covered.add(key)
            stored = row.payload_hash if row is not None and row.payload_hash else None
            if stored is None and foreign is not None and vanished:
                stored = foreign.items.get(key) or None
            attempts = row.attempts if row is not None else 0
            if destination_id is not None:
                self._facts[key] = Completion(key, destination_id, self.run.run_id,
                                              self.fence.fence, payload_hash=stored,
                                              attempts=max(attempts, 1))
                report.found.append(key)
            else:
                rows.append(Unresolved(key, ItemState.FAILED, retryable=True,
                                       error=bounded_text(f"not found at the destination "
                                                          f"(operator): {reason}", _MAX_ERROR),
                                       payload_hash=stored, attempts=max(attempts, 1)))
                report.not_found.append(key)
        rows += self._foreign_rows(found, covered, now_s, held_until=hold)
        self._write_facts()  # before the write that drops a vanished claim
        self._commit({}, rows)
        return report
