"""The lease row read as a value, attribute by attribute (no emulator).

GIVEN a lease row as the store reads it (plain values), WHEN it is parsed, THEN every
attribute lands in its own field, a damaged row is refused with the exact problem named,
and the held/free boundary and the backoff between conflicts are the documented ones.
These close the gaps ``make mutate`` found in ``jobguard.lease`` (docs/mutation.md).
"""

from __future__ import annotations

import pytest

from jobguard import JobConfig
from jobguard import lease as lease_module
from jobguard.errors import DamagedRowError
from jobguard.lease import LeaseState, backoff, parse_lease

NOW = 1_800_000_000_000

FULL_ROW = {
    "fence": 7, "run_id": "R7", "holder_owner": "worker-1", "trigger_id": "j@tick-7",
    "acquired_at_ms": NOW - 3_000, "expires_at_ms": NOW + 60_000,
    "heartbeat_at_ms": NOW - 1_000, "released_at_ms": NOW - 10_000, "last_run_id": "R6",
    "released_by": "run", "paused_at_ms": NOW - 500, "paused_reason": "maintenance",
    "queued_n": 2, "follow_up": "j@follow-up:R6", "wake_receipt": "receipt-1",
    "prev_run_id": "R5",
}


def test_a_missing_row_is_a_new_job():
    """GIVEN no lease row WHEN it is parsed THEN it is job j's row, not existing, free."""
    state = parse_lease("j", None)
    assert state == LeaseState(job="j", exists=False)
    assert state.exists is False and state.fence == 0 and state.run_id is None


def test_every_attribute_of_a_held_row_lands_in_its_field():
    """GIVEN a held row with every attribute set WHEN it is parsed THEN each attribute is
    in its own field (holder_owner as owner) and the row exists."""
    assert parse_lease("j", dict(FULL_ROW)) == LeaseState(
        job="j", fence=7, run_id="R7", owner="worker-1", trigger_id="j@tick-7",
        acquired_at_ms=NOW - 3_000, expires_at_ms=NOW + 60_000,
        heartbeat_at_ms=NOW - 1_000, released_at_ms=NOW - 10_000, last_run_id="R6",
        released_by="run", paused_at_ms=NOW - 500, paused_reason="maintenance",
        queued_n=2, follow_up="j@follow-up:R6", wake_receipt="receipt-1",
        prev_run_id="R5", exists=True,
    )


def test_a_row_at_fence_zero_is_an_existing_free_row_with_nothing_queued():
    """GIVEN a row with fence 0 and no queued_n WHEN it is parsed THEN it exists, keeps
    fence 0 (0 is a valid fence, not damage) and has no queued trigger."""
    assert parse_lease("j", {"fence": 0}) == LeaseState(job="j", fence=0, queued_n=0,
                                                         exists=True)


def test_a_pause_only_row_reads_as_fence_zero():
    """GIVEN a row made by pause alone (no fence) WHEN it is parsed THEN its fence reads
    as 0, so the first run takes fence 1."""
    state = parse_lease("j", {"paused_at_ms": NOW, "paused_reason": "x"})
    assert state.fence == 0 and state.queued_n == 0 and state.paused_reason == "x"


def test_a_negative_queued_count_reads_as_zero():
    """GIVEN a row whose queued_n went below zero WHEN it is parsed THEN nothing is
    queued (the count is clamped at 0)."""
    assert parse_lease("j", {"fence": 3, "queued_n": -2}).queued_n == 0


@pytest.mark.parametrize(("change", "attribute", "problem"), [
    ({"expires_at_ms": "soon"}, "expires_at_ms", "must be a number (epoch ms), got 'soon'"),
    ({"heartbeat_at_ms": True}, "heartbeat_at_ms", "must be a number (epoch ms), got True"),
    ({"run_id": 7}, "run_id", "must be a string, got 7"),
    ({"fence": -1}, "fence", "must be a whole number >= 0, got -1"),
    ({"fence": True}, "fence", "must be a whole number >= 0, got True"),
    ({"queued_n": "x"}, "queued_n", "must be a whole number, got 'x'"),
    ({"fence": None}, "fence", "is missing from a row that has been held"),
    ({"expires_at_ms": None}, "expires_at_ms", "is missing while run R7 holds the lease"),
    ({"holder_owner": None}, "holder_owner", "is missing while run R7 holds the lease"),
    ({"trigger_id": None}, "trigger_id", "is missing while run R7 holds the lease"),
    ({"acquired_at_ms": None}, "acquired_at_ms", "is missing while run R7 holds the lease"),
    ({"run_id": None}, "run_id",
     "is missing from a row that names a holder (holder_owner or expires_at_ms)"),
    ({"run_id": None, "holder_owner": None}, "run_id",
     "is missing from a row that names a holder (holder_owner or expires_at_ms)"),
])
def test_a_damaged_row_says_what_is_wrong_with_the_attribute(change, attribute, problem):
    """GIVEN a held row with one attribute damaged WHEN it is parsed THEN the error names
    that attribute and says exactly what is wrong with it, and the repair command."""
    row = {k: v for k, v in {**FULL_ROW, **change}.items() if v is not None}
    with pytest.raises(DamagedRowError) as caught:
        parse_lease("j", row)
    assert caught.value.attribute == attribute
    assert f"{attribute} {problem}; repair it with `jobguard release --force j`" \
        in str(caught.value)


