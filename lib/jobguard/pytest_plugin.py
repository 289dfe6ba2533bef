"""The pytest plugin of ``jobguard[testing]`` (entry point ``pytest11``: loaded by pytest
wherever the package is installed, nothing to configure).

Fixtures:

- ``jobguard_sandbox``: a :class:`jobguard.testing.Sandbox` for the test: the in-process
  emulator with the jobguard table created and ``JOBGUARD_TABLE`` set; ``.wire(handler)``
  binds your handler to it (see :mod:`jobguard.testing`).
- ``manual_clock``: the sandbox's :class:`jobguard.testing.ManualClock` (time moves only
  when the test says so).
- ``lambda_context``: a :class:`jobguard.testing.LambdaContext` (a request id, 15 minutes
  left on the manual clock).

Nothing is imported from the emulator until a fixture is used, so the plugin costs
nothing in a test session that does not use it.

Example:
    >>> def test_a_second_tick_is_skipped(jobguard_sandbox):  # doctest: +SKIP
    ...     job = jobguard_sandbox.wire(my_handler.lambda_handler)
    ...     with job.holding():
    ...         assert job.tick(later)["decision"] == "skipped"
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .testing import LambdaContext, ManualClock, Sandbox

__all__ = ["jobguard_sandbox", "lambda_context", "manual_clock"]


@pytest.fixture
def manual_clock() -> ManualClock:
    """A clock that only moves when the test advances it."""
    from .testing import ManualClock

    return ManualClock()


@pytest.fixture
def jobguard_sandbox(manual_clock: ManualClock) -> Iterator[Sandbox]:
    """The in-process emulator with the jobguard table, on ``manual_clock``."""
    from .testing import Sandbox

    with Sandbox.start(clock=manual_clock) as sandbox:
        yield sandbox


@pytest.fixture
def lambda_context(manual_clock: ManualClock) -> LambdaContext:
    """A Lambda context: a fresh request id, 15 minutes left on ``manual_clock``."""
    from .testing import LambdaContext

    return LambdaContext(clock=manual_clock)
