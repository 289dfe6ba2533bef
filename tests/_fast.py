"""The fast loop's promise, kept by every run: a test is *fast* unless a marker says
what makes it slow, and a fast test starts no process, opens no listening socket and
synthesizes no CDK app.

The slow markers (``SLOW``) are given by hand on a test or module, or by directory for
the suites that are slow as a whole (``SLOW_DIRS``). Every other test gets the ``fast``
marker at collection, and while it runs (setup, call and teardown) starting a process,
listening on a socket or synthesizing an app fails it with the marker it should carry.
A fast test that takes seconds (a search, a sweep, a load) is also ``long``: ``make
unit`` leaves those to ``make test`` (``-m "fast and not long"``).
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
LONG = "long"
UNIT = f"{FAST} and not {LONG}"
"""``make unit``'s selection: the fast tests but the long ones."""
# Fast (no server, process, synthesis or browser) but seconds each: in-process searches,
# sweeps and loads, in make test and not in make unit (measured on this 2-core machine
# with make test's three workers: test time in all).
LONG_TESTS = (
    "tests/explorer/test_explorer.py",  # 136 s: the CI seeds and regression histories
    "tests/faults/test_matrix.py",  # 66 s: every AWS call site under every fault
    "tests/faults/test_operator_matrix.py",  # 32 s: every operator command, every fault
    "tests/scenarios/test_trigger_state.py::test_lease_row_stays_bounded",  # 33 s
    "tests/scenarios/test_item_model.py",  # 31 s: the ledger's state-machine model
    "tests/faults/test_load.py",  # 26 s: the fault load
    "tests/faults/test_fleet_load.py",  # 23 s: 10 jobs under partition throttling
    "tests/faults/test_break_load_checker.py",  # 14 s: the load's own checks broken
    "tests/faults/test_valid_requests.py",  # 9 s: every request against the model
)

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


# make test runs three pytest-xdist workers on the two cores (``--dist loadgroup
# --no-loadscope-reorder``). Tests that share something costly to build run on one
# worker, so it is built once: the session fixtures of tests/infra (three syntheses) and
# the deployments of tests/local by directory, a module's own module-scoped fixtures (an
# installed wheel) by module. The longest single units are handed out first (LONG_FIRST:
# measured on this 2-core machine, make test), so no worker is left with one at the end;
# the rest follow, slow suites first.
GROUP_DIRS = {
    # one at a time: each demo run deploys from this checkout (cdk.out/, .local/)
    TESTS / "local": "ministack-deployment",
    TESTS / "infra": "cdk-synthesis",
}
LONG_FIRST = (
    "ministack-deployment",  # 185 s: MiniStack, the stack deployed, the 7 drills; then
    # the same for one job, kept running for the README's operator commands
    "cdk-synthesis",  # 40 s: 143 tests on three syntheses, cfn-lint and checkov
    "tests/ship/test_as_a_user.py",  # 35 s: the wheel installed in a fresh venv
    "tests/ship/test_testing_extra.py",  # 28 s: the wheel, [testing] alone, a fresh venv
    "tests/scenarios/test_trigger_state.py::test_lease_row_stays_bounded",  # 32 s
    "tests/faults/test_load.py",  # 29 s
    "tests/scenarios/test_chaos.py",  # 26 s
    "tests/ship/test_break_ship.py",  # 20 s
    "tests/scenarios/test_item_model.py",  # 14 s
    "tests/faults/test_break_load_checker.py",  # 8 s
)
SLOW_FIRST = ("local_aws", "synth", "browser", "process", "server")
# Shared fixtures of the slow suites: a fast test must not use one (a slow test may have
# started it already in make test; make unit would start it, or fail).
# (By name, in the fixture closure: tests/scenarios' ``table`` is found through its
# ``server``.)
SLOW_FIXTURES = {"server": "server", "ministack": "local_aws", "any_table": "server"}


class SlowInFastTest(AssertionError):
    """A test marked fast did what only a slow marker allows."""


def register(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{FAST}: needs no server, process, synthesis or "
                            "browser (every test without a slow marker)")
    config.addinivalue_line("markers", f"{LONG}: fast, but seconds each: an in-process "
                            "search, sweep or load (tests/_fast.py: LONG_TESTS); make unit "
                            f"runs -m '{UNIT}'")
    for name, why in SLOW.items():
        config.addinivalue_line("markers", f"{name}: {why}")
    if not config.pluginmanager.has_plugin("jobguard-fast"):
        config.pluginmanager.register(_Plugin(), "jobguard-fast")


def is_fast(item: pytest.Item) -> bool:
    return not any(item.get_closest_marker(name) for name in SLOW)


