"""`make demo-stop` (``python -m jobguard.local.demo --stop``): the local AWS a `make demo
DEMO_ARGS=--keep` left running is stopped by name, not by a `kill PID` printed once; it
says what it removed, and a pid that is no longer the kept one is never signalled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobguard.local import demo


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The checkout's folder, here a temporary one (``.local`` under it)."""
    (tmp_path / ".local").mkdir()
    monkeypatch.setattr(demo, "ROOT", tmp_path)
    return tmp_path


def _kept(repo: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """GIVEN a kept local AWS: a process leading its own group, its TMPDIR a folder of
    its own (as LocalStack.start starts MiniStack), noted as `--keep` notes it."""
    workdir = repo / "jobguard-ministack-x"
    (workdir / "s3").mkdir(parents=True)
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                               stdin=subprocess.PIPE, start_new_session=True,
                               env={**os.environ, "TMPDIR": str(workdir)})
    demo._note_kept(repo / ".local", pid=process.pid, endpoint="http://127.0.0.1:4566",
                    workdir=workdir)
    return process, workdir


@pytest.mark.process
def test_demo_stop_stops_the_kept_local_aws_and_says_what_it_removed(repo, capsys):
    """WHEN `make demo-stop` THEN the kept process group is stopped, its folder and the
    note removed, and one line says so; a second `make demo-stop` says there is nothing
    to stop (exit 0)."""
    process, workdir = _kept(repo)
    assert demo.main(["--stop"]) == 0
    assert process.wait(10) != 0  # ended by the signal
    (line,) = capsys.readouterr().out.splitlines()
    assert line == (f"stopped the local AWS at http://127.0.0.1:4566 (pid {process.pid} "
                    f"and its workers); removed {workdir}, {repo / '.local' / 'kept.json'}")
    assert not workdir.exists() and not (repo / ".local" / "kept.json").exists()
    assert demo.main(["--stop"]) == 0
    assert capsys.readouterr().out.startswith("no local AWS kept (")


@pytest.mark.process
def test_demo_stop_never_signals_a_pid_that_is_no_longer_the_kept_one(repo, capsys):
    """GIVEN the note names a live process that is not the kept local AWS (another
    TMPDIR: its pid was reused) WHEN `make demo-stop` THEN that process is left running;
    the note is removed and the line says the local AWS was no longer running."""
    process, workdir = _kept(repo)
    note = repo / ".local" / "kept.json"
    note.write_text(json.dumps({**json.loads(note.read_text()),
                                "workdir": str(repo / "another")}))
    try:
        assert demo.main(["--stop"]) == 0
        assert process.poll() is None
        assert f"(pid {process.pid}) was no longer running" in capsys.readouterr().out
        assert not note.exists() and workdir.exists()
    finally:
        process.kill()
        process.wait(10)
