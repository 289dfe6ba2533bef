"""The run table under the chart, read at a laptop's width (1,280 px) in headless
Chromium: every header on one line, no cell's content cut off or pushed out of the
table's box, and a long error shown as its start, the whole of it a click away, so that
no row is taller than what it shows (issue 31, item 5.1).

Skipped, saying why, where Chromium is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

from typing import Any

import pytest

from jobguard.ids import new_run_id
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import Window, build_timeline, render_page

from . import NEEDS_CHROMIUM
from .chromium import Browser

pytestmark = NEEDS_CHROMIUM

T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z
LONG_ERROR = ("LeaseLostError: job 'crm-sync': run 01M92CA7JS9C57D8FR0EF24HNP (fence 123457) "
              "lost its lease: renewal refused: the lease was taken over or released; "
              + "ValueError: contact-4242:create-note refused by the CRM with HTTP 422 " * 6
              + "END-OF-ERROR")
ITEMS = {"selected": 123_456, "completed": 123_000, "failed": 444, "uncertain": 12,
         "reconciled": 7, "already_done": 3}


def _history() -> list[RunRecord]:
    """Twelve runs of large fences and item counts, every third failing with a long
    error, a takeover (a 'linked' cell) and a decision (a mark's row)."""
    records = []
    for n in range(12):
        start = T0 + n * 20_000
        records.append(RunRecord(
            job="crm-sync", run_id=new_run_id(start), trigger_id=f"crm-sync@{start}",
            trigger_kind="tick", policy="COALESCE", decision=Decision.RAN,
            status=RunStatus.FAILED if n % 3 == 0 else RunStatus.SUCCEEDED,
            started_at_ms=start, ended_at_ms=start + 15_000, fence=123_450 + n,
            error=LONG_ERROR if n % 3 == 0 else None,
            extra={**ITEMS, **({"displaced_run_id": records[-1].run_id} if n == 5 else {})}))
    holder = records[4]
    records.append(RunRecord(
        job="crm-sync", run_id=new_run_id(T0 + 85_000), trigger_id="crm-sync@skipped",
        trigger_kind="tick", policy="SKIP", decision=Decision.SKIPPED,
        status=RunStatus.SKIPPED, started_at_ms=T0 + 85_000, ended_at_ms=T0 + 85_000,
        holder_run_id=holder.run_id, holder_fence=holder.fence))
    return records


_MEASURE = r"""(() => {
  const lineH = (e) => parseFloat(getComputedStyle(e).lineHeight);
  const pads = (e) => { const s = getComputedStyle(e);
    return parseFloat(s.paddingTop) + parseFloat(s.paddingBottom); };
  // the height of what a cell shows: its text as laid out, not what a closed <details>
  // keeps folded
  const shown = (cell) => { let top = Infinity, bottom = -Infinity;
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      const folded = n.parentElement.closest('details');
      if (folded && !folded.open && !n.parentElement.closest('summary')) continue;
      const range = document.createRange(); range.selectNodeContents(n);
      for (const r of range.getClientRects()) {
        if (!r.height) continue;
        top = Math.min(top, r.top); bottom = Math.max(bottom, r.bottom); } }
    return bottom > top ? bottom - top : 0; };
  const table = document.querySelector('table');
  const box = table.parentElement.getBoundingClientRect();
  return {
    box: {left: box.left, right: box.right}, text: table.innerText,
    folded: [...table.querySelectorAll('details')].map(d => d.textContent),
    heads: [...table.querySelectorAll('th')].map(th => ({text: th.textContent,
      h: th.getBoundingClientRect().height - pads(th), line: lineH(th)})),
    cells: [...table.querySelectorAll('td')].map(td => { const r = td.getBoundingClientRect();
      return {text: td.textContent.slice(0, 60), sw: td.scrollWidth, cw: td.clientWidth,
              left: r.left, right: r.right}; }),
    rows: [...table.querySelectorAll('tr')].filter(tr => tr.querySelector('td')).map(tr => ({
      text: tr.textContent.slice(0, 60), h: tr.getBoundingClientRect().height,
      shown: Math.max(...[...tr.children].map(shown)), pads: pads(tr.children[0]),
      line: lineH(tr.children[0])})),
  };
})()"""


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> dict[str, Any]:
    timeline = build_timeline([("crm-sync", _history())], Window(T0, T0 + 300_000),
                              now_ms=T0 + 300_000)
    page = tmp_path_factory.mktemp("table") / "timeline.html"
    page.write_text(render_page(timeline))
    with Browser() as browser:
        browser.open(page, width=1280, height=900)
        measured: dict[str, Any] = browser.evaluate(_MEASURE)
    return measured


def test_every_header_is_one_line(table):
    assert len(table["heads"]) == 10
    for head in table["heads"]:
        assert head["h"] <= head["line"] + 1, head  # "fence", "duration": never wrapped


def test_no_cell_is_cut_off_or_pushed_out_of_the_tables_box(table):
    for cell in table["cells"]:
        assert cell["sw"] <= cell["cw"], cell  # its content fits its width
        # and the cell is in view: not past the table's box, scrolled out of sight
        assert table["box"]["left"] - 0.5 <= cell["left"], cell
        assert cell["right"] <= table["box"]["right"] + 0.5, cell
    for words in ("123000 done, 444 failed, 12 uncertain", "(of 123456 selected)", "123461",
                  "took over the run of fence 123454", "deferred to the run of fence 123454"):
        assert words in " ".join(table["text"].split()), words


def test_a_long_error_shows_its_start_and_opens_to_the_whole_never_a_tall_blank_row(table):
    errors = [d for d in table["folded"] if d.startswith("LeaseLostError")]
    assert len(errors) == 4 and all(d.endswith("END-OF-ERROR") for d in errors)
    assert "END-OF-ERROR" not in table["text"]  # folded until asked for
    for row in table["rows"]:
        # as high as what it shows and its padding (text is measured by its glyphs,
        # a little less than its lines: at most a line's slack), no taller
        assert row["h"] <= row["shown"] + row["pads"] + row["line"], row
        assert row["h"] <= 8 * row["line"], row  # a long error is a few lines, not 30
