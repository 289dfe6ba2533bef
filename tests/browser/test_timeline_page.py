"""The timeline page in a real browser: headless Chromium (Debian's package) renders it
for a known history; the test reads the laid-out SVG through the DOM (DevTools protocol
on a pipe: ``getBoundingClientRect`` of every bar, mark and marker), checks that each is
where the history says, reads the screenshot's pixels at the bars, and keeps the PNG
(``JOBGUARD_SCREENSHOTS=dir`` to look at it).

Skipped, saying why, where Chromium is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from jobguard.ids import new_run_id
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import Window, build_timeline, render_page
from jobguard.timeline.html import PAD, PLOT_W, WIDTH

from . import NEEDS_CHROMIUM
from .chromium import Browser

pytestmark = NEEDS_CHROMIUM

T0 = 1_800_000_000_000  # 2027-01-15T08:00:00Z
SPAN = 300_000


def _run(job: str, start_s: int, end_s: int | None, status: str, fence: int,
         trigger: str | None = None, **extra: Any) -> RunRecord:
    return RunRecord(job=job, run_id=new_run_id(T0 + start_s * 1000),
                     trigger_id=trigger or f"{job}@{start_s}", trigger_kind="tick",
                     policy="COALESCE", decision=Decision.RAN, status=RunStatus(status),
                     started_at_ms=T0 + start_s * 1000,
                     ended_at_ms=None if end_s is None else T0 + end_s * 1000, fence=fence,
                     extra=extra)


def _decided(job: str, at_s: int, decision: str, holder: RunRecord) -> RunRecord:
    return RunRecord(job=job, run_id=new_run_id(T0 + at_s * 1000), trigger_id=f"{job}@d{at_s}",
                     trigger_kind="tick", policy="COALESCE", decision=Decision(decision),
                     status=RunStatus(decision), started_at_ms=T0 + at_s * 1000,
                     ended_at_ms=T0 + at_s * 1000, holder_run_id=holder.run_id,
                     holder_fence=holder.fence)


@pytest.fixture(scope="module")
def history() -> dict[str, Any]:
    """crm-sync: run 1 (fence 1) with two coalesced ticks, its follow-up; run 3 frozen
    (lease lost) while run 4 takes over; an incomplete run; a force-released one.
    report-export: a run with a queued tick, the queued run, a failure, an abandoned run."""
    one = _run("crm-sync", 10, 70, "succeeded", 1, selected=12, completed=12)
    lost = _run("crm-sync", 120, 180, "lease_lost", 3, selected=10)
    taker = _run("crm-sync", 150, 200, "succeeded", 4, displaced_run_id=lost.run_id,
                 selected=10, completed=10)
    released = _run("crm-sync", 230, 260, "released_by_operator", 6)
    crm = [one, _decided("crm-sync", 30, "coalesced", one),
           _decided("crm-sync", 50, "coalesced", one),
           _run("crm-sync", 72, 90, "succeeded", 2, trigger=f"crm-sync@follow-up:{one.run_id}"),
           lost, taker, _decided("crm-sync", 160, "duplicate", taker),
           _run("crm-sync", 205, 225, "incomplete", 5, selected=8, completed=7, failed=1),
           released]
    export = _run("report-export", 20, 100, "succeeded", 1)
    report = [export, _decided("report-export", 40, "queued", export),
              _decided("report-export", 60, "skipped", export),
              _run("report-export", 101, 130, "succeeded", 2),
              _run("report-export", 140, 150, "failed", 3, error="TimeoutError: CRM"),
              _run("report-export", 170, 190, "abandoned", 4)]
    timeline = build_timeline([("crm-sync", crm), ("report-export", report)],
                              Window(T0, T0 + SPAN), now_ms=T0 + SPAN)
    return {"crm": crm, "report": report, "page": render_page(timeline), "lost": lost,
            "taker": taker, "released": released, "one": one}


@pytest.fixture(scope="module")
def rendered(history, tmp_path_factory) -> dict[str, Any]:
    page = tmp_path_factory.mktemp("timeline") / "timeline.html"
    page.write_text(history["page"])
    with Browser() as browser:
        browser.open(page, width=1280, height=900)
        layout = browser.evaluate(_LAYOUT)
        png = browser.screenshot(full_page=False)
    keep = os.environ.get("JOBGUARD_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / "timeline.png").write_bytes(png)
    return {"layout": layout, "png": png}


_LAYOUT = """(() => {
  const svg = document.querySelector('figure svg');
  const box = (e) => { const r = e.getBoundingClientRect();
    return {x: r.x, y: r.y, w: r.width, h: r.height}; };
  const lane = (e) => e.closest('g.lanegrp').dataset.job;
  const title = (e) => (e.querySelector('title') || {}).textContent || '';
  const target = (e) => { const a = e.closest('a');
    const t = a && document.querySelector(a.getAttribute('href'));
    return t ? (t.dataset.startMs || t.id) : null; };
  return {
    svg: box(svg), from: +svg.dataset.fromMs, to: +svg.dataset.toMs,
    bars: [...svg.querySelectorAll('[data-kind=run]')].map(e => ({...box(e), job: lane(e),
      status: e.dataset.status, start: +e.dataset.startMs, end: +e.dataset.endMs,
      title: title(e), target: target(e)})),
    marks: [...svg.querySelectorAll('[data-kind=decision]')].map(e => ({...box(e),
      job: lane(e), decision: e.dataset.decision, at: +e.dataset.atMs, title: title(e),
      target: target(e)})),
    markers: [...svg.querySelectorAll('[data-kind=marker]')].map(e => ({
      ...box(e.querySelector('line')),
      job: lane(e), kind: e.dataset.marker, at: +e.dataset.atMs})),
    lanes: [...svg.querySelectorAll('g.lanegrp')].map(e => ({...box(e), job: e.dataset.job})),
    text: document.body.innerText,
    resources: performance.getEntriesByType('resource').length,
    scrollWidth: document.documentElement.scrollWidth,
  };
})()"""


def _x(layout: dict[str, Any], ms: int) -> float:
    """Where ``ms`` must be on screen: the page's axis scaled to the SVG's laid-out width."""
    svg = layout["svg"]
    scale = svg["w"] / WIDTH
    return float(svg["x"] + (PAD + (ms - layout["from"]) / (layout["to"] - layout["from"])
                             * PLOT_W) * scale)


def test_every_bar_spans_its_run_in_its_jobs_lane(history, rendered):
    layout = rendered["layout"]
    bars = layout["bars"]
    assert len(bars) == 6 + 4
    lanes = {lane["job"]: lane for lane in layout["lanes"]}
    for bar in bars:
        assert bar["x"] == pytest.approx(_x(layout, bar["start"]), abs=1.5), bar
        assert bar["x"] + bar["w"] == pytest.approx(_x(layout, bar["end"]), abs=1.5), bar
        lane = lanes[bar["job"]]
        assert lane["y"] <= bar["y"] and bar["y"] + bar["h"] <= lane["y"] + lane["h"], bar
    expected = {(r.job, r.started_at_ms, r.ended_at_ms, r.status.value)
                for r in history["crm"] + history["report"] if r.decision is Decision.RAN}
    assert {(b["job"], b["start"], b["end"], b["status"]) for b in bars} == expected
    # crm-sync's lane is above report-export's: the jobs share one axis, one above the other
    assert lanes["crm-sync"]["y"] + lanes["crm-sync"]["h"] <= lanes["report-export"]["y"]


def test_a_takeover_draws_two_runs_on_two_rows_and_a_marker_between(history, rendered):
    layout = rendered["layout"]
    by_start = {b["start"]: b for b in layout["bars"] if b["job"] == "crm-sync"}
    lost, taker = by_start[history["lost"].started_at_ms], by_start[history["taker"].started_at_ms]
    assert lost["status"] == "lease_lost" and taker["y"] > lost["y"] + lost["h"] - 1
    markers = {m["kind"]: m for m in layout["markers"]}
    assert set(markers) == {"takeover", "force_release"}
    takeover = markers["takeover"]
    assert takeover["x"] + takeover["w"] / 2 == pytest.approx(
        _x(layout, history["taker"].started_at_ms), abs=2)
    release = markers["force_release"]
    assert release["x"] + release["w"] / 2 == pytest.approx(
        _x(layout, history["released"].ended_at_ms), abs=2)


def test_every_mark_sits_at_its_time_and_links_to_the_run_it_deferred_to(history, rendered):
    layout = rendered["layout"]
    marks = layout["marks"]
    assert sorted((m["job"], m["decision"]) for m in marks) == [
        ("crm-sync", "coalesced"), ("crm-sync", "coalesced"), ("crm-sync", "duplicate"),
        ("report-export", "queued"), ("report-export", "skipped")]
    holders = {r.run_id: r for r in history["crm"] + history["report"]}
    for mark in marks:
        assert mark["x"] + mark["w"] / 2 == pytest.approx(_x(layout, mark["at"]), abs=1.5)
        holder = holders[mark["title"].split("deferred to run ", 1)[1].split(" ")[0]]
        assert mark["target"] == str(holder.started_at_ms), mark  # its link: the holder's bar
        # below the bars of its lane
        assert all(mark["y"] >= b["y"] + b["h"] for b in layout["bars"]
                   if b["job"] == mark["job"])


def test_hover_text_names_run_id_and_fence_and_the_page_says_it_in_words(history, rendered):
    layout = rendered["layout"]
    one = next(b for b in layout["bars"] if b["start"] == history["one"].started_at_ms)
    assert one["title"].startswith(f"run {history['one'].run_id} · fence 1\nsucceeded: "
                                   "2027-01-15T08:00:10Z → 2027-01-15T08:01:10Z (1 min 00 s)")
    assert "items: 12 done, 0 failed, 0 uncertain (of 12 selected)" in one["title"]
    text = layout["text"]
    for words in ("succeeded", "incomplete", "failed", "lease lost", "abandoned",
                  "released by operator", "running", "skipped", "queued", "coalesced",
                  "duplicate", "stale", "paused", "dropped", "takeover", "force release",
                  "2027-01-15T08:00:00Z to 2027-01-15T08:05:00Z", "all times UTC"):
        assert words in text, words
    assert "succeeded · fence 1 · 12 done" in text  # a bar wide enough says it in words
    assert layout["resources"] == 0  # nothing fetched: the page is whole in itself
    assert layout["scrollWidth"] <= 1280  # no sideways scrolling at a laptop's width


def _pixels(png: bytes) -> tuple[int, int, list[bytes], int]:
    """Rows of a non-interlaced 8-bit RGB(A) PNG, unfiltered (the standard library)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, width = 8, b"", 0
    height = channels = 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", data[:10])
            assert depth == 8 and colour in (2, 6) and data[12] == 0
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            chunks += data
        pos += 12 + length
    raw, stride, rows = zlib.decompress(chunks), width * channels, []
    previous = bytearray(stride)
    for y in range(height):
        at = y * (stride + 1)
        kind, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, rows, channels


