"""``jobguard timeline`` as an operator meets it: every bad range, job or file refused
naming its option (exit 2, no traceback, nothing written); empty logs, hostile and
damaged run records shown for what they are. In process, on the in-process emulator."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from jobguard.cli import main
from jobguard.ids import new_run_id
from jobguard.requests import Take
from jobguard.schema import job_pk, run_sk
from tests.timeline._support import put_run as _run


def _refused(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    (line,) = captured.err.splitlines()
    return line


@pytest.mark.parametrize(("argv", "said"), [
    (["--since", "24"], r"^error: --since: '24' is not a duration"),
    (["--since", "yesterday"], r"^error: --since: 'yesterday' is not a duration"),
    (["--since", "0h"], r"^error: --since: '0h' is an empty range"),
    (["--since", "90d"], r"^error: --since: 90d is longer than 31 days"),
    (["--since", "1h", "--from", "2026-01-01T00:00:00Z"], r"^error: --since: give --since "
     r"or --from/--to, not both"),
    (["--from", "2026-01-01T00:00:00Z"], r"^error: --to: --from needs --to"),
    (["--to", "2026-01-01T00:00:00Z"], r"^error: --from: --to needs --from"),
    (["--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00:00Z"],
     r"^error: --to: 2026-01-01T00:00:00Z is before --from .*reversed"),
    (["--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T00:00:00Z"],
     r"^error: --to: .* the range is empty"),
    (["--from", "2026-01-01T00:00:00", "--to", "2026-01-02T00:00:00Z"],
     r"^error: --from: '2026-01-01T00:00:00' has no timezone"),
    (["--from", "01/01/2026", "--to", "2026-01-02T00:00:00Z"],
     r"^error: --from: '01/01/2026' is not an ISO 8601 time"),
    (["--from", "2026-01-01T00:00:00Z", "--to", "2026-03-01T00:00:00Z"],
     r"^error: --to: the range is 59 days, 0:00:00, longer than 31 days"),
    (["--width", "20"], r"^error: --width: give 60 to 1000 columns"),
    (["--html", "/no/such/folder/t.html"], r"^error: --html: '/no/such/folder/t.html': no "
     r"folder"),
    (["--html", "/tmp"], r"^error: --html: '/tmp' is a folder"),
])
def test_a_bad_range_or_file_is_refused_naming_the_option(env, capsys, argv, said):
    ddb, store = env
    _run(store, int(time.time() * 1000) - 60_000)
    line = _refused(["timeline", "crm-sync", *argv], capsys)
    assert re.search(said, line), line


def test_an_unknown_job_is_refused_naming_the_nearest(env, capsys):
    _, store = env
    _run(store, int(time.time() * 1000) - 60_000)
    from jobguard.triggers import Trigger, TriggerKind

    # the table knows a job by its lease row; crm-synk has none and is not defined
    store.take(Take(Trigger("crm-sync", "crm-sync@manual:1", TriggerKind.MANUAL),
                    run_id=new_run_id(1), owner="w", now_ms=1, lease_ms=1000))
    line = _refused(["timeline", "crm-sync", "crm-synk"], capsys)
    assert line.startswith("error: JOB: no job 'crm-synk'") and "did you mean 'crm-sync'" in line


def test_an_empty_log_says_so(env, capsys, tmp_path: Path):
    """GIVEN a defined job that never ran WHEN its timeline is drawn THEN the terminal
    view and the page say there is nothing in the range (no error)."""
    assert main(["timeline", "crm-sync", "--since", "1h", "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert "crm-sync: 0 runs; 0 not run" in out and "(none in this range)" in out
    page = tmp_path / "empty.html"
    assert main(["timeline", "crm-sync", "--html", str(page)]) == 0
    assert "no runs and no decisions in this range" in page.read_text()


def _markup(html: str) -> tuple[set[str], set[str]]:
    """The element and attribute names a browser's parser finds in the page."""
    from html.parser import HTMLParser

    tags: set[str] = set()
    attributes: set[str] = set()

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            tags.add(tag)
            attributes.update(name for name, _ in attrs)

    Parser().feed(html)
    return tags, attributes


HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>\x1b[2J\u202e'


def test_hostile_records_are_text_never_markup_or_terminal_codes(env, capsys, tmp_path):
    """GIVEN run records whose run id, trigger, error, detail and requested_by carry
    markup, a terminal escape and a bidirectional override WHEN drawn THEN the page
    holds them escaped (no element, no attribute from them) and the terminal view
    without control characters."""
    ddb, store = env
    now = int(time.time() * 1000)
    run_id = new_run_id(now - 60_000)
    # (the hostile id in the key too: a record whose id is not its key's is damaged)
    item = {"pk": {"S": job_pk("crm-sync")}, "sk": {"S": run_sk(run_id + HOSTILE)},
            "job": {"S": "crm-sync"}, "run_id": {"S": run_id + HOSTILE},
            "trigger_id": {"S": HOSTILE}, "trigger_kind": {"S": HOSTILE},
            "decision": {"S": "ran"}, "status": {"S": "failed"},
            "started_at_ms": {"N": str(now - 60_000)}, "ended_at_ms": {"N": str(now - 50_000)},
            "fence": {"N": "7"}, "error": {"S": HOSTILE * 50}, "detail": {"S": HOSTILE},
            "requested_by": {"S": HOSTILE}, "selected": {"S": HOSTILE}}
    ddb.put_item(TableName=store.table_name, Item=item)
    page = tmp_path / "hostile.html"
    assert main(["timeline", "crm-sync", "--since", "1h", "--html", str(page)]) == 0
    html = page.read_text()
    tags, attributes = _markup(html)
    assert not {"script", "img"} & tags and "onerror" not in attributes, (tags, attributes)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\x1b" not in html and "\u202e" not in html
    assert len(html) < 200_000  # a 50-fold error is cut, not repeated in full
    capsys.readouterr()
    assert main(["timeline", "crm-sync", "--since", "1h", "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "failed" in out


def test_a_damaged_run_record_is_named_and_the_rest_still_shown(env, capsys):
    ddb, store = env
    now = int(time.time() * 1000)
    good = _run(store, now - 120_000)
    bad = new_run_id(now - 60_000)
    ddb.put_item(TableName=store.table_name, Item={
        "pk": {"S": job_pk("crm-sync")}, "sk": {"S": run_sk(bad)}, "job": {"S": "crm-sync"},
        "run_id": {"S": bad}, "status": {"S": "exploded"}})
    assert main(["--json", "timeline", "crm-sync", "--since", "1h"]) == 0
    (lane,) = json.loads(capsys.readouterr().out)["jobs"]
    assert [r["run_id"] for r in lane["runs"]] == [good.run_id]
    (unreadable,) = lane["unreadable"]
    assert unreadable == f"RUN#{bad}: status 'exploded' is not a run status jobguard writes"


def test_clock_skewed_records_are_drawn_where_they_claim_and_said(env, capsys):
    """GIVEN a run whose worker's clock ran 10 minutes ahead (in the range's future) and
    one that ended before it started WHEN drawn THEN both are there, the second with
    its note."""
    _, store = env
    now = int(time.time() * 1000)
    ahead = _run(store, now + 600_000)
    reversed_ = _run(store, now - 30_000, ended_at_ms=now - 40_000)
    assert main(["--json", "timeline", "crm-sync", "--from",
                 time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now / 1000 - 3600)),
                 "--to", time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                       time.gmtime(now / 1000 + 3600))]) == 0
    runs = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["jobs"][0]["runs"]}
    assert runs[ahead.run_id]["start_ms"] == now + 600_000
    assert runs[reversed_.run_id]["end_ms"] == now - 30_000
    assert "clock skew" in " ".join(runs[reversed_.run_id]["notes"])


