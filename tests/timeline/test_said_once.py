"""A lease-lost run's reason is said once (issue 31, item 5.3): the guard records the
``LeaseLostError`` as the run's error (``... lost its lease: <reason>``) and the reason
again as its detail; the terminal printed both, so the reason twice, on the run's line."""

from __future__ import annotations

import re

from jobguard._redact import error_text
from jobguard.errors import LeaseLostError
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import Window, build_timeline, render_page, render_text

T0 = 1_800_000_000_000
REASON = "renewal refused: the lease was taken over or released"


def _timeline(*, error: str | None, detail: str | None):
    record = RunRecord(job="report-export", run_id="01M92CA7JS9C57D8FR0EF24HNP",
                       trigger_id="report-export@t", trigger_kind="tick", policy="REPLACE",
                       decision=Decision.RAN, status=RunStatus.LEASE_LOST,
                       started_at_ms=T0 + 10_000, ended_at_ms=T0 + 40_000, fence=5,
                       error=error, detail=detail)
    return build_timeline([("report-export", [record])], Window(T0, T0 + 120_000),
                          now_ms=T0 + 120_000)


def test_a_lease_lost_runs_reason_is_printed_once_with_its_error():
    # GIVEN the record the guard writes for a run whose renewal was refused
    error = error_text(LeaseLostError("report-export", "01M92CA7JS9C57D8FR0EF24HNP", 5,
                                      REASON))
    timeline = _timeline(error=error, detail=REASON)
    # WHEN shown in a terminal (wide enough for the whole line) and on the page
    text = render_text(timeline, width=400)
    page = render_page(timeline)
    # THEN the run's line says the error, its reason once
    (line,) = [x for x in text.splitlines() if "run      lease lost" in x]
    assert "error: LeaseLostError: job 'report-export'" in line
    assert line.count(REASON) == 1, line
    # and so do the bar's hover text (in each chart: the runs' minute, the whole range)
    # and its row in the table (a long error folded: the whole of it, once)
    titles = re.findall(r"<title>run 01M92CA7.*?</title>", page, re.S)
    assert len(titles) == 2 and all(t.count(REASON) == 1 for t in titles)
    (row,) = re.findall(r"<tr id=.*?</tr>", page, re.S)
    assert re.sub(r"<summary>.*?</summary>", "", row).count(REASON) == 1, row


def test_a_detail_the_error_does_not_say_is_still_shown():
    timeline = _timeline(error="TimeoutError: CRM", detail="lease taken over before release")
    (line,) = [x for x in render_text(timeline, width=400).splitlines()
               if "run      lease lost" in x]
    assert "error: TimeoutError: CRM; lease taken over before release" in line
