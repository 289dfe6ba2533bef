"""Review of the run timeline (issue 13), in headless Chromium: defects of the page as
laid out, each a test that fails on the branch as reviewed (skipped where Chromium is
not installed, like the browser test it reviews)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from jobguard.dynamodb import DynamoJobStore, create_table
from jobguard.ids import new_run_id
from jobguard.local.emulator import in_process
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.schema import job_pk, run_sk
from jobguard.timeline import Window, build_timeline, collect, render_page

from . import NEEDS_CHROMIUM
from .chromium import Browser

pytestmark = NEEDS_CHROMIUM

T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z


def _laid_out(page: str, tmp_path: Path, script: str) -> Any:
    path = tmp_path / "page.html"
    path.write_text(page)
    with Browser() as browser:
        browser.open(path, width=1280, height=900)
        return browser.evaluate(script)


def test_a_damaged_record_never_makes_the_page_scroll_sideways(tmp_path):
    """GIVEN crm-sync's run log holding one good run and a row another tool wrote under
    the run prefix (a 200-character key, not a run record) WHEN the page is drawn from
    the table and laid out at 1,280 px THEN the page does not scroll sideways (the
    README: no sideways scroll at 1,280 px; a hostile record never breaks the layout).
    Today the unreadable-row note prints the key unbroken, wider than the page."""
    now = int(time.time() * 1000)
    with in_process() as emu:
        ddb = emu.client("dynamodb")
        table = f"jobguard-{uuid.uuid4().hex[:8]}"
        create_table(ddb, table)
        store = DynamoJobStore(table, client=ddb)
        store.put_run(RunRecord(job="crm-sync", run_id=new_run_id(now - 120_000),
                                trigger_id="crm-sync@t", trigger_kind="tick", policy="SKIP",
                                decision=Decision.RAN, status=RunStatus.SUCCEEDED,
                                started_at_ms=now - 120_000, ended_at_ms=now - 110_000,
                                fence=1), ttl_epoch_s=now // 1000 + 86_400)
        # a row some other tool wrote under the run prefix: a long key, no run record
        other = f"{run_sk(new_run_id(now - 60_000))}#imported#{'0f3a9c2e' * 20}"
        ddb.put_item(TableName=table, Item={
            "pk": {"S": job_pk("crm-sync")}, "sk": {"S": other}, "note": {"S": "backup"}})
        timeline = collect(store, ["crm-sync"], Window(now - 600_000, now), now_ms=now)
    assert timeline.lanes[0].unreadable  # the damaged row is named
    width = _laid_out(render_page(timeline), tmp_path,
                      "document.documentElement.scrollWidth")
    assert width <= 1280, width


def test_six_deliveries_decided_at_one_instant_are_six_marks_to_see(tmp_path):
    """GIVEN a run and six duplicate deliveries of one tick decided in the same
    millisecond (Scheduler's retries plus Lambda's, or duplicate schedules) WHEN laid
    out THEN each of the six marks can be seen: six distinct positions (or one mark
    saying six). Today marks stack at most 4 high: the 5th and 6th sit exactly on the
    4th, so the chart shows 4."""
    holder = RunRecord(job="report-export", run_id=new_run_id(T0 + 10_000),
                       trigger_id="report-export@t", trigger_kind="tick", policy="QUEUE",
                       decision=Decision.RAN, status=RunStatus.SUCCEEDED,
                       started_at_ms=T0 + 10_000, ended_at_ms=T0 + 60_000, fence=1)
    duplicates = [RunRecord(job="report-export", run_id=new_run_id(T0 + 20_000),
                            trigger_id="report-export@t", trigger_kind="tick",
                            policy="QUEUE", decision=Decision.DUPLICATE,
                            status=RunStatus.DUPLICATE, started_at_ms=T0 + 20_000,
                            ended_at_ms=T0 + 20_000, holder_run_id=holder.run_id,
                            holder_fence=1) for _ in range(6)]
    page = render_page(build_timeline([("report-export", [holder, *duplicates])],
                                      Window(T0, T0 + 300_000), now_ms=T0 + 300_000))
    marks = _laid_out(page, tmp_path, """[...document.querySelectorAll(
        'figure [data-kind=decision], figure [data-kind=decisions]')].map(e => {
        const r = e.getBoundingClientRect();
        return {x: Math.round(r.x), y: Math.round(r.y), n: +(e.dataset.count || 1)}; })""")
    assert sum(m["n"] for m in marks) == 6
    seen = {(m["x"], m["y"]) for m in marks}
    assert len(seen) == len(marks), marks  # none hidden exactly under another
