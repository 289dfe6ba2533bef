"""jobguard's log lines go to the stdout of the moment they are written.

A user's test suite swaps stdout per test (pytest's ``capsys``) and closes the stream it
swapped in. A logging handler keeps the stream it was made with, so a logger first made
under one test would write every later line into a closed stream: the line is lost, and
logging's error report prints the exception being handled (a secret the redact hook was
there to hide) on stderr.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from jobguard.observability import JobLogger, _logger

pytestmark = pytest.mark.fast


def test_a_line_written_after_stdout_was_swapped_and_closed_reaches_the_new_stdout():
    # GIVEN jobguard's logger, made (or first used) while one stdout was in place
    first, second, errors = io.StringIO(), io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(errors):
        with contextlib.redirect_stdout(first):
            logger = JobLogger(_logger(), "stream-job")
            logger.warning("under the first stdout")
        first.close()  # what a per-test capture does when its test ends

        # WHEN a line is written under the next one, while an exception is handled
        with contextlib.redirect_stdout(second):
            try:
                raise ConnectionError("token=SECRET refused")
            except ConnectionError:
                logger.warning("under the second stdout")

    # THEN it is there, and logging reported no error (nor printed the exception)
    assert "under the second stdout" in second.getvalue()
    assert '"job":"stream-job"' in second.getvalue().replace(" ", "")
    assert errors.getvalue() == ""


def test_a_line_written_while_there_is_no_stdout_goes_to_stderr_and_leaks_nothing():
    # GIVEN a process without a stdout (started with fd 1 closed, pythonw, a detached
    # daemon): sys.stdout is None. Before the logger followed stdout, Powertools' handler
    # was made with logging's default for a missing stream, stderr, and the line was there.
    import sys

    errors = io.StringIO()
    logger = JobLogger(_logger(), "no-stdout-job")
    saved = sys.stdout
    with contextlib.redirect_stderr(errors):
        sys.stdout = None  # type: ignore[assignment]
        try:
            # WHEN a line is written while an exception is handled
            try:
                raise ConnectionError("token=SECRET refused")
            except ConnectionError:
                logger.warning("with no stdout")
            _logger().registered_handler.flush()  # what logging.shutdown does at exit
        finally:
            sys.stdout = saved

    # THEN the line is on stderr, and no logging error report printed the exception
    assert "with no stdout" in errors.getvalue()
    assert "Logging error" not in errors.getvalue()
    assert "SECRET" not in errors.getvalue()

