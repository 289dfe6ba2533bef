"""The local AWS the real stack is deployed into: MiniStack, on 127.0.0.1, a free port.

MiniStack pins botocore exactly, so it lives in a virtual environment of its own
(``.venv-ministack``, created by ``make``, version pinned in :data:`VERSION`). It runs
the stack's Lambda functions in local processes on that environment's interpreter, fires
schedules, runs SQS event source mappings, and executes each DynamoDB request atomically.

Example:
    >>> with LocalStack.start() as aws:       # doctest: +SKIP
    ...     os.environ.update(aws.env)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["ACCOUNT", "REGION", "VERSION", "LocalStack", "client_env", "executable"]

VERSION = "1.5.33"
"""The MiniStack release the Makefile installs (its facts are measured in DESIGN.md)."""
ACCOUNT = "000000000000"
REGION = "us-east-1"
ROOT = Path(__file__).resolve().parents[3]
VENV = ROOT / ".venv-ministack"


def executable() -> Path:
    """The ``ministack`` command of the project's MiniStack environment."""
    override = os.environ.get("JOBGUARD_MINISTACK")
    path = Path(override) if override else VENV / "bin" / "ministack"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: run `make demo` (it installs MiniStack {VERSION} into "
            f"{VENV.name}), or set JOBGUARD_MINISTACK to a ministack executable")
    return path


def client_env(endpoint: str) -> dict[str, str]:
    """What an SDK (ours, the CDK CLI's) needs to talk to the local AWS."""
    return {
        "AWS_ENDPOINT_URL": endpoint, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


WORKDIR_PREFIX = "jobguard-ministack-"
"""How MiniStack's own temporary folder is named (its TMPDIR): ``--stop`` removes no
other folder a note names."""


@dataclass
class LocalStack:
    """A running MiniStack process (or one already running at ``endpoint``)."""

    endpoint: str
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    workdir: Path | None = None
    """MiniStack's own temporary folder (its function workers' code, S3 data): removed
    when it stops, so no run leaves megabytes per function behind in /tmp."""
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def env(self) -> dict[str, str]:
        return client_env(self.endpoint)

    @classmethod
    def start(cls, *, port: int | None = None, log_path: Path | None = None,
              timeout_s: float = 30.0) -> LocalStack:
        """Start MiniStack on 127.0.0.1 (a free port unless ``port``) and wait until
        it answers."""
        import tempfile

        port = port or _free_port()
        workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
        env = {**os.environ, "BIND_HOST": "127.0.0.1", "GATEWAY_PORT": str(port),
               "MINISTACK_HOST": "127.0.0.1", "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO"),
               "TMPDIR": str(workdir), "S3_DATA_DIR": str(workdir / "s3")}
        for name in ("AWS_ENDPOINT_URL", "PYTHONPATH", "VIRTUAL_ENV"):
            env.pop(name, None)
        log = open(log_path, "ab") if log_path else None  # noqa: SIM115 - kept open
        process = subprocess.Popen([str(executable())], env=env, stdout=log or subprocess.DEVNULL,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        stack = cls(endpoint=f"http://127.0.0.1:{port}", process=process, log_path=log_path,
                    workdir=workdir, _log=log)
        deadline = time.monotonic() + timeout_s
        while not stack.ready():
            if process.poll() is not None:
                raise RuntimeError(f"MiniStack exited with {process.returncode} while starting"
                                   + (f"; see {log_path}" if log_path else ""))
            if time.monotonic() > deadline:
                stack.stop()
                raise TimeoutError(f"MiniStack did not answer on port {port} in {timeout_s} s")
            time.sleep(0.1)
        return stack

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/_ministack/health", timeout=2) as r:
                body: dict[str, Any] = json.loads(r.read())
            return body.get("services", {}).get("dynamodb") in ("available", "running")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.workdir is not None and (self.process is None or
                                         self.process.poll() is not None):
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> LocalStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """Set ``env`` in ``os.environ`` for the block."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
