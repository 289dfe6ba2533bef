"""``pip install 'jobguard[testing]'`` alone, as a project that only tests its handlers
installs it (issue 29, row 6): the wheel with its ``testing`` extra in a new virtual
environment outside the repository. The sandbox, the pytest plugin and ``jobguard local``
work there on the in-process emulator; moto's server (Flask and the parsers of every
AWS service) is not installed, and what needs it says in one line which extra brings it.

The install pins every dependency to the version this repository's environment tested,
as in :mod:`tests.ship.test_as_a_user` (``python -m bench.testing_extra`` measures the
same install from the package index, for its time and size)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._user import _run, _user_env, build_installed

pytestmark = pytest.mark.timeout(600)

SERVER_ONLY = ("flask", "flask_cors", "cfnlint", "docker", "sympy", "networkx",
               "graphql", "aws_xray_sdk", "openapi_spec_validator")
"""Top-level modules that moto[server] (and moto[dynamodb]'s docker) brought along."""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The wheel installed with its ``testing`` extra only into a virtual environment
    outside the repository; yields its bin/."""
    yield from build_installed(tmp_path_factory, extras="testing", timeout=600)


def test_the_testing_extra_brings_no_server(installed: Path, tmp_path: Path) -> None:
    # GIVEN a venv with jobguard[testing] alone
    # WHEN its Python looks for what moto's server brought
    done = _run([str(installed / "python"), "-c",
                 "import importlib.util as u, jobguard.testing, moto; "
                 f"print(' '.join(m for m in {SERVER_ONLY!r} if u.find_spec(m)))"],
                cwd=tmp_path, env=_user_env(installed))
    # THEN none of it is there (the kit and moto are)
    assert done.stdout.strip() == "", done.stdout


def test_a_users_sandbox_test_passes_with_the_testing_extra_alone(installed: Path,
                                                                 tmp_path: Path) -> None:
    # GIVEN a project with one job and a test that wires it into the sandbox
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_job.py").write_text(textwrap.dedent("""
        from datetime import timedelta

        import boto3

        from jobguard import OverlapPolicy, guarded


        @guarded("nightly", policy=OverlapPolicy.SKIP, lease=timedelta(minutes=2))
        def handler(event, context):
            boto3.client("s3").create_bucket(Bucket="nightly-out")
            boto3.client("s3").put_object(Bucket="nightly-out", Key="done", Body=b"1")
            return {"ok": True}


        def test_a_tick_runs_once(jobguard_sandbox):
            job = jobguard_sandbox.wire(handler)
            assert job.tick() == {"ok": True}
            assert job.tick()["decision"] == "duplicate"
            assert sorted(job.decisions()) == ["duplicate", "ran"]
            s3 = jobguard_sandbox.client("s3")
            assert s3.get_object(Bucket="nightly-out", Key="done")["Body"].read() == b"1"
    """))
    # WHEN the user runs pytest
    done = _run([str(installed / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                cwd=tmp_path, env=_user_env(installed))
    # THEN the plugin's sandbox runs it, on the in-process emulator
    assert "1 passed" in done.stdout, done.stdout


def test_jobguard_local_runs_on_the_in_process_emulator(installed: Path,
                                                       tmp_path: Path) -> None:
    # WHEN the user runs `jobguard local` (load under faults, on the embedded emulator)
    done = _run([str(installed / "jobguard"), "local", "--triggers", "5", "--jobs", "1"],
                cwd=tmp_path, env=_user_env(installed))
    # THEN it runs without moto's server, and its checks hold
    assert "violations 0" in done.stdout, done.stdout + done.stderr[-2000:]


def test_the_server_emulator_names_the_local_extra(installed: Path, tmp_path: Path) -> None:
    import subprocess

    # WHEN the user starts the server-based emulator, as a command and from Python
    command = subprocess.run([str(installed / "python"), "-m", "jobguard.local.emulator"],
                             cwd=tmp_path, env=_user_env(installed), capture_output=True,
                             text=True, timeout=120, check=False)
    library = subprocess.run(
        [str(installed / "python"), "-c",
         "from jobguard.local.emulator import LocalAWS\n"
         "try:\n    LocalAWS().start()\nexcept ModuleNotFoundError as exc: print(exc)"],
        cwd=tmp_path, env=_user_env(installed), capture_output=True, text=True, timeout=120,
        check=False)
    # THEN the command ends with one line naming the extra that brings it, no traceback
    assert command.returncode == 2, command.stdout + command.stderr
    assert command.stderr.count("\n") == 1, command.stderr
    assert "pip install 'jobguard[local]'" in command.stderr
    # AND LocalAWS raises the same line (moto's own warning, naming moto[server], is kept
    # out of it)
    assert library.stdout.count("\n") == 1, library.stdout
    assert "pip install 'jobguard[local]'" in library.stdout
    assert "Warning" not in library.stderr, library.stderr
