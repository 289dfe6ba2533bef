"""What a timeline shows, decided from run records alone (pure: no I/O, no clock).

A job's run log holds one record per trigger decision. Those that took the lease
(``decision = ran``) become *bars* from start to end, coloured by status; every other
decision (skipped, queued, coalesced, duplicate, stale, paused, dropped, and a
trigger-queue message rejected as no trigger) becomes a *mark* at its time, linked to
the run it deferred to (the holder named on the record) and, where the log shows it,
the run it became (a queued trigger's own run, the follow-up of a coalesced one). A run
that took over another's lease (its record names the displaced run) and a lease an
operator force-released are *markers*.

The run holding the lease has no record yet: :mod:`.collect` passes one made from the
lease row (status ``running``), whose ``extra`` carries the row's ``lease_expires_at_ms``
and ``heartbeat_at_ms``; past its expiry it is drawn ``expired``, not running.

Times are epoch milliseconds, UTC. Nothing here trusts a record: a missing or reversed
time, a count that is not a number, a status the page does not know are shown as what
they are (with a note), never raised.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records import Decision, RunRecord, RunStatus
from ._format import DECISIONS, RUN_STATUSES, duration, iso

__all__ = ["RUN_STATUSES", "DECISIONS", "FOCUS_AT_MOST", "Bar", "Lane", "Mark", "Marker",
           "Timeline", "Window", "build_lane", "build_timeline", "focus"]

ITEM_COUNTS = ("selected", "completed", "failed", "uncertain", "reconciled", "already_done")
"""The work-item figures a run record carries (``BatchReport``), shown per bar."""


@dataclass(frozen=True)
class Window:
    """The time range a timeline covers, ``from_ms`` to ``to_ms`` (UTC epoch ms)."""

    from_ms: int
    to_ms: int

    def __post_init__(self) -> None:
        if self.to_ms <= self.from_ms:
            raise ValueError(f"to_ms ({self.to_ms}) must be after from_ms ({self.from_ms})")

    @property
    def span_ms(self) -> int:
        return self.to_ms - self.from_ms

    def overlaps(self, start_ms: int, end_ms: int) -> bool:
        return start_ms <= self.to_ms and end_ms >= self.from_ms


@dataclass(frozen=True)
class Bar:
    """One run: a bar from ``start_ms`` to ``end_ms`` on sub-row ``row`` of its lane."""

    run_id: str
    status: str
    start_ms: int
    end_ms: int
    row: int
    fence: int | None
    trigger_id: str
    trigger_kind: str
    owner: str | None = None
    requested_by: str | None = None
    error: str | None = None
    detail: str | None = None
    items: dict[str, int] = field(default_factory=dict)
    displaced_run_id: str | None = None
    held_to_ms: int | None = None
    """Its lease, still held after the bar's end with no heartbeat, until this time (a
    dead worker's lease until it was taken over, or until it expired)."""
    open_end: bool = False
    """Still running (or its end is unknown): drawn to ``end_ms`` with an open end."""
    notes: tuple[str, ...] = ()
    """What the record said that a bar cannot (clock skew, a clipped start, ...)."""
    continues: str | None = None
    """A chain's link (continuation): the run it continues, drawn joined to it."""
    chain: str | None = None
    """The first run of the chain this run is a link of (its label, shared by every
    link); None for a run that is no chain's."""
    link: int | None = None
    """Its place in the chain (the first run is 1)."""

    @property
    def duration_ms(self) -> int:
        return self.end_ms - self.start_ms


@dataclass(frozen=True)
class Mark:
    """A trigger that did not run, at the time it was decided."""

    run_id: str
    decision: str
    at_ms: int
    trigger_id: str
    trigger_kind: str
    holder_run_id: str | None = None
    holder_fence: int | None = None
    became_run_id: str | None = None
    """The run this trigger later became (queued: its own run; coalesced: the follow-up;
    a duplicate: the run of the same trigger), when the log shows it."""
    requested_by: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Marker:
    """A lease changing hands without its holder's release."""

    kind: str
    """``takeover`` (an expired or replaced lease taken) or ``force_release``."""
    at_ms: int
    run_id: str
    """The run that lost the lease."""
    by: str | None = None
    """The run that took it over, or who released it."""
    fence: int | None = None


