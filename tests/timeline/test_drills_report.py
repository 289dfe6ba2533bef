"""``jobguard drill --html``: the drills' results are printed even when their page
cannot be written after a minute of drills (its folder removed meanwhile). The page is
the real one (drawn from a table of records); no stack is needed for what is printed."""

from __future__ import annotations

import json
import shutil

from jobguard.drill.report import DrillResult, JobTally
from jobguard.drill.runner import report_drills
from jobguard.ids import new_run_id
from jobguard.records import Decision, RunRecord, RunStatus
from jobguard.timeline import DrillSection, Window, build_timeline, render_drills_page
from jobguard.timeline.command import check_html_path

T0 = 1_800_000_000_000


def _results() -> list[DrillResult]:
    result = DrillResult("lease-expiry", "a worker freezes with its lease",
                         injected=["crm-sync run 1 frozen"], started_at_ms=T0,
                         ended_at_ms=T0 + 30_000, seconds=30.0)
    result.check("runs", "run 2 took over with the next fence", True)
    result.tallies.append(JobTally("crm-sync", triggers=2, runs=2, takeovers=1))
    return [result]


def _page(results: list[DrillResult]) -> str:
    run = RunRecord(job="crm-sync", run_id=new_run_id(T0 + 1_000), trigger_id="crm-sync@t",
                    trigger_kind="tick", policy="SKIP", decision=Decision.RAN,
                    status=RunStatus.SUCCEEDED, started_at_ms=T0 + 1_000,
                    ended_at_ms=T0 + 9_000, fence=1)
    timeline = build_timeline([("crm-sync", [run])], Window(T0, T0 + 30_000),
                              now_ms=T0 + 30_000)
    return render_drills_page([DrillSection(
        name=r.name, title=r.title, held=r.held, seconds=r.seconds, injected=r.injected,
        checks=[(c.side, c.what, c.ok) for c in r.checks], timeline=timeline)
        for r in results], generated_at_ms=T0 + 30_000)


def test_the_results_are_printed_when_the_page_cannot_be_written_late(tmp_path, capsys):
    """GIVEN --html checked before the drills, its folder removed while they ran WHEN
    the drills end THEN the table is printed, then the error naming the page, exit 1;
    with --json the summary is printed whole, the error in it and on stderr."""
    folder = tmp_path / "gone"
    folder.mkdir()
    html = check_html_path(str(folder / "drills.html"))
    shutil.rmtree(folder)
    results = _results()
    assert report_drills(results, html=html, page=lambda: _page(results), quiet=False) == 1
    out, err = capsys.readouterr()
    assert "lease-expiry" in out and "held" in out and "drills page:" not in out
    assert err.startswith(f"error: timeline: could not write {html}: "), err
    assert report_drills(results, html=html, page=lambda: _page(results), quiet=True) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["held"] is True and report["drills"][0]["name"] == "lease-expiry"
    assert "html" not in report and str(html) in report["html_error"] and str(html) in err


def test_a_page_that_cannot_be_built_still_leaves_the_results(tmp_path, capsys):
    """GIVEN the run log unreadable when the page is drawn (the read raises) WHEN the
    drills end THEN the table is printed and the failure said, exit 1."""
    def unreadable() -> str:
        raise ConnectionError("the local AWS stopped")

    html = check_html_path(str(tmp_path / "drills.html"))
    assert report_drills(_results(), html=html, page=unreadable, quiet=False) == 1
    out, err = capsys.readouterr()
    assert "lease-expiry" in out
    assert err == (f"error: drills page: not written to {html}: ConnectionError: the local "
                   "AWS stopped\n"), err
    assert not html.exists()


def test_a_written_page_is_named_after_the_table(tmp_path, capsys):
    results = _results()
    html = check_html_path(str(tmp_path / "drills.html"))
    assert report_drills(results, html=html, page=lambda: _page(results), quiet=False) == 0
    out, err = capsys.readouterr()
    assert out.rstrip().endswith(f"drills page: {html}") and err == ""
    assert "1 of 1 drills held" in html.read_text()
