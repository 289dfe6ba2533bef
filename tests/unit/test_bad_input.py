"""Bad input at the entry points that are not Lambda events: job definitions
(``JobDefinition``, ``guarded()``) and the ``jobguard`` command's arguments.

(``JobConfig``'s own table and the unsafe-configuration rules are in test_config.py;
the Lambda events and the functions' environment in tests/handlers/test_bad_input.py.)
Every case asserts the field, and the CLI cases that nothing was written.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from jobguard import ConfigError, OverlapPolicy, guarded
from jobguard.cli import main
from jobguard.definitions import DRILL_TIMEOUT, JobDefinition
from jobguard.dynamodb import create_table
from jobguard.local.emulator import in_process

S = timedelta(seconds=1)
GOOD: dict[str, Any] = {"name": "crm-sync", "handler": "handlers.crm_sync.lambda_handler",
                        "schedule": "rate(5 minutes)", "policy": OverlapPolicy.COALESCE,
                        "timeout": 240 * S, "lease": 120 * S, "overlap_alarm_share": 0.75}

DEFINITIONS: dict[str, tuple[dict[str, Any], str]] = {
    "a name with the key delimiter": ({"name": "crm#sync"}, "name"),
    "a name that is not a string": ({"name": 7}, "name"),
    "a handler without a function": ({"handler": "handlers"}, "handler"),
    "a handler path": ({"handler": "handlers/crm_sync.py"}, "handler"),
    "a schedule in seconds": ({"schedule": "rate(30 seconds)"}, "schedule"),
    "a cron with five fields": ({"schedule": "cron(0 2 * * *)"}, "schedule"),
    "a reconciler schedule that is not one": ({"reconciler_schedule": "hourly"},
                                              "reconciler_schedule"),
    "an unknown policy": ({"policy": "SOMETIMES"}, "policy"),
    "a timeout in seconds as an int": ({"timeout": 240}, "timeout"),
    "a timeout over 15 minutes": ({"timeout": 16 * 60 * S}, "timeout"),
    "a lease as an int": ({"lease": 120}, "lease"),
    "a skew margin as a float": ({"skew_margin": 5.0}, "skew_margin"),
    "a claim as an int": ({"claim_for": 60}, "claim_for"),
    "a batch size of 0": ({"batch_size": 0}, "batch_size"),
    "memory as a bool": ({"memory_mb": True}, "memory_mb"),
    "memory below Lambda's minimum": ({"memory_mb": 64}, "memory_mb"),
    "max_queued 0": ({"max_queued": 0}, "max_queued"),
    "stale_after negative": ({"stale_after": -S}, "stale_after"),
    "an alarm share as a string": ({"overlap_alarm_share": "0.8"}, "overlap_alarm_share"),
    "an alarm share over 1": ({"overlap_alarm_share": 1.5}, "overlap_alarm_share"),
    # 80% of 5 minutes is the 4-minute timeout: no run reports a duration that long
    "an overlap alarm no run can reach": ({"overlap_alarm_share": 0.8}, "overlap_alarm_share"),
    "an overlap alarm at the whole timeout of a cron job": (
        {"schedule": "cron(0 2 * * ? *)", "overlap_alarm_share": 1.0}, "overlap_alarm_share"),
    "a monthly cron without its interval": ({"schedule": "cron(0 2 1 * ? *)"}, "cron_interval"),
    "a cron interval on a rate schedule": ({"cron_interval": 300 * S}, "cron_interval"),
    "a cron interval shorter than its ticks": (
        {"schedule": "cron(0 2 * * ? *)", "cron_interval": 3600 * S}, "cron_interval"),
    "a cron interval in seconds": (
        {"schedule": "cron(0 2 1 * ? *)", "cron_interval": 90 * S}, "cron_interval"),
    "a weekly job watched for three weeks": (
        {"schedule": "cron(0 0 ? * SUN *)"}, "no_success_alarm_intervals"),
    "a monthly job watched by CloudWatch": (
        {"schedule": "cron(0 2 1 * ? *)", "cron_interval": 31 * 86400 * S,
         "no_success_alarm_intervals": 1}, "no_success_alarm_intervals"),
    "a no-success count of 0": ({"no_success_alarm_intervals": 0}, "no_success_alarm_intervals"),
    "a pause alarm past CloudWatch's 7 days": (
        {"paused_alarm_after": 8 * 86400 * S}, "paused_alarm_after"),
    "a skipped alarm count as a bool": ({"skipped_alarm_count": True}, "skipped_alarm_count"),
    "a description that is not text": ({"description": None}, "description"),
    "environment values that are not strings": ({"environment": {"BATCH": 5}}, "environment"),
    "an environment name with a dash": ({"environment": {"NOTES-TABLE": "x"}}, "environment"),
    "an environment that is a list": ({"environment": ["NOTES=x"]}, "environment"),
}


@pytest.mark.parametrize("case", sorted(DEFINITIONS))
def test_a_malformed_job_definition_is_refused_naming_the_field(case):
    options, field = DEFINITIONS[case]
    with pytest.raises(ConfigError) as info:
        JobDefinition(**{**GOOD, **options})
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


# case: (args, options, the field named, what the message must say besides)
GUARDED: dict[str, tuple[tuple[Any, ...], dict[str, Any], str, str]] = {
    "a misspelt option": (("crm-sync",), {"leese": 300 * S}, "options", "'leese'"),
    "an unknown policy": (("crm-sync",), {"policy": "SOMETIMES"}, "policy",
                          "unknown policy 'SOMETIMES'; one of SKIP, QUEUE, COALESCE, REPLACE"),
    "a policy that is not a string": (("crm-sync",), {"policy": 2}, "policy",
                                      "unknown policy 2; one of SKIP, QUEUE, COALESCE, REPLACE"),
    "a job name with a space": (("crm sync",), {}, "name", "'crm sync'"),
    "a lease of two heartbeats": (("crm-sync",), {"lease": 60 * S, "heartbeat_every": 30 * S},
                                  "heartbeat_every", ""),
    "a config and options": ((GOOD and JobDefinition(**GOOD).config(),),
                             {"lease": 60 * S}, "options",
                             "give either a JobConfig or options, not both: ['lease']"),
}


@pytest.mark.parametrize("case", sorted(GUARDED))
def test_guarded_refuses_at_definition_time_naming_the_field(case):
    args, options, field, says = GUARDED[case]
    with pytest.raises(ConfigError) as info:
        guarded(*args, **options)(lambda event, context: None)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert says in str(info.value)


# -- the jobguard command ------------------------------------------------------------------


@pytest.fixture
def table(monkeypatch):
    """A jobguard table in the in-process emulator; the command runs against it."""
    with in_process() as emu:
        ddb = emu.client("dynamodb")
        name = f"jobguard-{uuid.uuid4().hex[:8]}"
        create_table(ddb, name)
        monkeypatch.setenv("JOBGUARD_TABLE", name)
        monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
        monkeypatch.setenv("JOBGUARD_JOBS_MODULE", "handlers.jobs")  # the example jobs
        yield ddb, name


CLI: dict[str, tuple[list[str], str]] = {
    "a job with the key delimiter": (["status", "crm#sync"], "JOB"),
    "an empty job": (["pause", "", "--reason", "x"], "JOB"),
    "runs: --last 0": (["runs", "crm-sync", "--last", "0"], "--last"),
    "runs: --last negative": (["runs", "crm-sync", "--last", "-3"], "--last"),
    "runs: an unknown --status": (["runs", "crm-sync", "--status", "failde"], "--status"),
    "run: a run id that is not one": (["run", "not-a-run-id"], "RUN_ID"),
    "run: a malformed --job": (["run", "01M8K455D5SMBCC61XNCBKW1C4", "--job", "a#b"], "--job"),
    "pause: a blank --reason": (["pause", "crm-sync", "--reason", "  "], "--reason"),
    "release: without --force": (["release", "crm-sync"], "--force"),
    "runbook: a job that is not defined": (["runbook", "no-such-job"], "JOB"),
    "runbook: a jobs module that does not exist": (
        ["--jobs-module", "handlers.no_such_module", "runbook", "crm-sync"], "--jobs-module"),
    "a malformed --table": (["--table", "jobguard table", "status", "crm-sync"], "--table"),
    "a malformed --endpoint-url": (["--endpoint-url", "localhost:4566", "status", "crm-sync"],
                                   "--endpoint-url"),
    "a malformed --region": (["--region", "EU West", "status", "crm-sync"], "--region"),
    "a profile that does not exist": (["--profile", "no-such-profile-7f3", "status",
                                       "crm-sync"], "--profile"),
    "recover: no range": (["recover", "crm-sync", "--direct"], "--from"),
    "recover: only --from": (["recover", "crm-sync", "--from", "000001", "--direct"], "--to"),
    "recover: a reversed range": (["recover", "crm-sync", "--from", "000009", "--to", "000001",
                                   "--direct"], "--to"),
    "recover: cursors and times": (["recover", "crm-sync", "--from", "000001", "--to", "000002",
                                    "--from-time", "2026-11-29T00:00:00Z", "--direct"], "--from"),
    "recover: a naive --from-time": (["recover", "crm-sync", "--from-time", "2026-11-29T00:00",
                                      "--to-time", "2026-11-29T01:00:00Z", "--direct"],
                                     "--from-time"),
    "recover: an unknown --mode": (["recover", "crm-sync", "--from", "0", "--to", "5",
                                    "--mode", "all", "--direct"], "--mode"),
    "recover: --max-items 0": (["recover", "crm-sync", "--from", "0", "--to", "5",
                                "--max-items", "0", "--direct"], "--max-items"),
    "recover: --confirm without --execute": (["recover", "crm-sync", "--from", "0", "--to", "5",
                                              "--confirm", "abc", "--direct"], "--confirm"),
    "recover: a valid request with nowhere to send it": (
        ["recover", "crm-sync", "--from", "0", "--to", "5"], "--function-name"),
}


@pytest.mark.parametrize("case", sorted(CLI))
def test_a_malformed_command_names_the_option_and_writes_nothing(table, capsys, case):
    ddb, name = table
    argv, field = CLI[case]
    assert main(argv) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"error: {field}: "), error
    assert ddb.scan(TableName=name, Select="COUNT")["Count"] == 0


@pytest.mark.parametrize(("variable", "value", "field"), [
    ("JOBGUARD_TABLE", "", "--table"),  # set but empty is unset (as ${VAR:-}): no table
    ("JOBGUARD_TABLE", "a/b", "JOBGUARD_TABLE"),
    ("AWS_ENDPOINT_URL", "ftp://127.0.0.1", "AWS_ENDPOINT_URL"),
])
def test_a_malformed_variable_the_command_reads_is_named(table, capsys, monkeypatch,
                                                         variable, value, field):
    monkeypatch.setenv(variable, value)
    assert main(["status", "crm-sync"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {field}: ")


def test_argparse_refuses_what_it_types_naming_the_option(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["runs", "crm-sync", "--last", "ten"])
    assert exited.value.code == 2 and "--last" in capsys.readouterr().err


def test_a_queued_manual_trigger_with_the_longest_id_is_read_back():
    """Found by the explorer: a manual trigger id of 128 characters was queued, and its
    message was then refused by the consumer (the id pattern checked what follows
    "<job>@", which also holds "manual:"), so it went to the DLQ and never ran."""
    from jobguard import OverlapPolicy
    from jobguard.triggers import (
        Trigger,
        TriggerKind,
        parse_event,
        parse_queue_message,
        queue_message_body,
    )

    event = {"job": "crm-sync", "manual": True, "trigger_id": "a" + "x" * 127}
    trigger = parse_event(event, job="crm-sync", policy=OverlapPolicy.QUEUE)
    queued = Trigger(trigger.job, trigger.trigger_id, TriggerKind.QUEUED)
    back, _ = parse_queue_message(queue_message_body(queued, event=event), job="crm-sync")
    assert back.trigger_id == trigger.trigger_id


# -- what the alarms of a definition watch ----------------------------------------------------


@pytest.mark.parametrize(("schedule", "gap"), [
    ("rate(5 minutes)", 300 * S),
    ("cron(0 2 * * ? *)", 86400 * S),                # nightly
    ("cron(0/15 * * * ? *)", 900 * S),
    ("cron(0 9 ? * MON-FRI *)", 3 * 86400 * S),      # Friday 09:00 to Monday 09:00
    ("cron(5,35 8-17 ? * * *)", (14 * 3600 + 30 * 60) * S),  # 17:35 to 08:05
])
def test_the_longest_time_between_ticks_is_derived_from_the_schedule(schedule, gap):
    job = JobDefinition(**{**GOOD, "schedule": schedule, "no_success_alarm_intervals": 2})
    assert job.tick_gap == gap


def test_a_cron_the_schedule_cannot_tell_says_its_interval_and_may_go_unwatched():
    monthly = JobDefinition(**{**GOOD, "schedule": "cron(0 2 1 * ? *)",
                               "cron_interval": 31 * 86400 * S,
                               "no_success_alarm_intervals": None})
    assert monthly.tick_gap == 31 * 86400 * S
    assert monthly.no_success_window() is None


def test_the_dead_man_window_covers_two_full_length_runs():
    # GIVEN a SKIP job ticking every minute whose runs may take its whole 10-minute timeout
    job = JobDefinition(**{**GOOD, "schedule": "rate(1 minute)", "policy": OverlapPolicy.SKIP,
                           "timeout": 600 * S, "overlap_alarm_share": None})
    window = job.no_success_window()
    # THEN 3 quiet minutes are not "stopped": two successes may be 11 minutes apart (the
    # next tick, then a full-length run), so 12 quiet periods are
    assert window is not None and window.period == 60 * S
    assert window.periods == 12


def test_a_drill_deployment_drops_an_overlap_alarm_its_short_runs_cannot_reach():
    job = JobDefinition(**GOOD)
    assert job.overlap_threshold(job.timeout) == 225 * S
    drill = job.for_drills()  # 60 s runs against a 5-minute interval
    assert drill.overlap_alarm_share is None and drill.overlap_threshold(drill.timeout) is None


def test_the_default_overlap_share_fits_any_schedule_longer_than_the_timeout():
    from jobguard.runbook import job_alarms

    # GIVEN a first definition, rate(10 minutes) with a 5-minute timeout, no share given
    first = {**GOOD, "schedule": "rate(10 minutes)", "timeout": 300 * S}
    first.pop("overlap_alarm_share")
    # WHEN it is defined THEN it is, with no overlap alarm (no run meets its next tick)
    job = JobDefinition(**first)
    assert job.overlap_share() is None and job.overlap_threshold(job.timeout) is None
    assert "overlap" not in job_alarms(job)
    # AND where a run can reach its next tick, the default alarms at 80% of the interval
    tight = JobDefinition(**{**first, "schedule": "rate(5 minutes)"})
    assert tight.overlap_threshold(tight.timeout) == 240 * S
    assert "took more than 80%" in job_alarms(tight)["overlap"].means
    assert tight.for_drills().overlap_threshold(DRILL_TIMEOUT) is None  # 60 s drill runs
    # AND the same 0.8 given explicitly is refused, naming the field and what would fit
    with pytest.raises(ConfigError, match=r"^overlap_alarm_share: \(0\.8\).*below 0\.48"):
        JobDefinition(**first, overlap_alarm_share=0.8)
