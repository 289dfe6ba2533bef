"""Issue 34, lower item: a page written to the shared temporary folder is private.

``jobguard timeline --open`` without ``--html`` writes the page (the run log's text,
errors included) to the temporary folder, which every user of the machine can list: it
is created readable and writable by its owner only (0600), whatever the umask. A page
written with ``--html FILE`` is the operator's own file, in a folder they chose: a new
one gets the permissions their umask gives any new file, as their shell would.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobguard.cli import main
from tests.timeline._support import put_run as _run


@pytest.fixture
def umask_0() -> Iterator[None]:
    """The most permissive umask: any file mode seen is the one the code asked for."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_open_writes_the_page_to_a_private_file_in_the_temporary_folder(
        env, capsys, monkeypatch, tmp_path: Path, umask_0):
    """GIVEN a run log WHEN `timeline --open` writes the page to the temporary folder
    (here a folder of the test's) THEN the file is 0600 even under umask 0, and it is
    the file the browser is asked to open."""
    _, store = env
    _run(store, int(time.time() * 1000) - 60_000)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    assert main(["timeline", "crm-sync", "--since", "1h", "--open"]) == 0
    (page,) = tmp_path.glob("jobguard-timeline-*.html")
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    assert opened == [page.resolve().as_uri()]
    assert "<svg" in page.read_text() and str(page) in capsys.readouterr().out


def test_html_file_gets_the_umasks_permissions(env, tmp_path: Path):
    """GIVEN umask 022 WHEN `timeline --html FILE` writes a new page THEN it is 0644, as
    any file the operator's shell creates (the folder is theirs to choose)."""
    _, store = env
    _run(store, int(time.time() * 1000) - 60_000)
    old = os.umask(0o022)
    try:
        page = tmp_path / "timeline.html"
        assert main(["timeline", "crm-sync", "--since", "1h", "--html", str(page)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(page.stat().st_mode) == 0o644
