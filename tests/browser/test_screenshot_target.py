"""``make screenshot``: the commands its recipe runs work on a drills page as ``make
demo`` writes it (every drill), and one of them takes docs/timeline.png, a timeline for
the docs to show (issue 31, item 5.5). Run here on a page rendered from every drill's
name, into a temporary folder: the recipe's lines, their paths swapped, nothing else.

Skipped, saying why, where Chromium is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import shlex
import struct
from pathlib import Path

from jobguard.drill.drills import DRILLS
from jobguard.ids import new_run_id
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import DrillSection, Window, build_timeline, render_drills_page

from . import NEEDS_CHROMIUM
from .chromium import main

pytestmark = NEEDS_CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_800_000_000_000


def _recipe() -> list[list[str]]:
    """The screenshot target's `python -m tests.browser.chromium` commands, as argv."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    lines = text.split("\nscreenshot:", 1)[1].split("\n\n", 1)[0].splitlines()
    return [shlex.split(line.split("-m tests.browser.chromium", 1)[1]) for line in lines
            if "-m tests.browser.chromium" in line]


def _drills_page() -> str:
    sections = []
    for n, drill in enumerate(DRILLS):
        start = T0 + n * 60_000
        runs = [RunRecord(job="crm-sync", run_id=new_run_id(start + k * 10_000),
                          trigger_id=f"crm-sync@{n}-{k}", trigger_kind="tick",
                          policy="QUEUE", decision=Decision.RAN, status=RunStatus.SUCCEEDED,
                          started_at_ms=start + k * 10_000,
                          ended_at_ms=start + k * 10_000 + 8_000, fence=k + 1)
                for k in range(3)]
        timeline = build_timeline([("crm-sync", runs)], Window(start, start + 40_000),
                                  now_ms=T0 + 3_600_000, title=f"drill {drill.name}")
        sections.append(DrillSection(name=drill.name, title=drill.name, held=True,
                                     seconds=30.0, injected=["a fault"],
                                     checks=[("destination", "no duplicate", True)],
                                     timeline=timeline))
    return render_drills_page(sections, generated_at_ms=T0 + 3_600_000)


def test_the_recipe_takes_a_timeline_for_the_docs_and_every_element_it_names_is_there(
        tmp_path):
    recipe = _recipe()
    outputs = [argv[1] for argv in recipe]
    assert "docs/timeline.png" in outputs, outputs
    assert all(argv[0] == ".local/drills.html" for argv in recipe)  # the page of every drill
    page = tmp_path / "drills.html"
    page.write_text(_drills_page())
    for argv in recipe:
        png = tmp_path / Path(argv[1]).name
        # WHEN the recipe's command runs (on this page, into this folder)
        assert main([str(page), str(png), *argv[2:]]) == 0, argv
        # THEN it wrote a picture (a named element that is missing is an error, exit 1)
        width, height = struct.unpack(">II", png.read_bytes()[16:24])
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and width > 600 and height > 80
    # and docs/timeline.png is a timeline: the chart, as wide as the page's content
    width, height = struct.unpack(">II", (tmp_path / "timeline.png").read_bytes()[16:24])
    assert 1000 <= width <= 1280 and height < 600, (width, height)