@dataclass(frozen=True)
class Lane:
    """One job's runs, decisions and markers; runs that overlap get their own rows."""

    job: str
    bars: tuple[Bar, ...]
    marks: tuple[Mark, ...]
    markers: tuple[Marker, ...]
    rows: int
    outside: int = 0
    """Records read that lie wholly outside the window (not drawn)."""
    ahead: int = 0
    """Of those, records that claim to start after now, past the window: their worker's
    clock runs ahead."""
    unreadable: tuple[str, ...] = ()
    truncated: bool = False

    @property
    def status_counts(self) -> Counter[str]:
        return Counter(b.status for b in self.bars)

    @property
    def decision_counts(self) -> Counter[str]:
        return Counter(m.decision for m in self.marks)

    def items_total(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for bar in self.bars:
            total.update(bar.items)
        return total


@dataclass(frozen=True)
class Timeline:
    """Every job's lane on one shared time axis."""

    window: Window
    lanes: tuple[Lane, ...]
    generated_at_ms: int
    title: str = "jobguard timeline"

    def as_dict(self) -> dict[str, Any]:
        """JSON-serializable form (``--output json``)."""
        def clean(obj: Any) -> dict[str, Any]:
            return {k: v for k, v in obj.__dict__.items() if v not in (None, (), {}, [])}

        return {
            "title": self.title, "from_ms": self.window.from_ms, "to_ms": self.window.to_ms,
            "generated_at_ms": self.generated_at_ms,
            "jobs": [{"job": lane.job, "rows": lane.rows, "outside": lane.outside,
                      "ahead": lane.ahead,
                      "unreadable": list(lane.unreadable), "truncated": lane.truncated,
                      "runs": [clean(b) for b in lane.bars],
                      "decisions": [clean(m) for m in lane.marks],
                      "markers": [clean(m) for m in lane.markers]} for lane in self.lanes],
        }


# -- building ----------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    """A record's number, or None when it is not one (hostile or damaged records)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return str(value)


def _key(value: Any) -> str:
    """An id as text: a damaged record may hold a number or a list where an id goes."""
    return value if isinstance(value, str) else "" if value is None else str(value)


def _items(record: RunRecord) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in ITEM_COUNTS:
        value = _int(record.extra.get(key))
        if value is not None and value >= 0:
            counts[key] = value
    return counts


def _follow_up_of(job: str, holder_run_id: str) -> str:
    from ..triggers import follow_up_trigger_id

    return follow_up_trigger_id(job, holder_run_id)


def _assign_rows(spans: Sequence[tuple[int, int]], min_gap_ms: int) -> list[int]:
    """Greedy interval partitioning (spans sorted by start): the first row whose last
    span ended ``min_gap_ms`` or more before this one starts (0: at or before it)."""
    row_ends: list[int] = []
    rows: list[int] = []
    for start, end in spans:
        for index, last_end in enumerate(row_ends):
            if last_end + min_gap_ms <= start:
                row_ends[index] = end
                rows.append(index)
                break
        else:
            row_ends.append(end)
            rows.append(len(row_ends) - 1)
    return rows


def _chain_head(run_id: str, continues: dict[str, str | None],
                continued_by: dict[str, str]) -> str:
    """The first run of ``run_id``'s chain, as far as the log shows it. A link whose
    record is missing is stepped over through the record naming it as the one after
    it (``continued_by``): one chain keeps one label."""
    seen = {run_id}
    while (before := continues.get(run_id)) and before not in seen:
        if before not in continues:
            before = continued_by.get(before)
            if before is None or before in seen:
                break
        seen.add(before)
        run_id = before
    return continues.get(run_id) or run_id


def build_lane(job: str, records: Iterable[RunRecord], window: Window, *, now_ms: int,
               unreadable: Sequence[str] = (), truncated: bool = False,
               min_gap_ms: int | None = None) -> Lane:
    """One job's lane from its run records (any order; one record per run id, the last
    one read winning, as the table keeps one row per run id).

    ``now_ms`` ends the bars of runs still going. Runs that overlap in time (a takeover,
    a replaced run) get rows of their own; ``min_gap_ms`` (default 0) also separates
    runs that nearly touch.
    """
    by_run: dict[str, RunRecord] = {}
    for record in records:
        by_run[_key(record.run_id)] = record
    ran = [r for r in by_run.values() if r.decision is Decision.RAN]
    decided = [r for r in by_run.values() if r.decision is not Decision.RAN]
    by_trigger: dict[str, str] = {}
    for record in sorted(ran, key=lambda r: r.started_at_ms):
        by_trigger.setdefault(_key(record.trigger_id), _key(record.run_id))

    takeovers: dict[str, int] = {}  # the displaced run -> when it was taken over
    for record in ran:
        displaced = _text(record.extra.get("displaced_run_id"))
        start = _int(record.started_at_ms)
        if displaced and start is not None:
            takeovers[displaced] = min(start, takeovers.get(displaced, start))

    outside = ahead = 0
    spans: list[tuple[RunRecord, str, int, int, bool, int | None, tuple[str, ...]]] = []
    for record in ran:
        start = _int(record.started_at_ms) or 0
        end = _int(record.ended_at_ms)
        status = record.status.value
        notes: list[str] = []
        open_end = False
        held_to = takeovers.get(_key(record.run_id))
        if record.status is RunStatus.RUNNING:
            expires = _int(record.extra.get("lease_expires_at_ms"))
            if expires is not None and expires < now_ms:
                beat = _int(record.extra.get("heartbeat_at_ms"))
                status, end, held_to = "expired", max(start, beat or start), expires
                notes.append(f"its last heartbeat {iso(end)}; its lease expired {iso(expires)}"
                             " and nothing has taken it over: its worker stopped (it can "
                             "commit nothing past its lease; the next trigger takes it over)")
            else:
                end, open_end = max(start, min(now_ms, window.to_ms)), True
        elif end is None:
            end, open_end = start, True
            notes.append("its end was not recorded")
        elif end < start:
            notes.append(f"ended {start - end} ms before it started (clock skew): drawn "
                         "as an instant")
            end = start
        if start > now_ms:
            notes.append(f"starts {duration(start - now_ms)} after now: its worker's clock "
                         "runs ahead (or this machine's behind)")
        if not window.overlaps(start, end):
            outside += 1
            if start > max(window.to_ms, now_ms):
                ahead += 1
            continue
        if start < window.from_ms:
            notes.append("started before the range")
        if end > window.to_ms and not open_end:
            notes.append("ended after the range")
        spans.append((record, status, start, end, open_end,
                      held_to if held_to is not None and held_to > end else None,
                      tuple(notes)))
    spans.sort(key=lambda s: (s[2], s[3], _key(s[0].run_id)))
    gap = 0 if min_gap_ms is None else min_gap_ms
    rows = _assign_rows([(max(s, window.from_ms), e) for _, _, s, e, _, _, _ in spans], gap)

    continues = {_key(r.run_id): _text(r.extra.get("continues")) for r in ran}
    continued_by = {by: _key(r.run_id) for r in ran
                    if (by := _text(r.extra.get("continued_by")))}
    continued = {c for c in continues.values() if c}  # a set: one lookup per run, not a scan
    heads = {run_id: _chain_head(run_id, continues, continued_by) for run_id in continues
             if continues[run_id] or run_id in continued
             or _text(by_run[run_id].extra.get("continued_by"))}
    bars = []
    markers: list[Marker] = []
    for (record, status, start, end, open_end, held_to, said), row in zip(spans, rows,
                                                                         strict=True):
        displaced = _text(record.extra.get("displaced_run_id"))
        run_id = _key(record.run_id)
        bars.append(Bar(
            run_id=_key(record.run_id), status=status, start_ms=start,
            end_ms=end, row=row, fence=_int(record.fence), trigger_id=_key(record.trigger_id),
            trigger_kind=_key(record.trigger_kind), owner=_text(record.owner),
            requested_by=_text(record.requested_by), error=_text(record.error),
            detail=_text(record.detail), items=_items(record), displaced_run_id=displaced,
            held_to_ms=held_to, open_end=open_end, notes=said,
            continues=continues.get(run_id), chain=heads.get(run_id),
            link=_int(record.extra.get("link")) if run_id in heads else None))
        if displaced and window.from_ms <= start <= window.to_ms:
            markers.append(Marker("takeover", start, displaced, by=_key(record.run_id),
                                  fence=_int(record.fence)))
        if record.status is RunStatus.RELEASED_BY_OPERATOR and not open_end \
                and window.from_ms <= end <= window.to_ms:
            markers.append(Marker("force_release", end, _key(record.run_id),
                                  by=_text(record.detail), fence=_int(record.fence)))

    marks = []
    for record in decided:
        at = _int(record.started_at_ms) or 0
        if not window.from_ms <= at <= window.to_ms:
            outside += 1
            if at > max(window.to_ms, now_ms):
                ahead += 1
            continue
        became: str | None = None
        holder = _text(record.holder_run_id)
        if record.decision is Decision.QUEUED or record.decision is Decision.DUPLICATE:
            became = by_trigger.get(_key(record.trigger_id))
        elif record.decision is Decision.COALESCED and holder:
            became = by_trigger.get(_follow_up_of(job, holder))
        marks.append(Mark(
            run_id=_key(record.run_id), decision=record.decision.value, at_ms=at,
            trigger_id=_key(record.trigger_id), trigger_kind=_key(record.trigger_kind),
            holder_run_id=holder, holder_fence=_int(record.holder_fence),
            became_run_id=became if became != _key(record.run_id) else None,
            requested_by=_text(record.requested_by), detail=_text(record.detail)))
    marks.sort(key=lambda m: (m.at_ms, m.run_id))  # ids are text here (see _key)
    markers.sort(key=lambda m: (m.at_ms, m.kind))
    return Lane(job=job, bars=tuple(bars), marks=tuple(marks), markers=tuple(markers),
                rows=max(rows, default=-1) + 1, outside=outside, ahead=ahead,
                unreadable=tuple(unreadable), truncated=truncated)


def build_timeline(logs: Sequence[tuple[str, Iterable[RunRecord]]], window: Window, *,
                   now_ms: int, title: str = "jobguard timeline") -> Timeline:
    """A timeline of several jobs from ``(job, records)`` pairs, on one axis."""
    lanes = tuple(build_lane(job, records, window, now_ms=now_ms) for job, records in logs)
    return Timeline(window=window, lanes=lanes, generated_at_ms=now_ms, title=title)


FOCUS_AT_MOST = 1 / 3
"""A timeline opens on where its records are when that (with its margin) is at most this
share of the range asked: ``--since 1h`` over runs of a few seconds in its last minutes
would otherwise draw every bar as a sliver at the right edge."""
FOCUS_MARGIN = 1 / 8
"""The margin either side of the records, as a share of their span ..."""
FOCUS_MARGIN_MIN_MS = 2_000
"""... and at least this (a lone run or mark is shown with time either side)."""


def focus(timeline: Timeline) -> Window | None:
    """The part of the range where the records are (every bar, with the lease it held on
    after its end, every mark and marker), with a margin, when it is at most
    :data:`FOCUS_AT_MOST` of the range; None when the whole range is the view (the
    records fill enough of it, or there are none).

    Example:
        >>> from jobguard.records import Decision, RunRecord, RunStatus
        >>> run = RunRecord(job="j", run_id="r", trigger_id="j@t", trigger_kind="tick",
        ...                 policy="SKIP", decision=Decision.RAN, status=RunStatus.SUCCEEDED,
        ...                 started_at_ms=3_540_000, ended_at_ms=3_556_000, fence=1)
        >>> focus(build_timeline([("j", [run])], Window(0, 3_600_000), now_ms=3_600_000))
        Window(from_ms=3538000, to_ms=3558000)
    """
    w = timeline.window
    times = [t for lane in timeline.lanes for bar in lane.bars
             for t in (bar.start_ms, bar.end_ms, bar.held_to_ms) if t is not None]
    times += [m.at_ms for lane in timeline.lanes for m in lane.marks]
    times += [m.at_ms for lane in timeline.lanes for m in lane.markers]
    if not times:
        return None
    first, last = max(min(times), w.from_ms), min(max(times), w.to_ms)
    margin = max(int((last - first) * FOCUS_MARGIN), FOCUS_MARGIN_MIN_MS)
    start = (first - margin) // 1000 * 1000  # whole seconds, outwards
    end = -(-(max(last, first + 1) + margin) // 1000) * 1000
    shown = Window(max(w.from_ms, start), min(w.to_ms, end))
    return shown if shown.span_ms <= w.span_ms * FOCUS_AT_MOST else None
