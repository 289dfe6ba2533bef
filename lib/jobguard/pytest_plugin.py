"""The pytest plugin of ``jobguard[testing]`` (entry point ``pytest11``: loaded by pytest
wherever the package is installed, nothing to configure).

No request leaves the machine. When pytest loads the plugin, before any conftest or test
module is imported (:mod:`jobguard._offline`), it replaces the environment's AWS
credentials, profiles and endpoint variables with fake ones for the whole session
(your region is kept), installs the emulator's interception, so a client your module
makes when it is imported is answered by the sandbox of the test that calls it, and
refuses any request to a host that is neither loopback nor answered by a sandbox.
Tests meant to reach AWS run without the plugin: ``pytest -p no:jobguard``.

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

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .testing import LambdaContext, ManualClock, Sandbox

__all__ = ["jobguard_sandbox", "lambda_context", "manual_clock",
           "pytest_load_initial_conftests"]

_SANDBOX = "jobguard_sandbox"


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    """Before the first conftest is imported: nothing leaves the machine."""
    from ._offline import seal

    seal()


@pytest.fixture
def jobguard_sandbox() -> Iterator[Sandbox]:
    """The in-process emulator with the jobguard table, on its own ManualClock."""
    from ._offline import session_region
    from .testing import ManualClock, Sandbox

    with Sandbox.start(clock=ManualClock(), region=session_region()) as sandbox:
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
