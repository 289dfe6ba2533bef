"""The fault load (`jobguard local`, `make bench`'s `faults_load`) loads the protocol and
its checker counts every destination call.

GIVEN a small seeded load (5 jobs: SKIP, QUEUE, COALESCE, REPLACE, SKIP; 10 % of AWS
calls faulted) whose ticks are planned inside the window a job accepts; WHEN it runs;
THEN nearly every trigger reaches a decision (the planned malformed ticks are refused
and counted on their own), and a job that calls its destination twice per work id is
reported under every policy, although the destination's conditional write keeps one
note and the ledger agrees with it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jobguard.batch import ClaimedItem
from jobguard.local._load_plan import (
    LATE_TICK,
    MALFORMED_AHEAD,
    MALFORMED_TICK,
    TICK,
    TICKS_BEHIND,
    plan_load,
)
from jobguard.local.load import NotesJob, run_load

POLICIES = ("SKIP", "QUEUE", "COALESCE", "REPLACE")

def test_the_plan_keeps_every_on_time_tick_inside_the_accepted_window():
    import random

    now = datetime(2026, 3, 1, 12, 0, 30, 250_000, tzinfo=UTC)
    plan = plan_load(["a", "b"], 2000, now=now, stale_after=timedelta(hours=1),
                     rng=random.Random(5))
    assert len(plan) == 2000
    def at(kind: str) -> list[datetime]:
        return [datetime.fromisoformat(p.event["scheduled_at"]) for p in plan if p.kind == kind]

    # a job refuses a tick ahead of its clock by more than its skew margin: no on-time
    # tick is ahead of the clock the plan was made by; every malformed one is well past
    # the load's skew margin (1 s)
    assert all(now - TICKS_BEHIND - timedelta(seconds=1) <= t <= now for t in at(TICK))
    assert all(t < now - timedelta(hours=1) for t in at(LATE_TICK))
    assert all(t > now + MALFORMED_AHEAD - timedelta(seconds=1) for t in at(MALFORMED_TICK))
    assert len(at(TICK)) > 0.9 * len(plan)
    assert at(LATE_TICK) and at(MALFORMED_TICK)
    # one identity per scheduled time: a repeat is the same trigger, delivered again
    assert all(p.trigger_id == f"{p.job}@{p.event['scheduled_at']}" for p in plan)
    assert all(q.event == p.event for p, q in zip(plan, plan[1:], strict=False) if q.again)


def test_nearly_every_trigger_of_the_load_reaches_a_decision():
    summary = run_load(triggers=80, jobs=5, fault_rate=0.1, seed=7, threads=4)

    assert summary["triggers"] == 80
    assert summary["decided"] >= 0.9 * summary["triggers"], summary["decisions"]
    assert summary["invalid_unplanned"] == 0
    assert summary["malformed_refused"] == summary["malformed_planned"]
    assert summary["decided"] + summary["malformed_planned"] + summary[
        "failed_after_retries"] == summary["triggers"]
    assert summary["faults_injected"] > 0 and summary["runs_ran"] > 0
    # every work id's destination calls were counted, under every policy
    assert set(summary["called_twice_by_policy"]) == set(POLICIES)
    assert summary["checks"]["ONCE"] >= summary["items"]
    # ONCE at the destination itself, REPLACE included (issue 33: a displaced run's open
    # claim is left alone until it can no longer call)
    assert summary["violations"] == []
    assert summary["called_twice_by_policy"] == dict.fromkeys(POLICIES, 0)


class TwiceNotesJob(NotesJob):
    """Calls the destination twice per record: the second put finds the first note and
    answers its id, so the ledger and the notes table look right; only the calls tell."""

    def process(self, record: dict[str, Any], item: ClaimedItem) -> str:
        super().process(record, item)
        return super().process(record, item)


def test_a_job_that_calls_its_destination_twice_is_reported_under_every_policy():
    summary = run_load(triggers=40, jobs=5, fault_rate=0.1, seed=7, threads=4,
                       job_class=TwiceNotesJob)

    for policy in POLICIES:
        assert summary["called_twice_by_policy"][policy] > 0, summary["called_twice_by_policy"]
    once = [v for v in summary["violations"] if v.startswith("ONCE: ")]
    assert sum(summary["called_twice_by_policy"].values()) == len(once)
    assert all(v.endswith("puts reached the destination") for v in once), once[:3]
    assert not [v for v in summary["violations"] if "ledger says" in v]
