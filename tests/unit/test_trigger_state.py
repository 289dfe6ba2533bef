"""The trigger state machine and the pure decision, by table (no emulator).

GIVEN a lease row and a trigger's item, WHEN a delivery decides, THEN the step is the
one the README's policy table promises; and every (state, event) pair of the machine is
either an edge of ``TRANSITIONS`` or refused.
"""

from __future__ import annotations

import itertools

import pytest

from jobguard.config import JobConfig, OverlapPolicy
from jobguard.errors import DamagedRowError
from jobguard.lease import LeaseState, parse_lease
from jobguard.observed import Observed, landed_and_ended
from jobguard.trigger_state import (
    TERMINAL,
    TRANSITIONS,
    Event,
    Next,
    Refused,
    Route,
    State,
    TriggerRecord,
    decide,
    transition,
)
from jobguard.triggers import Trigger, TriggerKind

NOW = 1_800_000_000_000
FREE = LeaseState(job="j", fence=4)
HELD = LeaseState(job="j", fence=5, run_id="R1", trigger_id="j@other", expires_at_ms=NOW + 60_000)
EXPIRED = LeaseState(job="j", fence=5, run_id="R1", trigger_id="j@other",
                     expires_at_ms=NOW - 10_000)
PAUSED = LeaseState(job="j", fence=4, paused_at_ms=NOW - 1, paused_reason="maintenance")
TICK = Trigger("j", "j@t", TriggerKind.TICK)
QUEUED = Trigger("j", "j@t", TriggerKind.QUEUED)
FOLLOW_UP = Trigger("j", "j@follow-up:R0", TriggerKind.FOLLOW_UP)


