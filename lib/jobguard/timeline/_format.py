"""Words and times shared by the page and the terminal view (private): the statuses and
decisions a timeline knows, in the legend's order, what each is called and means, and how
a time, a span and a count are written."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .._safe_text import safe_text

if TYPE_CHECKING:
    from .model import Bar, Lane, Mark

RUN_STATUSES = ("succeeded", "incomplete", "failed", "lease_lost", "abandoned",
                "expired", "released_by_operator", "running")
"""Statuses a bar can have, in the legend's order. ``expired`` is no record's status: a
run holding the lease past its expiry, not taken over yet (its worker stopped)."""
DECISIONS = ("skipped", "queued", "coalesced", "duplicate", "stale", "paused", "dropped",
             "rejected", "superseded")
"""Decisions a mark can have, in the legend's order."""
STATUS_LABEL = {
    "succeeded": "succeeded",
    "incomplete": "incomplete",
    "failed": "failed",
    "lease_lost": "lease lost",
    "abandoned": "abandoned",
    "expired": "lease expired",
    "released_by_operator": "released by operator",
    "running": "running",
}
STATUS_MEANING = {
    "succeeded": "the run finished and released its lease",
    "incomplete": "finished, but some items failed or stay uncertain",
    "failed": "the handler raised; its trigger is retried",
    "lease_lost": "its lease was taken (expired or replaced): it wrote nothing after",
    "abandoned": "its worker vanished; the next run took over the expired lease",
    "expired": "holds a lease that expired with no heartbeat: its worker stopped, and it "
               "can commit nothing more; the next trigger takes the lease over",
    "released_by_operator": "an operator force-released its lease",
    "running": "holds the lease now",
}
DECISION_MEANING = {
    "skipped": "SKIP: the lease was held",
    "queued": "QUEUE: waits, runs after the active run",
    "coalesced": "COALESCE: folded into one follow-up run",
    "duplicate": "another delivery of a trigger already decided",
    "stale": "delivered too long after its scheduled time",
    "paused": "the job was paused",
    "dropped": "QUEUE: too many pending, dropped",
    "rejected": "a trigger-queue message that was no trigger: recorded, deleted, not run",
    "superseded": "a continuation whose chain had ended (replaced, released, taken over)",
}
MARKER_LABEL = {"takeover": "takeover", "force_release": "force release"}


def clean(value: object, limit: int = 300) -> str:
    """A record's text made safe to show on a page or a terminal, one line, cut at
    ``limit`` characters: :func:`jobguard._safe_text.safe_text` (control, bidirectional
    and other invisible characters shown as their escapes, ``\\x1b``, ``\\u202e``)."""
    return safe_text(value, limit)


def _at(ms: int) -> datetime | None:
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return None  # a record's time past year 9999 (or before year 1): no date


