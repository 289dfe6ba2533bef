"""jobguard's log lines go to the stdout of the moment they are written.

A user's test suite swaps stdout per test (pytest's ``capsys``) and closes the stream it
swapped in. Powertools' handler keeps the stream it was made with, so a logger first made
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
