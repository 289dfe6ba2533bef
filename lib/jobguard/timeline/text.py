"""The timeline in a terminal (``jobguard timeline --output text``): plain ASCII.

Per job a chart on a shared axis (a line per row of runs, a line of marks for the
triggers that did not run, a line of lease markers; on where the records are when they
fill little of the range, as the page does, and saying so), then every event in time
order, one line each. Record text is cleaned of control characters: a run id or an error can
never move the cursor or recolour the terminal.
"""

from __future__ import annotations

from . import _format as f
from .model import Lane, Timeline, focus

__all__ = ["BAR_CHARS", "MARK_CHARS", "fit", "render_text"]

BAR_CHARS = {"succeeded": "=", "incomplete": "~", "failed": "x", "lease_lost": "!",
             "abandoned": "?", "expired": "e", "released_by_operator": "R", "running": ">"}
MARK_CHARS = {"skipped": "s", "queued": "q", "coalesced": "c", "duplicate": "d",
              "stale": "t", "paused": "p", "dropped": "D", "rejected": "r",
              "superseded": "u"}
MARKER_CHARS = {"takeover": "T", "force_release": "F"}
_SEVERITY = "=>~Re?x!"
"""When two runs share a cell, the one later in this list is drawn (a failure is never
hidden behind a success)."""
LABEL_W = 12


def _col(ms: int, lane_from: int, span: int, width: int) -> int:
    return min(width - 1, max(0, int((ms - lane_from) / span * width)))


def _chart(lane: Lane, from_ms: int, span: int, width: int) -> list[str]:
    rows = [[" "] * width for _ in range(max(1, lane.rows))]
    for bar in lane.bars:
        char = BAR_CHARS.get(bar.status, "#")
        a = _col(bar.start_ms, from_ms, span, width)
        b = _col(bar.end_ms, from_ms, span, width)
        for c in range(a, b + 1):
            cell = rows[bar.row][c]
            if cell == " " or _SEVERITY.find(char) > _SEVERITY.find(cell):
                rows[bar.row][c] = char
    for held in lane.bars:  # a dead worker's lease, held until taken over or expired
        if held.held_to_ms is not None:
            for c in range(_col(held.end_ms, from_ms, span, width) + 1,
                           _col(held.held_to_ms, from_ms, span, width)):
                if rows[held.row][c] == " ":
                    rows[held.row][c] = "."
    marks = [" "] * width
    for mark in lane.marks:
        c = _col(mark.at_ms, from_ms, span, width)
        char = MARK_CHARS.get(mark.decision, "*")
        marks[c] = char if marks[c] in (" ", char) else "*"
    markers = [" "] * width
    for marker in lane.markers:
        c = _col(marker.at_ms, from_ms, span, width)
        char = MARKER_CHARS.get(marker.kind, "*")
        markers[c] = char if markers[c] in (" ", char) else "*"
    lines = [f"{'runs' if i == 0 else '':<{LABEL_W}}|{''.join(r)}|" for i, r in enumerate(rows)]
    lines.append(f"{'not run':<{LABEL_W}}|{''.join(marks)}|")
    if lane.markers:
        lines.append(f"{'lease':<{LABEL_W}}|{''.join(markers)}|")
    return lines