STATUS_RGB = {"succeeded": (0x1B, 0x7F, 0x4B), "failed": (0xC7, 0x36, 0x1A),
              "incomplete": (0xD9, 0x8C, 0x00), "released_by_operator": (0x1F, 0x5F, 0xA8)}


def test_the_screenshot_shows_each_status_in_its_colour_where_its_bar_is(rendered):
    width, height, rows, channels = _pixels(rendered["png"])
    assert width == 1280
    for bar in rendered["layout"]["bars"]:
        if bar["status"] not in STATUS_RGB or bar["y"] + bar["h"] > height:
            continue
        # a point inside the bar clear of its label: 2 px above its lower edge
        x, y = int(bar["x"] + bar["w"] - 3), int(bar["y"] + bar["h"] - 2)
        pixel = tuple(rows[y][x * channels:x * channels + 3])
        assert all(abs(p - q) <= 6 for p, q in zip(pixel, STATUS_RGB[bar["status"]],
                                                   strict=True)), (bar, pixel)


def test_an_expired_lease_shows_its_own_stripes_and_its_dots_to_the_expiry(tmp_path):
    """GIVEN the lease row's run, its last heartbeat at 40 s, its lease expired at 100 s
    and not taken over WHEN laid out at 200 s THEN its bar ends at its last heartbeat in
    the lease-expired stripes (neither colour of 'running'), dotted on to the expiry,
    and the legend names it."""
    record = RunRecord(job="crm-sync", run_id=new_run_id(T0 + 20_000), trigger_id="crm-sync@x",
                       trigger_kind="", policy="", decision=Decision.RAN,
                       status=RunStatus.RUNNING, started_at_ms=T0 + 20_000, fence=3,
                       extra={"lease_expires_at_ms": T0 + 100_000,
                              "heartbeat_at_ms": T0 + 40_000})
    page = render_page(build_timeline([("crm-sync", [record])], Window(T0, T0 + SPAN),
                                      now_ms=T0 + 200_000))
    path = tmp_path / "expired.html"
    path.write_text(page)
    with Browser() as browser:
        browser.open(path, width=1280, height=700)
        layout = browser.evaluate("""(() => {
          const svg = document.querySelector('figure svg');
          const box = (e) => { const r = e.getBoundingClientRect();
            return {x: r.x, y: r.y, w: r.width, h: r.height}; };
          return {svg: box(svg), from: +svg.dataset.fromMs, to: +svg.dataset.toMs,
            bar: {...box(svg.querySelector('[data-kind=run]')),
                  status: svg.querySelector('[data-kind=run]').dataset.status},
            ghost: box(svg.querySelector('[data-kind=held-unworked]')),
            text: document.body.innerText};
        })()""")
        png = browser.screenshot(full_page=False)
    bar, ghost = layout["bar"], layout["ghost"]
    assert bar["status"] == "expired" and "lease expired" in layout["text"]
    assert bar["x"] + bar["w"] == pytest.approx(_x(layout, T0 + 40_000), abs=1.5)
    assert ghost["x"] == pytest.approx(_x(layout, T0 + 40_000), abs=3)
    assert ghost["x"] + ghost["w"] == pytest.approx(_x(layout, T0 + 100_000), abs=3)
    _, _, rows, channels = _pixels(png)
    y = int(bar["y"] + bar["h"] - 3)
    seen = {tuple(rows[y][x * channels:x * channels + 3])
            for x in range(int(bar["x"]) + 3, int(bar["x"] + bar["w"]) - 3)}

    def near(colour: tuple[int, int, int]) -> bool:
        return any(all(abs(p - q) <= 10 for p, q in zip(colour, pixel, strict=True))
                   for pixel in seen)

    assert near((0xA8, 0x74, 0x2C)) and near((0xD9, 0xB0, 0x7A)), sorted(seen)[:12]
    assert not near((0x2B, 0x8F, 0xD6)) and not near((0x5F, 0xB0, 0xEA))
