"""The fast loop's promise, kept by every run: a test is *fast* unless a marker says
what makes it slow, and a fast test starts no process, opens no listening socket and
synthesizes no CDK app. ``make unit`` runs the fast tests only (``-m fast``).

The slow markers (``SLOW``) are given by hand on a test or module, or by directory for
the suites that are slow as a whole (``SLOW_DIRS``). Every other test gets the ``fast``
marker at collection, and while it runs (setup, call and teardown) starting a process,
listening on a socket or synthesizing an app fails it with the marker it should carry.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

SLOW = {
    "server": "needs the embedded emulator server in a process of its own",
    "local_aws": "deploys the stack into MiniStack and runs the drills (the make demo path)",
    "browser": "renders a page in headless Chromium (skipped where Chromium is not installed)",
    "synth": "imports the CDK construct library or synthesizes an app (jsii runs Node)",
    "process": "starts a process (a Python interpreter, pip, a linter)",
}
FAST = "fast"

TESTS = Path(__file__).resolve().parent
# Suites (and modules) slow as a whole: what each of their tests needs.
SLOW_DIRS = {
    TESTS / "infra": ("synth",),
    TESTS / "ship": ("synth", "process"),
    TESTS / "local": ("local_aws", "process"),
    TESTS / "browser": ("browser", "process"),
    # imports jobguard.cdk (the role's statements) at collection
    TESTS / "handlers" / "test_review_iam_calls.py": ("synth",),
}


# make test runs on both cores (pytest-xdist, ``--dist loadgroup``). Tests that share
# something costly to build run on one worker, so it is built once: a suite's session
# fixtures (the syntheses of tests/infra, the deployment of tests/local) by directory, and
# a module's own module-scoped fixtures by module. The groups that take longest go first,
# so neither worker is left with a long one at the end.
GROUP_DIRS = {
    TESTS / "local": "ministack-deployment",
    TESTS / "infra": "cdk-synthesis",
}


class SlowInFastTest(AssertionError):
    """A test marked fast did what only a slow marker allows."""


def register(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{FAST}: needs no server, process, synthesis or "
                            "browser (every test without a slow marker; make unit)")
    for name, why in SLOW.items():
        config.addinivalue_line("markers", f"{name}: {why}")
    if not config.pluginmanager.has_plugin("jobguard-fast"):
        config.pluginmanager.register(_Plugin(), "jobguard-fast")


def is_fast(item: pytest.Item) -> bool:
    return not any(item.get_closest_marker(name) for name in SLOW)


def _group(item: pytest.Item) -> str | None:
    path = Path(str(item.path))
    for directory, group in GROUP_DIRS.items():
        if directory == path or directory in path.parents:
            return group
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        for definitions in info.name2fixturedefs.values():
            if any(d.scope in ("module", "class") and d.baseid for d in definitions):
                return item.nodeid.split("::", 1)[0]
    return None


def _slow_dir(path: Path) -> tuple[str, ...]:
    for directory, marks in SLOW_DIRS.items():
        if directory == path or directory in path.parents:
            return marks
    return ()


class _Plugin:
    def pytest_ignore_collect(self, collection_path: Path, config: pytest.Config) -> bool | None:
        # ``-m fast`` never imports the slow suites (tests/infra's conftest alone starts
        # Node for jsii).
        if config.getoption("markexpr", "") == FAST and _slow_dir(collection_path):
            return True
        return None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            for name in _slow_dir(Path(str(item.path))):
                item.add_marker(name)
            if is_fast(item):
                item.add_marker(FAST)
            group = _group(item)
            if group is not None and item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(group))
        # slow suites first (stable within each): a worker takes the long groups early
        rank = {name: i for i, name in enumerate(("local_aws", "synth", "browser", "process",
                                                  "server"))}
        items.sort(key=lambda item: min(
            (rank[m] for m in rank if item.get_closest_marker(m)), default=len(rank)))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        with _guard(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        with _guard(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, Any]:
        with _guard(item):
            return (yield)


def _refuse(item: pytest.Item, what: str, marker: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise SlowInFastTest(
            f"{item.nodeid} is marked fast (it carries no slow marker) but {what}: mark it "
            f"@pytest.mark.{marker}, or keep it off that path (tests/_fast.py)")
    return refuse


@contextmanager
def _guard(item: pytest.Item) -> Iterator[None]:
    if not is_fast(item):
        yield
        return
    with ExitStack() as stack:
        patch = pytest.MonkeyPatch()
        stack.callback(patch.undo)
        patch.setattr(subprocess.Popen, "_execute_child",
                      _refuse(item, "started a process", "process"))
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                patch.setattr(os, name, _refuse(item, f"called os.{name}", "process"))
        patch.setattr(socket.socket, "listen",
                      _refuse(item, "listened on a socket (a server)", "server"))
        cdk = sys.modules.get("aws_cdk")
        if cdk is not None:  # jsii is running already: synthesis would start no process
            for owner in (cdk.Stage, cdk.App):
                patch.setattr(owner, "synth", _refuse(item, "synthesized a CDK app", "synth"))
        yield
