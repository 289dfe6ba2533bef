"""What the timeline shows, decided from run records (pure): tables of records in,
bars, marks and markers out; hostile and damaged records shown for what they are."""

from __future__ import annotations

from typing import Any

import pytest

from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import Window, build_lane
from jobguard.timeline._format import clean, duration, items_text, ticks

T0 = 1_800_000_000_000
WINDOW = Window(T0, T0 + 600_000)


def ran(run_id: str, start_s: float, end_s: float | None, status: str = "succeeded",
        fence: int = 1, trigger: str | None = None, **extra: Any) -> RunRecord:
    return RunRecord(job="j", run_id=run_id, trigger_id=trigger or f"j@{run_id}",
                     trigger_kind="tick", policy="SKIP", decision=Decision.RAN,
                     status=RunStatus(status), started_at_ms=T0 + int(start_s * 1000),
                     ended_at_ms=None if end_s is None else T0 + int(end_s * 1000),
                     fence=fence, extra=extra)


def decided(run_id: str, at_s: float, decision: str, holder: str | None = None,
            trigger: str | None = None) -> RunRecord:
    return RunRecord(job="j", run_id=run_id, trigger_id=trigger or f"j@{run_id}",
                     trigger_kind="tick", policy="SKIP", decision=Decision(decision),
                     status=RunStatus(decision), started_at_ms=T0 + int(at_s * 1000),
                     ended_at_ms=T0 + int(at_s * 1000), holder_run_id=holder, holder_fence=1)


def lane(*records: RunRecord, now_s: float = 600):
    return build_lane("j", records, WINDOW, now_ms=T0 + int(now_s * 1000))


@pytest.mark.parametrize(("records", "rows"), [
    ([ran("A", 0, 10), ran("B", 20, 30)], {"A": 0, "B": 0}),  # one after the other
    ([ran("A", 0, 30), ran("B", 20, 40)], {"A": 0, "B": 1}),  # a takeover: two rows
    ([ran("A", 0, 30), ran("B", 20, 40), ran("C", 35, 50)], {"A": 0, "B": 1, "C": 0}),
    ([ran("A", 0, 10), ran("B", 10, 20)], {"A": 0, "B": 0}),  # touching: one row
])
def test_overlapping_runs_get_rows_of_their_own(records, rows):
    assert {b.run_id: b.row for b in lane(*records).bars} == rows


def test_each_decision_is_a_mark_linked_to_its_holder_and_to_the_run_it_became():
    history = [ran("A", 0, 60, fence=1), decided("S", 10, "skipped", holder="A"),
               decided("Q", 20, "queued", holder="A", trigger="j@q"),
               decided("C", 30, "coalesced", holder="A"),
               decided("D", 40, "duplicate", holder="A", trigger="j@A"),
               ran("Q2", 61, 70, fence=2, trigger="j@q"),
               ran("F", 71, 80, fence=3, trigger="j@follow-up:A")]
    marks = {m.run_id: m for m in lane(*history).marks}
    assert [(m.decision, m.at_ms - T0, m.holder_run_id) for m in marks.values()] == [
        ("skipped", 10_000, "A"), ("queued", 20_000, "A"), ("coalesced", 30_000, "A"),
        ("duplicate", 40_000, "A")]
    assert {k: m.became_run_id for k, m in marks.items()} == {
        "S": None, "Q": "Q2", "C": "F", "D": "A"}


def test_takeovers_and_force_releases_are_markers():
    result = lane(ran("A", 0, 20, status="abandoned", fence=1),
                  ran("B", 30, 40, fence=2, displaced_run_id="A"),
                  ran("C", 50, 70, status="released_by_operator", fence=3))
    assert [(m.kind, m.at_ms - T0, m.run_id, m.by) for m in result.markers] == [
        ("takeover", 30_000, "A", "B"), ("force_release", 70_000, "C", None)]


@pytest.mark.parametrize(("record", "start", "end", "open_end", "note"), [
    (ran("A", 10, 5), 10_000, 10_000, False, "clock skew"),      # ended before it started
    (ran("A", 10, None), 10_000, 10_000, True, "not recorded"),  # no end at all
    (ran("A", -30, 20), -30_000, 20_000, False, "before the range"),
    (ran("A", 590, 700), 590_000, 700_000, False, "after the range"),
    (ran("A", 100, None, status="running"), 100_000, 300_000, True, ""),  # to now
])
def test_times_a_bar_cannot_draw_are_said(record, start, end, open_end, note):
    (bar,) = lane(record, now_s=300).bars
    assert (bar.start_ms - T0, bar.end_ms - T0, bar.open_end) == (start, end, open_end)
    assert note in " ".join(bar.notes)


