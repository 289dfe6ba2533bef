"""The timeline's chart: an inline SVG, per job a lane (private to the pages, but for
:func:`render_svg`).

Each run a bar from start to end, coloured by status and labelled in words where it fits
(fence and run id on hover, and a link to its row in the table); runs that overlap (a
takeover) on rows of their own; every trigger that did not run a mark at its time, linked
to the run it deferred to and to the run it became; a chain's links joined; a lease held
with no heartbeat drawn to its expiry; takeovers and force releases as markers. Where
things go is :mod:`._layout`'s; this module changes when what the chart draws, or what
its hover text says, does.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _format as f
from ._format import DECISIONS, RUN_STATUSES
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
from ._markup import Ids, esc, hover_lines
from ._style import DEFS
from .model import Bar, Lane, Mark, Marker, Timeline

__all__ = ["marker_title", "render_svg"]

AXIS_H = 40
HEAD_H = 28
ROW_H = 22
MARK_ROW_H = 22
LANE_GAP = 14
BLEED_PX = 0.2
"""A dense lane's shapes are drawn this much wider (pixel-snapped, they would leave
seams of background between neighbours)."""
MAX_LINKS = 1500
"""Above this many marks in a lane, no connector lines (they would be a grey wash)."""

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


def marker_title(marker: Marker) -> str:
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


def render_svg(timeline: Timeline, *, ids: Ids | None = None, label: str = "",
               defs: bool = True, again: bool = False) -> str:
    """The chart: an inline SVG whose geometry follows the records (``data-*``
    attributes name what each shape stands for). ``defs=False`` when the page already
    carries the patterns and mark shapes (once per page); ``again=True`` for a second
    view of the last chart's runs (its bars link to the same rows of the table)."""
    ids = ids or Ids()
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
           f'{esc(label or timeline.title)}: {len(timeline.lanes)} job(s), '
           f'{f.iso(w.from_ms)} to {f.iso(w.to_ms)}" data-from-ms="{w.from_ms}" '
           f'data-to-ms="{w.to_ms}" data-plot-x="{PAD}" data-plot-w="{PLOT_W}">',
           DEFS if defs else ""]
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
                f'data-status="{esc(bar.status, 40)}"><title>'
                f"{hover_lines(_group_title(shape), 600)}</title></rect>")
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
           f'data-status="{esc(bar.status, 40)}" data-start-ms="{bar.start_ms}" '
           f'data-end-ms="{bar.end_ms}"><title>{hover_lines(title, 1500)}</title></rect></a>')
    text = "" if shape.share_of else _bar_label(bar, width)
    if text:
        dark = " dark" if bar.status == "incomplete" else ""
        out += f'<text class="lbl{dark}" x="{x0 + 5}" y="{y + 12}">{esc(text)}</text>'
    return out


def _lane_svg(lane: Lane, index: int, top: int, g: Geometry, ids: Ids,
              spots: Sequence[MarkSpot]) -> list[str]:
    out = [f'<g class="lanegrp" data-job="{esc(lane.job, 200)}" data-lane="{index}">']
    rows = max(1, lane.rows)
    body_top = top + HEAD_H + (TAG_H if lane.markers else 0)
    stack = max((spot.level for spot in spots), default=0) * MARK_STEP
    mark_y = body_top + rows * ROW_H + stack + MARK_ROW_H // 2
    out.append(f'<rect class="lane" x="{PAD}" y="{body_top}" width="{PLOT_W}" '
               f'height="{rows * ROW_H + MARK_ROW_H + stack}"/>')
    out.append(f'<text class="job" x="{PAD}" y="{top + 18}">{esc(lane.job, 60)}'
               f'<tspan class="sum" dx="12">{esc(_chart_summary(lane), 300)}</tspan></text>')
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
                       f'data-decision="{esc(said, 40)}"><title>'
                       f"{esc(_marks_title(spot.marks), 600)}</title></use>")
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
               f'data-kind="decision" data-decision="{esc(mark.decision, 40)}" '
               f'data-at-ms="{mark.at_ms}"><title>{hover_lines(_mark_title(mark), 1200)}</title>'
               "</use>")
        out.append(f'<a href="#r{target}">{use}</a>' if target else use)
    for bar in lane.bars:  # a chain's links joined, end to start: one chain
        before = drawn.get(bar.continues or "")
        if bar.run_id in drawn and before is not None:
            x0, y0 = g.x(before[0].end_ms), before[1] + BAR_H / 2
            x1, y1 = g.x(bar.start_ms), drawn[bar.run_id][1] + BAR_H / 2
            out.append(f'<path class="chain" d="M{x0} {y0}L{x1} {y1}" data-kind="chain" '
                       f'data-chain="{esc(bar.chain or "", 80)}"><title>chain of run '
                       f'{esc(bar.chain or "", 80)}: link {bar.link or "?"} continues '
                       f'{esc(bar.continues or "", 80)}</title></path>')
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
                           f'{esc(bar.run_id, 80)}: its lease, still held after its last '
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
                ids: Ids, *, tags: bool) -> str:
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
    inner = (f'<g data-kind="marker" data-marker="{esc(marker.kind, 40)}" '
             f'data-at-ms="{marker.at_ms}"><title>{hover_lines(marker_title(marker), 600)}</title>'
             f'<line class="mk" x1="{x}" y1="{body_top - 2}" x2="{x}" y2="{bottom}" '
             f'stroke="{colour}"/>{tag}</g>')
    return f'<a href="#r{target}">{inner}</a>' if target else inner