def test_several_jobs_share_one_axis_and_open_writes_a_page(env, capsys, tmp_path,
                                                             monkeypatch):
    _, store = env
    now = int(time.time() * 1000)
    _run(store, now - 60_000)
    _run(store, now - 30_000, job="report-export", trigger_id="report-export@t")
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or False)
    page = tmp_path / "two.html"
    assert main(["timeline", "crm-sync", "report-export", "crm-sync", "--html", str(page),
                 "--open"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {page}: crm-sync, report-export, 2 runs")
    assert "no browser could be opened here" in out and opened == [page.resolve().as_uri()]
    html = page.read_text()
    # one chart for both jobs: opened on their last minute of the 24 h asked, the whole
    # range a second chart behind a click
    shown, whole = html.split('<details class="whole">')
    assert shown.count('class="lanegrp"') == 2 and shown.count("<svg xmlns") == 1
    assert whole.count('class="lanegrp"') == 2 and whole.count("<svg xmlns") == 1


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def test_a_run_that_started_before_the_range_and_ran_into_it_is_drawn(env, capsys):
    """GIVEN a 20-minute run that started 10 minutes before the range (run ids sort by
    start: the read looks an hour back) and one that ended before the range WHEN drawn
    THEN the first is a bar clipped at the range's start, the second is counted outside."""
    _, store = env
    start = (int(time.time() * 1000) // 60_000 - 30) * 60_000
    into = _run(store, start - 600_000, ended_at_ms=start + 600_000)
    before = _run(store, start - 1_200_000, ended_at_ms=start - 1_100_000)
    assert main(["--json", "timeline", "crm-sync", "--from", _iso(start),
                 "--to", _iso(start + 1_200_000)]) == 0
    (lane,) = json.loads(capsys.readouterr().out)["jobs"]
    assert [r["run_id"] for r in lane["runs"]] == [into.run_id]
    assert lane["runs"][0]["notes"] == ["started before the range"]
    assert lane["outside"] == 1 and before.run_id not in json.dumps(lane)


def test_a_page_is_written_whole_or_not_at_all(env, capsys, tmp_path, monkeypatch):
    """GIVEN a page already there WHEN writing the new one fails at its rename THEN the
    old page is untouched and no temporary file is left beside it."""
    _, store = env
    _run(store, int(time.time() * 1000) - 60_000)
    page = tmp_path / "t.html"
    page.write_text("the old page")

    def fail(*_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", fail)
    assert main(["timeline", "crm-sync", "--html", str(page)]) == 1
    assert page.read_text() == "the old page" and [p.name for p in tmp_path.iterdir()] == [
        "t.html"]
    err = capsys.readouterr().err
    assert err == f"error: timeline: could not write {page}: disk full\n", err


def test_html_never_replaces_or_writes_through_a_link_or_a_device(env, capsys, tmp_path):
    """GIVEN ``--html`` naming a symbolic link to another file, and a character device
    (a copy of /dev/null made in a temporary folder, where this user may make one) WHEN
    asked THEN each is refused naming --html (exit 2), and the link, its target and the
    device are as they were."""
    _run(env[1], int(time.time() * 1000) - 60_000)
    target = tmp_path / "keep.txt"
    target.write_text("someone else's file")
    link = tmp_path / "page.html"
    link.symlink_to(target)
    line = _refused(["timeline", "crm-sync", "--html", str(link)], capsys)
    assert line.startswith(f"error: --html: {str(link)!r} is a symbolic link"), line
    assert link.is_symlink() and target.read_text() == "someone else's file"
    import os
    import stat

    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        return  # no right to make a device node here: the link case stands alone
    line = _refused(["timeline", "crm-sync", "--html", str(device)], capsys)
    assert line.startswith(f"error: --html: {str(device)!r} is a character device"), line
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_a_new_page_takes_the_umask_and_a_rewritten_one_keeps_its_mode(env, capsys,
                                                                       tmp_path):
    """GIVEN umask 027 WHEN a new page is written THEN it is 0640, as any new file; WHEN
    a page kept private (0600) is written again THEN it stays 0600 (never widened)."""
    import os
    import stat

    _run(env[1], int(time.time() * 1000) - 60_000)
    private = tmp_path / "private.html"
    private.write_text("old")
    private.chmod(0o600)
    old = os.umask(0o027)
    try:
        assert main(["timeline", "crm-sync", "--html", str(tmp_path / "new.html")]) == 0
        assert main(["timeline", "crm-sync", "--html", str(private)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.html").stat().st_mode) == 0o640
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text().startswith("<!doctype html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.html", "private.html"]


def test_a_name_that_became_a_pipe_after_its_check_is_left_alone(tmp_path):
    """GIVEN a page's name checked as free, then made a FIFO before the page is written
    (another process, in between) WHEN written THEN an error naming it, the FIFO
    untouched, no temporary file left."""
    import os
    import stat

    from jobguard.errors import JobGuardError
    from jobguard.timeline.command import check_html_path, write_page

    target = check_html_path(str(tmp_path / "late.html"))
    os.mkfifo(target)
    with pytest.raises(JobGuardError, match="a FIFO .* now, not a regular file"):
        write_page("<!doctype html>", target)
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["late.html"]


@pytest.mark.parametrize(("given", "said"), [
    ("2026-01-01", "'2026-01-01' is a date without a time"),
    ("2026-01-01Z", "'2026-01-01Z' is a date without a time"),
    ("2026-01-01+02:00", "'2026-01-01+02:00' is a date without a time"),
    ("2026-01-01T00:30", "'2026-01-01T00:30' has no timezone"),
])
def test_the_example_a_refusal_gives_is_accepted_when_typed_back(env, capsys, given, said):
    line = _refused(["timeline", "crm-sync", "--from", given, "--to",
                     "2026-01-02T00:00:00Z"], capsys)
    assert said in line, line
    (example,) = re.findall(r"\(e\.g\. ([^)]+)\)", line)
    assert main(["timeline", "crm-sync", "--from", example, "--to",
                 "2026-01-02T00:00:00Z"]) == 0, capsys.readouterr().err


def test_a_range_of_one_millisecond_is_drawn(env, capsys):
    """The shortest range the axis has: 1 ms (a shorter one is refused, naming --to)."""
    assert main(["--json", "timeline", "crm-sync", "--from", "2026-01-01T00:00:00.000Z",
                 "--to", "2026-01-01T00:00:00.001Z"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["to_ms"] - report["from_ms"] == 1


def test_the_chart_opens_on_the_runs_and_whole_range_draws_the_range_asked(env, capsys,
                                                                            tmp_path):
    """Issue 31, item 5.2: `--since 1h` over a run of seconds a minute ago opens on that
    minute, saying so; `--whole-range` draws the hour (terminal and page)."""
    _, store = env
    _run(store, int(time.time() * 1000) - 60_000)
    assert main(["timeline", "crm-sync", "--since", "1h", "--width", "100"]) == 0
    zoomed = capsys.readouterr().out
    assert "where the runs are; the range asked was" in " ".join(zoomed.split())
    assert main(["timeline", "crm-sync", "--since", "1h", "--width", "100",
                 "--whole-range"]) == 0
    whole = capsys.readouterr().out
    assert "where the runs are" not in whole
    (zoomed_runs,) = [x for x in zoomed.splitlines() if x.startswith("runs ")]
    (whole_runs,) = [x for x in whole.splitlines() if x.startswith("runs ")]
    assert whole_runs.count("=") <= 2 < zoomed_runs.count("=")  # an hour: one column
    page = tmp_path / "whole.html"
    assert main(["timeline", "crm-sync", "--since", "1h", "--html", str(page),
                 "--whole-range"]) == 0
    assert 'class="whole"' not in page.read_text()
    assert main(["timeline", "crm-sync", "--since", "1h", "--html", str(page)]) == 0
    assert 'class="whole"' in page.read_text()
