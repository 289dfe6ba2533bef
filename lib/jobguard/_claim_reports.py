"""The values the claim engine hands its callers: a page of source records, and the
reports of a run's items, of a sweep and of an operator's resolution (private;
:mod:`jobguard.claims` exports them).

Its one reason to change is what a run, a sweep or a resolution reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["BatchReport", "Page", "ResolveReport", "SweepReport"]


R = TypeVar("R")


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
    deferred: int = 0
    """Items a displaced run (REPLACE) may still call the destination for: left alone
    until its deadline, then reconciled by this run if it has the time, else by the next
    (uncertain rows until then)."""
    remaining: int = 0
    rejected: int = 0
    """Records no work id could be made for (``rejected`` in the ledger): passed."""
    superseded: int = 0
    """Failed or uncertain outcomes not written: the item was completed meanwhile."""
    cursor_from: str | None = None
    cursor_to: str | None = None
    stopped: str | None = None
    rejected_first: str | None = None
    """The first rejected record's ledger key and why (``jobguard items --status
    rejected`` lists them all)."""
    damaged_first: str | None = None
    """The first item whose row is not a readable item (a :class:`DamagedItem`): its
    key and what is wrong. Such items are left as they are (not claimed, not called,
    not reconciled, not overwritten) and counted ``uncertain``: an operator looks, then
    ``jobguard resolve`` replaces the row."""
    written_on_failure: str | None = None
    """When the handler raised with the lease held: what the run wrote before it ended
    (the completions, failed and uncertain rows and checkpoint it had earned)."""
    conflict_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if v not in (None, [])}
        data["conflict_ids"] = self.conflict_ids[:20]
        return data


@dataclass
class ResolveReport:
    """What an operator's resolution did (work ids by outcome)."""

    found: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    already_completed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    """Not unresolved: never claimed, or claimed by a live run."""
    held: list[str] = field(default_factory=list)
    """Not resolved "not found" now: a displaced run may still call the destination for
    them until the hold their rows name (resolve them after it)."""

    def as_dict(self) -> dict[str, list[str]]:
        return dict(self.__dict__)


@dataclass
class SweepReport:
    """What a reconciliation sweep over a job's unresolved items found."""

    examined: int = 0
    found: int = 0
    not_found: int = 0
    still_uncertain: int = 0
    failed: int = 0
    held: int = 0
    damaged: int = 0
    """Rows that are not readable items (:class:`DamagedItem`): left as they are."""

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)
