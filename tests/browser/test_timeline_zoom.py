"""A range asked for much longer than its runs (``--since 1h``, runs of seconds in its
last two minutes) opens on where the runs are, says so, and shows the whole range a
click away (issue 31, item 5.2): laid out by headless Chromium at 1,280 px.

Skipped, saying why, where Chromium is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

from typing import Any

from jobguard.ids import new_run_id
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import Window, build_timeline, render_page
from jobguard.timeline.html import PLOT_W, WIDTH

from . import NEEDS_CHROMIUM
from .chromium import Browser

pytestmark = NEEDS_CHROMIUM

NOON = 1_800_014_400_000  # 2027-01-15T12:00:00Z
HOUR = Window(NOON - 3_600_000, NOON)


def _run(start_s: int, end_s: int, status: str, fence: int) -> RunRecord:
    """A run ``start_s``..``end_s`` seconds from noon (before it: negative)."""
    return RunRecord(job="crm-sync", run_id=new_run_id(NOON + start_s * 1000),
                     trigger_id=f"crm-sync@{start_s}", trigger_kind="tick", policy="SKIP",
                     decision=Decision.RAN, status=RunStatus(status),
                     started_at_ms=NOON + start_s * 1000, ended_at_ms=NOON + end_s * 1000,
                     fence=fence)


RUNS = [_run(-110, -95, "succeeded", 1), _run(-80, -62, "failed", 2),
        _run(-50, -41, "succeeded", 3), _run(-30, -20, "lease_lost", 4)]

_LAYOUT = """(() => {
  const chart = (svg) => { const box = svg.getBoundingClientRect();
    return {w: box.width, h: box.height, from: +svg.dataset.fromMs, to: +svg.dataset.toMs,
      bars: [...svg.querySelectorAll('[data-kind=run]')].map(
        e => e.getBoundingClientRect().width)}; };
  const whole = document.querySelector('details.whole');
  const out = {text: document.body.innerText, shown: chart(document.querySelector('figure svg')),
    whole: whole && {h: whole.getBoundingClientRect().height,
                     summary: whole.querySelector('summary').getBoundingClientRect().height}};
  if (whole) { whole.open = true; out.opened = {...chart(whole.querySelector('svg')),
                                                 details: whole.getBoundingClientRect().height}; }
  return out;
})()"""


def _laid_out(records: list[RunRecord], tmp_path: Any) -> dict[str, Any]:
    page = tmp_path / "timeline.html"
    page.write_text(render_page(build_timeline([("crm-sync", records)], HOUR, now_ms=NOON)))
    with Browser() as browser:
        browser.open(page, width=1280, height=900)
        layout: dict[str, Any] = browser.evaluate(_LAYOUT)
    return layout


def test_an_hour_with_runs_in_its_last_two_minutes_opens_on_them(tmp_path):
    # GIVEN --since 1h at noon, four runs of 9 to 18 s between 11:58:10 and 11:59:40
    # WHEN the page is laid out at 1,280 px
    layout = _laid_out(RUNS, tmp_path)
    shown = layout["shown"]
    # THEN the chart spans those two minutes (and a margin), inside the hour
    assert HOUR.from_ms < shown["from"] <= NOON - 110_000
    assert NOON - 20_000 <= shown["to"] <= NOON and shown["to"] - shown["from"] < 180_000
    # and its bars are bars, not slivers: the widest is over a tenth of the axis
    axis_px = shown["w"] * PLOT_W / WIDTH
    assert len(shown["bars"]) == 4 and max(shown["bars"]) >= 0.10 * axis_px, shown
    # and the page says it shows a part of the range, which one, and the range asked
    assert ("where the runs are; the range asked was 11:00:00Z-12:00:00Z (1 h 00 min)"
            in layout["text"])
    assert "showing 11:5" in layout["text"]
    assert "show the whole range asked, 11:00:00Z-12:00:00Z" in layout["text"]
    # and the whole hour is a click away, folded until then: the same runs, as slivers
    assert layout["whole"]["h"] <= layout["whole"]["summary"] + 8  # folded: one line
    assert layout["opened"]["details"] > layout["whole"]["h"] + 100  # opened: the chart
    assert (layout["opened"]["from"], layout["opened"]["to"]) == (HOUR.from_ms, HOUR.to_ms)
    assert len(layout["opened"]["bars"]) == 4
    assert max(layout["opened"]["bars"]) < 0.01 * layout["opened"]["w"]


def test_runs_that_fill_the_range_open_on_the_whole_range(tmp_path):
    # GIVEN runs from 11:05 to 11:55 in the hour
    layout = _laid_out([_run(-3300, -3240, "succeeded", 1), _run(-300, -240, "succeeded", 2)],
                       tmp_path)
    # THEN the chart is the hour, and the page says nothing of a part of it
    assert (layout["shown"]["from"], layout["shown"]["to"]) == (HOUR.from_ms, HOUR.to_ms)
    assert layout["whole"] is None and "where the runs are" not in layout["text"]
