"""The local AWS leaves nothing behind: its process group and its temporary folder
(function workers' code, S3 data) go when it stops, also when it is interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.local_aws, pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_stopped_local_aws_leaves_no_process_and_no_files() -> None:
    from jobguard.local.ministack import LocalStack

    aws = LocalStack.start()
    assert aws.process is not None and aws.workdir is not None and aws.workdir.is_dir()
    pid, workdir = aws.process.pid, aws.workdir
    (workdir / "ministack-lambda-fn-x").mkdir()  # what a function worker leaves
    aws.stop()
    assert not _alive(pid) and not workdir.exists()


def test_a_demo_stopped_by_sigterm_stops_the_local_aws_and_removes_its_files(
        tmp_path: Path) -> None:
    """GIVEN a process that started the local AWS the way the demo does (SIGTERM turned
    into an orderly exit) WHEN it receives SIGTERM THEN MiniStack is gone and so is its
    temporary folder."""
    script = tmp_path / "hold.py"
    script.write_text(textwrap.dedent("""
        import signal, sys, time
        from jobguard.local.ministack import LocalStack
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        aws = LocalStack.start()
        try:
            print(aws.process.pid, aws.workdir, flush=True)
            time.sleep(120)
        finally:
            aws.stop()
    """))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout is not None
    pid_text, workdir_text = proc.stdout.readline().split()
    assert _alive(int(pid_text)) and Path(workdir_text).is_dir()
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(60) == 143
    assert not _alive(int(pid_text)) and not Path(workdir_text).exists()