@pytest.mark.parametrize("marker", [
    {"run_id": "R1"}, {"acquired_at_ms": NOW}, {"released_at_ms": NOW},
    {"last_run_id": "R0"},
])
def test_a_row_that_was_ever_held_needs_its_fence(marker):
    """GIVEN a row without a fence that shows it was held once (a holder, an acquisition,
    a release or a last run) WHEN it is parsed THEN the missing fence is the damage named
    (checked before the holder's other attributes)."""
    with pytest.raises(DamagedRowError) as caught:
        parse_lease("j", dict(marker))
    assert caught.value.attribute == "fence"
    assert "fence is missing from a row that has been held" in str(caught.value)


def test_a_lease_is_held_until_expired_for_longer_than_the_skew_margin():
    """GIVEN a lease that expired at E WHEN a worker with skew margin S looks at time
    now THEN it is held while E >= now - S, and free from one millisecond later."""
    lease = LeaseState(job="j", fence=1, run_id="R1", expires_at_ms=NOW)
    assert lease.is_held(NOW + 5_000, 5_000)
    assert not lease.is_held(NOW + 5_001, 5_000)
    assert lease.is_held(NOW - 1_000, 0)
    assert not LeaseState(job="j", fence=1, expires_at_ms=NOW).is_held(NOW, 5_000)
    assert not LeaseState(job="j", fence=1, run_id="R1").is_held(NOW, 5_000)


@pytest.mark.parametrize(("attempt", "ceiling"), [
    (0, 0.01), (1, 0.02), (3, 0.08), (5, 0.32), (9, 0.32),
])
def test_backoff_is_jittered_from_zero_doubling_up_to_a_cap(monkeypatch, attempt, ceiling):
    """GIVEN the n-th conflicting attempt WHEN it backs off THEN it sleeps a uniformly
    random time in [0, 0.01 s * 2**n], the exponent capped at 5 (never a spin, never
    longer than 0.32 s)."""
    drawn: list[tuple[float, float]] = []
    slept: list[float] = []

    def uniform(low: float, high: float) -> float:
        drawn.append((low, high))
        return high / 2

    monkeypatch.setattr(lease_module.random, "uniform", uniform)
    monkeypatch.setattr(lease_module.time, "sleep", slept.append)
    backoff(attempt)
    assert drawn == [(0, pytest.approx(ceiling))]
    assert slept == [pytest.approx(ceiling / 2)]


@pytest.mark.parametrize(("attempt", "ceiling"), [
    (0, 0.1), (1, 0.2), (3, 0.8), (4, 1.6), (5, 1.6), (9, 1.6),
])
def test_a_throttle_backs_off_longer_never_less_than_half_its_cap(monkeypatch, attempt,
                                                                  ceiling):
    """GIVEN the n-th attempt refused for the partition's capacity WHEN it backs off THEN
    it sleeps a uniformly random time in [cap / 2, cap], cap = 0.1 s * 2**n up to 1.6 s:
    a throttle clears as the budget refills, and the seven waits between eight tries add
    up to THROTTLE_SPAN_S, more than one second's refill; with a page commit's five
    waits before them (its six tries), less than the 10 s a batch keeps for its end."""
    drawn: list[tuple[float, float]] = []
    slept: list[float] = []

    def uniform(low: float, high: float) -> float:
        drawn.append((low, high))
        return low

    monkeypatch.setattr(lease_module.random, "uniform", uniform)
    monkeypatch.setattr(lease_module.time, "sleep", slept.append)
    backoff(attempt, throttled=True)
    assert drawn == [(pytest.approx(ceiling / 2), pytest.approx(ceiling))]
    assert slept == [pytest.approx(ceiling / 2)]
    monkeypatch.setattr(lease_module.time, "sleep", lambda seconds: None)
    drawn.clear()
    for n in range(7):
        backoff(n, throttled=True)
    span = (sum(low for low, _ in drawn), sum(high for _, high in drawn))
    assert span == pytest.approx(lease_module.THROTTLE_SPAN_S)
    drawn.clear()
    for n in range(5):  # a page commit's waits (ItemWrites: six tries)
        backoff(n, throttled=True)
    commit = sum(high for _, high in drawn)
    margin = JobConfig(name="x").time_margin.total_seconds()
    assert span[0] > 1 and commit + span[1] < margin, (commit, span)