def _order(item: pytest.Item, group: str | None) -> int:
    """Where ``item`` (of xdist ``group``) goes in the run (a stable sort): the long
    units first, then the slow suites, then the fast tests."""
    for i, prefix in enumerate(LONG_FIRST):
        if item.nodeid.startswith(prefix) or group == prefix:
            return i
    return len(LONG_FIRST) + min(
        (i for i, m in enumerate(SLOW_FIRST) if item.get_closest_marker(m)),
        default=len(SLOW_FIRST))


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
        # A selection no test of a slow suite can match (``-m fast``, ``-m long``) never
        # imports it (tests/infra's conftest alone starts Node for jsii).
        marks = _slow_dir(collection_path)
        expression = config.getoption("markexpr", "")
        if marks and expression and not _selects(expression, set(marks)):
            return True
        return None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        groups: dict[str, str | None] = {}
        for item in items:
            for name in _slow_dir(Path(str(item.path))):
                item.add_marker(name)
            if is_fast(item):
                item.add_marker(FAST)
            if item.nodeid.startswith(LONG_TESTS):
                item.add_marker(LONG)
            group = groups[item.nodeid] = _group(item)
            if group is not None and item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(group))
        items.sort(key=lambda item: _order(item, groups[item.nodeid]))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        if is_fast(item):
            # a slow suite's shared fixture, perhaps started already by a slow test: the
            # same test would pass in make test and fail in make unit
            for name, marker in SLOW_FIXTURES.items():
                if name in getattr(item, "fixturenames", ()):
                    raise SlowInFastTest(_message(item, f"uses the fixture {name!r}", marker))
        with _guard(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        with _guard(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item,
                                nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
        if nextitem is None or nextitem.path != item.path:
            # module and session fixtures end here too, started by whichever test (often
            # a slow one) set them up: not this test's doing
            return (yield)
        with _guard(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        report = yield
        refused = item.stash.get(_REFUSED, [])
        if refused:
            if report.passed:
                # the refusal was caught by the code under test (an ``except Exception``,
                # a background thread): the test still fails
                report.outcome = "failed"
                report.longrepr = "\n".join(refused)
            item.stash[_REFUSED] = []
        return report


_REFUSED = pytest.StashKey[list[str]]()


def _message(item: pytest.Item, what: str, marker: str) -> str:
    return (f"{item.nodeid} is marked fast (it carries no slow marker) but {what}: mark it "
            f"@pytest.mark.{marker}, or keep it off that path (tests/_fast.py)")


def _selects(expression: str, marks: set[str]) -> bool:
    """Whether ``-m expression`` can select a test that carries exactly ``marks``."""
    from _pytest.mark.expression import Expression

    return bool(Expression.compile(expression).evaluate(
        lambda name, **kwargs: name in marks))


def _refuse(item: pytest.Item, what: str, marker: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        message = _message(item, what, marker)
        item.stash.setdefault(_REFUSED, []).append(message)
        raise SlowInFastTest(message)
    return refuse


@contextmanager
def _guard(item: pytest.Item) -> Iterator[None]:
    if not is_fast(item):
        yield
        return
    import _posixsubprocess
    import multiprocessing.process

    with ExitStack() as stack:
        patch = pytest.MonkeyPatch()
        stack.callback(patch.undo)
        started = _refuse(item, "started a process", "process")
        patch.setattr(subprocess.Popen, "_execute_child", started)
        # what Popen, multiprocessing's spawn and forkserver and os.system come down to
        patch.setattr(_posixsubprocess, "fork_exec", started)
        if hasattr(subprocess, "_fork_exec"):
            patch.setattr(subprocess, "_fork_exec", started)
        patch.setattr(multiprocessing.process.BaseProcess, "start", started)
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv",
                     "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe"):
            if hasattr(os, name):
                patch.setattr(os, name, _refuse(item, f"called os.{name}", "process"))
        patch.setattr(socket.socket, "listen",
                      _refuse(item, "listened on a socket (a server)", "server"))
        real_bind = socket.socket.bind

        def bind(sock: socket.socket, address: Any) -> None:
            if sock.type == socket.SOCK_DGRAM and sock.family in (socket.AF_INET,
                                                                  socket.AF_INET6):
                _refuse(item, "bound a UDP socket (a server)", "server")()
            real_bind(sock, address)

        patch.setattr(socket.socket, "bind", bind)
        cdk = sys.modules.get("aws_cdk")
        if cdk is not None:  # jsii is running already: synthesis would start no process
            for owner in (cdk.Stage, cdk.App):
                patch.setattr(owner, "synth", _refuse(item, "synthesized a CDK app", "synth"))
        yield
