"""The edges of the pure decision and of the state table (no emulator).

GIVEN a lease row and a trigger's item at a boundary (the skew margin, the TTL, a run
that died or is gone, a paused job, a queue with or without pending triggers), WHEN a
delivery decides, THEN the step is the one the trigger state machine documents. These
close the gaps ``make mutate`` found in ``jobguard.trigger_state`` (docs/mutation.md).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobguard.config import JobConfig, OverlapPolicy
from jobguard.lease import LeaseState
from jobguard.trigger_state import (
    TRANSITIONS,
    Event,
    Next,
    Route,
    State,
    TriggerRecord,
    decide,
    transition,
)
from jobguard.triggers import Trigger, TriggerKind

NOW = 1_800_000_000_000
TICK = Trigger("j", "j@t", TriggerKind.TICK)
QUEUED = Trigger("j", "j@t", TriggerKind.QUEUED)


def item(state: State, route: Route, run_id: str = "R0") -> TriggerRecord:
    return TriggerRecord(trigger_id="j@t", state=state, route=route, run_id=run_id,
                         ttl_epoch_s=(NOW + 3_600_000) // 1000)


def held_by(run_id: str, expires_at_ms: int, **kw) -> LeaseState:
    return LeaseState(job="j", fence=5, run_id=run_id, owner="w", trigger_id="j@x",
                      acquired_at_ms=NOW - 120_000, expires_at_ms=expires_at_ms, **kw)


def test_the_configured_skew_margin_decides_when_an_expired_lease_is_free():
    """GIVEN a job with a 30 s skew margin and a lease that expired exactly 30 s ago
    WHEN a tick decides THEN the lease still counts as held (SKIP); one millisecond
    later it is free (RUN)."""
    config = JobConfig(name="j", policy=OverlapPolicy.SKIP, skew_margin=timedelta(seconds=30))
    assert decide(held_by("R1", NOW - 30_000), None, TICK, config, NOW) is Next.SKIP
    assert decide(held_by("R1", NOW - 30_001), None, TICK, config, NOW) is Next.RUN


def test_a_queue_redelivery_of_a_trigger_whose_run_lives_waits_on_the_queue():
    """GIVEN a queued trigger now running as R0, R0 still holding the lease WHEN its
    queue message is delivered again THEN it defers (the message stays the trigger's
    retry), while a direct redelivery of a running direct trigger is a duplicate."""
    lease = held_by("R0", NOW + 60_000)
    config = JobConfig(name="j", policy=OverlapPolicy.QUEUE)
    assert decide(lease, item(State.RUNNING, Route.QUEUE), QUEUED, config, NOW) is Next.DEFER
    assert decide(lease, item(State.RUNNING, Route.DIRECT), TICK, config, NOW) \
        is Next.DUPLICATE


def test_a_paused_job_records_the_redelivery_of_a_trigger_whose_run_died():
    """GIVEN a running trigger whose run R0 died holding the lease, and the job paused
    WHEN the trigger is delivered again THEN it is recorded as paused, unless the caller
    ignores the pause (then it takes its own trigger over: RUN)."""
    lease = held_by("R0", NOW - 60_000, paused_at_ms=NOW - 1_000, paused_reason="ops")
    running = item(State.RUNNING, Route.DIRECT)
    config = JobConfig(name="j")
    assert decide(lease, running, TICK, config, NOW) is Next.PAUSED
    assert decide(lease, running, TICK, config, NOW, ignore_pause=True) is Next.RUN


@pytest.mark.parametrize(("lease", "expected"), [
    (LeaseState(job="j", fence=6, last_run_id="R1"), Next.RUN),
    (held_by("R2", NOW + 60_000), Next.DEFER),
])
def test_a_queued_trigger_whose_run_is_gone_is_retried_like_a_lost_one(lease, expected):
    """GIVEN a queue-route trigger still marked running as R0 but the lease no longer
    names R0 (its run is gone without its item being moved) WHEN its message is
    delivered again THEN it is treated as lost: it runs when the lease is free and
    waits when another run holds it; it is never dropped as a duplicate."""
    running = item(State.RUNNING, Route.QUEUE)
    assert decide(lease, running, QUEUED, JobConfig(name="j", policy=OverlapPolicy.QUEUE),
                  NOW) is expected


@pytest.mark.parametrize(("queued_n", "expected"), [
    (0, Next.RUN), (1, Next.QUEUE), (3, Next.DROP),
])
def test_a_free_lease_runs_a_queue_tick_only_when_nothing_is_queued(queued_n, expected):
    """GIVEN a QUEUE job (max_queued 3) whose lease is free WHEN a tick decides THEN it
    runs only if no queued trigger is pending; otherwise it queues behind them (trigger
    order), and it is dropped once max_queued are pending."""
    lease = LeaseState(job="j", fence=4, queued_n=queued_n)
    config = JobConfig(name="j", policy=OverlapPolicy.QUEUE, max_queued=3)
    assert decide(lease, None, TICK, config, NOW) is expected


def test_a_trigger_item_is_live_up_to_its_ttl_second_inclusive():
    """GIVEN a trigger item with ttl_epoch_s T WHEN it is read anywhere in second T THEN
    it is still live, as every write condition judges it (``ttl < now_s`` is absent);
    from second T + 1 on it counts as absent."""
    record = TriggerRecord(trigger_id="j@t", state=State.DONE, route=Route.DIRECT,
                           ttl_epoch_s=1_800_000_000)
    assert record.live(1_800_000_000_000)
    assert record.live(1_800_000_000_999)
    assert not record.live(1_800_000_001_000)


def test_every_edge_of_the_table_is_found_by_its_source_and_event():
    """GIVEN the transition table WHEN each (source, event) of it is looked up THEN that
    very edge is returned; a pair outside the table (done, run) is refused (None)."""
    for edge in TRANSITIONS:
        assert transition(edge.source, edge.event) is edge
    assert transition(State.RUNNING, Event.RELEASE_OK).target is State.DONE
    assert transition(State.DONE, Event.RUN) is None
