"""``python -m jobguard.local.up``: what it refuses before starting anything, each in one
line that names the option or says what to install (the deployment itself is
tests/ship/test_own_stack.py's, with the wheel, MiniStack and the CDK CLI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
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


FAKE_LOCAL_AWS = '''
import json, os
from http.server import BaseHTTPRequestHandler, HTTPServer

STACK = ("<DescribeStacksResponse><DescribeStacksResult><Stacks><member>"
         "<StackName>Billing</StackName><StackStatus>CREATE_COMPLETE</StackStatus>"
         "<CreationTime>2026-01-01T00:00:00Z</CreationTime><Outputs><member>"
         "<OutputKey>TableName</OutputKey><OutputValue>billing-jobs</OutputValue>"
         "</member></Outputs></member></Stacks></DescribeStacksResult>"
         "</DescribeStacksResponse>")


class Answer(BaseHTTPRequestHandler):
    def _send(self, body, kind):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._send(json.dumps({"services": {"dynamodb": "available"}}).encode(),
                   "application/json")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("X-Amz-Target", "").endswith("UpdateTimeToLive"):
            self._send(b'{"TimeToLiveSpecification": {"Enabled": true, '
                       b'"AttributeName": "ttl"}}', "application/x-amz-json-1.0")
        elif os.environ.get("FAKE_NO_TABLE"):  # a stack without jobguard's table
            self._send(STACK.split("<Outputs>")[0].encode()
                       + b"</member></Stacks></DescribeStacksResult></DescribeStacksResponse>",
                       "text/xml")
        else:
            self._send(STACK.encode(), "text/xml")

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", int(os.environ["GATEWAY_PORT"])), Answer).serve_forever()
'''
"""A stand-in for MiniStack's process (the other side of the wire, not our code): it
answers the health check, the stack's outputs and the TTL call, and leads its group as
MiniStack does."""


def _fake_tools(project: Path, tmp_path: Path, cdk: str) -> dict[str, str]:
    """The project's CDK CLI (a script: ``cdk``'s body) and a local AWS stand-in; the
    environment that runs ``python -m jobguard.local.up`` with them."""
    ministack = tmp_path / "fake-ministack"
    ministack.write_text(f"#!{sys.executable}\n{FAKE_LOCAL_AWS}")
    ministack.chmod(0o755)
    tool = project / "node_modules" / ".bin" / "cdk"
    tool.parent.mkdir(parents=True)
    tool.write_text(f"#!/bin/sh\n{cdk}\n")
    tool.chmod(0o755)
    return {**os.environ, "JOBGUARD_MINISTACK": str(ministack),
            "PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), str(ROOT)])}


def _up(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jobguard.local.up", *args,
                           "--dir", str(project)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def _noted_pid(project: Path) -> int:
    return int(json.loads((project / up.STATE_DIR / "kept.json").read_text())["pid"])


def _gone(pid: int) -> bool:
    from jobguard.local.demo import _alive

    return not _alive(pid)


def _stand_ins(tmp_path: Path) -> list[int]:
    """The pids of local AWS stand-ins of this test still running."""
    mark = str(tmp_path / "fake-ministack").encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if mark in (proc / "cmdline").read_bytes() and not _gone(int(proc.name)):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.fixture
def leftovers(tmp_path: Path) -> Iterator[None]:
    """Stops any stand-in a failing test left running."""
    yield
    import signal

    for pid in _stand_ins(tmp_path):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.process
def test_up_keeps_the_local_aws_and_stop_stops_it(project: Path, tmp_path: Path,
                                                  leftovers: None) -> None:
    """GIVEN a project whose deploy succeeds WHEN up THEN the local AWS is kept, noted,
    and its env written; WHEN --stop THEN it ends and both files go."""
    env = _fake_tools(project, tmp_path, "exit 0")
    done = _up(project, env, *DEPLOY)
    assert done.returncode == 0, done.stderr
    state = project / up.STATE_DIR
    pid = _noted_pid(project)
    assert not _gone(pid) and "export JOBGUARD_STACK=Billing" in (state / "env").read_text()
    assert _up(project, env, "--stop").returncode == 0
    assert _gone(pid) and not (state / "env").exists() and not (state / "kept.json").exists()


@pytest.mark.process
def test_a_failed_deploy_leaves_nothing_running(project: Path, tmp_path: Path,
                                                leftovers: None) -> None:
    """GIVEN a project whose cdk deploy fails WHEN up THEN exit 1 with one line naming the
    log, the local AWS it started is stopped, and no note is left."""
    env = _fake_tools(project, tmp_path, "exit 3")
    done = _up(project, env, *DEPLOY)
    assert done.returncode == 1
    assert "deploy.log" in done.stderr.strip().splitlines()[-1]
    assert _stand_ins(tmp_path) == []
    assert not (project / up.STATE_DIR / "kept.json").exists()


@pytest.mark.process
def test_up_killed_during_the_deploy_leaves_a_note_stop_can_use(
        project: Path, tmp_path: Path, leftovers: None) -> None:
    """GIVEN up is killed (SIGKILL, an OOM kill, a closed terminal's group) while cdk runs
    WHEN the user runs --stop THEN the local AWS it had started (in a session of its own,
    so it outlived up) is stopped: up noted it before deploying."""
    env = _fake_tools(project, tmp_path, "kill -9 $PPID; exit 0")
    assert _up(project, env, *DEPLOY).returncode == -9
    started = _stand_ins(tmp_path)
    assert len(started) == 1
    stopped = _up(project, env, "--stop")
    assert stopped.returncode == 0 and "stopped the local AWS" in stopped.stdout, stopped.stdout
    assert _gone(started[0])


@pytest.mark.process
@pytest.mark.parametrize("name", ["env", "kept.json"])
def test_up_writes_its_files_in_place_of_a_symlink_never_through_it(
        project: Path, tmp_path: Path, name: str, leftovers: None) -> None:
    """GIVEN ``.jobguard-local/env`` (or ``kept.json``) is a symlink to a file of the
    user's WHEN up writes it THEN that file is unchanged: the symlink is replaced by the
    file (written whole, then renamed into place)."""
    env = _fake_tools(project, tmp_path, "exit 0")
    profile = tmp_path / "profile"
    profile.write_text("export PATH=/usr/bin\n")
    (project / up.STATE_DIR).mkdir()
    (project / up.STATE_DIR / name).symlink_to(profile)
    assert _up(project, env, *DEPLOY).returncode == 0
    try:
        assert profile.read_text() == "export PATH=/usr/bin\n"
        assert not (project / up.STATE_DIR / name).is_symlink()
    finally:
        _up(project, env, "--stop")


@pytest.mark.parametrize("where", ["missing", "a-file"])
@pytest.mark.parametrize("stop", [False, True], ids=["up", "stop"])
def test_a_dir_that_is_not_a_folder_is_refused_naming_dir(
        project: Path, where: str, stop: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN --dir names no folder (a typo, a file) WHEN up or --stop THEN exit 2 with one
    line naming --dir, and nothing is created there."""
    _with_cdk(project)
    target = project / where
    if where == "a-file":
        target.write_text("")
    args = ["--stop"] if stop else DEPLOY
    assert up.main([*args, "--dir", str(target)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--dir:" in err and str(target) in err, err
    assert not (project / up.STATE_DIR).exists()


@pytest.mark.process
def test_a_stack_without_jobguards_table_is_said_in_one_line(
        project: Path, tmp_path: Path, leftovers: None) -> None:
    """GIVEN --stack names a stack of the app that holds no JobTable (another of its
    stacks) WHEN up deploys it THEN exit 1 with one line naming --stack and the missing
    output (not a traceback), and the local AWS it started is stopped."""
    env = {**_fake_tools(project, tmp_path, "exit 0"), "FAKE_NO_TABLE": "1"}
    done = _up(project, env, *DEPLOY)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and "--stack" in last and "TableName" in last, \
        done.stderr
    assert _stand_ins(tmp_path) == []
