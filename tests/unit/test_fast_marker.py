"""The fast loop keeps its promise (tests/_fast.py): a test without a slow marker that
starts a process, listens on a socket or synthesizes a CDK app fails, naming the marker
it needs; ``-m fast`` never collects the slow suites."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import _fast

ROOT = Path(__file__).resolve().parents[2]
pytest_plugins = ["pytester"]

INNER = '''
import os
import socket
import subprocess
import sys
import types

import pytest


@pytest.fixture
def fake_cdk(monkeypatch):
    # stands in for a loaded construct library (jsii already running)
    class App:
        def synth(self):
            return "synthesized"
    monkeypatch.setitem(sys.modules, "aws_cdk", types.SimpleNamespace(App=App, Stage=App))
    return App


def test_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_listens():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()


def test_synthesizes(fake_cdk):
    fake_cdk().synth()


@pytest.fixture
def server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield


def test_uses_a_fixture_that_serves(server):
    pass


@pytest.fixture(scope="session")
def ends_with_a_process():
    # set up by a slow test, ended after the last (fast) one: not that test's doing
    yield
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.process
def test_marked_process(ends_with_a_process):
    assert subprocess.run([sys.executable, "-c", "print(42)"], capture_output=True,
                          text=True, check=True).stdout == "42\\n"


@pytest.mark.synth
def test_marked_synth(fake_cdk):
    assert fake_cdk().synth() == "synthesized"


def test_plain():
    assert sum([1, 2]) == 3


def test_os_system():
    os.system("true")


def test_spawn_context():
    import multiprocessing
    process = multiprocessing.get_context("spawn").Process(target=print)
    process.start()
    process.join()


def test_udp_server():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))


def test_swallows_the_refusal():
    try:
        subprocess.run([sys.executable, "-c", "pass"])
    except Exception:
        pass


def test_uses_a_slow_suites_fixture(ministack):
    pass


@pytest.fixture(scope="session")
def ministack():
    yield {}


def test_socketpair_is_no_server():
    a, b = socket.socketpair()
    a.close()
    b.close()
'''


@pytest.mark.process  # its marked inner test really starts a process
def test_a_fast_test_that_does_slow_work_fails_naming_the_marker(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest("from tests import _fast\n\n"
                          "def pytest_configure(config):\n    _fast.register(config)\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=4, failed=7, errors=2)
    out = result.stdout.str()
    for test, marker in (("test_starts_a_process", "process"), ("test_listens", "server"),
                         ("test_synthesizes", "synth"),
                         ("test_uses_a_fixture_that_serves", "server"),
                         ("test_os_system", "process"), ("test_spawn_context", "process"),
                         ("test_udp_server", "server"), ("test_swallows_the_refusal", "process"),
                         ("test_uses_a_slow_suites_fixture", "local_aws")):
        line = next(x for x in out.splitlines() if f"test_inner.py::{test} is marked fast" in x)
        assert f"@pytest.mark.{marker}" in line, line
    # -m fast selects exactly the tests without a slow marker
    fast = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-m", "fast",
                                        "--collect-only", "-q")
    selected = {line.split("::")[1] for line in fast.stdout.lines if "::" in line}
    assert selected == {"test_starts_a_process", "test_listens", "test_synthesizes",
                        "test_uses_a_fixture_that_serves", "test_plain", "test_os_system",
                        "test_spawn_context", "test_udp_server", "test_swallows_the_refusal",
                        "test_uses_a_slow_suites_fixture", "test_socketpair_is_no_server"}


@pytest.mark.process
@pytest.mark.parametrize("selection", [_fast.FAST, _fast.UNIT])
def test_the_fast_selection_never_imports_the_slow_suites(selection: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, pytest; code = pytest.main(['--collect-only', "
         f"'-q', '-o', 'addopts=', '-p', 'no:cacheprovider', '-m', {selection!r}, 'tests']); "
         "print('CDK LOADED' if 'aws_cdk' in sys.modules else 'NO CDK'); sys.exit(code)"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    nodes = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(nodes) > 1000
    for slow in ("tests/infra/", "tests/local/", "tests/ship/", "tests/browser/"):
        assert not any(n.startswith(slow) for n in nodes), slow
    assert not any("test_fast_marker.py::test_the_fast_selection" in n for n in nodes)
    long_ones = [n for n in nodes if n.startswith(_fast.LONG_TESTS)]
    if selection == _fast.UNIT:  # make unit leaves the long ones to make test
        assert long_ones == []
    else:
        assert {n.split("::")[0] for n in long_ones} == {
            t.split("::")[0] for t in _fast.LONG_TESTS}
    assert done.stdout.rstrip().endswith("NO CDK")
