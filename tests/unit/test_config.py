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
