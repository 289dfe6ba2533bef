"""Review of the run timeline (issue 13): what the branch's suite does not hold. Each of
these passes on the branch; each fails on a change the branch's own tests let through,
named in its docstring (every bar labelled "succeeded"; the terminal chart's bars one
column wide, or its marks given the wrong letter)."""

from __future__ import annotations

import re
from html import unescape

from jobguard.ids import new_run_id
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import Window, build_timeline, render_page, render_text
from jobguard.timeline._format import STATUS_LABEL
from jobguard.timeline.text import LABEL_W

T0 = 1_800_000_000_000
SPAN = 600_000
BAR_CHARS = {"succeeded": "=", "incomplete": "~", "failed": "x", "lease_lost": "!",
             "abandoned": "?", "released_by_operator": "R", "running": ">"}
MARK_CHARS = {"skipped": "s", "queued": "q", "coalesced": "c", "duplicate": "d",
              "stale": "t", "paused": "p", "dropped": "D"}
"""The terminal view's letters as the README gives them."""
SHORT = {"released_by_operator": "released", "lease_lost": "lost", "incomplete": "partial",
         "abandoned": "abandon."}


def _history() -> list[RunRecord]:
    records = []
    for i, status in enumerate(("succeeded", "failed", "incomplete", "lease_lost",
                                "abandoned", "released_by_operator")):
        start = T0 + 10_000 + i * 90_000
        records.append(RunRecord(
            job="crm-sync", run_id=new_run_id(start), trigger_id=f"crm-sync@{i}",
            trigger_kind="tick", policy="SKIP", decision=Decision.RAN,
            status=RunStatus(status), started_at_ms=start, ended_at_ms=start + 60_000,
            fence=i + 1, extra={"selected": 4, "completed": 4}))
    for i, decision in enumerate(("skipped", "duplicate", "paused")):
        at = T0 + 30_000 + i * 180_000
        records.append(RunRecord(
            job="crm-sync", run_id=new_run_id(at), trigger_id=f"crm-sync@d{i}",
            trigger_kind="tick", policy="SKIP", decision=Decision(decision),
            status=RunStatus(decision), started_at_ms=at, ended_at_ms=at))
    return records


def _timeline():
    return build_timeline([("crm-sync", _history())], Window(T0, T0 + SPAN),
                          now_ms=T0 + SPAN)


def test_every_bar_is_labelled_with_its_own_status():
    """GIVEN one run of each ended status, each wide enough for a label WHEN drawn THEN
    each bar's label names its own status (mutant: every label "succeeded"; the branch's
    browser test finds the words in the legend)."""
    page = render_page(_timeline())
    found = re.findall(r'data-kind="run" data-status="([a-z_]+)".*?</a>'
                       r'<text class="lbl[^"]*"[^>]*>([^<]*)</text>', page, re.S)
    assert len(found) == 6, found
    for status, label in found:
        words = unescape(label)
        assert words.startswith((STATUS_LABEL[status], SHORT.get(status, "\0"))), (status,
                                                                                   words)


def test_the_terminal_chart_draws_each_run_and_mark_where_the_page_does():
    """GIVEN the same history WHEN drawn in the terminal THEN each run's letter fills
    its columns from start to end on its row and each mark's letter is in its column
    (mutants: bars one column wide; a mark's letter swapped)."""
    timeline = _timeline()
    width = 100
    plot = width - LABEL_W - 2
    lines = render_text(timeline, width=width).splitlines()
    runs = next(i for i, line in enumerate(lines) if line.startswith("runs "))
    chart = lines[runs][LABEL_W + 1:LABEL_W + 1 + plot]
    marks = next(line for line in lines if line.startswith("not run "))[LABEL_W + 1:]

    def col(ms: int) -> int:
        return min(plot - 1, max(0, int((ms - T0) / SPAN * plot)))

    (lane,) = timeline.lanes
    assert lane.rows == 1
    for bar in lane.bars:
        cells = chart[col(bar.start_ms) + 1:col(bar.end_ms)]  # its inner columns: its own
        assert cells and set(cells) == {BAR_CHARS[bar.status]}, (bar.status, cells)
    for mark in lane.marks:
        assert marks[col(mark.at_ms)] == MARK_CHARS[mark.decision], mark.decision
