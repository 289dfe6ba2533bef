"""The pure decision a trigger makes after losing the acquisition."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobguard import JobConfig, OverlapPolicy, Trigger, TriggerKind
from jobguard.lease import LeaseState, Mark, Next, TriggerMark, classify, prunable

NOW = 1_800_000_000_000
HELD = LeaseState(job="j", fence=4, run_id="R", trigger_id="j@other", expires_at_ms=NOW + 1)
EXPIRED = LeaseState(job="j", fence=4, run_id="R", trigger_id="j@other",
                     expires_at_ms=NOW - 5_001)
FREE = LeaseState(job="j", fence=4)
TICK = Trigger("j", "j@t", TriggerKind.TICK)


def cfg(policy: OverlapPolicy, **kw) -> JobConfig:
    return JobConfig(name="j", policy=policy, **kw)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [(OverlapPolicy.SKIP, Next.SKIP), (OverlapPolicy.QUEUE, Next.QUEUE),
     (OverlapPolicy.COALESCE, Next.COALESCE), (OverlapPolicy.REPLACE, Next.RETRY)],
)
def test_a_held_lease_gets_the_policy_decision(policy, expected):
    assert classify(HELD, TICK, cfg(policy), NOW) is expected


def test_expiry_counts_only_beyond_the_skew_margin():
    within = LeaseState(job="j", fence=1, run_id="R", expires_at_ms=NOW - 4_999)
    assert classify(within, TICK, cfg(OverlapPolicy.SKIP), NOW) is Next.SKIP
    assert classify(EXPIRED, TICK, cfg(OverlapPolicy.SKIP), NOW) is Next.RETRY


@pytest.mark.parametrize("mark", [m for m in Mark if not m.retryable])
def test_a_decided_trigger_is_a_duplicate_whatever_the_lease(mark):
    for state in (HELD, FREE):
        marked = LeaseState(**{**state.__dict__, "triggers": {"j@t": TriggerMark(mark, 1)}})
        assert classify(marked, TICK, cfg(OverlapPolicy.SKIP), NOW) is Next.DUPLICATE


def test_the_running_trigger_itself_is_a_duplicate_even_under_replace():
    running = LeaseState(job="j", fence=2, run_id="R", trigger_id="j@t", expires_at_ms=NOW + 1,
                         triggers={"j@t": TriggerMark(Mark.RUNNING, 1)})
    assert classify(running, TICK, cfg(OverlapPolicy.REPLACE), NOW) is Next.DUPLICATE


def test_queue_bound_pause_and_queue_order():
    full = LeaseState(**{**HELD.__dict__, "queued_n": 3})
    assert classify(full, TICK, cfg(OverlapPolicy.QUEUE, max_queued=3), NOW) is Next.DROP
    pending = LeaseState(job="j", fence=1, queued_n=1)
    assert classify(pending, TICK, cfg(OverlapPolicy.QUEUE), NOW) is Next.QUEUE
    paused = LeaseState(job="j", fence=1, paused_at_ms=1)
    assert classify(paused, TICK, cfg(OverlapPolicy.SKIP), NOW) is Next.PAUSED


def test_queue_deliveries_wait_while_held_and_follow_ups_know_when_absorbed():
    queued = Trigger("j", "j@t", TriggerKind.QUEUED)
    marked = LeaseState(**{**HELD.__dict__, "triggers": {"j@t": TriggerMark(Mark.QUEUED, 1)}})
    assert classify(marked, queued, cfg(OverlapPolicy.QUEUE), NOW) is Next.DEFER
    assert classify(HELD, queued, cfg(OverlapPolicy.QUEUE), NOW) is Next.DUPLICATE
    follow = Trigger("j", "j@follow-up:R0", TriggerKind.FOLLOW_UP)
    pending = LeaseState(**{**HELD.__dict__, "follow_up": "j@follow-up:R0"})
    assert classify(pending, follow, cfg(OverlapPolicy.COALESCE), NOW) is Next.DEFER
    assert classify(FREE, follow, cfg(OverlapPolicy.COALESCE), NOW) is Next.ABSORBED


@given(st.dictionaries(st.text(min_size=1, max_size=8),
                       st.tuples(st.sampled_from(list(Mark)), st.integers(0, 2 * NOW)),
                       max_size=60))
def test_pruning_never_forgets_a_pending_or_recent_trigger(marks):
    config = cfg(OverlapPolicy.QUEUE, dedup_window=timedelta(hours=2))
    state = LeaseState(job="j", triggers={k: TriggerMark(m, at) for k, (m, at) in marks.items()})
    pruned = prunable(state, NOW, config)
    horizon = NOW - 2 * 3600 * 1000
    assert len(pruned) <= 40
    for trigger_id in pruned:
        mark = state.triggers[trigger_id]
        assert mark.mark is not Mark.QUEUED and mark.at_ms < horizon


def test_a_displaced_trigger_redelivered_never_replaces_the_newer_run():
    # j@t ran, was replaced by j@other (which holds the lease now), then j@t is redelivered
    displaced = LeaseState(**{**HELD.__dict__, "triggers": {"j@t": TriggerMark(Mark.RUNNING, 1)}})
    assert classify(displaced, TICK, cfg(OverlapPolicy.REPLACE), NOW) is Next.DUPLICATE
    # but once nobody holds the lease, a crashed trigger's retry may run again
    crashed = LeaseState(**{**EXPIRED.__dict__, "triggers": {"j@t": TriggerMark(Mark.RUNNING, 1)}})
    assert classify(crashed, TICK, cfg(OverlapPolicy.REPLACE), NOW) is Next.RETRY


@pytest.mark.parametrize("kind", [TriggerKind.QUEUED, TriggerKind.FOLLOW_UP])
@pytest.mark.parametrize(
    ("mark", "lease", "expected"),
    [(Mark.FAILED, FREE, Next.RETRY), (Mark.FAILED, HELD, Next.DEFER),
     (Mark.RUNNING, EXPIRED, Next.RETRY), (Mark.RUNNING, HELD, Next.DEFER),
     (Mark.DONE, FREE, Next.DUPLICATE), (Mark.DONE, HELD, Next.DUPLICATE)],
)
def test_a_queued_trigger_whose_own_run_failed_or_died_runs_again(kind, mark, lease, expected):
    # Its pending mark was spent when it first ran; only a completed run makes a
    # redelivery of its message a duplicate.
    trigger = Trigger("j", "j@q", kind)
    state = LeaseState(job="j", fence=lease.fence, run_id=lease.run_id,
                       trigger_id=lease.trigger_id, expires_at_ms=lease.expires_at_ms,
                       triggers={"j@q": TriggerMark(mark, NOW - 1000)})
    assert classify(state, trigger, cfg(OverlapPolicy.QUEUE), NOW) is expected