def test_records_wholly_outside_the_range_are_counted_not_drawn():
    result = lane(ran("A", -100, -50), decided("S", 700, "skipped"),
                  ran("Z", -1_800_000_000, -1_799_999_990), ran("B", 5, 6))
    assert [b.run_id for b in result.bars] == ["B"] and result.outside == 3


def test_counts_that_are_not_numbers_are_left_out():
    (bar,) = lane(ran("A", 0, 1, selected=10, completed="ten", failed=True,
                      uncertain=-1, reconciled=2)).bars
    assert bar.items == {"selected": 10, "reconciled": 2}


def test_the_last_record_of_a_run_id_wins():
    (bar,) = lane(ran("A", 0, 10, status="succeeded"),
                  ran("A", 0, 12, status="lease_lost")).bars
    assert bar.status == "lease_lost"


@pytest.mark.parametrize(("text", "shown"), [
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # a terminal escape, shown
    ("evil\u202eexe.txt", "evil\\u202eexe.txt"),          # a bidirectional override
    ("a\nb", "a\\nb"), ("a\tb\x9b31m", "a\\tb\\x9b31m"),  # one line; a C1 CSI
    ("x" * 400, "x" * 299 + "\u2026"), ("\x07" * 400, "\\x07" * 74 + "\u2026"),
])
def test_record_text_is_cleaned_of_control_characters(text, shown):
    assert clean(text) == shown


@pytest.mark.parametrize(("ms", "text"), [(850, "850 ms"), (12_300, "12.3 s"),
                                          (245_000, "4 min 05 s"), (7_800_000, "2 h 10 min"),
                                          (604_800_000, "7 d 00 h")])
def test_durations_read_as_a_person_says_them(ms, text):
    assert duration(ms) == text


def test_items_name_every_outcome():
    assert items_text({"selected": 12, "completed": 9, "failed": 1, "uncertain": 2,
                       "reconciled": 3}) == ("9 done, 1 failed, 2 uncertain, 3 reconciled "
                                             "(of 12 selected)")


@pytest.mark.parametrize(("span_ms", "step_ms"), [(20_000, 5_000), (600_000, 120_000),
                                                  (86_400_000, 10_800_000),
                                                  (31 * 86_400_000, 604_800_000)])
def test_axis_ticks_are_round_and_few(span_ms, step_ms):
    step, marks = ticks(T0, T0 + span_ms)
    assert step == step_ms and 1 <= len(marks) <= 10 and all(m % step == 0 for m in marks)


def test_ids_of_the_wrong_type_are_shown_as_text():
    """GIVEN damaged records whose ids are a list and a number (DynamoDB holds any type)
    WHEN drawn THEN nothing raises and the ids read as text."""
    bad = RunRecord(job="j", run_id=["x"], trigger_id=7, trigger_kind=None,  # type: ignore[arg-type]
                    policy="SKIP", decision=Decision.RAN, status=RunStatus.SUCCEEDED,
                    started_at_ms=T0, ended_at_ms=T0 + 1000, fence="3")  # type: ignore[arg-type]
    mark = RunRecord(job="j", run_id=5, trigger_id=["t"], trigger_kind="tick",  # type: ignore[arg-type]
                     policy="SKIP", decision=Decision.DUPLICATE, status=RunStatus.DUPLICATE,
                     started_at_ms=T0 + 10, holder_run_id={"a": 1})  # type: ignore[arg-type]
    result = lane(bad, mark)
    assert [(b.run_id, b.trigger_id, b.fence) for b in result.bars] == [("['x']", "7", None)]
    assert [(m.run_id, m.trigger_id, m.holder_run_id) for m in result.marks] == [
        ("5", "['t']", "{'a': 1}")]


def test_a_time_past_any_date_is_said_not_raised():
    """GIVEN a run whose recorded end is far past year 9999 WHEN drawn as a page and as
    text THEN both render, saying the time has no date."""
    from jobguard.timeline import build_timeline, render_page, render_text

    record = ran("A", 10, None)
    record = RunRecord(**{**record.__dict__, "ended_at_ms": 10**17})
    timeline = build_timeline([("j", [record])], WINDOW, now_ms=T0)
    assert "(epoch ms 100000000000000000: no date)" in render_page(timeline)
    # (the terminal view wraps its lines to its width: read it as words)
    assert "(epoch ms 100000000000000000)" in " ".join(render_text(timeline).split())


