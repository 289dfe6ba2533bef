"""A user's environment outside this repository: the wheel built from the repository's
files and installed with its ``cdk`` and ``testing`` extras into a fresh virtual
environment (shared by the tests of tests/ship that act as a user, built once a session),
and the shell such a user has.

The install pins every dependency to the version this repository's environment tested
(a constraints file from it); pip fetches from its cache or the package index. The
jsii package cache is shared with the repository's, so the synth stays fast."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobguard.local.node import pinned_node

ROOT = Path(__file__).resolve().parents[2]


def _run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, (
        f"{' '.join(command)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def build_installed(tmp_path_factory: pytest.TempPathFactory, *, extras: str = "cdk,testing",
                    timeout: float = 900) -> Iterator[Path]:
    """The wheel, built from the repository's files and installed with ``extras`` into
    a virtual environment outside the repository; yields that environment's bin/."""
    work = tmp_path_factory.mktemp("user")
    clone = work / "clone"
    clone.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, clone / name)
    shutil.copytree(ROOT / "lib", clone / "lib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    # the README's commands, in the clone then in the user's project
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", "dist", "."], cwd=clone)
    (wheel,) = (clone / "dist").glob("jobguard-*.whl")
    _run([sys.executable, "-m", "venv", str(work / "venv")], cwd=work)
    frozen = _run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], cwd=work).stdout
    constraints = work / "constraints.txt"
    constraints.write_text("\n".join(
        line for line in frozen.splitlines()
        if not line.startswith(("jobguard", "-e")) and " @ " not in line))
    bin_dir = work / "venv" / "bin"
    _run([str(bin_dir / "pip"), "install", "-q", "--no-compile", "--disable-pip-version-check",
          "--constraint", str(constraints), f"{wheel}[{extras}]"], cwd=work, timeout=timeout)
    yield bin_dir


def _user_env(installed: Path) -> dict[str, str]:
    """A user's shell: the venv activated, nothing of this repository on the path; their
    Node a supported LTS (the one this repository pins, given to jsii as JSII_NODE)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "JOBGUARD_", "AWS_", "PYTEST_"))}
    ours = str(Path(sys.executable).parent)  # make puts this repository's .venv/bin first
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours]
    env["PATH"] = os.pathsep.join([str(installed), *path])
    node = pinned_node()
    if node is not None:
        env["JSII_NODE"] = str(node)
    env["VIRTUAL_ENV"] = str(installed.parent)
    env.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".jsii-cache"))
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


