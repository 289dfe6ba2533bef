"""The timeline as one self-contained HTML page: inline SVG and CSS, no script, no
network (a Content-Security-Policy in the page forbids both), readable from a file.

Per job a lane: each run a bar from start to end, coloured by status and labelled in
words where it fits (fence and run id on hover, and a link to its row in the table);
runs that overlap (a takeover) on rows of their own; every trigger that did not run a
mark at its time, linked to the run it deferred to; takeovers and force releases as
markers. A range much longer than its records opens on where they are (it says so; the
chart of the whole range is a click away). Under the chart, per job, the same events as
a table (text, not only colour).
Everything a record says is escaped: a run id, an error or a ``requested_by`` is text,
never markup; element ids are counters, never record values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from html import escape

from .._safe_text import safe_lines
from . import _format as f
from ._layout import (
    BAR_H,
    MARK_STEP,
    MERGE_PX,
    PAD,
    PLOT_W,
    WIDTH,
    Geometry,
    MarkSpot,
    Shape,
    dense,
    place_marks,
    shapes,
)
from .model import (
    DECISIONS,
    RUN_STATUSES,
    Bar,
    Lane,
    Mark,
    Marker,
    Timeline,
    focus,
)

__all__ = ["DrillSection", "render_drills_page", "render_page", "render_svg"]

AXIS_H = 40
HEAD_H = 28
ROW_H = 22
MARK_ROW_H = 22
LANE_GAP = 14
MAX_TABLE_ROWS = 300
"""Rows of a job's table in the page (the chart shows every record; ``--output text``
lists them all)."""
BLEED_PX = 0.2
"""A dense lane's shapes are drawn this much wider (pixel-snapped, they would leave
seams of background between neighbours)."""
MAX_LINKS = 1500
"""Above this many marks in a lane, no connector lines (they would be a grey wash)."""

CSS = """
:root{--ok:#1b7f4b;--inc:#d98c00;--fail:#c7361a;--lost:#8e3fa8;--aband:#6b6b6b;
--rel:#1f5fa8;--run:#2b8fd6;--exp:#a8742c;--ink:#1d2329;--muted:#5d6873;--line:#d5dbe1;--bg:#fff;
--panel:#f5f7f9}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",
sans-serif;color:var(--ink);background:var(--bg)}
main{max-width:1260px;margin:0 auto;padding:18px 22px 40px;overflow-wrap:anywhere}
h1{font-size:21px;margin:0 0 2px}h2{font-size:17px;margin:26px 0 6px}
h3{font-size:15px;margin:18px 0 4px}
.sub{color:var(--muted);margin:0 0 12px}
.zoom{margin:4px 0;color:var(--muted)}details.whole{margin:4px 0 10px}
code,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:8px 0 12px;padding:8px 12px;
background:var(--panel);border-radius:6px;font-size:13px}
.legend span{display:inline-flex;align-items:center;gap:6px}
.legend svg{flex:none}
.legend b{font-weight:600;margin-right:2px}
figure,div.chart{margin:0;border:1px solid var(--line);border-radius:6px;padding:4px 0;
overflow-x:auto}
figure svg,div.chart svg{display:block;width:100%;min-width:900px;height:auto}
.summary{margin:4px 0}
.note{color:#8a4b00}
.tw{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:12.5px;margin:6px 0;
overflow-wrap:normal}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid var(--line);
vertical-align:top}
th{background:var(--panel);font-weight:600;position:sticky;top:0;white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td{white-space:nowrap}td:last-child{white-space:normal;min-width:14em}
table.events td.at{white-space:normal;min-width:8.6em}
table.events td.id{white-space:normal;overflow-wrap:anywhere;min-width:10em}
table.events td.wrap{white-space:normal;min-width:6em}table.events td.items{min-width:10.5em}
table.events td.said{white-space:normal;overflow-wrap:anywhere;min-width:12em}
details.more{margin:0}details.more summary{color:inherit}
details.more[open] summary{color:var(--muted)}
tr:target{background:#fff3c4}
.tag{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;color:#fff;
font-weight:600;white-space:nowrap}
.t-succeeded,.t-held{background:var(--ok)}.t-incomplete{background:var(--inc)}
.t-failed,.t-FAILED{background:var(--fail)}.t-lease_lost{background:var(--lost)}
.t-abandoned{background:var(--aband)}.t-expired{background:var(--exp)}
.t-released_by_operator{background:var(--rel)}
.t-running{background:var(--run)}.t-decision{background:#e4e8ec;color:var(--ink)}
.t-marker{background:#333}
details{margin:4px 0}summary{cursor:pointer;color:var(--muted)}
ul.checks{list-style:none;padding:0;margin:4px 0}
.two{display:grid;grid-template-columns:minmax(0,2fr) minmax(0,3fr);gap:0 28px}
.two ul{margin:4px 0;padding-left:18px}.two ul.checks{padding-left:0}
section{margin-top:10px}
ul.checks li{margin:2px 0}
.ok{color:var(--ok);font-weight:700}.bad{color:var(--fail);font-weight:700}
.side{display:inline-block;min-width:88px;color:var(--muted)}
.drills td,.drills th{text-align:right}.drills td:first-child,.drills th:first-child{
text-align:left}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
svg .ax{font-size:11.5px;fill:var(--muted)}
svg .day{font-size:11.5px;fill:var(--ink);font-weight:600}
svg .grid{stroke:var(--line);stroke-width:1}
svg .job{font-size:14px;font-weight:700;fill:var(--ink)}
svg .sum{font-size:12px;fill:var(--muted)}
svg .lbl{font-size:11px;fill:#fff;pointer-events:none;font-weight:600}
svg .lbl.dark{fill:var(--ink)}
svg .b{stroke:#fff;stroke-width:.75}svg .dense .b{stroke:none;shape-rendering:crispEdges}
svg a:hover .b,svg .b:target{stroke:#111}
svg .s-succeeded{fill:var(--ok)}svg .s-incomplete{fill:var(--inc)}
svg .s-failed{fill:var(--fail)}svg .s-lease_lost{fill:url(#p-lost)}
svg .s-abandoned{fill:url(#p-aband)}svg .s-expired{fill:url(#p-exp)}
svg .s-released_by_operator{fill:var(--rel)}
svg .s-running{fill:url(#p-run)}svg .s-other{fill:#999}
svg .lane{fill:#fafbfc}
svg .link{stroke:#9aa5b1;stroke-width:1;stroke-dasharray:2 2}
svg .mk{stroke:#222;stroke-width:1.4;stroke-dasharray:4 3}
svg .became{fill:none;stroke:#5b8fc7;stroke-width:1;stroke-dasharray:3 2}
svg .chain{fill:none;stroke:#2f6f3e;stroke-width:2}
svg .ghost{stroke:#8d8d8d;stroke-width:3;stroke-dasharray:1 4;stroke-linecap:round}
svg .mkt{font-size:10.5px;font-weight:700}
svg .rowlbl{font-size:10.5px;fill:var(--muted)}
svg a:hover use{opacity:.7}
"""

_DEFS = """<defs>
<pattern id="p-aband" width="7" height="7" patternUnits="userSpaceOnUse" \
patternTransform="rotate(45)"><rect width="7" height="7" fill="#8d8d8d"/>\
<rect width="3" height="7" fill="#5e5e5e"/></pattern>
<pattern id="p-lost" width="8" height="8" patternUnits="userSpaceOnUse" \
patternTransform="rotate(-45)"><rect width="8" height="8" fill="#8e3fa8"/>\
<rect width="2" height="8" fill="#b57ccb"/></pattern>
<pattern id="p-exp" width="6" height="6" patternUnits="userSpaceOnUse">\
<rect width="6" height="6" fill="#a8742c"/>\
<rect width="2" height="6" fill="#d9b07a"/></pattern>
<pattern id="p-run" width="10" height="10" patternUnits="userSpaceOnUse" \
patternTransform="rotate(45)"><rect width="10" height="10" fill="#2b8fd6"/>\
<rect width="4" height="10" fill="#5fb0ea"/></pattern>
<symbol id="m-skipped" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<circle r="5" fill="#fff" stroke="#444" stroke-width="1.6"/>\
<path d="M-3.3 3.3 3.3-3.3" stroke="#444" stroke-width="1.6"/></symbol>
<symbol id="m-queued" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<path d="M-4-5 5 0-4 5z" fill="#1f5fa8"/></symbol>
<symbol id="m-coalesced" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<path d="M0-5.5 5.5 0 0 5.5-5.5 0z" fill="#0f8a8a"/></symbol>
<symbol id="m-duplicate" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<circle r="4.5" fill="#7a8691"/><circle r="1.6" fill="#fff"/></symbol>
<symbol id="m-stale" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<rect x="-4.5" y="-4.5" width="9" height="9" fill="#9a6a2f"/></symbol>
<symbol id="m-paused" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<rect x="-4.5" y="-5" width="3.2" height="10" fill="#222"/>\
<rect x="1.3" y="-5" width="3.2" height="10" fill="#222"/></symbol>
<symbol id="m-dropped" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<path d="M-4.5-4.5 4.5 4.5M4.5-4.5-4.5 4.5" stroke="#c7361a" stroke-width="2.4"/></symbol>
<symbol id="m-rejected" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<path d="M0-5.5 5.5 4.5-5.5 4.5z" fill="#fff" stroke="#c7361a" stroke-width="1.6"/>\
<path d="M0-1.5V1.8" stroke="#c7361a" stroke-width="1.6"/></symbol>
<symbol id="m-superseded" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<circle r="4.5" fill="#fff" stroke="#2f6f3e" stroke-width="1.6"/>\
<path d="M-3 0H3" stroke="#2f6f3e" stroke-width="1.6"/></symbol>
<symbol id="m-other" viewBox="-6 -6 12 12" width="12" height="12" overflow="visible">\
<circle r="4" fill="#bbb"/></symbol>
</defs>"""


def _e(value: object, limit: int = 300) -> str:
    """A value shown on the page: one line (:func:`jobguard.timeline._format.clean`),
    HTML-escaped."""
    return escape(f.clean(value, limit), quote=True)


def _lines(title: str, limit: int) -> str:
    """Hover text composed here, one fact a line: its own line breaks kept (each record
    value in it was made one line by ``f.clean`` as it was put in), anything else
    escaped, cut at ``limit`` characters, HTML-escaped."""
    if len(title) > limit:
        title = title[: limit - 1] + "\u2026"
    return escape(safe_lines(title), quote=True)


class _Ids:
    """Element ids: counters, never record values (a run id could be anything)."""

    def __init__(self) -> None:
        self.bar: dict[tuple[int, str], int] = {}
        self.row: dict[tuple[int, str], int] = {}
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


TAG_H = 14
"""The strip above a lane's bars where takeover and force-release tags sit."""


def _lane_height(lane: Lane, spots: Sequence[MarkSpot]) -> int:
    levels = max((spot.level for spot in spots), default=0)
    return (HEAD_H + (TAG_H if lane.markers else 0) + max(1, lane.rows) * ROW_H
            + MARK_ROW_H + levels * MARK_STEP)


def _chart_summary(lane: Lane) -> str:
    """The lane's heading in the chart, short enough for its width (the full one is
    under the chart)."""
    runs = lane.status_counts
    bad = sum(n for s, n in runs.items() if s not in ("succeeded", "running"))
    parts = [f"{len(lane.bars)} run{'s' if len(lane.bars) != 1 else ''}"
             + (f" ({bad} not succeeded)" if bad else ""), f"{len(lane.marks)} not run"]
    takeovers = sum(1 for m in lane.markers if m.kind == "takeover")
    if takeovers:
        parts.append(f"{takeovers} takeover{'s' if takeovers != 1 else ''}")
    if len(lane.markers) - takeovers:
        parts.append(f"{len(lane.markers) - takeovers} force release"
                     + ("s" if len(lane.markers) - takeovers != 1 else ""))
    items = lane.items_total()
    if items:
        parts.append(f"items {items.get('completed', 0)} done, {items.get('failed', 0)} "
                     f"failed, {items.get('uncertain', 0)} uncertain")
    return " · ".join(parts)


def _bar_title(bar: Bar) -> str:
    lines = [f"run {f.clean(bar.run_id, 60)}"
             + (f" · fence {bar.fence}" if bar.fence is not None else ""),
             f"{f.clean(f.STATUS_LABEL.get(bar.status, bar.status), 40)}: "
             f"{f.iso(bar.start_ms)} → "
             + ("still running" if bar.status == "running" else
                "end unknown" if bar.open_end else f"{f.iso(bar.end_ms)}")
             + f" ({f.duration(bar.duration_ms)})",
             f"trigger {f.clean(bar.trigger_id, 120)}"
             + (f" ({f.clean(bar.trigger_kind, 40)})" if bar.trigger_kind else "")]
    if bar.chain is not None:
        lines.append(f"link {bar.link or '?'} of the chain of run {f.clean(bar.chain, 60)}"
                     + (f", continues {f.clean(bar.continues, 60)}" if bar.continues else ""))
    return "\n".join(lines + f.run_facts(bar))


def _mark_title(mark: Mark) -> str:
    lines = [f"{f.clean(mark.decision, 40)} at {f.iso(mark.at_ms)}: "
             f"{f.clean(f.DECISION_MEANING.get(mark.decision, mark.decision), 200)}",
             f"trigger {f.clean(mark.trigger_id, 120)}", f"record {f.clean(mark.run_id, 60)}"]
    return "\n".join(lines + f.mark_facts(mark))


def _group_title(shape: Shape) -> str:
    group = shape.bars
    fences = [b.fence for b in group if b.fence is not None]
    items: dict[str, int] = {}
    for bar in group:
        for key, value in bar.items.items():
            items[key] = items.get(key, 0) + value
    status = f.clean(f.STATUS_LABEL.get(group[0].status, group[0].status), 40)
    return "\n".join(x for x in (
        f"{len(group)} runs {status}"
        + (f" of the {shape.share_of} runs of this pixel" if shape.share_of else "")
        + f", {f.iso(group[0].start_ms)} → {f.iso(shape.end_ms)}",
        f"fences {min(fences)} to {max(fences)}" if fences else "",
        f"items: {f.items_text(items)}" if items else "",
        "(closer than a pixel here: narrow the range with --from/--to to see each)") if x)


def _marks_title(group: Sequence[Mark]) -> str:
    holders = {m.holder_run_id for m in group if m.holder_run_id}
    counts: dict[str, int] = {}
    for mark in group:
        counts[mark.decision] = counts.get(mark.decision, 0) + 1
    what = (f"{len(group)} {group[0].decision}" if len(counts) == 1 else
            f"{len(group)} triggers not run (" + ", ".join(f"{n} {d}" for d, n in
                                                           counts.items()) + ")")
    meaning = f": {f.DECISION_MEANING.get(group[0].decision, '')}" if len(counts) == 1 else ""
    return (f"{what}, {f.iso(group[0].at_ms)} → {f.iso(group[-1].at_ms)}{meaning}\n"
            f"deferred to {len(holders)} run(s)\n(narrow the range to see each)")


def _marker_title(marker: Marker) -> str:
    if marker.kind == "takeover":
        return (f"takeover at {f.iso(marker.at_ms)}: run {f.clean(marker.by, 60)} took the "
                f"lease of run {f.clean(marker.run_id, 60)}"
                + (f" with fence {marker.fence}" if marker.fence else ""))
    return (f"force release at {f.iso(marker.at_ms)}: run {f.clean(marker.run_id, 60)}'s "
            f"lease (fence {marker.fence}) released; "
            f"{f.clean(marker.by or 'by an operator', 160)}")


def _axis(g: Geometry, height: int, out: list[str]) -> None:
    step, ticks = f.ticks(g.from_ms, g.from_ms + g.span_ms)
    seconds = step < 60_000 or any(t % 60_000 for t in ticks)
    last_day = None
    for tick in ticks:
        x = g.x(tick)
        out.append(f'<line class="grid" x1="{x}" y1="{AXIS_H - 6}" x2="{x}" y2="{height}"/>')
        anchor = "start" if x < PAD + 30 else "end" if x > WIDTH - PAD - 30 else "middle"
        out.append(f'<text class="ax" x="{x}" y="{AXIS_H - 10}" text-anchor="{anchor}">'
                   f'{f.clock(tick, seconds=seconds)}</text>')
        if f.day(tick) != last_day:
            last_day = f.day(tick)
            out.append(f'<text class="day" x="{x}" y="14" text-anchor="{anchor}">'
                       f'{last_day}</text>')
    if not ticks:
        out.append(f'<text class="day" x="{PAD}" y="14">{f.day(g.from_ms)}</text>')


def render_svg(timeline: Timeline, *, ids: _Ids | None = None, label: str = "",
               defs: bool = True, again: bool = False) -> str:
    """The chart: an inline SVG whose geometry follows the records (``data-*``
    attributes name what each shape stands for). ``defs=False`` when the page already
    carries the patterns and mark shapes (once per page); ``again=True`` for a second
    view of the last chart's runs (its bars link to the same rows of the table)."""
    ids = ids or _Ids()
    ids.bar = {}  # this chart's runs: links stay inside it and its tables
    if not again:
        ids.row = {}
    w = timeline.window
    g = Geometry(w.from_ms, w.span_ms)
    spots = [place_marks(lane, g) for lane in timeline.lanes]
    heights = [_lane_height(lane, s) for lane, s in zip(timeline.lanes, spots, strict=True)]
    height = AXIS_H + sum(h + LANE_GAP for h in heights) + 4
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
           f'width="{WIDTH}" height="{height}" role="img" aria-label="'
           f'{_e(label or timeline.title)}: {len(timeline.lanes)} job(s), '
           f'{f.iso(w.from_ms)} to {f.iso(w.to_ms)}" data-from-ms="{w.from_ms}" '
           f'data-to-ms="{w.to_ms}" data-plot-x="{PAD}" data-plot-w="{PLOT_W}">',
           _DEFS if defs else ""]
    _axis(g, height - 4, out)
    y = AXIS_H
    for index, (lane, lane_spots, lane_h) in enumerate(zip(timeline.lanes, spots, heights,
                                                           strict=True)):
        out.extend(_lane_svg(lane, index, y, g, ids, lane_spots))
        y += lane_h + LANE_GAP
    if not timeline.lanes:
        out.append(f'<text class="sum" x="{PAD}" y="{AXIS_H + 16}">no jobs</text>')
    out.append("</svg>")
    return "".join(out)


def _shape_svg(shape: Shape, n: int, y: float, row_id: int) -> str:
    """One run's bar (with its link and label), a stretch of runs of one status, or a
    mixed pixel column's share of one status."""
    bar = shape.bars[0]
    status = bar.status if bar.status in RUN_STATUSES else "other"
    top = round(y + shape.top, 2)
    if len(shape.bars) > 1:  # (a dense lane's shapes overlap by BLEED_PX: no seams)
        return (f'<rect id="r{n}" class="b s-{status}" x="{shape.x0}" y="{top}" '
                f'width="{round(max(MERGE_PX, shape.x1 - shape.x0) + BLEED_PX, 1)}" '
                f'height="{shape.height}" data-kind="runs" data-count="{len(shape.bars)}" '
                f'data-status="{_e(bar.status, 40)}"><title>'
                f"{_lines(_group_title(shape), 600)}</title></rect>")
    x0 = shape.x0
    if shape.share_of:
        width = round(max(MERGE_PX, shape.x1 - x0) + BLEED_PX, 1)
        title = (_bar_title(bar) + f"\n(one of the {shape.share_of} runs of this pixel: "
                 "narrow the range to see each)")
        corner = ""
    else:
        width = max(2.0 if bar.status == "succeeded" else 3.0, round(shape.x1 - x0, 1))
        title, corner = _bar_title(bar), ' rx="2"'
    out = (f'<a href="#t{row_id}"><rect id="r{n}" class="b s-{status}" x="{x0}" y="{top}" '
           f'width="{width}" height="{shape.height}"{corner} data-kind="run" '
           f'data-status="{_e(bar.status, 40)}" data-start-ms="{bar.start_ms}" '
           f'data-end-ms="{bar.end_ms}"><title>{_lines(title, 1500)}</title></rect></a>')
    text = "" if shape.share_of else _bar_label(bar, width)
    if text:
        dark = " dark" if bar.status == "incomplete" else ""
        out += f'<text class="lbl{dark}" x="{x0 + 5}" y="{y + 12}">{_e(text)}</text>'
    return out


def _lane_svg(lane: Lane, index: int, top: int, g: Geometry, ids: _Ids,
              spots: Sequence[MarkSpot]) -> list[str]:
    out = [f'<g class="lanegrp" data-job="{_e(lane.job, 200)}" data-lane="{index}">']
    rows = max(1, lane.rows)
    body_top = top + HEAD_H + (TAG_H if lane.markers else 0)
    stack = max((spot.level for spot in spots), default=0) * MARK_STEP
    mark_y = body_top + rows * ROW_H + stack + MARK_ROW_H // 2
    out.append(f'<rect class="lane" x="{PAD}" y="{body_top}" width="{PLOT_W}" '
               f'height="{rows * ROW_H + MARK_ROW_H + stack}"/>')
    out.append(f'<text class="job" x="{PAD}" y="{top + 18}">{_e(lane.job, 60)}'
               f'<tspan class="sum" dx="12">{_e(_chart_summary(lane), 300)}</tspan></text>')
    if not lane.bars and not lane.marks:
        out.append(f'<text class="sum" x="{PAD + 8}" y="{body_top + 15}">no runs and no '
                   "decisions in this range</text>")
    drawn: dict[str, tuple[Bar, float]] = {}  # run id -> its bar and the bar's top
    out.append('<g class="dense">' if dense(lane) else "<g>")
    # success first, everything else on top: a failure is never hidden under a success
    for shape in sorted(shapes(lane, g), key=lambda sh: sh.status != "succeeded"):
        n = ids.next()
        y = body_top + shape.bars[0].row * ROW_H + (ROW_H - BAR_H) // 2
        for member in shape.bars:
            ids.bar[(index, member.run_id)] = n
            ids.row.setdefault((index, member.run_id), ids.next())
            drawn[member.run_id] = (member, y)
        out.append(_shape_svg(shape, n, y, ids.row[(index, shape.bars[0].run_id)]))
    out.append("</g>")
    links = len(lane.marks) <= MAX_LINKS
    for spot in spots:
        mark = spot.marks[0]
        x, y = spot.x, mark_y - spot.level * MARK_STEP
        decisions = {m.decision for m in spot.marks}
        kind = mark.decision if mark.decision in DECISIONS and len(decisions) == 1 \
            else "other"
        if len(spot.marks) > 1:
            said = mark.decision if len(decisions) == 1 else "several"
            out.append(f'<use href="#m-{kind}" x="{round(x - 6, 1)}" y="{y - 6}" '
                       f'data-kind="decisions" data-count="{len(spot.marks)}" '
                       f'data-decision="{_e(said, 40)}"><title>'
                       f"{_e(_marks_title(spot.marks), 600)}</title></use>")
            continue
        target = ids.bar.get((index, mark.holder_run_id or "")) or ids.bar.get(
            (index, mark.became_run_id or ""))
        if links and mark.holder_run_id in drawn:
            holder_y = drawn[mark.holder_run_id][1] + BAR_H / 2
            out.append(f'<line class="link" x1="{x}" y1="{holder_y}" x2="{x}" '
                       f'y2="{y - 6}"/>')
        became = drawn.get(mark.became_run_id or "")
        if links and became is not None and mark.decision in ("queued", "coalesced"):
            # the run it became, later: straight from the mark to that run's start (each
            # its own slope: two marks' lines never run along one another)
            bx, by = g.x(became[0].start_ms), became[1] + BAR_H / 2
            if bx > x + 8:
                out.append(f'<path class="became" d="M{x + 6} {y}L{bx} {by}"/>')
        use = (f'<use href="#m-{kind}" x="{round(x - 6, 1)}" y="{y - 6}" '
               f'data-kind="decision" data-decision="{_e(mark.decision, 40)}" '
               f'data-at-ms="{mark.at_ms}"><title>{_lines(_mark_title(mark), 1200)}</title>'
               "</use>")
        out.append(f'<a href="#r{target}">{use}</a>' if target else use)
    for bar in lane.bars:  # a chain's links joined, end to start: one chain
        before = drawn.get(bar.continues or "")
        if bar.run_id in drawn and before is not None:
            x0, y0 = g.x(before[0].end_ms), before[1] + BAR_H / 2
            x1, y1 = g.x(bar.start_ms), drawn[bar.run_id][1] + BAR_H / 2
            out.append(f'<path class="chain" d="M{x0} {y0}L{x1} {y1}" data-kind="chain" '
                       f'data-chain="{_e(bar.chain or "", 80)}"><title>chain of run '
                       f'{_e(bar.chain or "", 80)}: link {bar.link or "?"} continues '
                       f'{_e(bar.continues or "", 80)}</title></path>')
    for bar in lane.bars:  # a lease held with no heartbeat: to its takeover, or expiry
        if bar.held_to_ms is not None and bar.run_id in drawn:
            x_end, y_mid = g.x(bar.end_ms), drawn[bar.run_id][1] + BAR_H / 2
            x_held = g.x(bar.held_to_ms)
            if x_held - x_end > 3:
                until = (f"until it expired {f.iso(bar.held_to_ms)}; nothing has taken it "
                         "over" if bar.status == "expired" else
                         "until it expired and was taken over")
                out.append(f'<line class="ghost" x1="{x_end}" y1="{y_mid}" x2="{x_held}" '
                           f'y2="{y_mid}" data-kind="held-unworked"><title>run '
                           f'{_e(bar.run_id, 80)}: its lease, still held after its last '
                           f"heartbeat, {until}</title></line>")
    tagged_to = -1000.0  # a marker's tag only where it does not run into the last one
    for marker in lane.markers:
        x = g.x(marker.at_ms)
        tag = x - tagged_to > 110
        if tag:
            tagged_to = x
        out.append(_marker_svg(marker, index, body_top, rows, g, ids, tags=tag))
    out.append("</g>")
    return out


def _bar_label(bar: Bar, width: float) -> str:
    words = f.STATUS_LABEL.get(bar.status, bar.status)
    options = [words, {"released_by_operator": "released", "lease_lost": "lost",
                       "incomplete": "partial", "abandoned": "abandon.",
                       "expired": "expired"}.get(bar.status, "")]
    if bar.fence is not None:
        options.insert(0, f"{words} · fence {bar.fence}")
        if bar.items:
            options.insert(0, f"{words} · fence {bar.fence} · "
                              f"{bar.items.get('completed', 0)} done"
                           + (f", {bar.items['failed']} failed" if bar.items.get("failed")
                              else "")
                           + (f", {bar.items['uncertain']} uncertain"
                              if bar.items.get("uncertain") else ""))
    for option in options:
        if option and len(option) * 6.4 + 10 <= width:
            return option
    return ""


def _marker_svg(marker: Marker, index: int, body_top: int, rows: int, g: Geometry,
                ids: _Ids, *, tags: bool) -> str:
    x = g.x(marker.at_ms)
    bottom = body_top + rows * ROW_H
    colour = "#8e3fa8" if marker.kind == "takeover" else "#1f5fa8"
    word = f.MARKER_LABEL.get(marker.kind, marker.kind)
    tag = ""
    if tags:
        right = x > WIDTH - PAD - 90
        tx = x - 4 if right else x + 4
        tag = (f'<text class="mkt" x="{tx}" y="{body_top - 3}" fill="{colour}" '
               f'text-anchor="{"end" if right else "start"}">▼ {word}</text>')
    target = ids.bar.get((index, marker.run_id))
    inner = (f'<g data-kind="marker" data-marker="{_e(marker.kind, 40)}" '
             f'data-at-ms="{marker.at_ms}"><title>{_lines(_marker_title(marker), 600)}</title>'
             f'<line class="mk" x1="{x}" y1="{body_top - 2}" x2="{x}" y2="{bottom}" '
             f'stroke="{colour}"/>{tag}</g>')
    return f'<a href="#r{target}">{inner}</a>' if target else inner


# -- the page ------------------------------------------------------------------------


def _legend() -> str:
    def swatch(cls: str) -> str:
        return (f'<svg width="26" height="14" aria-hidden="true">'
                f'<rect class="{cls}" width="26" height="14" rx="2"/></svg>')

    def mark(kind: str) -> str:
        return (f'<svg width="14" height="14" viewBox="-7 -7 14 14" aria-hidden="true">'
                f'<use href="#m-{kind}" x="-6" y="-6"/></svg>')

    statuses = "".join(
        f'<span title="{escape(f.STATUS_MEANING[s])}">{swatch("s-" + s)}'
        f'{escape(f.STATUS_LABEL[s])}</span>' for s in RUN_STATUSES)
    decisions = "".join(
        f'<span title="{escape(f.DECISION_MEANING[d])}">{mark(d)}{escape(d)}</span>'
        for d in DECISIONS)
    links = ('<span><svg width="26" height="14" aria-hidden="true"><path d="M2 12L24 2" '
             'fill="none" stroke="#5b8fc7" stroke-dasharray="3 2"/></svg>ran later as</span>')
    markers = ('<span><svg width="14" height="14" aria-hidden="true"><line x1="7" y1="0" '
               'x2="7" y2="14" stroke="#8e3fa8" stroke-width="2" stroke-dasharray="4 3"/>'
               '</svg>takeover</span><span><svg width="26" height="14" aria-hidden="true">'
               '<line x1="2" y1="7" x2="24" y2="7" stroke="#8d8d8d" stroke-width="3" '
               'stroke-dasharray="1 4" stroke-linecap="round"/></svg>lease held, no heartbeat'
               '</span><span><svg width="14" height="14" aria-hidden="true">'
               '<line x1="7" y1="0" x2="7" y2="14" stroke="#1f5fa8" stroke-width="2" '
               'stroke-dasharray="4 3"/></svg>force release</span>')
    defs = (f'<svg width="0" height="0" style="position:absolute" aria-hidden="true">'
            f'{_DEFS}</svg>')
    return (f'{defs}<div class="legend" role="note" aria-label="legend">'
            f'<span><b>runs</b></span>{statuses}<span><b>not run</b></span>{decisions}{links}'
            f'<span><b>lease</b></span>{markers}</div>')


NOTE_SHOWN = 120
"""Characters of a table row's error or detail shown at once; a longer one shows its
start, and the whole text (up to :data:`NOTE_KEPT`) opens under it."""
NOTE_KEPT = 4000


def _note(text: str) -> str:
    """A row's error or detail: short, as it is; long, its start as a summary that opens
    to the whole (a row stays a few lines high, and nothing is cut off unseen)."""
    if len(text) <= NOTE_SHOWN:
        return _e(text, NOTE_SHOWN)
    return (f'<details class="more"><summary>{_e(text, NOTE_SHOWN)}</summary>'
            f"{_e(text, NOTE_KEPT)}</details>")


def _run_ref(run_id: str, fence: int | None) -> str:
    """A run as a person names it in a table: its fence, else its id's last letters."""
    if fence is not None:
        return f"the run of fence {fence}"
    return f"run …{_e(run_id[-8:], 8)}"


def _table(lane: Lane, index: int, ids: _Ids, day_of: str | None) -> str:
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
        return (f'<a href="#t{target}" title="{_e(run_id, 80)}">{text}</a>' if target
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
                f'<td><span class="tag t-{_e(bar.status, 40)}">'
                f'{_e(f.STATUS_LABEL.get(bar.status, bar.status), 40)}</span></td>'
                f'<td class="num">{f.duration(bar.duration_ms)}</td>'
                f'<td class="mono">{_e(bar.run_id, 80)}</td>'
                f'<td class="num">{"" if bar.fence is None else bar.fence}</td>'
                f'<td class="mono id">{_e(bar.trigger_id, 120)}</td>'
                f'<td class="wrap items">{_e(f.items_text(bar.items))}</td>'
                f'<td class="wrap">{link}</td><td class="said">{_note(note)}</td></tr>')
        elif isinstance(event, Mark):
            mark = event
            links = [linked("deferred to", mark.holder_run_id, mark.holder_fence)
                     if mark.holder_run_id else "",
                     linked("ran as", mark.became_run_id, fences.get(mark.became_run_id))
                     if mark.became_run_id else ""]
            rows.append(
                f'<tr><td class="mono at">{f.when(mark.at_ms, day_of=day_of)}</td><td></td>'
                f'<td><span class="tag t-decision">{_e(mark.decision, 40)}</span></td>'
                f'<td></td><td class="mono">{_e(mark.run_id, 80)}</td><td></td>'
                f'<td class="mono id">{_e(mark.trigger_id, 120)}</td><td></td>'
                f'<td class="wrap">{"; ".join(x for x in links if x)}</td>'
                f'<td class="said">{_note(mark.detail or "")}</td></tr>')
        else:
            marker = event
            rows.append(
                f'<tr><td class="mono at">{f.when(marker.at_ms, day_of=day_of)}</td><td></td>'
                f'<td><span class="tag t-marker">{f.MARKER_LABEL.get(marker.kind, "")}'
                f'</span></td><td></td><td class="mono">{_e(marker.run_id, 80)}</td>'
                f'<td class="num">{marker.fence or ""}</td><td></td><td></td>'
                f'<td class="said" colspan="2">{_note(_marker_title(marker))}</td></tr>')
    head = ("<tr><th>start (UTC)</th><th>end</th><th>status / decision</th><th>duration</th>"
            "<th>run id</th><th>fence</th><th>trigger</th><th>items</th><th>linked</th>"
            "<th>error / detail</th></tr>")
    more = (f'<p class="note">{hidden} earlier rows not listed here (the chart shows every '
            "one; <code>jobguard timeline --output text</code> lists them all).</p>"
            if hidden else "")
    return (f"<details{' open' if len(events) <= 60 else ''}><summary>{len(events)} events "
            f"of {_e(lane.job, 120)} as a table</summary>{more}<div class=\"tw\">"
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
    return "".join(f'<p class="note">{_e(n, 1200)}</p>' for n in notes)


def _head(title: str) -> str:
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; img-src data:\">"
            f"<title>{_e(title, 200)}</title><style>{CSS}</style></head><body><main>")


def _range_line(timeline: Timeline, *, generated: bool = True) -> str:
    w = timeline.window
    return (f"{f.iso(w.from_ms)} to {f.iso(w.to_ms)} ({f.duration(w.span_ms)}), all times "
            "UTC" + (f" · generated {f.iso(timeline.generated_at_ms)}" if generated else ""))


def _jobs_body(timeline: Timeline, ids: _Ids, *, heading: str = "h2") -> str:
    parts = []
    day_of = f.one_day(timeline.window.from_ms, timeline.window.to_ms)
    for index, lane in enumerate(timeline.lanes):
        parts.append(f"<{heading}>{_e(lane.job, 120)}</{heading}>"
                     f'<p class="summary">{_e(f.summary(lane), 600)}</p>{_notes(lane)}'
                     f"{_table(lane, index, ids, day_of)}")
    return "".join(parts)


def _charts(timeline: Timeline, ids: _Ids, *, label: str = "", zoom: bool = True) -> str:
    """The chart, opened on where the records are when they fill little of the range
    (:func:`jobguard.timeline.model.focus`): the page says so, and the whole range is a
    click away (no script: a ``<details>`` holding the chart of the whole range)."""
    shown = focus(timeline) if zoom else None
    if shown is None:
        return f"<figure>{render_svg(timeline, ids=ids, label=label, defs=False)}</figure>"
    zoomed = replace(timeline, window=shown)
    svg = render_svg(zoomed, ids=ids, label=label, defs=False)
    whole = render_svg(timeline, ids=ids, label=label, defs=False, again=True)
    asked = f.span(timeline.window.from_ms, timeline.window.to_ms)
    return (f'<p class="zoom" data-from-ms="{shown.from_ms}" data-to-ms="{shown.to_ms}">'
            f"showing {f.span(shown.from_ms, shown.to_ms)}, where the runs are; the range "
            f"asked was {asked}</p><figure>{svg}</figure>"
            f'<details class="whole"><summary>show the whole range asked, {asked}</summary>'
            f'<div class="chart">{whole}</div></details>')


def render_page(timeline: Timeline, *, zoom: bool = True) -> str:
    """The whole page for ``jobguard timeline --html``: its chart on where the runs are
    when they fill little of the range (``zoom=False``: always the whole range)."""
    ids = _Ids()
    charts = _charts(timeline, ids, zoom=zoom)
    jobs = ", ".join(lane.job for lane in timeline.lanes)
    return (_head(f"{timeline.title}: {jobs}") + f"<h1>{_e(timeline.title, 200)}</h1>"
            f'<p class="sub">{_e(jobs, 400)} · {_range_line(timeline)}. Hover a bar or a '
            "mark for its run id and fence; click a bar for its row in the table, a mark for "
            "the run it deferred to.</p>"
            + _legend() + charts + _jobs_body(timeline, ids)
            + "</main></body></html>\n")


@dataclass(frozen=True)
class DrillSection:
    """One drill on the drills page: what it injected, what it checked, its timeline."""

    name: str
    title: str
    held: bool
    seconds: float
    injected: Sequence[str]
    checks: Sequence[tuple[str, str, bool]]
    """(side, what, ok) for each check."""
    timeline: Timeline
    error: str | None = None
    tallies: Sequence[dict[str, object]] = ()


_TALLY_COLUMNS = (("triggers", "triggers"), ("runs", "runs"), ("skipped", "skipped"),
                  ("queued", "queued"), ("coalesced", "coalesced"),
                  ("duplicate", "duplicate"), ("takeovers", "takeovers"),
                  ("completed", "done"), ("failed", "failed"), ("uncertain", "uncertain"),
                  ("reconciled", "reconciled"), ("duplicates_at_destination", "dest dup"))


def render_drills_page(sections: Iterable[DrillSection], *, generated_at_ms: int,
                       title: str = "jobguard drills") -> str:
    """``jobguard drill --html``: every drill's checks and its timeline on one page."""
    sections = list(sections)
    held = sum(1 for s in sections if s.held)
    ids = _Ids()
    overview = ['<table class="drills"><tr><th>drill / job</th>'
                + "".join(f"<th>{h}</th>" for _, h in _TALLY_COLUMNS) + "</tr>"]
    for n, section in enumerate(sections):
        verdict = "held" if section.held else "FAILED"
        overview.append(f'<tr><td colspan="{len(_TALLY_COLUMNS) + 1}"><a href="#d{n}">'
                        f"<b>{_e(section.name, 120)}</b></a> "
                        f'<span class="tag t-{verdict}">{verdict}</span></td></tr>')
        for tally in section.tallies:
            overview.append(f'<tr><td>&nbsp;&nbsp;{_e(tally.get("job", ""), 120)}</td>'
                            + "".join(f'<td class="num">{_e(tally.get(k, ""), 20)}</td>'
                                      for k, _ in _TALLY_COLUMNS) + "</tr>")
    overview.append("</table>")
    body = []
    for n, section in enumerate(sections):
        verdict = "held" if section.held else "FAILED"
        checks = "".join(
            f'<li><span class="{"ok" if ok else "bad"}">{"ok" if ok else "BAD"}</span> '
            f'<span class="side">{_e(side, 40)}</span>{_e(what, 600)}</li>'
            for side, what, ok in section.checks)
        injected = "".join(f"<li>{_e(line, 600)}</li>" for line in section.injected)
        error = (f'<p class="bad">error: {_e(section.error, 1000)}</p>' if section.error
                 else "")
        charts = _charts(section.timeline, ids, label=f"drill {section.name}")
        body.append(
            f'<section id="d{n}" data-drill="{_e(section.name, 120)}">'
            f'<h2>{_e(section.name, 120)} '
            f'<span class="tag t-{verdict}">{verdict}</span></h2>'
            f'<p class="sub">{_e(section.title, 300)} · {section.seconds:.1f} s · '
            f"{_range_line(section.timeline, generated=False)}</p>{error}"
            f"{charts}"
            f'<div class="two"><div><h3>injected</h3><ul>{injected}</ul></div>'
            f'<div><h3>checked</h3><ul class="checks">{checks}</ul></div></div>'
            f"<details><summary>the run log of this drill, as a table</summary>"
            f"{_jobs_body(section.timeline, ids, heading='h3')}</details></section>")
    verdict = (f"{held} of {len(sections)} drills held" if sections else "no drills ran")
    return (_head(title) + f"<h1>{_e(title, 200)}</h1>"
            f'<p class="sub">{verdict} · generated {f.iso(generated_at_ms)} · all times UTC. '
            "Each drill injects a failure into the deployed stack and checks the run log, "
            "the item ledger and the destination; its timeline is what the run log "
            "recorded.</p>" + _legend() + "".join(body)
            + "<h2>every drill, counted</h2><p class=\"sub\">the table <code>make demo</code> "
            "prints: per drill, a line per job it touched</p>" + "".join(overview)
            + "</main></body></html>\n")
