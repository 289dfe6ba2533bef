"""A follow-up the lease row names waits for the holder it follows, paused or not (the
explorer's seed 482518): recorded paused under that holder, it could never be coalesced
into again, and every COALESCE trigger meeting the holder failed."""

from __future__ import annotations

import pytest

from jobguard.config import JobConfig, OverlapPolicy
from jobguard.lease import LeaseState
from jobguard.trigger_state import Next, Route, State, TriggerRecord, decide
from jobguard.triggers import Trigger, TriggerKind

NOW = 1_800_000_000_000
FOLLOW_UP = Trigger("j", "j@follow-up:H", TriggerKind.FOLLOW_UP)
CONFIG = JobConfig(name="j", policy=OverlapPolicy.COALESCE)
QUEUED = TriggerRecord(trigger_id=FOLLOW_UP.trigger_id, state=State.QUEUED, route=Route.QUEUE,
                       ttl_epoch_s=2**40)


def _row(expires_at_ms: int, follow_up: str | None) -> LeaseState:
    return LeaseState(job="j", fence=5, served_fence=5, run_id="H", owner="w",
                      trigger_id="j@t", acquired_at_ms=NOW - 1000, heartbeat_at_ms=NOW - 1000,
                      expires_at_ms=expires_at_ms, paused_at_ms=NOW - 10, follow_up=follow_up)


@pytest.mark.parametrize(("expires", "named", "step"), [
    (NOW + 60_000, FOLLOW_UP.trigger_id, Next.DEFER),  # its holder holds the row naming it
    (NOW - 60_000, FOLLOW_UP.trigger_id, Next.PAUSED),  # its holder died: paused
    (NOW + 60_000, "j@follow-up:other", Next.PAUSED),  # the row names another follow-up
], ids=["held-naming-it", "holder-dead", "names-another"])
def test_a_paused_follow_up_waits_while_its_holder_holds_the_row_naming_it(
        expires: int, named: str, step: Next) -> None:
    """GIVEN a paused job and a queued follow-up WHEN it is delivered THEN it waits
    (DEFER) while a live holder's row names it, and is recorded paused otherwise."""
    assert decide(_row(expires, named), QUEUED, FOLLOW_UP, CONFIG, NOW) is step
