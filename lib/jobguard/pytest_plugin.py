"""The pytest plugin of ``jobguard[testing]`` (entry point ``pytest11``: loaded by pytest
wherever the package is installed, nothing to configure).

The seal: the moment pytest imports this plugin (:func:`jobguard._offline.seal`), before
any conftest or test module, it replaces the environment's AWS credentials, profiles and
endpoint variables with fake ones for the whole session (your region is kept), forgets
boto3's default session, and installs the emulator's interception, so a client your
module makes when it is imported is answered by the sandbox of the test that calls it.
From then on, for the rest of the process, it refuses
(:class:`~jobguard._offline.RequestLeftTheMachine`) any AWS request that no sandbox
answers to a host that is not loopback (clients made before the seal included), any
connection or datagram from a Python socket to an address that is not loopback (urllib,
http.client, requests, raw sockets), and the lookup of any name but ``localhost`` and
the machine's own. Not sealed: code that ran before pytest imported this plugin (a plugin
named with ``-p`` before it: name it after ``-p jobguard``), other processes, and
networking below Python's socket module. Tests meant to reach AWS or the network run
without the plugin: ``pytest -p no:jobguard``.

Fixtures:

- ``jobguard_sandbox``: a :class:`jobguard.testing.Sandbox` for the test: the in-process
  emulator (the session's region) with the jobguard table created and
  ``JOBGUARD_TABLE`` set; ``.wire(handler)`` binds your handler to it (see
  :mod:`jobguard.testing`). It has its own clock, ``jobguard_sandbox.clock``: it takes no
  other fixture, so a project's own fixtures of any name are left alone.
- ``manual_clock``: the sandbox's :class:`jobguard.testing.ManualClock` when the test
  uses ``jobguard_sandbox`` too, a new one otherwise (time moves only when the test says
  so).
- ``lambda_context``: a :class:`jobguard.testing.LambdaContext` (a request id, 15 minutes
  left) on that clock.

Example:
    >>> def test_a_second_tick_is_skipped(jobguard_sandbox):  # doctest: +SKIP
    ...     job = jobguard_sandbox.wire(my_handler.lambda_handler)
    ...     with job.holding():
    ...         assert job.tick(later)["decision"] == "skipped"
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .testing import LambdaContext, ManualClock, Sandbox

__all__ = ["jobguard_sandbox", "lambda_context", "manual_clock",
           "pytest_load_initial_conftests"]

_SANDBOX = "jobguard_sandbox"

if os.environ.get("PYTEST_VERSION"):
    # pytest is loading the plugin (it sets PYTEST_VERSION while it runs): seal now, so
    # the plugins it loads after this one (other entry points, PYTEST_PLUGINS) already
    # see the fake environment. Imported by anything else (a docs build), it seals nothing
    # until the hook below runs.
    from ._offline import seal as _seal

    _seal()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    """Before the first conftest is imported: nothing leaves the machine (already done
    when the plugin was imported under pytest; this covers a pytest that did not say so)."""
    from ._offline import seal

    seal()


@pytest.fixture
def jobguard_sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    """The in-process emulator with the jobguard table, on its own ManualClock."""
    from ._offline import session_region
    from .testing import ManualClock, Sandbox

    with Sandbox.start(clock=ManualClock(), region=session_region()) as sandbox:
        # a wired job's definition environment is set through the test's monkeypatch
        # too: one the test sets after wire() is undone before the definition's, so
        # neither outlives the test, whichever fixture pytest tears down first
        sandbox._setenv = monkeypatch.setenv
        yield sandbox


@pytest.fixture
def manual_clock(request: pytest.FixtureRequest) -> ManualClock:
    """A clock that only moves when the test advances it (the sandbox's, if used)."""
    from .testing import ManualClock

    if _SANDBOX in request.fixturenames:
        clock: ManualClock = request.getfixturevalue(_SANDBOX).clock
        return clock
    return ManualClock()


@pytest.fixture
def lambda_context(request: pytest.FixtureRequest) -> LambdaContext:
    """A Lambda context: a fresh request id, 15 minutes left on the sandbox's clock (when
    the test uses ``jobguard_sandbox``)."""
    from .testing import LambdaContext

    clock = (request.getfixturevalue(_SANDBOX).clock if _SANDBOX in request.fixturenames
             else None)
    return LambdaContext(clock=clock)
