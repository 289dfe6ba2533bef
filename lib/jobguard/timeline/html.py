"""The timeline as one self-contained HTML page: inline SVG and CSS, no script, no
network (a Content-Security-Policy in the page forbids both), readable from a file.

The page's shell: its head, title and range, the legend, the chart (:mod:`.chart`)
opened on where the records are when a range is much longer than they (it says so; the
chart of the whole range is a click away), and under it, per job, the same events as a
table (:mod:`._table`); the drills page (``jobguard drill --html``) puts every drill's
checks and timeline on one. The look is :mod:`._style`; what a record may show, escaped,
:mod:`._markup`. This module changes when what a page holds, or its order, does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from html import escape

from . import _format as f
from ._format import DECISIONS, RUN_STATUSES
from ._layout import PAD, PLOT_W, WIDTH
from ._markup import Ids, esc
from ._style import CSS, DEFS
from ._table import MAX_TABLE_ROWS, jobs_body
from .chart import render_svg
from .model import Timeline, focus

__all__ = ["MAX_TABLE_ROWS", "PAD", "PLOT_W", "WIDTH", "DrillSection", "render_drills_page",
           "render_page", "render_svg"]


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
            f'{DEFS}</svg>')
    return (f'{defs}<div class="legend" role="note" aria-label="legend">'
            f'<span><b>runs</b></span>{statuses}<span><b>not run</b></span>{decisions}{links}'
            f'<span><b>lease</b></span>{markers}</div>')


def _head(title: str) -> str:
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; img-src data:\">"
            f"<title>{esc(title, 200)}</title><style>{CSS}</style></head><body><main>")


def _range_line(timeline: Timeline, *, generated: bool = True) -> str:
    w = timeline.window
    return (f"{f.iso(w.from_ms)} to {f.iso(w.to_ms)} ({f.duration(w.span_ms)}), all times "
            "UTC" + (f" · generated {f.iso(timeline.generated_at_ms)}" if generated else ""))


def _charts(timeline: Timeline, ids: Ids, *, label: str = "", zoom: bool = True) -> str:
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
    ids = Ids()
    charts = _charts(timeline, ids, zoom=zoom)
    jobs = ", ".join(lane.job for lane in timeline.lanes)
    return (_head(f"{timeline.title}: {jobs}") + f"<h1>{esc(timeline.title, 200)}</h1>"
            f'<p class="sub">{esc(jobs, 400)} · {_range_line(timeline)}. Hover a bar or a '
            "mark for its run id and fence; click a bar for its row in the table, a mark for "
            "the run it deferred to.</p>"
            + _legend() + charts + jobs_body(timeline, ids)
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
    ids = Ids()
    overview = ['<table class="drills"><tr><th>drill / job</th>'
                + "".join(f"<th>{h}</th>" for _, h in _TALLY_COLUMNS) + "</tr>"]
    for n, section in enumerate(sections):
        verdict = "held" if section.held else "FAILED"
        overview.append(f'<tr><td colspan="{len(_TALLY_COLUMNS) + 1}"><a href="#d{n}">'
                        f"<b>{esc(section.name, 120)}</b></a> "
                        f'<span class="tag t-{verdict}">{verdict}</span></td></tr>')
        for tally in section.tallies:
            overview.append(f'<tr><td>&nbsp;&nbsp;{esc(tally.get("job", ""), 120)}</td>'
                            + "".join(f'<td class="num">{esc(tally.get(k, ""), 20)}</td>'
                                      for k, _ in _TALLY_COLUMNS) + "</tr>")
    overview.append("</table>")
    body = []
    for n, section in enumerate(sections):
        verdict = "held" if section.held else "FAILED"
        checks = "".join(
            f'<li><span class="{"ok" if ok else "bad"}">{"ok" if ok else "BAD"}</span> '
            f'<span class="side">{esc(side, 40)}</span>{esc(what, 600)}</li>'
            for side, what, ok in section.checks)
        injected = "".join(f"<li>{esc(line, 600)}</li>" for line in section.injected)
        error = (f'<p class="bad">error: {esc(section.error, 1000)}</p>' if section.error
                 else "")
        charts = _charts(section.timeline, ids, label=f"drill {section.name}")
        body.append(
            f'<section id="d{n}" data-drill="{esc(section.name, 120)}">'
            f'<h2>{esc(section.name, 120)} '
            f'<span class="tag t-{verdict}">{verdict}</span></h2>'
            f'<p class="sub">{esc(section.title, 300)} · {section.seconds:.1f} s · '
            f"{_range_line(section.timeline, generated=False)}</p>{error}"
            f"{charts}"
            f'<div class="two"><div><h3>injected</h3><ul>{injected}</ul></div>'
            f'<div><h3>checked</h3><ul class="checks">{checks}</ul></div></div>'
            f"<details><summary>the run log of this drill, as a table</summary>"
            f"{jobs_body(section.timeline, ids, heading='h3')}</details></section>")
    verdict = (f"{held} of {len(sections)} drills held" if sections else "no drills ran")
    return (_head(title) + f"<h1>{esc(title, 200)}</h1>"
            f'<p class="sub">{verdict} · generated {f.iso(generated_at_ms)} · all times UTC. '
            "Each drill injects a failure into the deployed stack and checks the run log, "
            "the item ledger and the destination; its timeline is what the run log "
            "recorded.</p>" + _legend() + "".join(body)
            + "<h2>every drill, counted</h2><p class=\"sub\">the table <code>make demo</code> "
            "prints: per drill, a line per job it touched</p>" + "".join(overview)
            + "</main></body></html>\n")
