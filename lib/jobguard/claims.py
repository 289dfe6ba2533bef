"""The claim engine of a guarded run: pages, claims, outcomes, checkpoints, reconciliation.

It depends on the run only through what it is handed (no import of the run or the
guard), so ``run -> claims`` and ``batch -> claims, guard, run`` point one way.

It serves :meth:`jobguard.Run.claim` in any guarded handler and
:class:`jobguard.BatchJob` (whose docstring says how outcomes are flushed).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from .dynamodb_items import DynamoItemStore

from ._bounds import bounded_text, check_batch_size, check_cursor
from ._redact import Redactor, error_text, redacted
from .clock import to_ms
from .errors import JobGuardError, LeaseLostError, StoreError
from .hooks import fire
from .workitems import (
    MAX_SOURCE_KEPT,
    Commit,
    Completion,
    DamagedItem,
    Fence,
    ItemRecord,
    ItemState,
    JobRow,
    OpenClaim,
    Unresolved,
    WorkId,
    claim_hash,
    is_outcome_unknown,
    payload_differs,
    rejected_key,
    source_key,
)

__all__ = ["BatchReport", "ClaimedItem", "Page", "RejectedPageError", "ResolveReport",
           "SweepReport", "WorkClaims",
           "destination_id_problem", "fingerprint", "payload_hash", "remaining_ms", "sweep"]

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


MAX_DESTINATION_ID = 1024
"""Bytes (UTF-8) of a destination id: it is stored with every completion."""
MAX_PAYLOAD_HASH = 64
"""Characters of a payload hash kept as given; a longer one is hashed (stable)."""


def destination_id_problem(value: object) -> str | None:
    """Why ``value`` cannot be a destination id (None: it can). The one check for every
    way an id is recorded: a run's ``complete``, a reconcile's answer, ``resolve``."""
    if not isinstance(value, str) or not value:
        return f"must be a non-empty string, got {type(value).__name__}"
    if not value.strip():
        return "must not be blank (only whitespace)"
    if len(value.encode("utf-8")) > MAX_DESTINATION_ID:
        return (f"must be at most {MAX_DESTINATION_ID} bytes (UTF-8), got "
                f"{len(value.encode('utf-8'))}")
    return None


def payload_hash(key: str, value: object) -> str | None:
    """A record's payload hash as stored: None, or a string of at most 64 characters
    (a longer one, e.g. the content itself, is reduced to its SHA-256)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise JobGuardError(f"{key}: payload() must return a string or None, got "
                            f"{type(value).__name__}")
    if len(value) > MAX_PAYLOAD_HASH:
        return hashlib.sha256(value.encode()).hexdigest()[:32]
    return value


def _reconciled(answer: object) -> str | None:
    """What a ``reconcile`` answered: a destination id (found), or None / "" (not found).
    Anything else is no answer (:class:`TypeError`): the item stays uncertain, never
    redone on the strength of an answer that is neither."""
    if answer is None or answer == "":
        return None
    problem = destination_id_problem(answer)
    if problem is not None:
        raise TypeError(f"reconcile() must return the destination id (a string) or None; "
                        f"its answer {problem}")
    assert isinstance(answer, str)
    return answer


def _held_until(row: ItemRecord) -> int:
    """Until when a displaced run may still call the destination for this item (0: no
    hold on it)."""
    return row.held_until_ms or 0


def _describe(error: BaseException | str, redact: Redactor | None = None) -> str:
    """An error as an item row keeps it: the whole text through the job's ``redact``,
    then bounded."""
    return bounded_text(redacted(error_text(error), redact), _MAX_ERROR) or ""


def _stable(value: Any) -> Any:
    """A JSON stand-in for what JSON cannot hold, the same for the same content in any
    process: a set, its members in order; its text (a datetime, a Decimal), unless that
    names where it lives in memory (an object without a repr of its own), then its
    fields; a value whose text cannot be read at all, its type."""
    if isinstance(value, set | frozenset):
        return sorted(value, key=_sort_key)
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - e.g. an ORM object detached from its session
        text = None
    if text is not None and " at 0x" not in text:
        return text
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    fields = dict(getattr(value, "__dict__", None) or {})
    for cls in type(value).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if isinstance(name, str) and hasattr(value, name):
                fields.setdefault(name, getattr(value, name))
    if fields:
        return {"__type__": type(value).__qualname__, **fields}
    return f"<{type(value).__qualname__}>"


def _sort_key(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=_stable)
    except Exception:  # noqa: BLE001 - ordered by what can be said of it
        return f"<{type(value).__qualname__}>"


