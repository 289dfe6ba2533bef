"""Review attacks on the fault load's checker and plan (issue 33, item 6): checks that
cannot fail, and counts that say more than happened."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from jobguard.local._load_plan import REDELIVERED, TICK, plan_load
from jobguard.local.load import NotesJob, run_load


class BackwardsCheckpointJob(NotesJob):
    """Once per job, after a run that moved the checkpoint past the start, writes it
    back to the start (cursor "000000", the next sequence number): the checkpoint moves
    backwards, which CKPT forbids. Later runs walk the completed items again (skipped),
    so nothing else shows it."""

    moved: set[str] = set()
    confirmed: set[str] = set()
    lock = threading.Lock()

    def run(self, run: Any, context: Any) -> Any:
        report = super().run(run, context)
        claims = run.work_claims()
        row = claims.start()
        with self.lock:
            if (self.config.name in self.moved or row.checkpoint.cursor in (None, "000000")
                    or run.lease_lost):
                return report
            self.moved.add(self.config.name)
        claims.flush(checkpoint=(row.checkpoint.seq, "000000"))
        if run.services.items.read_checkpoint(self.config.name).cursor == "000000":
            with self.lock:
                self.confirmed.add(self.config.name)
        return report


def test_the_load_reports_a_checkpoint_that_moves_backwards():
    """GIVEN the fault load with a job that writes its checkpoint back to the start once
    WHEN it runs
    THEN (expected) a CKPT violation: the invariant says the checkpoint never moves
    backwards. Actual: none. The checker records only the checkpoint's sequence number
    (``checkpoints[job].append((seq, None))``), which the store increments on every
    write whatever the cursor, so `seqs == sorted(seqs)` cannot fail; the cursor is
    never compared."""
    BackwardsCheckpointJob.moved = set()
    BackwardsCheckpointJob.confirmed = set()
    summary = run_load(triggers=40, jobs=5, fault_rate=0.0, seed=7, threads=4,
                       job_class=BackwardsCheckpointJob)
    assert BackwardsCheckpointJob.confirmed, "no checkpoint was moved back: no attack"
    ckpt = [v for v in summary["violations"] if v.startswith("CKPT")]
    assert ckpt, (f"{len(BackwardsCheckpointJob.confirmed)} jobs' checkpoints moved back to the "
                  f"start; violations: {summary['violations']}; checks {summary['checks']}")


def test_the_plan_delivers_about_one_trigger_in_ten_again_as_it_says():
    """GIVEN the plan of `make bench`'s fault load (1,000 deliveries, 5 jobs)
    THEN (expected, as the plan's docstring and REDELIVERED = 0.1 say) about one delivery
    in ten is another delivery of a trigger already planned, so that the summary's
    `triggers` / `decided` are (nearly) distinct triggers and `redelivered` counts the
    repeats. Actual: on-time ticks are drawn at random from exactly `per_job` slots, so
    about 38 % of deliveries repeat a trigger (1,000 deliveries are ~620 triggers), and
    the summary's `redelivered` counts only the ~10 % marked `again`: the ~280 chance
    repeats are counted `decided` (as `duplicate`) among the '1,000 triggers'."""
    now = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
    plan = plan_load([f"job{j}" for j in range(5)], 1000, now=now,
                     stale_after=timedelta(hours=1), rng=random.Random(1))
    seen: set[str] = set()
    repeats = 0
    for planned in plan:
        repeats += planned.trigger_id in seen
        seen.add(planned.trigger_id)
    marked = sum(p.again for p in plan)
    print(f"deliveries {len(plan)}, distinct triggers {len(seen)}, repeats {repeats}, "
          f"marked again {marked}, on-time {sum(p.kind == TICK for p in plan)}")
    assert repeats == marked, (
        f"{repeats} of {len(plan)} deliveries repeat a planned trigger; the plan marks "
        f"{marked} (REDELIVERED = {REDELIVERED}) and the summary reports only those")
