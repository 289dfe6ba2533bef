"""jobguard's log and EMF lines, written with the standard library in the shape
Powertools' Logger and Metrics wrote them: what users' log queries, alarms and bills rely
on (one line each, keys present only with a value, text as it is, the level and the
metrics switch from the same variables, no value lost to a failed write)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.fast


@pytest.mark.process
def test_a_line_is_written_once_though_the_lambda_runtime_has_a_root_handler():
    """Lambda's Python runtime puts a handler on the root logger before the function's
    code is imported. jobguard's lines go to stdout once, by its own handler: not a
    second time through the runtime's (as ``[INFO]\\t<time>\\t<request id>\\t...``)."""
    script = textwrap.dedent("""
        import contextlib, io, logging
        root_said = io.StringIO()
        logging.getLogger().addHandler(logging.StreamHandler(root_said))  # the runtime's
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            from jobguard.observability import JobTelemetry
            JobTelemetry("dup-job", {}).logger.info("trigger not run")
            logging.getLogger("botocore").warning("a library's own line")
        print(out.getvalue().count("trigger not run"), root_said.getvalue().count("trigger"),
              root_said.getvalue().count("a library's own line"))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env=os.environ, timeout=60, check=True)
    on_stdout, on_root, others_on_root = map(int, result.stdout.split())
    # (and the runtime's handler still writes everything else)
    assert (on_stdout, on_root, others_on_root) == (1, 0, 1), result.stdout


def test_a_key_with_no_value_is_left_out_of_the_line(log_lines):
    """A bound key or an extra whose value is None is not written (a Logs Insights query
    asks ``ispresent(field)``): the "malformed trigger message" line of a message
    without a field has no ``field``."""
    from jobguard.observability import JobTelemetry

    telemetry = JobTelemetry("none-job", {})
    telemetry.bind(run_id="r-1", trigger_id=None)
    try:
        telemetry.logger.warning("malformed trigger message",
                                 extra={"field": None, "error": "not JSON"})
    finally:
        telemetry.unbind("run_id", "trigger_id")
    (line,) = [json.loads(text) for text in log_lines.getvalue().splitlines()]
    assert line["run_id"] == "r-1" and line["error"] == "not JSON"
    assert "field" not in line and "trigger_id" not in line, line


def test_an_extra_never_takes_the_place_of_the_lines_own_keys(log_lines):
    from jobguard.observability import JobTelemetry

    JobTelemetry("keys-job", {}).logger.warning("run ended", extra={
        "level": "DEBUG", "location": "x:1", "service": "x", "status": "failed"})
    (line,) = [json.loads(text) for text in log_lines.getvalue().splitlines()]
    assert (line["level"], line["service"], line["status"]) == ("WARNING", "jobguard", "failed")
    assert line["location"].startswith("test_an_extra_never_takes_the_place")


@pytest.mark.parametrize(("variable", "value"), [("POWERTOOLS_METRICS_DISABLED", "true"),
                                                 ("POWERTOOLS_DEV", "1")])
def test_metrics_disabled_as_for_powertools_keeps_the_emf_line_off_stdout(
        monkeypatch, variable, value):
    """POWERTOOLS_METRICS_DISABLED=true (or POWERTOOLS_DEV=true): no EMF line, as for
    Powertools' own metrics in the same function, and no custom metric billed."""
    from jobguard.observability import JobTelemetry

    monkeypatch.setenv(variable, value)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        telemetry = JobTelemetry("quiet-job", {})
        telemetry.count("ItemsCompleted")
        telemetry.flush()
    assert '"_aws"' not in out.getvalue(), out.getvalue()


def test_metrics_disabled_false_wins_over_dev_mode(monkeypatch):
    from jobguard.observability import JobTelemetry

    monkeypatch.setenv("POWERTOOLS_DEV", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        telemetry = JobTelemetry("loud-job", {})
        telemetry.count("ItemsCompleted")
        telemetry.flush()
    assert '"ItemsCompleted":[1.0]' in out.getvalue()


def test_a_metrics_switch_that_is_neither_true_nor_false_is_refused_naming_it(monkeypatch):
    from jobguard.errors import ConfigError
    from jobguard.observability import JobTelemetry

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "sometimes")
    with pytest.raises(ConfigError) as refused:
        JobTelemetry("bad-job", {})
    assert refused.value.field == "POWERTOOLS_METRICS_DISABLED"


def test_a_value_whose_line_failed_to_write_goes_out_with_the_next_flush():
    """A write that failed (a closed pipe) keeps the values for the next flush."""
    from jobguard.observability import JobTelemetry

    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("EPIPE")

    telemetry = JobTelemetry("lost-job", {})
    telemetry.count("ItemsCompleted", 5)
    with contextlib.redirect_stdout(Broken()), contextlib.suppress(OSError):
        telemetry.flush()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        telemetry.flush()
    assert out.getvalue().count('"ItemsCompleted":[5.0]') == 1, out.getvalue()


def test_text_is_written_as_it_is_and_control_characters_escaped(log_lines):
    """Non-ASCII text as it is (a search for ``José`` finds the line); a control
    character escaped (nothing in a line drives a terminal)."""
    from jobguard.observability import JobTelemetry

    JobTelemetry("text-job", {}).logger.warning("record rejected: no work id",
                                                extra={"error": "José ✓ \x1b[2J"})
    assert "José ✓" in log_lines.getvalue() and "\x1b" not in log_lines.getvalue()
    assert json.loads(log_lines.getvalue())["error"] == "José ✓ \x1b[2J"


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
    ({"AWS_LAMBDA_LOG_LEVEL": "WARNING"}, "WARNING"),  # Python's word for it too
])
def test_the_log_level_comes_from_lambda_then_powertools_variables(environ, level):
    import logging

    from jobguard.observability import _log_level

    assert logging.getLevelName(_log_level(environ)) == level


@pytest.mark.parametrize("variable", ["AWS_LAMBDA_LOG_LEVEL", "POWERTOOLS_LOG_LEVEL",
                                      "LOG_LEVEL"])
def test_a_log_level_that_is_no_level_is_refused_naming_the_variable(variable):
    from jobguard.errors import ConfigError
    from jobguard.observability import _log_level

    with pytest.raises(ConfigError) as refused:
        _log_level({variable: "verbose"})
    assert refused.value.field == variable and "'verbose'" in str(refused.value)


# -- EMF lines -------------------------------------------------------------------------

def test_more_values_than_one_emf_line_takes_go_on_in_the_next_and_none_is_lost():
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


def test_a_line_holding_a_lone_surrogate_is_written_escaped_not_lost():
    """Bad data (a source id with a lone surrogate, as a JSON decoder can hand over)
    in a line: written, escaped, on a UTF-8 stdout that refuses the raw character, and
    no logging error printed."""
    import sys

    from jobguard.observability import JobTelemetry

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    errors = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errors):
        JobTelemetry("surrogate-job", {}).logger.warning(
            "record rejected: no work id", extra={"source_id": "contact-\ud800"})
        sys.stdout.flush()
    line = json.loads(raw.getvalue().decode("utf-8"))
    assert line["source_id"] == "contact-\ud800" and errors.getvalue() == ""
