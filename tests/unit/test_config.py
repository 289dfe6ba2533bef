"""A configuration that cannot be safe is refused when the job is defined."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobguard import ConfigError, JobConfig, OverlapPolicy, guarded

S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"name": "crm#sync"}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"policy": "SOMETIMES"}, "policy"),
        ({"lease": 0 * S}, "lease"),
        ({"lease": 300}, "lease"),
        ({"lease": 60 * S, "heartbeat_every": 30 * S}, "heartbeat_every"),
        ({"lease": 60 * S, "heartbeat_every": -S}, "heartbeat_every"),
        ({"lease": 60 * S, "skew_margin": 60 * S}, "skew_margin"),
        ({"lease": 60 * S, "heartbeat_every": 20 * S, "skew_margin": 41 * S}, "skew_margin"),
        ({"skew_margin": -S}, "skew_margin"),
        ({"stale_after": 3 * 3600 * S}, "dedup_window"),
        ({"max_queued": 0}, "max_queued"),
        ({"max_queued": True}, "max_queued"),
        ({"record_ttl": 60 * S}, "record_ttl"),
        ({"table_name": " "}, "table_name"),
        ({"table_name": "jobguard table"}, "table_name"),
        ({"trigger_queue_url": "https://sqs.eu-west-1.amazonaws.com/1/triggers"},
         "trigger_queue_url"),
        ({"tracing": "yes"}, "tracing"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 1001}, "batch_size"),
        ({"flush": "batch"}, "flush"),
        ({"time_margin": -S}, "time_margin"),
        # unsafe: a lease not longer than two heartbeats (one lost renewal loses it)
        ({"lease": 30 * S, "heartbeat_every": 15 * S}, "heartbeat_every"),
        ({"lease": 30 * S, "heartbeat_every": 31 * S}, "heartbeat_every"),
        # unsafe: a skew margin >= lease (or >= lease - heartbeat: no time to renew)
        ({"lease": 30 * S, "skew_margin": 31 * S}, "skew_margin"),
        ({"lease": 30 * S, "skew_margin": 20 * S}, "skew_margin"),
        # unsafe: a claim longer than the function timeout (held by nobody)
        ({"claim_for": 301 * S, "function_timeout": 300 * S}, "claim_for"),
        ({"claim_for": 16 * 60 * S}, "claim_for"),
        ({"time_margin": 300 * S, "function_timeout": 300 * S, "claim_for": 60 * S},
         "time_margin"),
        # unsafe: an item TTL shorter than the redelivery window
        ({"item_ttl": 23 * 3600 * S}, "item_ttl"),
        ({"dedup_window": 3 * 86400 * S, "record_ttl": 3 * 86400 * S,
          "item_ttl": 2 * 86400 * S}, "item_ttl"),
        ({"policy": "QUEUE", "item_ttl": 13 * 86400 * S}, "item_ttl"),
        ({"policy": "COALESCE", "item_ttl": 13 * 86400 * S}, "item_ttl"),
    ],
)
def test_unsafe_or_malformed_config_is_refused_naming_the_field(options, field):
    options = {"name": "crm-sync", **options}
    with pytest.raises(ConfigError) as info:
        JobConfig(**options)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_the_decorator_refuses_at_definition_time():
    with pytest.raises(ConfigError) as info:
        @guarded("crm-sync", lease=timedelta(seconds=10), heartbeat_every=timedelta(seconds=6))
        def lambda_handler(event, context):  # pragma: no cover - never defined
            return None
    assert info.value.field == "heartbeat_every"
    with pytest.raises(ConfigError) as unknown:
        guarded("crm-sync", leese=timedelta(minutes=5))
    assert unknown.value.field == "options" and "leese" in str(unknown.value)


def test_defaults_are_safe_and_documented_values():
    config = JobConfig(name="crm-sync", policy="coalesce")
    assert config.policy is OverlapPolicy.COALESCE
    assert config.heartbeat == config.lease / 3
    assert config.lease > 2 * config.heartbeat
    assert config.skew_margin < config.lease - config.heartbeat
    assert config.dedup_window >= config.stale_after
    with pytest.raises(AttributeError):
        config.lease = timedelta(seconds=1)  # type: ignore[misc]


def test_the_redelivery_window_is_the_longest_way_a_trigger_can_come_back():
    day = timedelta(days=1)
    # SKIP/REPLACE: Scheduler's 24 h of retries, or dedup_window when longer
    assert JobConfig(name="j").redelivery_window == day
    assert JobConfig(name="j", item_ttl=3 * day).item_ttl == 3 * day
    assert JobConfig(name="j", dedup_window=2 * day, record_ttl=2 * day,
                     item_ttl=2 * day).redelivery_window == 2 * day
    # QUEUE/COALESCE: a queued trigger may wait as long as SQS keeps it
    for policy in ("QUEUE", "COALESCE"):
        config = JobConfig(name="j", policy=policy, item_ttl=14 * day)
        assert config.redelivery_window == 14 * day
    with pytest.raises(ConfigError, match="SQS queue"):
        JobConfig(name="j", policy="QUEUE", item_ttl=14 * day - S)


def _definition(**options):
    from jobguard.definitions import JobDefinition

    return JobDefinition(**{"name": "crm-sync", "handler": "handlers.crm_sync.lambda_handler",
                            "schedule": "rate(5 minutes)", "policy": OverlapPolicy.COALESCE,
                            "timeout": 240 * S, "lease": 120 * S,
                            "overlap_alarm_share": 0.75, **options})


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"heartbeat_every": 60 * S}, "heartbeat_every"),   # lease = 2 heartbeats
        ({"skew_margin": 120 * S}, "skew_margin"),          # skew = lease
        ({"skew_margin": 80 * S}, "skew_margin"),           # skew = lease - heartbeat
        ({"claim_for": 241 * S}, "claim_for"),              # claim > the function timeout
        ({"item_ttl": timedelta(days=7)}, "item_ttl"),      # a COALESCE trigger waits 14 d
        ({"policy": OverlapPolicy.SKIP, "item_ttl": timedelta(hours=12)}, "item_ttl"),
    ],
)
def test_an_unsafe_job_definition_is_refused_naming_the_field(options, field):
    with pytest.raises(ConfigError) as info:
        _definition(**options)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("deployed", "field"),
    [
        ({"function_timeout": 60 * S}, "claim_for"),        # a claim outlives the function
        ({"function_timeout": 240 * S, "queue_visibility_timeout": 23 * 60 * S},
         "queue_visibility_timeout"),                       # < 6 x the function timeout
        ({"function_timeout": 240 * S, "queue_retention": timedelta(days=16)}, "item_ttl"),
        # the overlap alarm at 225 s: a 200 s function never reports a run that long
        ({"function_timeout": 200 * S}, "overlap_alarm_share"),
    ],
)
def test_a_deployment_that_would_make_a_safe_definition_unsafe_is_refused(deployed, field):
    with pytest.raises(ConfigError) as info:
        _definition(claim_for=120 * S).check_deployment(**deployed)
    assert info.value.field == field


def test_a_safe_deployment_returns_the_config_the_function_runs_with():
    config = _definition().check_deployment(
        function_timeout=240 * S, queue_visibility_timeout=24 * 60 * S,
        queue_retention=timedelta(days=14))
    assert (config.claim_for, config.function_timeout, config.item_ttl) == (
        240 * S, 240 * S, timedelta(days=15))
