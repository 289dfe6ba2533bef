"""Unsafe configuration is refused when the stack is synthesized, naming the field.

A job definition refuses an unsafe job when it is built (tests/unit/test_config.py);
the constructs do not trust it: they check every rule again against what they deploy
(:meth:`jobguard.definitions.JobDefinition.check_deployment`), the function's timeout and
the trigger queue's visibility timeout and retention. A definition changed after it was
validated (frozen dataclasses can be forced) stands in here for one that drifted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import aws_cdk as cdk
import pytest

from handlers.jobs import CRM_SYNC
from infra.stack import HANDLER_PACKAGES
from jobguard.cdk import (
    GuardedJob,
    JobTable,
    LambdaBundle,
    Reconciler,
    RecoveryFunction,
    alarms_off,
)
from jobguard.definitions import JobDefinition
from jobguard.errors import ConfigError

S = timedelta(seconds=1)
ALARMS = alarms_off(reason="a test stack, never deployed")


@dataclasses.dataclass
class Parts:
    stack: cdk.Stack
    table: JobTable
    bundle: LambdaBundle


@pytest.fixture(scope="module")
def parts() -> Iterator[Parts]:
    stack = cdk.Stack(cdk.App(), "Unsafe")
    yield Parts(stack, JobTable(stack, "Table", alarms=ALARMS),
                LambdaBundle(stack, "Bundle", packages=HANDLER_PACKAGES))


def _drifted(**changes: Any) -> JobDefinition:
    """CRM_SYNC with fields changed after its validation ran."""
    job = dataclasses.replace(CRM_SYNC)
    for name, value in changes.items():
        object.__setattr__(job, name, value)
    return job


UNSAFE: dict[str, tuple[dict[str, Any], str]] = {
    "a lease of two heartbeats": ({"heartbeat_every": 60 * S}, "heartbeat_every"),
    "a lease shorter than one heartbeat": ({"lease": 30 * S, "heartbeat_every": 40 * S},
                                           "heartbeat_every"),
    "a skew margin as long as the lease": ({"skew_margin": 120 * S}, "skew_margin"),
    "a claim longer than the function timeout": ({"claim_for": 300 * S}, "claim_for"),
    "an item TTL shorter than the trigger queue's retention": (
        {"item_ttl": timedelta(days=10)}, "item_ttl"),
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
@pytest.mark.parametrize("construct", ["job", "reconciler", "recovery"])
def test_every_construct_that_runs_the_job_refuses_an_unsafe_definition(
        parts: Parts, case: str, construct: str) -> None:
    changes, field = UNSAFE[case]
    job = _drifted(**changes)
    build = {
        "job": lambda i: GuardedJob(parts.stack, f"Job{i}", job=job, table=parts.table,
                                    bundle=parts.bundle, alarms=ALARMS),
        "reconciler": lambda i: Reconciler(parts.stack, f"Sweep{i}", job=job,
                                           table=parts.table, bundle=parts.bundle,
                                           alarms=ALARMS),
        "recovery": lambda i: RecoveryFunction(parts.stack, f"Recovery{i}", jobs=[job],
                                               table=parts.table, bundle=parts.bundle,
                                               alarms=ALARMS),
    }[construct]
    with pytest.raises(ConfigError) as info:
        build(f"{construct}{sorted(UNSAFE).index(case)}")
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_a_visibility_timeout_below_six_function_timeouts_says_what_goes_wrong(
        parts: Parts) -> None:
    with pytest.raises(ConfigError) as info:
        GuardedJob(parts.stack, "ShortVisibility", job=CRM_SYNC, table=parts.table,
                   bundle=parts.bundle, alarms=ALARMS,
                   queue_visibility_timeout=timedelta(minutes=23))
    assert info.value.field == "queue_visibility_timeout"
    assert "deliver a trigger again while its run is still working" in str(info.value)


def test_the_trigger_queue_keeps_messages_no_longer_than_items_are_remembered(
        parts: Parts) -> None:
    # the rule the stack enforces, on the queue it actually made
    job = GuardedJob(parts.stack, "Retention", job=CRM_SYNC, table=parts.table,
                     bundle=parts.bundle, alarms=ALARMS)
    assert job.trigger_queue is not None
    retention = cdk.Stack.of(job).resolve(
        job.trigger_queue.node.default_child.message_retention_period)  # type: ignore[union-attr]
    assert timedelta(seconds=retention) <= job.config.item_ttl
    assert timedelta(seconds=retention) == job.config.redelivery_window