def item(state: State, route: Route = Route.DIRECT, run_id: str = "R0", *,
         gate: int | None = None, ttl_ms: int = NOW + 3_600_000) -> TriggerRecord:
    return TriggerRecord(trigger_id="j@t", state=state, route=route, run_id=run_id,
                         ttl_epoch_s=ttl_ms // 1000, gate_fence=gate)


def cfg(policy: OverlapPolicy = OverlapPolicy.SKIP, **kw) -> JobConfig:
    return JobConfig(name="j", policy=policy, **kw)


@pytest.mark.parametrize(("policy", "lease", "expected"), [
    (OverlapPolicy.SKIP, FREE, Next.RUN), (OverlapPolicy.SKIP, HELD, Next.SKIP),
    (OverlapPolicy.SKIP, EXPIRED, Next.RUN), (OverlapPolicy.QUEUE, HELD, Next.QUEUE),
    (OverlapPolicy.COALESCE, HELD, Next.COALESCE), (OverlapPolicy.REPLACE, HELD, Next.RUN),
    (OverlapPolicy.SKIP, PAUSED, Next.PAUSED), (OverlapPolicy.QUEUE, PAUSED, Next.PAUSED),
])
def test_a_new_direct_trigger_follows_its_policy(policy, lease, expected):
    assert decide(lease, None, TICK, cfg(policy), NOW) is expected


def test_queue_bound_and_order():
    pending = LeaseState(job="j", fence=4, queued_n=1)
    assert decide(pending, None, TICK, cfg(OverlapPolicy.QUEUE), NOW) is Next.QUEUE
    full = LeaseState(job="j", fence=5, run_id="R1", expires_at_ms=NOW + 1, queued_n=2)
    assert decide(full, None, TICK, cfg(OverlapPolicy.QUEUE, max_queued=2), NOW) is Next.DROP


@pytest.mark.parametrize("state", sorted(TERMINAL))
def test_a_terminal_trigger_is_a_duplicate_for_every_route(state):
    for trigger, route in ((TICK, Route.DIRECT), (QUEUED, Route.QUEUE)):
        assert decide(FREE, item(state, route), trigger, cfg(), NOW) is Next.DUPLICATE


def test_an_expired_item_counts_as_absent():
    old = item(State.DONE, ttl_ms=NOW - 1000)
    assert decide(FREE, old, TICK, cfg(), NOW) is Next.RUN


@pytest.mark.parametrize("state", [State.FAILED, State.LOST])
def test_failure_and_lease_loss_are_not_success(state):
    # direct: its redelivery runs again; queued: its message does, once the lease is free
    assert decide(FREE, item(state), TICK, cfg(), NOW) is Next.RUN
    assert decide(FREE, item(state, Route.QUEUE), QUEUED, cfg(OverlapPolicy.QUEUE), NOW) \
        is Next.RUN
    assert decide(HELD, item(state, Route.QUEUE), QUEUED, cfg(OverlapPolicy.QUEUE), NOW) \
        is Next.DEFER


def test_a_route_never_runs_the_other_routes_trigger():
    assert decide(FREE, item(State.FAILED, Route.QUEUE), TICK, cfg(), NOW) is Next.DUPLICATE
    assert decide(FREE, item(State.QUEUED, Route.QUEUE), TICK, cfg(), NOW) is Next.DUPLICATE
    assert decide(FREE, item(State.FAILED), QUEUED, cfg(), NOW) is Next.DUPLICATE


def test_paused_job_decides_a_failed_queued_trigger_as_paused():
    assert decide(PAUSED, item(State.FAILED, Route.QUEUE), QUEUED, cfg(OverlapPolicy.QUEUE),
                  NOW) is Next.PAUSED
    assert decide(PAUSED, item(State.QUEUED, Route.QUEUE), QUEUED, cfg(OverlapPolicy.QUEUE),
                  NOW) is Next.PAUSED


def test_a_running_trigger_is_a_duplicate_while_its_run_lives_and_retried_once_it_died():
    own = LeaseState(job="j", fence=5, run_id="R0", trigger_id="j@t",
                     expires_at_ms=NOW + 60_000)
    assert decide(own, item(State.RUNNING), TICK, cfg(), NOW) is Next.DUPLICATE
    dead = LeaseState(job="j", fence=5, run_id="R0", trigger_id="j@t",
                      expires_at_ms=NOW - 60_000)
    assert decide(dead, item(State.RUNNING), TICK, cfg(), NOW) is Next.RUN


def test_a_follow_up_is_absorbed_once_a_run_started_after_its_holder():
    queued = item(State.QUEUED, Route.QUEUE, gate=4)
    assert decide(FREE, queued, FOLLOW_UP, cfg(OverlapPolicy.COALESCE), NOW) is Next.RUN
    later = LeaseState(job="j", fence=6, served_fence=6)
    assert decide(later, queued, FOLLOW_UP, cfg(OverlapPolicy.COALESCE), NOW) is Next.ABSORB


# -- continuations -------------------------------------------------------------------------

CONT = Trigger("j", "j@continue:R1", TriggerKind.CONTINUATION, continues="R1", link=2)
HANDED = LeaseState(job="j", fence=5, run_id="R2", trigger_id="j@continue:R1",
                    handed_from="R1", expires_at_ms=NOW + 60_000)


def handed(state: State, run_id: str = "R2") -> TriggerRecord:
    return TriggerRecord(trigger_id="j@continue:R1", state=state, route=Route.DIRECT,
                         run_id=run_id, ttl_epoch_s=(NOW + 3_600_000) // 1000)


@pytest.mark.parametrize("policy", list(OverlapPolicy))
def test_a_continuation_runs_only_from_the_hand_off_the_row_names(policy):
    assert decide(HANDED, None, CONT, cfg(policy), NOW) is Next.RUN
    assert decide(HANDED, handed(State.HANDED), CONT, cfg(policy), NOW) is Next.RUN
    expired = LeaseState(**{**HANDED.__dict__, "expires_at_ms": NOW - 60_000})
    assert decide(expired, None, CONT, cfg(policy), NOW) is Next.RUN  # nobody took it
    paused = LeaseState(**{**HANDED.__dict__, "paused_at_ms": NOW - 1})
    assert decide(paused, None, CONT, cfg(policy), NOW) is Next.PAUSED
    # the hand-off gone: freed, replaced, taken over, or never made (an event by hand)
    for lease in (FREE, HELD, EXPIRED):
        assert decide(lease, None, CONT, cfg(policy), NOW) is Next.SUPERSEDE
        assert decide(lease, handed(State.LOST), CONT, cfg(policy), NOW) is Next.SUPERSEDE
        for ended in (State.REPLACED, State.RELEASED):
            assert decide(lease, handed(ended), CONT, cfg(policy), NOW) is Next.SUPERSEDE
        for ended in (State.DONE, State.SUPERSEDED, State.PAUSED):
            assert decide(lease, handed(ended), CONT, cfg(policy), NOW) is Next.DUPLICATE


def test_a_continuation_whose_link_holds_or_held_the_lease_is_a_duplicate():
    running = LeaseState(job="j", fence=6, run_id="R2", trigger_id="j@continue:R1",
                         expires_at_ms=NOW + 60_000)
    assert decide(running, None, CONT, cfg(), NOW) is Next.DUPLICATE
    assert decide(running, handed(State.RUNNING), CONT, cfg(), NOW) is Next.DUPLICATE
    died = LeaseState(**{**running.__dict__, "expires_at_ms": NOW - 60_000})
    # its link died: the next tick takes over from the checkpoint, not the retry
    assert decide(died, handed(State.RUNNING), CONT, cfg(), NOW) is Next.DUPLICATE


def test_other_triggers_meet_a_hand_off_as_a_held_lease():
    assert decide(HANDED, None, TICK, cfg(), NOW) is Next.SKIP
    assert decide(HANDED, None, TICK, cfg(OverlapPolicy.QUEUE), NOW) is Next.QUEUE
    assert decide(HANDED, None, TICK, cfg(OverlapPolicy.COALESCE), NOW) is Next.COALESCE
    assert decide(HANDED, None, TICK, cfg(OverlapPolicy.REPLACE), NOW) is Next.RUN
    assert decide(HANDED, item(State.QUEUED, Route.QUEUE), QUEUED, cfg(OverlapPolicy.QUEUE),
                  NOW) is Next.DEFER
    expired = LeaseState(**{**HANDED.__dict__, "expires_at_ms": NOW - 60_000})
    assert decide(expired, None, TICK, cfg(), NOW) is Next.RUN  # a lost invoke


# -- the machine itself -------------------------------------------------------------------

SOURCES: list[State | None] = [None, *State]


@pytest.mark.parametrize(("source", "event"), list(itertools.product(SOURCES, Event)))
def test_every_state_event_pair_is_an_edge_or_refused(source, event):
    edge = transition(source, event)
    if source in TERMINAL:
        # nothing moves a terminal trigger: a later delivery is a duplicate
        assert edge is None
        return
    if edge is None:
        return
    assert edge.source == source and edge.event is event
    assert edge.writer and edge.guard
    if edge.event is Event.RUN:
        assert edge.target is State.RUNNING
    if source is None:
        assert edge.event in (Event.RUN, Event.SKIP, Event.QUEUE, Event.DROP,
                              Event.COALESCE, Event.PAUSE, Event.HAND_OFF, Event.SUPERSEDE,
                              Event.STALE)
    if edge.event is Event.STALE:
        # a late tick writes its record only: its item (if any) is left as it was, and
        # one the job owes a run (queued, coalesced) is never recorded stale
        assert edge.target == source and source not in (State.QUEUED, State.COALESCED)
    if edge.event is Event.SUPERSEDE or source is State.HANDED:
        # a continuation's edges: it never runs again once its hand-off is gone
        assert edge.target in (State.RUNNING, State.SUPERSEDED, State.PAUSED, State.LOST,
                               State.REPLACED, State.RELEASED)


def test_the_table_has_one_edge_per_pair_and_reaches_every_state():
    pairs = [(t.source, t.event) for t in TRANSITIONS]
    assert len(pairs) == len(set(pairs))
    reached = {t.target for t in TRANSITIONS}
    assert set(State) <= reached


def test_only_a_run_leaves_a_running_trigger_or_an_operator():
    leaving = {t.event for t in TRANSITIONS if t.source is State.RUNNING}
    assert leaving == {Event.RUN, Event.RELEASE_OK, Event.RELEASE_FAILED, Event.RELEASE_LOST,
                       Event.TAKEN_OVER, Event.REPLACED, Event.FORCE_RELEASE}


# -- what a delivery has observed, folded ------------------------------------------------


def test_a_refusal_folds_into_what_the_delivery_observed():
    """GIVEN a delivery that observed a held row WHEN its writes are refused THEN each
    refusal's news is kept (row, item, high-water, an unmarkable holder, a served
    follow-up) and what it did not say stays as it was."""
    seen = Observed(lease=EXPIRED)
    moved = seen.after(Refused(lease=HELD, high_water=9), Next.RUN)
    assert (moved.lease, moved.item, moved.high_water) == (HELD, None, 9)
    failed = item(State.FAILED)
    again = moved.after(Refused(trigger=failed, trigger_failed=True), Next.SKIP)
    assert (again.lease, again.item, again.high_water) == (HELD, failed, 9)
    # a takeover whose displaced item could not be marked: that holder's, and only on RUN
    assert seen.after(Refused(displaced_failed=True), Next.RUN).unmarkable == "R1"
    assert seen.after(Refused(displaced_failed=True), Next.SKIP).unmarkable is None
    served = seen.after(Refused(follow_up_failed=True), Next.RUN)
    assert served.follow_up_served and served.after(Refused(conflict=True),
                                                    Next.RUN).follow_up_served


def test_a_late_tick_is_stale_unless_owed():
    """GIVEN a tick past stale_after WHEN it is checked THEN it is stale unless its job
    already accepted it onto its queue (owed); a queued delivery is never stale."""
    from datetime import UTC, datetime, timedelta

    scheduled = datetime(2026, 1, 1, tzinfo=UTC)
    late = Trigger("j", "j@t", TriggerKind.TICK, scheduled_at=scheduled)
    config = cfg(stale_after=timedelta(minutes=5))
    now = scheduled + timedelta(minutes=6)
    assert Observed(lease=FREE).stale(late, now, config)
    assert not Observed(lease=FREE, owed=True).stale(late, now, config)
    assert not Observed(lease=FREE).stale(late, scheduled + timedelta(minutes=4), config)
    queued = Trigger("j", "j@t", TriggerKind.QUEUED, scheduled_at=scheduled)
    assert not Observed(lease=FREE).stale(queued, now, config)


def test_an_own_landed_attempt_whose_run_ended_is_recognised():
    """GIVEN a refused acquisition WHEN the row names the delivery's run id as the run
    before or the last released, or its item names it THEN its earlier attempt landed
    and was ended since (it decides again under a new run id); else not."""
    assert landed_and_ended("R1", Refused(lease=LeaseState(job="j", prev_run_id="R1")))
    assert landed_and_ended("R1", Refused(lease=LeaseState(job="j", last_run_id="R1")))
    assert landed_and_ended("R0", Refused(trigger=item(State.LOST), trigger_failed=True))
    assert not landed_and_ended("R9", Refused(lease=HELD, trigger=item(State.LOST)))


# -- damaged lease rows -------------------------------------------------------------------

GOOD = {"fence": 3, "run_id": "R1", "holder_owner": "w", "trigger_id": "j@t",
        "acquired_at_ms": NOW, "expires_at_ms": NOW + 1, "heartbeat_at_ms": NOW}


@pytest.mark.parametrize(("change", "attribute"), [
    ({"expires_at_ms": None}, "expires_at_ms"),
    ({"fence": None}, "fence"),
    ({"fence": "abc"}, "fence"),
    ({"expires_at_ms": "soon"}, "expires_at_ms"),
    ({"queued_n": "x"}, "queued_n"),
    ({"run_id": 7}, "run_id"),
])
def test_a_damaged_row_names_its_job_row_attribute_and_repair(change, attribute):
    row = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(DamagedRowError) as caught:
        parse_lease("j", row)
    error = caught.value
    assert (error.job, error.row, error.attribute) == ("j", "LEASE", attribute)
    assert "jobguard release --force j" in str(error) and attribute in str(error)


def test_a_row_made_by_pause_alone_is_a_new_job_not_damage():
    state = parse_lease("j", {"paused_at_ms": NOW, "paused_reason": "x"})
    assert not state.exists and state.paused_at_ms == NOW
