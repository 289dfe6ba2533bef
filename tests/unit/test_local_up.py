"""``python -m jobguard.local.up``: what it refuses before starting anything, each in one
line that names the option or says what to install (the deployment itself is
tests/ship/test_own_stack.py's, with the wheel, MiniStack and the CDK CLI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobguard.local import up
from jobguard.local.ministack import VERSION

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ["--app", "python app.py", "--stack", "Billing"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder, no `cdk` on PATH, no JOBGUARD_MINISTACK."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JOBGUARD_MINISTACK", raising=False)
    folder = tmp_path / "billing"
    folder.mkdir()
    return folder


def _with_cdk(project: Path) -> None:
    cdk = project / "node_modules" / ".bin" / "cdk"
    cdk.parent.mkdir(parents=True)
    cdk.write_text("#!/bin/sh\nexit 1\n")
    cdk.chmod(0o755)


def _refused(project: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert up.main([*args, "--dir", str(project)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert not (project / up.STATE_DIR).exists()  # nothing started, nothing written
    return err


def test_no_cdk_cli_says_how_to_install_it(project: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(project, capsys, *DEPLOY)
    assert "no CDK CLI" in err and f"npm install aws-cdk@{up.CDK_VERSION}" in err


def test_no_ministack_says_how_to_install_it_in_its_own_venv(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _with_cdk(project)
    err = _refused(project, capsys, *DEPLOY)
    assert "python3 -m venv .venv-ministack" in err and f"ministack=={VERSION}" in err


def test_a_missing_jobguard_ministack_is_named(project: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _with_cdk(project)
    monkeypatch.setenv("JOBGUARD_MINISTACK", str(project / "nowhere" / "ministack"))
    assert "JOBGUARD_MINISTACK:" in _refused(project, capsys, *DEPLOY)


@pytest.mark.parametrize(("args", "named"), [
    (["-c", "drills"], "-c: 'drills' is not key=value"),
    (["-c", "jobguard:local=false"], "-c: jobguard:local is set by this command"),
    (["--stack", "1-billing"], "--stack: '1-billing' is not a stack name"),
])
def test_bad_options_are_refused_naming_the_option(project: Path, args: list[str], named: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _with_cdk(project)
    assert named in _refused(project, capsys, *DEPLOY, *args)


def test_app_and_stack_are_required(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        up.main(["--stack", "Billing", "--dir", str(project)])
    assert exited.value.code == 2 and "--app is required" in capsys.readouterr().err


def test_stop_with_nothing_running_says_so(project: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert up.main(["--stop", "--dir", str(project)]) == 0
    assert "nothing to stop" in capsys.readouterr().out


@pytest.mark.process
def test_stop_never_signals_a_pid_that_is_not_the_kept_ministack(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a note left by an earlier run whose MiniStack ended, its pid now another
    # process's (one that leads no process group)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state = project / up.STATE_DIR
        state.mkdir()
        (state / "kept.json").write_text(json.dumps({
            "pid": other.pid, "endpoint": "http://127.0.0.1:1", "workdir": None}))
        (state / "env").write_text("export AWS_ENDPOINT_URL=http://127.0.0.1:1\n")
        # WHEN the user stops it THEN nothing is signalled, the note and the env file go
        assert up.main(["--stop", "--dir", str(project)]) == 0
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
    out = capsys.readouterr().out
    assert "was no longer running" in out and str(state / "env") in out
    assert not (state / "kept.json").exists() and not (state / "env").exists()


def test_the_exports_point_jobguard_at_the_local_aws() -> None:
    lines = up.env_lines("http://127.0.0.1:4566", "Billing")
    assert "export AWS_ENDPOINT_URL=http://127.0.0.1:4566" in lines
    assert "export JOBGUARD_STACK=Billing" in lines
    assert {"export AWS_ACCESS_KEY_ID=test", "export AWS_SECRET_ACCESS_KEY=test",
            "export AWS_DEFAULT_REGION=us-east-1"} <= set(lines)


def test_the_cdk_version_it_names_is_the_pinned_one() -> None:
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert pinned == up.CDK_VERSION


def _leader(tmpdir: Path | None) -> subprocess.Popen[bytes]:
    """A process leading its own group (as the user's shell or another tool's daemon
    does), with ``tmpdir`` as its TMPDIR."""
    env = {**os.environ, **({"TMPDIR": str(tmpdir)} if tmpdir else {})}
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE, start_new_session=True, env=env)


def _note(project: Path, **kept: object) -> Path:
    state = project / up.STATE_DIR
    state.mkdir(exist_ok=True)
    (state / "kept.json").write_text(json.dumps({"endpoint": "http://127.0.0.1:1", **kept}))
    return state


@pytest.mark.process
@pytest.mark.parametrize("noted_workdir", [True, False], ids=["its-tmpdir", "no-workdir"])
def test_stop_never_signals_or_removes_what_a_hand_edited_note_names(
        project: Path, tmp_path: Path, noted_workdir: bool,
        capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN a note edited by hand (or left by another tool) that names a live process
    leading its own group, e.g. a shell, and either that process's own TMPDIR, a folder of
    the user's (not MiniStack's ``jobguard-ministack-*``), or no folder at all
    WHEN the user runs --stop THEN the process keeps running and the folder keeps its
    files; the note goes and the line says nothing was running."""
    precious = tmp_path / "my-files"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    other = _leader(precious)
    try:
        _note(project, pid=other.pid, workdir=str(precious) if noted_workdir else None)
        assert up.main(["--stop", "--dir", str(project)]) == 0
        assert other.poll() is None, "--stop signalled a process that is not MiniStack"
    finally:
        other.kill()
        other.wait(10)
    assert (precious / "thesis.tex").read_text() == "years of work"
    assert "was no longer running" in capsys.readouterr().out
    assert not (project / up.STATE_DIR / "kept.json").exists()


@pytest.mark.process
def test_stop_never_removes_a_folder_a_stale_note_names_that_is_not_ministacks(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN a note whose MiniStack has ended (its pid is gone) and whose folder was edited
    to name one of the user's folders WHEN --stop THEN that folder is left as it was."""
    precious = tmp_path / "my-files"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(10)
    _note(project, pid=gone.pid, workdir=str(precious))
    assert up.main(["--stop", "--dir", str(project)]) == 0
    assert (precious / "thesis.tex").read_text() == "years of work"
    out = capsys.readouterr().out
    assert "was no longer running" in out and str(precious) not in out.split("removed")[1]
