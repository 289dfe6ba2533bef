"""Where the runs are: a range much longer than its records is drawn on their part of
it, in the terminal as on the page (issue 31, item 5.2). ``--since 1h`` over runs of
seconds in its last two minutes drew every run as one column at the chart's right edge."""

from __future__ import annotations

from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import Window, build_timeline, render_text
from jobguard.timeline.model import focus

NOON = 1_800_014_400_000  # 2027-01-15T12:00:00Z
HOUR = Window(NOON - 3_600_000, NOON)


def _run(run_id: str, start_s: int, end_s: int, status: str = "succeeded") -> RunRecord:
    return RunRecord(job="crm-sync", run_id=run_id, trigger_id=f"crm-sync@{run_id}",
                     trigger_kind="tick", policy="SKIP", decision=Decision.RAN,
                     status=RunStatus(status), started_at_ms=NOON + start_s * 1000,
                     ended_at_ms=NOON + end_s * 1000, fence=1)


def _decided(run_id: str, at_s: int) -> RunRecord:
    return RunRecord(job="crm-sync", run_id=run_id, trigger_id=f"crm-sync@{run_id}",
                     trigger_kind="tick", policy="SKIP", decision=Decision.SKIPPED,
                     status=RunStatus.SKIPPED, started_at_ms=NOON + at_s * 1000,
                     ended_at_ms=NOON + at_s * 1000)


RUNS = [_run("A", -110, -95), _run("B", -80, -62, "failed"), _run("C", -30, -20, "lease_lost")]


def test_the_view_is_where_the_records_are_with_a_margin_in_whole_seconds():
    timeline = build_timeline([("crm-sync", [*RUNS, _decided("S", -5)])], HOUR, now_ms=NOON)
    # from A's start to the skipped trigger, 105 s, and an eighth of that either side
    assert focus(timeline) == Window(NOON - 124_000, NOON)  # (clamped to the range's end)
    lone = build_timeline([("crm-sync", [_run("A", -1800, -1799)])], HOUR, now_ms=NOON)
    assert focus(lone) == Window(NOON - 1_802_000, NOON - 1_797_000)  # 2 s either side


def test_records_filling_a_third_of_the_range_or_none_keep_the_whole_range():
    spread = [_run("A", -2400, -2390), _run("B", -1200, -1190)]
    assert focus(build_timeline([("crm-sync", spread)], HOUR, now_ms=NOON)) is None
    assert focus(build_timeline([("crm-sync", [])], HOUR, now_ms=NOON)) is None


def test_the_terminal_chart_opens_on_the_runs_and_says_so():
    # GIVEN --since 1h at noon, three runs in its last two minutes
    text = render_text(build_timeline([("crm-sync", RUNS)], HOUR, now_ms=NOON), width=100)
    lines = text.splitlines()
    # THEN it says what the chart shows, and the range asked
    assert "chart: 11:57:58Z-11:59:52Z (1 min 54 s), where the runs are; the range asked " \
           "was 11:00:00Z-12:00:00Z (1 h 00 min)" in " ".join(x.strip() for x in lines)
    # and each run is drawn over many columns, not one at the right edge
    (runs,) = [x for x in lines if x.startswith("runs ")]
    assert runs.count("=") >= 8 and runs.count("x") >= 8 and runs.count("!") >= 4, runs
    assert runs.index("=") < len(runs) // 4  # the first run starts near the left
    # and the axis is the runs' minutes, not the hour's
    axis = lines[lines.index(runs) - 2]
    assert "11:58:00Z" in axis and "11:10Z" not in axis, axis