def test_a_dense_lane_merges_runs_closer_than_a_pixel_but_never_a_failure():
    """GIVEN 2,000 back-to-back runs over 10 minutes (more than a pixel holds), one of
    them failed, and 600 skipped triggers WHEN drawn THEN the runs are a few bars whose
    counts add up to 2,000, the failure a bar of its own; the skips are marks whose
    counts add up to 600; the table lists the latest 300 events and says so."""
    import re

    from jobguard.timeline import build_timeline, render_page
    from jobguard.timeline.html import MAX_TABLE_ROWS

    runs = [ran(f"R{i:04d}", i * 0.3, i * 0.3 + 0.25, fence=i + 1,
                status="failed" if i == 1000 else "succeeded") for i in range(2000)]
    skips = [decided(f"S{i:04d}", i + 0.1, "skipped", holder="R0000") for i in range(600)]
    page = render_page(build_timeline([("j", runs + skips)], WINDOW, now_ms=T0))
    chart = page.split("<figure>", 1)[1].split("</figure>", 1)[0]
    counts = [int(n) for n in re.findall(r'data-kind="runs" data-count="(\d+)"', chart)]
    singles = chart.count('data-kind="run"')
    assert sum(counts) + singles == 2000 and len(counts) + singles < 50
    assert re.search(r'data-kind="run" data-status="failed"', chart)
    marks = [int(n) for n in re.findall(r'data-kind="decisions" data-count="(\d+)"', chart)]
    assert sum(marks) + chart.count('data-kind="decision"') == 600
    assert page.count("<tr id=") + page.count("<tr><td") <= MAX_TABLE_ROWS + 1
    assert f"{2600 - MAX_TABLE_ROWS} earlier rows not listed here" in page


def holding(run_id: str, start_s: float, *, heartbeat_s: float, expires_s: float,
            **extra: Any) -> RunRecord:
    """The record :mod:`jobguard.timeline.collect` makes from a held lease row."""
    return RunRecord(job="j", run_id=run_id, trigger_id=f"j@{run_id}", trigger_kind="",
                     policy="", decision=Decision.RAN, status=RunStatus.RUNNING,
                     started_at_ms=T0 + int(start_s * 1000), fence=4,
                     extra={"lease_expires_at_ms": T0 + int(expires_s * 1000),
                            "heartbeat_at_ms": T0 + int(heartbeat_s * 1000), **extra})


def test_a_lease_past_its_expiry_is_expired_not_running():
    """GIVEN the lease row's run, its last heartbeat at 70 s, its lease expiring at 100 s
    WHEN drawn at 300 s THEN the bar ends at its last heartbeat, status expired, its
    lease held with no heartbeat until 100 s, and it says so; at 90 s it is running, to
    now."""
    (bar,) = lane(holding("H", 60, heartbeat_s=70, expires_s=100), now_s=300).bars
    assert (bar.status, bar.start_ms - T0, bar.end_ms - T0, bar.open_end) == (
        "expired", 60_000, 70_000, False)
    assert bar.held_to_ms == T0 + 100_000
    assert "its lease expired 2027-01-15T08:01:40Z and nothing has taken it over" in \
        " ".join(bar.notes)
    (live,) = lane(holding("H", 60, heartbeat_s=70, expires_s=100), now_s=90).bars
    assert (live.status, live.end_ms - T0, live.open_end, live.held_to_ms) == (
        "running", 90_000, True, None)


def test_a_taken_over_lease_is_held_from_its_last_heartbeat_to_the_takeover():
    """The displaced run's lease, held with no heartbeat, ends where the taker starts;
    the taker may still be running (its lease row names the run it displaced)."""
    result = lane(ran("A", 0, 20, status="abandoned", fence=1),
                  holding("B", 50, heartbeat_s=55, expires_s=90, displaced_run_id="A"),
                  now_s=60)
    bars = {b.run_id: b for b in result.bars}
    assert bars["A"].held_to_ms == T0 + 50_000 and bars["B"].held_to_ms is None
    assert [(m.kind, m.at_ms - T0, m.run_id, m.by) for m in result.markers] == [
        ("takeover", 50_000, "A", "B")]