def _plain(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """``value`` with every mapping's keys as JSON writes them and every member made
    JSON (a tuple key, keys of mixed types, a cycle): for a hash of what json.dumps
    refuses."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if id(value) in seen:
        return "<cycle>"
    seen = seen | {id(value)}
    if isinstance(value, dict | list | tuple | set | frozenset):
        if isinstance(value, dict):
            return {(k if isinstance(k, str) else _sort_key(k)): _plain(v, seen)
                    for k, v in value.items()}
        members = [_plain(v, seen) for v in value]
        return sorted(members, key=_sort_key) if isinstance(value, set | frozenset) \
            else members
    return _plain(_stable(value), seen)


def _canonical(record: Any) -> str | None:
    try:
        return json.dumps(record, sort_keys=True, separators=(",", ":"), default=_stable)
    except Exception:  # noqa: BLE001 - keys JSON cannot sort, a cycle: made plain first
        pass
    try:
        return json.dumps(_plain(record), sort_keys=True, separators=(",", ":"))
    except Exception:  # noqa: BLE001 - not JSON, and not made so: no content hash
        return None


def fingerprint(record: Any) -> str | None:
    """A stable hash of a record's content (canonical JSON), or None if not JSON."""
    text = _canonical(record)
    if text is None:
        return None
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:32]


MAX_EXCERPT = 200
"""Bytes (UTF-8) of a rejected record kept on its ledger row, so it can be found."""


def rejection(record: Any, error: BaseException, ttl_s: int, *,
              after_cursor: str | None = None, redact: Redactor | None = None) -> Unresolved:
    """The ledger row of a record no work id could be made for: keyed by the record's
    content (the same bad record is one row however often it is selected), saying why,
    with an excerpt of it and the cursor its page was selected after (to find it, and
    to recover its range once it is fixed). The reason and the excerpt pass through the
    job's ``redact`` (the key is the record's unredacted content's hash)."""
    text = _canonical(record)
    if text is None:
        text = f"<{type(record).__qualname__}>"
    digest = hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:32]
    where = f" (its page was selected after cursor {after_cursor!r})" \
        if after_cursor is not None else ""
    return Unresolved(rejected_key(digest), ItemState.REJECTED,
                      error=_describe(f"{error_text(error)}{where}", redact), ttl_s=ttl_s,
                      excerpt=bounded_text(redacted(text, redact), MAX_EXCERPT))


def identify(record: Any, work_id: Callable[[Any], WorkId],
             payload: Callable[[Any], str | None]) -> tuple[WorkId, str | None]:
    """A record's work id and payload hash. Raises whatever the user's functions raise,
    and :class:`TypeError` for a ``work_id()`` that returns no :class:`WorkId`: each is
    a record that cannot be worked on (:func:`rejection`), never a reason to stop."""
    wid = work_id(record)
    if not isinstance(wid, WorkId):
        raise TypeError(f"work_id() must return a WorkId, got {type(wid).__name__}")
    return wid, payload_hash(str(wid), payload(record))


def kept_source(wid: WorkId) -> str | None:
    """The original source id, kept on ledger rows where the key escapes or hashes it."""
    if source_key(wid.source_id) == wid.source_id:
        return None
    return bounded_text(wid.source_id, MAX_SOURCE_KEPT)


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


class WorkClaims:
    """The claim engine of one run: looks a page up, reconciles what is uncertain, claims
    the rest in one fenced write of the job row, and writes outcomes: completion facts
    first, then the job row (the page dropped from the claim, the checkpoint moved, the
    failed and uncertain rows beside it).

    Writes are pipelined: a page's outcomes and the checkpoint past it ride on the write
    that claims the next page, so a page costs one job-row write whatever its size.
    """

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

    def _conflict(self, key: str, why: str) -> None:
        self.report.conflicts += 1
        self.report.conflict_ids.append(key)
        self.telemetry.count("PayloadConflicts")
        self.telemetry.logger.warning("work id reused with a different payload",
                                      extra={"work_id": key, "detail": why})

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
            self._write_facts()
            if kind in ("fail", "uncertain") and not self.hold_next:
                self._commit({}, [])
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
        if error is not None:
            facts = self._written_facts - facts_before
            parts = [f"{facts} completions" if facts else "",
                     f"{rows} failed/uncertain/rejected rows" if rows else "",
                     f"the checkpoint ({checkpoint[1]!r})" if checkpoint else ""]
            self.report.written_on_failure = ", ".join(p for p in parts if p) or "nothing owed"

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
        try:
            for record in records:
                page.append(record)
                if len(page) == size:
                    yield from self._page_items(page, work_id, payload)
                    page = []
            if page:
                yield from self._page_items(page, work_id, payload)
        finally:
            if not self.run.lease_lost:
                self.flush()

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
            # The caller stopped early: claims it never received are given back; one it
            # received without an outcome may have reached the destination.
            for item in items:
                if item.outcome is None and not self.run.lease_lost:
                    if item.handed_out:
                        item.uncertain("the caller stopped before recording an outcome")
                    else:
                        item.release()


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


def remaining_ms(context: Any) -> float:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return float(remaining()) if callable(remaining) else float("inf")
