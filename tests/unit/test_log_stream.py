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


# -- the level, from the variables Lambda and Powertools users set ----------------------

@pytest.mark.parametrize(("environ", "level"), [
    ({}, "INFO"),
    ({"POWERTOOLS_LOG_LEVEL": "debug"}, "DEBUG"),
    ({"LOG_LEVEL": "ERROR"}, "ERROR"),
    ({"POWERTOOLS_LOG_LEVEL": "WARNING", "LOG_LEVEL": "DEBUG"}, "WARNING"),
    # Lambda's own log-level control wins, in its own words
    ({"AWS_LAMBDA_LOG_LEVEL": "WARN", "POWERTOOLS_LOG_LEVEL": "DEBUG"}, "WARNING"),
    ({"AWS_LAMBDA_LOG_LEVEL": "TRACE"}, "DEBUG"),
    ({"AWS_LAMBDA_LOG_LEVEL": "FATAL"}, "CRITICAL"),
])
def test_the_log_level_comes_from_lambda_then_powertools_variables(environ, level):
    import logging

    from jobguard.observability import _log_level

    assert logging.getLevelName(_log_level(environ)) == level


def test_a_log_level_that_is_no_level_is_refused_naming_the_variable():
    from jobguard.errors import ConfigError
    from jobguard.observability import _log_level

    with pytest.raises(ConfigError) as refused:
        _log_level({"POWERTOOLS_LOG_LEVEL": "verbose"})
    assert refused.value.field == "POWERTOOLS_LOG_LEVEL" and "'verbose'" in str(refused.value)


# -- EMF lines -------------------------------------------------------------------------

def test_more_values_than_one_emf_line_takes_go_on_in_the_next_and_none_is_lost():
    import json

    from jobguard.observability import JobTelemetry

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        telemetry = JobTelemetry("emf-job", {})
        for _ in range(250):
            telemetry.count("ItemsCompleted")
        telemetry.milliseconds("RunDuration", 40.0)
        telemetry.flush()
        telemetry.flush()  # nothing left: no empty line
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    # CloudWatch takes at most 100 values of a metric in one line
    assert [len(line["ItemsCompleted"]) for line in lines] == [100, 100, 50]
    assert "RunDuration" not in lines[0] and lines[-1]["RunDuration"] == [40.0]
    for line in lines:
        directive = line["_aws"]["CloudWatchMetrics"][0]
        assert directive["Namespace"] == "JobGuard"
        assert directive["Dimensions"] == [["job", "service"]]
        assert line["job"] == "emf-job" and line["service"] == "jobguard"
        assert {m["Name"] for m in directive["Metrics"]} == {
            k for k in line if k not in ("_aws", "job", "service")}