def test_records_claiming_a_start_after_now_are_counted_as_ahead():
    """GIVEN a window ending now and a run and a skip whose worker's clock runs 10 min
    ahead WHEN drawn THEN both are counted outside and ahead; inside a window reaching
    past them they are drawn, the run with a note."""
    records = [ran("A", 700, 705), decided("S", 710, "skipped")]
    result = build_lane("j", records, WINDOW, now_ms=T0 + 100_000)
    assert (result.bars, result.marks, result.outside, result.ahead) == ((), (), 2, 2)
    wide = build_lane("j", records, Window(T0, T0 + 900_000), now_ms=T0 + 100_000)
    (bar,) = wide.bars
    assert ("starts 10 min 00 s after now: its worker's clock runs ahead (or this "
            "machine's behind)") in bar.notes
    assert (len(wide.marks), wide.outside, wide.ahead) == (1, 0, 0)


def _dense_chart(runs: list[RunRecord], window: Window = WINDOW) -> str:
    from jobguard.timeline import build_timeline, render_page

    page = render_page(build_timeline([("j", runs)], window, now_ms=window.to_ms))
    return page.split("<figure>", 1)[1].split("</figure>", 1)[0]


def test_a_dense_pixel_of_mixed_runs_is_split_by_height_in_proportion():
    """GIVEN 6,000 runs over 10 minutes, 1 in 10 failed and 1 in 30 incomplete WHEN drawn
    THEN every run is in exactly one shape of its own status (the counts add up per
    status), a pixel's shares are as high as their runs' share of it (at least 2 px of
    the bar's 16), and no share or bar is hidden under another of its pixel."""
    import re

    from jobguard.timeline._layout import BAR_H, MIN_STRIP_PX

    runs = [ran(f"R{i:05d}", i * 0.1, i * 0.1 + 0.05, fence=i + 1,
                status="failed" if i % 10 == 3 else "incomplete" if i % 30 == 7
                else "succeeded") for i in range(6000)]
    chart = _dense_chart(runs)
    shapes = re.findall(r'<rect id="r\d+" class="b s-(\w+)" x="([\d.]+)" y="([\d.]+)" '
                        r'width="[\d.]+" height="([\d.]+)"[^>]*?data-kind="(runs?)"'
                        r'(?: data-count="(\d+)")?', chart)
    drawn: dict[str, int] = {}
    columns: dict[str, list[tuple[str, float, float, int]]] = {}
    for status, x, y, height, kind, count in shapes:
        n = int(count) if kind == "runs" else 1
        drawn[status] = drawn.get(status, 0) + n
        columns.setdefault(x, []).append((status, float(y), float(height), n))
    assert drawn == {"succeeded": 5200, "failed": 600, "incomplete": 200}
    mixed = [c for c in columns.values() if len(c) > 1]
    assert mixed
    for column in mixed:
        total = sum(n for *_, n in column)
        assert sum(h for _, _, h, _ in column) == pytest.approx(BAR_H, abs=0.05)
        tops = sorted((y, y + h) for _, y, h, _ in column)
        assert all(a[1] <= b[0] + 0.01 for a, b in zip(tops, tops[1:], strict=False))
        for status, _, height, n in column:
            if status != "succeeded":  # the largest share gives way to the minimums
                assert height == pytest.approx(max(MIN_STRIP_PX, BAR_H * n / total),
                                               abs=0.05)


def test_a_dense_chart_grows_with_pixels_not_records():
    """GIVEN 5,000 then 20,000 runs over the same 10 minutes, every other one failed
    WHEN drawn THEN the chart is about as large either way: a few shapes per pixel."""
    def chart(n: int) -> str:
        return _dense_chart([ran(f"R{i:05d}", i * 600 / n, i * 600 / n + 0.01, fence=i + 1,
                                 status="failed" if i % 2 else "succeeded")
                             for i in range(n)])

    small, large = chart(5_000), chart(20_000)
    assert len(large) < 1.3 * len(small), (len(small), len(large))
    assert large.count("<rect") < 3 * 1200


def test_marks_past_the_levels_are_one_mark_saying_how_many():
    """GIVEN six duplicate deliveries decided in one millisecond WHEN placed THEN four
    levels: three marks and, on the top level, one standing for the other three."""
    from jobguard.timeline._layout import MARK_LEVELS, Geometry, place_marks

    result = lane(ran("A", 0, 60), *[decided(f"D{i}", 20, "duplicate", holder="A",
                                              trigger="j@A") for i in range(6)])
    spots = place_marks(result, Geometry(WINDOW.from_ms, WINDOW.span_ms))
    assert [(s.level, len(s.marks)) for s in spots] == [(0, 1), (1, 1), (2, 1), (3, 3)]
    assert MARK_LEVELS == 4