def iso(ms: int) -> str:
    """Epoch ms as ISO 8601 UTC with its ``Z`` (milliseconds when present)."""
    at = _at(ms)
    if at is None:
        return f"(epoch ms {ms}: no date)"
    if ms % 1000:
        return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def clock(ms: int, *, seconds: bool = True, millis: bool = False) -> str:
    at = _at(ms)
    if at is None:
        return f"(epoch ms {ms})"
    if millis:
        return at.strftime("%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return at.strftime("%H:%M:%SZ" if seconds else "%H:%MZ")


def day(ms: int) -> str:
    at = _at(ms)
    return at.strftime("%Y-%m-%d") if at is not None else "?"


def one_day(from_ms: int, to_ms: int) -> str | None:
    """The UTC day a whole range lies in (its times can go without a date), or None."""
    first = day(from_ms)
    return first if first == day(max(from_ms, to_ms - 1)) and first != "?" else None


def when(ms: int, *, day_of: str | None) -> str:
    """An event's time, ``09:00:00.000Z``, after its date (``2027-01-18 09:00:00.000Z``)
    unless it falls on ``day_of``: a week of 09:00 runs is seven dates, not one time."""
    at = _at(ms)
    if at is None:
        return clock(ms)
    text = f"{at.hour:02d}:{at.minute:02d}:{at.second:02d}.{ms % 1000:03d}Z"
    on = f"{at.year:04d}-{at.month:02d}-{at.day:02d}"
    return text if on == day_of else f"{on} {text}"


def span(from_ms: int, to_ms: int) -> str:
    """``11:58:10Z-11:59:40Z (1 min 30 s)``: a part of a day, its dates when it is not
    one day's, milliseconds only when it has them."""
    one = one_day(from_ms, to_ms)
    return (f"{when(from_ms, day_of=one).replace('.000Z', 'Z')}-"
            f"{when(to_ms, day_of=one).replace('.000Z', 'Z')} ({duration(to_ms - from_ms)})")


def duration(ms: int) -> str:
    """``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 10 min``, ``7 d 00 h``."""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{ms // 60_000} min {ms % 60_000 // 1000:02d} s"
    if ms < 172_800_000:
        return f"{ms // 3_600_000} h {ms % 3_600_000 // 60_000:02d} min"
    return f"{ms // 86_400_000} d {ms % 86_400_000 // 3_600_000:02d} h"


def items_text(items: dict[str, int]) -> str:
    """``12 done, 1 failed, 0 uncertain`` (and what else the record counted)."""
    if not items:
        return ""
    parts = [f"{items.get('completed', 0)} done", f"{items.get('failed', 0)} failed",
             f"{items.get('uncertain', 0)} uncertain"]
    for key, word in (("reconciled", "reconciled"), ("already_done", "already done")):
        if items.get(key):
            parts.append(f"{items[key]} {word}")
    text = ", ".join(parts)
    return f"{text} (of {items['selected']} selected)" if "selected" in items else text


TICK_STEPS_MS = (1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
                 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000,
                 43_200_000, 86_400_000, 172_800_000, 604_800_000)


def ticks(from_ms: int, to_ms: int, *, most: int = 10) -> tuple[int, list[int]]:
    """A round step giving at most ``most`` ticks over the range, and the ticks."""
    span = max(1, to_ms - from_ms)
    step = next((s for s in TICK_STEPS_MS if span / s <= most - 1), TICK_STEPS_MS[-1])
    first = -(-from_ms // step) * step
    return step, list(range(first, to_ms + 1, step))


def summary(lane: Lane, sep: str = " · ") -> str:
    """One line: runs by status, triggers not run by decision, markers, items."""
    runs = lane.status_counts
    decisions = lane.decision_counts
    parts = [f"{len(lane.bars)} run{'s' if len(lane.bars) != 1 else ''}"]
    if runs:
        parts[0] += " (" + ", ".join(f"{runs[s]} {STATUS_LABEL.get(s, s)}"
                                     for s in RUN_STATUSES if runs[s]) + ")"
    parts.append(f"{len(lane.marks)} not run"
                 + (" (" + ", ".join(f"{decisions[d]} {d}" for d in DECISIONS if decisions[d])
                    + ")" if decisions else ""))
    takeovers = sum(1 for m in lane.markers if m.kind == "takeover")
    releases = len(lane.markers) - takeovers
    if takeovers:
        parts.append(f"{takeovers} takeover{'s' if takeovers != 1 else ''}")
    if releases:
        parts.append(f"{releases} force release{'s' if releases != 1 else ''}")
    items = lane.items_total()
    if items:
        parts.append("items " + items_text(items))
    return sep.join(parts)


def ahead_note(n: int) -> str:
    """What records claiming a start after now, past the range, mean."""
    return (f"{n} of them claim to start after now: their worker's clock runs ahead, or "
            "this machine's behind (a range whose --to is past the time they claim draws "
            "them)")


def run_facts(bar: Bar, *, limit: int = 200) -> list[str]:
    """What a run's record says beyond its times (hover text, the terminal's lines)."""
    facts = []
    if bar.items:
        facts.append("items: " + items_text(bar.items))
    if bar.displaced_run_id:
        facts.append(f"took over the lease of run {clean(bar.displaced_run_id, 60)}")
    if bar.requested_by:
        facts.append(f"requested by {clean(bar.requested_by, 100)}")
    error, detail = error_and_detail(bar)
    if error:
        facts.append(f"error: {clean(error, limit)}")
    if detail:
        facts.append(clean(detail, limit))
    return facts + list(bar.notes)


def error_and_detail(bar: Bar) -> tuple[str | None, str | None]:
    """A run's error and its detail, each said once: a detail the error already says
    is left out (a lease-lost run's error, ``LeaseLostError: ... lost its lease:
    <reason>``, ends with the reason its detail also holds)."""
    if bar.error and bar.detail and bar.detail.strip() in bar.error:
        return bar.error, None
    return bar.error, bar.detail


def mark_facts(mark: Mark, *, limit: int = 200) -> list[str]:
    """Where a trigger that did not run went: its holder, the run it became, who asked."""
    facts = []
    if mark.holder_run_id:
        facts.append(f"deferred to run {clean(mark.holder_run_id, 60)}"
                     + (f" (fence {mark.holder_fence})" if mark.holder_fence is not None
                        else ""))
    if mark.became_run_id:
        facts.append(f"ran as run {clean(mark.became_run_id, 60)}")
    if mark.requested_by:
        facts.append(f"requested by {clean(mark.requested_by, 100)}")
    if mark.detail:
        facts.append(clean(mark.detail, limit))
    return facts