def _axis(from_ms: int, to_ms: int, width: int) -> list[str]:
    """The labels and tick marks above a chart. Over more than one day, the first tick
    of each day says its date (``01-16T00:00Z``): a week is not one label seven times."""
    step, ticks = f.ticks(from_ms, to_ms, most=max(2, width // 12))
    seconds = step < 60_000 or any(t % 60_000 for t in ticks)
    days = f.one_day(from_ms, to_ms) is None
    line = [" "] * (width + 2)
    marks = [" "] * (width + 2)
    taken, last_day = -1, None
    for tick in ticks:
        c = _col(tick, from_ms, to_ms - from_ms, width) + 1
        label = f.clock(tick, seconds=seconds)
        if days and f.day(tick) != last_day:
            label = f.day(tick)[5:] + "T" + label
        if c <= taken or c + len(label) > width + 2:
            continue
        last_day = f.day(tick)
        marks[c] = "+"
        line[c:c + len(label)] = label
        taken = c + len(label)
    return [" " * LABEL_W + "".join(line).rstrip(), " " * LABEL_W + "".join(marks).rstrip()]


def _events(lane: Lane, day_of: str | None) -> list[tuple[int, str]]:
    """Each event as one text, in time order (wrapped to the width by the caller)."""
    out: list[tuple[int, str]] = []
    for bar in lane.bars:
        end = "still running" if bar.status == "running" else (
            "end unknown" if bar.open_end else f.when(bar.end_ms, day_of=f.day(bar.start_ms)))
        fence = "-" if bar.fence is None else str(bar.fence)
        extra = [f"trigger {f.clean(bar.trigger_id, 120)}", *f.run_facts(bar, limit=160)]
        out.append((bar.start_ms, (
            f"{f.when(bar.start_ms, day_of=day_of)}  run      "
            f"{f.clean(f.STATUS_LABEL.get(bar.status, bar.status), 40):<13} "
            f"{f.clean(bar.run_id, 40):<26}  fence {fence:<3} -> {end} "
            f"({f.duration(bar.duration_ms)}); " + "; ".join(extra))))
    for mark in lane.marks:
        facts = "; ".join(f.mark_facts(mark, limit=160))
        out.append((mark.at_ms, (
            f"{f.when(mark.at_ms, day_of=day_of)}  not run  {mark.decision:<13} "
            f"{f.clean(mark.run_id, 40):<26}  trigger {f.clean(mark.trigger_id, 120)}"
            + (f"; {facts}" if facts else ""))))
    for marker in lane.markers:
        word = f.MARKER_LABEL.get(marker.kind, marker.kind)
        who = (f"by run {f.clean(marker.by or '?', 40)}" if marker.kind == "takeover"
               else f.clean(marker.by or "by an operator", 160))
        out.append((marker.at_ms, (
            f"{f.when(marker.at_ms, day_of=day_of)}  lease    {word:<13} "
            f"{f.clean(marker.run_id, 40):<26}  fence {marker.fence or '-'}  {who}")))
    out.sort(key=lambda e: e[0])
    return out


def fit(text: str, width: int, indent: int = 4) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken at spaces, the lines after
    the first indented by ``indent``; a word longer than a line (a run id, a key) is cut
    across lines. Spaces inside a line are kept (the columns of an event's first line).

    Example:
        >>> fit("a run that failed: TimeoutError", 16)
        ['a run that', '    failed:', '    TimeoutError']
    """
    text = text.replace("\n", " ")
    if len(text) <= width:
        return [text]
    pad = " " * indent
    lines: list[str] = []
    prefix, line = "", ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if len(prefix) + len(candidate) <= width:
            line = candidate
            continue
        if line.strip():
            lines.append(prefix + line.rstrip())
            prefix = pad
        line = ""
        if not word:
            continue  # the spaces where a line breaks
        while len(prefix) + len(word) > width:
            room = width - len(prefix)
            lines.append(prefix + word[:room])
            prefix, word = pad, word[room:]
        line = word
    if line.strip():
        lines.append(prefix + line.rstrip())
    return lines


def render_text(timeline: Timeline, *, width: int = 100, zoom: bool = True) -> str:
    """The terminal timeline, no line wider than ``width`` columns (at least 60); its
    chart on where the runs are when they fill little of the range (``zoom=False``: always
    the whole range)."""
    width = max(60, width)
    plot = width - LABEL_W - 2
    w = timeline.window
    day_of = f.one_day(w.from_ms, w.to_ms)
    lines = fit(f"{f.clean(timeline.title, 80)}: {f.iso(w.from_ms)} to {f.iso(w.to_ms)} "
                 f"({f.duration(w.span_ms)}), times UTC", width)
    if day_of is None:
        lines.append(f"from {f.day(w.from_ms)} to {f.day(max(w.from_ms, w.to_ms - 1))}")
    shown = (focus(timeline) if zoom else None) or w  # the runs' part, if they fill little
    if shown != w:
        lines += fit(f"chart: {f.span(shown.from_ms, shown.to_ms)}, where the runs are; the "
                     f"range asked was {f.span(w.from_ms, w.to_ms)} (--whole-range draws "
                     "it all)", width, 7)
    axis = _axis(shown.from_ms, shown.to_ms, plot)
    for lane in timeline.lanes:
        lines += ["", *fit(f"{f.clean(lane.job, 80)}: {f.summary(lane, '; ')}", width),
                  *axis, *_chart(lane, shown.from_ms, shown.span_ms, plot)]
        notes = []
        if lane.truncated:
            notes.append("note: more records than were read; narrow the range")
        if lane.outside:
            notes.append(f"note: {lane.outside} record(s) outside the range, not drawn")
        if lane.ahead:
            notes.append(f"note: {f.ahead_note(lane.ahead)}")
        notes += [f"note: unreadable run record {f.clean(bad, 200)}"
                  for bad in lane.unreadable]
        lines += [line for note in notes for line in fit(note, width, 6)]
    legend = ["runs:    " + "  ".join(f"{c} {f.STATUS_LABEL[s]}" for s, c in BAR_CHARS.items()),
              "not run: " + "  ".join(f"{c} {d}" for d, c in MARK_CHARS.items())
              + "  (* several in one column)",
              "lease:   T takeover  F force release  . a lease held with no heartbeat, "
              "until taken over or expired"]
    lines += ["", *(line for text in legend for line in fit(text, width, 9))]
    for lane in timeline.lanes:
        events = _events(lane, day_of)
        lines += ["", f"{f.clean(lane.job, 80)}: {len(events)} events"]
        lines += [line for _, text in events for line in fit(text, width)] \
            or ["  (none in this range)"]
    return "\n".join(lines)