@pytest.mark.parametrize("width", [60, 61, 100, 137])
def test_terminal_lines_fit_their_width_and_lose_no_word(width):
    """GIVEN an event's text with aligned columns, a 300-character key and a newline
    WHEN fitted THEN no line is wider than ``width``, the lines after the first are
    indented, and the words read back are the text's words (a long one cut, not lost)."""
    from jobguard.timeline.text import fit

    text = ("08:00:10.000Z  run      failed        01MCC5RXRGMXGYV56RZHBWK19X  fence 1   "
            "-> 08:01:10.000Z (1 min 00 s); error: TimeoutError\nmore; key " + "k" * 300)
    lines = fit(text, width)
    assert all(len(line) <= width for line in lines) and len(lines) > 1
    assert all(line.startswith("    ") and line.strip() for line in lines[1:])
    assert lines[0].startswith("08:00:10.000Z  run      failed")  # its columns kept
    assert "".join("".join(lines).split()) == "".join(text.split())


def test_a_rejected_trigger_message_is_a_mark_the_terminal_and_the_page_name():
    """GIVEN a QUEUE job's run log holding the record of a trigger-queue message that was
    no trigger (``rejected``, issue 33) WHEN drawn THEN it is a mark at its time, counted
    in the lane's summary, drawn ``r`` in the terminal and with its own symbol and
    meaning on the page (not the unknown decision's grey dot)."""
    from jobguard._rejected import rejected_record
    from jobguard.errors import InvalidTriggerError
    from jobguard.timeline import build_timeline, render_page, render_text
    from jobguard.timeline._format import DECISION_MEANING, summary
    from jobguard.timeline.text import LABEL_W, MARK_CHARS

    record = rejected_record(job="j", policy="QUEUE", owner="fn/1", message_id="m-1",
                             body="{not json", attributes={
                                 "ApproximateFirstReceiveTimestamp": str(T0 + 90_000)},
                             error=InvalidTriggerError("body", "is not JSON"),
                             now_ms=T0 + 90_050)
    (mark,) = lane(ran("A", 0, 60), record).marks
    assert (mark.decision, mark.at_ms, mark.trigger_id) == ("rejected", T0 + 90_000,
                                                            "j@message:m-1")
    assert "1 rejected" in summary(lane(ran("A", 0, 60), record))
    timeline = build_timeline([("j", [record])], WINDOW, now_ms=T0 + 600_000)
    text = render_text(timeline, width=100)
    assert MARK_CHARS["rejected"] == "r" and "r rejected" in text
    marks = next(line for line in text.splitlines() if line.startswith("not run "))
    assert marks[LABEL_W:].strip(" |") == "r"
    page = render_page(timeline)
    assert '<use href="#m-rejected"' in page and 'id="m-rejected"' in page
    assert DECISION_MEANING["rejected"].split(":")[0] in page


def test_a_chain_is_drawn_as_one_chain():
    """GIVEN three links of a chain (each record naming the one before and after it) and
    a run that is no chain's THEN the links share one chain label (the first run) and
    their places, and the page joins each link to the one before it."""
    from jobguard.timeline import render_page
    from jobguard.timeline.model import Timeline

    records = [ran("A", 0, 60, continued_by="B", link=1),
               ran("B", 61, 120, fence=2, continues="A", continued_by="C", link=2),
               ran("C", 121, 150, fence=3, continues="B", link=3),
               ran("D", 200, 210, fence=4)]
    bars = {b.run_id: b for b in lane(*records).bars}
    assert [(bars[r].chain, bars[r].link, bars[r].continues) for r in "ABC"] == [
        ("A", 1, None), ("A", 2, "A"), ("A", 3, "B")]
    assert (bars["D"].chain, bars["D"].link) == (None, None)
    page = render_page(Timeline(window=WINDOW, lanes=(lane(*records),),
                                generated_at_ms=T0 + 600_000))
    assert page.count('data-kind="chain"') == 2
    assert "link 3 of the chain of run A, continues B" in page


def test_a_superseded_continuation_is_a_mark_of_its_own():
    from jobguard.timeline import render_page
    from jobguard.timeline.model import Timeline

    records = [ran("A", 0, 60, continued_by="B", link=1), decided("S", 90, "superseded")]
    page = render_page(Timeline(window=WINDOW, lanes=(lane(*records),),
                                generated_at_ms=T0 + 600_000))
    assert '<symbol id="m-superseded"' in page and 'href="#m-superseded"' in page
