"""Review of the run timeline (issue 13): what the browser test does not hold. Each of
these passes on the branch; each fails on a change to the renderer that the branch's
own suite (tests/browser, tests/timeline) lets through, named in its docstring:

- lease lost drawn with the abandoned pattern, running drawn in the succeeded green;
- the dotted "lease held, no heartbeat" line of a dead worker removed;
- the "ran later as" line of a coalesced trigger ending at the wrong run.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobguard.ids import new_run_id
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import Window, build_timeline, render_page
from jobguard.timeline.html import PAD, PLOT_W, WIDTH

from . import NEEDS_CHROMIUM
from .chromium import Browser
from .test_timeline_page import _pixels

pytestmark = NEEDS_CHROMIUM

T0 = 1_800_000_000_000
SPAN = 300_000


def _run(start_s: int, end_s: int | None, status: str, fence: int, trigger: str | None = None,
         **extra: Any) -> RunRecord:
    return RunRecord(job="crm-sync", run_id=new_run_id(T0 + start_s * 1000),
                     trigger_id=trigger or f"crm-sync@{start_s}", trigger_kind="tick",
                     policy="COALESCE", decision=Decision.RAN, status=RunStatus(status),
                     started_at_ms=T0 + start_s * 1000,
                     ended_at_ms=None if end_s is None else T0 + end_s * 1000, fence=fence,
                     extra=extra)


@pytest.fixture(scope="module")
def drawn(tmp_path_factory) -> dict[str, Any]:
    """crm-sync: run 1 with a coalesced tick and its follow-up; a worker that died after
    its last heartbeat at 110 s, taken over at 150 s; a run that lost its lease to a
    replacing one; a run still holding the lease."""
    one = _run(10, 70, "succeeded", 1)
    coalesced = RunRecord(job="crm-sync", run_id=new_run_id(T0 + 30_000),
                          trigger_id="crm-sync@c", trigger_kind="tick", policy="COALESCE",
                          decision=Decision.COALESCED, status=RunStatus.COALESCED,
                          started_at_ms=T0 + 30_000, ended_at_ms=T0 + 30_000,
                          holder_run_id=one.run_id, holder_fence=1)
    follow_up = _run(80, 90, "succeeded", 2, trigger=f"crm-sync@follow-up:{one.run_id}")
    dead = _run(100, 110, "abandoned", 3)
    taker = _run(150, 170, "succeeded", 4, displaced_run_id=dead.run_id)
    lost = _run(180, 235, "lease_lost", 5)
    replacing = _run(200, 215, "succeeded", 6, displaced_run_id=lost.run_id)
    running = _run(250, None, "running", 7)
    records = [one, coalesced, follow_up, dead, taker, lost, replacing, running]
    page = render_page(build_timeline([("crm-sync", records)], Window(T0, T0 + SPAN),
                                      now_ms=T0 + SPAN))
    path = tmp_path_factory.mktemp("gaps") / "page.html"
    path.write_text(page)
    with Browser() as browser:
        browser.open(path, width=1280, height=900)
        layout = browser.evaluate("""(() => {
          const svg = document.querySelector('figure svg');
          const box = (e) => { const r = e.getBoundingClientRect();
            return {x: r.x, y: r.y, w: r.width, h: r.height}; };
          return {svg: box(svg),
            bars: [...svg.querySelectorAll('[data-kind=run]')].map(e => ({...box(e),
              status: e.dataset.status, start: +e.dataset.startMs, end: +e.dataset.endMs})),
            ghosts: [...svg.querySelectorAll('[data-kind=held-unworked]')].map(box),
            became: [...svg.querySelectorAll('path.became')].map(box),
            marks: [...svg.querySelectorAll('[data-kind=decision]')].map(box)};
        })()""")
        png = browser.screenshot(full_page=False)
    return {"layout": layout, "png": png, "dead": dead, "taker": taker,
            "follow_up": follow_up}


def _x(layout: dict[str, Any], ms: int) -> float:
    svg = layout["svg"]
    return float(svg["x"] + (PAD + (ms - T0) / SPAN * PLOT_W) * svg["w"] / WIDTH)


def _bar(layout: dict[str, Any], start_ms: int) -> dict[str, Any]:
    return next(b for b in layout["bars"] if b["start"] == start_ms)


PATTERNS = {"lease_lost": {(0x8E, 0x3F, 0xA8), (0xB5, 0x7C, 0xCB)},
            "abandoned": {(0x8D, 0x8D, 0x8D), (0x5E, 0x5E, 0x5E)},
            "running": {(0x2B, 0x8F, 0xD6), (0x5F, 0xB0, 0xEA)}}


@pytest.mark.parametrize("status", sorted(PATTERNS))
def test_each_patterned_status_shows_its_own_stripes(drawn, status):
    """THEN along its bar's lower edge a lease-lost, abandoned or running bar shows both
    colours of its own pattern (mutant: ``.s-lease_lost`` filled with ``#p-aband``, or
    ``.s-running`` with ``--ok``: the branch's colour check covers the four plain
    statuses only)."""
    width, height, rows, channels = _pixels(drawn["png"])
    (bar,) = [b for b in drawn["layout"]["bars"] if b["status"] == status]
    y = int(bar["y"] + bar["h"] - 3)
    seen = {tuple(rows[y][x * channels:x * channels + 3])
            for x in range(int(bar["x"]) + 3, int(bar["x"] + bar["w"]) - 3)}

    def near(colour: tuple[int, ...]) -> bool:
        return any(all(abs(p - q) <= 10 for p, q in zip(colour, pixel, strict=True))
                   for pixel in seen)

    assert all(near(colour) for colour in PATTERNS[status]), (status, sorted(seen)[:12])


def test_a_dead_workers_lease_is_dotted_from_its_last_heartbeat_to_the_takeover(drawn):
    """THEN one dotted line runs along the abandoned run's row from its last heartbeat
    to the taker's start (mutant: the line never drawn)."""
    layout = drawn["layout"]
    dead = _bar(layout, drawn["dead"].started_at_ms)
    (ghost,) = layout["ghosts"]
    assert ghost["x"] == pytest.approx(_x(layout, drawn["dead"].ended_at_ms), abs=3)
    assert ghost["x"] + ghost["w"] == pytest.approx(
        _x(layout, drawn["taker"].started_at_ms), abs=3)
    assert dead["y"] <= ghost["y"] + ghost["h"] / 2 <= dead["y"] + dead["h"]


def test_a_coalesced_triggers_line_ends_at_the_follow_up_it_became(drawn):
    """THEN the coalesced mark's "ran later as" line ends at the follow-up's start, up
    to its bar (mutant: the line ends 40 units to the right, at no run)."""
    layout = drawn["layout"]
    follow_up = _bar(layout, drawn["follow_up"].started_at_ms)
    (line,) = layout["became"]
    assert line["x"] + line["w"] == pytest.approx(follow_up["x"], abs=2)
    assert follow_up["y"] <= line["y"] <= follow_up["y"] + follow_up["h"]
