"""Under each job's chart, the same events as a table (text, not only colour), with the
notes on what was not drawn (private).

A job's latest :data:`MAX_TABLE_ROWS` events, one row each: a run with its times,
status, fence, trigger, items, the run it took over and its error; a trigger that did
not run with the run it deferred to and the run it became; a takeover or force release.
Changes when what the table lists does.
"""

from __future__ import annotations

from . import _format as f
from ._markup import Ids, esc
from .chart import marker_title
from .model import Bar, Lane, Mark, Marker, Timeline

__all__ = ["MAX_TABLE_ROWS", "NOTE_KEPT", "NOTE_SHOWN", "jobs_body"]

MAX_TABLE_ROWS = 300
"""Rows of a job's table in the page (the chart shows every record; ``--output text``
lists them all)."""

NOTE_SHOWN = 120
"""Characters of a table row's error or detail shown at once; a longer one shows its
start, and the whole text (up to :data:`NOTE_KEPT`) opens under it."""
NOTE_KEPT = 4000


def _note(text: str) -> str:
    """A row's error or detail: short, as it is; long, its start as a summary that opens
    to the whole (a row stays a few lines high, and nothing is cut off unseen)."""
    if len(text) <= NOTE_SHOWN:
        return esc(text, NOTE_SHOWN)
    return (f'<details class="more"><summary>{esc(text, NOTE_SHOWN)}</summary>'
            f"{esc(text, NOTE_KEPT)}</details>")


def _run_ref(run_id: str, fence: int | None) -> str:
    """A run as a person names it in a table: its fence, else its id's last letters."""
    if fence is not None:
        return f"the run of fence {fence}"
    return f"run …{esc(run_id[-8:], 8)}"


def _table(lane: Lane, index: int, ids: Ids, day_of: str | None) -> str:
    """A job's events as a table, its latest :data:`MAX_TABLE_ROWS` (only those are
    formatted). ``day_of``: the one day the whole range lies in (times then go without
    their date), else None."""
    events: list[tuple[int, int, Bar | Mark | Marker]] = [
        *((bar.start_ms, 0, bar) for bar in lane.bars),
        *((mark.at_ms, 1, mark) for mark in lane.marks),
        *((marker.at_ms, 2, marker) for marker in lane.markers)]
    events.sort(key=lambda e: (e[0], e[1]))
    hidden = max(0, len(events) - MAX_TABLE_ROWS)
    fences = {bar.run_id: bar.fence for bar in lane.bars}

    def linked(word: str, run_id: str, fence: int | None) -> str:
        target = ids.row.get((index, run_id))
        text = f"{word} " + _run_ref(run_id, fence)
        return (f'<a href="#t{target}" title="{esc(run_id, 80)}">{text}</a>' if target
                else text)

    rows = []
    for _, _, event in events[hidden:]:
        if isinstance(event, Bar):
            bar = event
            row_id = ids.row.get((index, bar.run_id)) or ids.next()
            link = (linked("took over", bar.displaced_run_id,
                           fences.get(bar.displaced_run_id)) if bar.displaced_run_id else "")
            note = "; ".join(x for x in (*f.error_and_detail(bar), *bar.notes) if x)
            end = "running" if bar.status == "running" else "-" if bar.open_end else \
                f.when(bar.end_ms, day_of=f.day(bar.start_ms))
            rows.append(
                f'<tr id="t{row_id}"><td class="mono at">{f.when(bar.start_ms, day_of=day_of)}'
                f'</td><td class="mono at">{end}</td>'
                f'<td><span class="tag t-{esc(bar.status, 40)}">'
                f'{esc(f.STATUS_LABEL.get(bar.status, bar.status), 40)}</span></td>'
                f'<td class="num">{f.duration(bar.duration_ms)}</td>'
                f'<td class="mono">{esc(bar.run_id, 80)}</td>'
                f'<td class="num">{"" if bar.fence is None else bar.fence}</td>'
                f'<td class="mono id">{esc(bar.trigger_id, 120)}</td>'
                f'<td class="wrap items">{esc(f.items_text(bar.items))}</td>'
                f'<td class="wrap">{link}</td><td class="said">{_note(note)}</td></tr>')
        elif isinstance(event, Mark):
            mark = event
            links = [linked("deferred to", mark.holder_run_id, mark.holder_fence)
                     if mark.holder_run_id else "",
                     linked("ran as", mark.became_run_id, fences.get(mark.became_run_id))
                     if mark.became_run_id else ""]
            rows.append(
                f'<tr><td class="mono at">{f.when(mark.at_ms, day_of=day_of)}</td><td></td>'
                f'<td><span class="tag t-decision">{esc(mark.decision, 40)}</span></td>'
                f'<td></td><td class="mono">{esc(mark.run_id, 80)}</td><td></td>'
                f'<td class="mono id">{esc(mark.trigger_id, 120)}</td><td></td>'
                f'<td class="wrap">{"; ".join(x for x in links if x)}</td>'
                f'<td class="said">{_note(mark.detail or "")}</td></tr>')
        else:
            marker = event
            rows.append(
                f'<tr><td class="mono at">{f.when(marker.at_ms, day_of=day_of)}</td><td></td>'
                f'<td><span class="tag t-marker">{f.MARKER_LABEL.get(marker.kind, "")}'
                f'</span></td><td></td><td class="mono">{esc(marker.run_id, 80)}</td>'
                f'<td class="num">{marker.fence or ""}</td><td></td><td></td>'
                f'<td class="said" colspan="2">{_note(marker_title(marker))}</td></tr>')
    head = ("<tr><th>start (UTC)</th><th>end</th><th>status / decision</th><th>duration</th>"
            "<th>run id</th><th>fence</th><th>trigger</th><th>items</th><th>linked</th>"
            "<th>error / detail</th></tr>")
    more = (f'<p class="note">{hidden} earlier rows not listed here (the chart shows every '
            "one; <code>jobguard timeline --output text</code> lists them all).</p>"
            if hidden else "")
    return (f"<details{' open' if len(events) <= 60 else ''}><summary>{len(events)} events "
            f"of {esc(lane.job, 120)} as a table</summary>{more}<div class=\"tw\">"
            '<table class="events">'
            f"{head}" + "".join(rows) + "</table></div></details>")


def _notes(lane: Lane) -> str:
    notes = []
    if lane.truncated:
        notes.append("more records than the page reads: the latest ones are not shown "
                     "(narrow the range)")
    if lane.outside:
        notes.append(f"{lane.outside} record(s) read lie outside the range (a run started "
                     "and ended before it, or a time the record got wrong): not drawn")
    if lane.ahead:
        notes.append(f.ahead_note(lane.ahead))
    if lane.unreadable:
        shown = "; ".join(f.clean(u, 160) for u in lane.unreadable[:5])
        notes.append(f"{len(lane.unreadable)} row(s) under the run log are not readable run "
                     f"records: {shown}")
    return "".join(f'<p class="note">{esc(n, 1200)}</p>' for n in notes)


def jobs_body(timeline: Timeline, ids: Ids, *, heading: str = "h2") -> str:
    parts = []
    day_of = f.one_day(timeline.window.from_ms, timeline.window.to_ms)
    for index, lane in enumerate(timeline.lanes):
        parts.append(f"<{heading}>{esc(lane.job, 120)}</{heading}>"
                     f'<p class="summary">{esc(f.summary(lane), 600)}</p>{_notes(lane)}'
                     f"{_table(lane, index, ids, day_of)}")
    return "".join(parts)
