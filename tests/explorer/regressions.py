"""Histories the explorer found violations in: each one's seed, its shrunk choice list,
the violation it showed on the old protocol, and the issue-14 behaviour it is.

``PROTOCOL_FIXED`` says which way the CI run checks them. On the old protocol (False)
every entry had to show its violation (the explorer kept finding what it found); the
trigger-state redesign (issue 14) has landed, so it is True: every entry, and every CI
seed, must hold. The entries are kept as history (what each found on the old code, its
seed, how long it took). A choice list replays the same history only on the code it was
found on: on the new code it is a new, still valid history, so each entry is run both
from its choice list and from its seed, and both must hold.

On the old protocol the explorer found 10 of issue 14's 11 behaviours (all but #4, a
lost release response); on the new code each behaviour is re-introduced by a known
bug's patch (``known_bugs``, in the explorer's process) and found by ``explore --mutants all``.
"""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOL_FIXED = True


@dataclass(frozen=True)
class Regression:
    bug: str
    """The issue-14 behaviour (``#N name``), or ``new: ...`` for one not in the issue."""
    seed: int
    violation: str
    """The violation's code on the old protocol (``INVARIANT/what:key``; history)."""
    choices: tuple[int, ...]
    found_in_s: float
    """Seconds of exploration until found (``make explore``, 2 workers, 2-core machine)."""
    found_by: str
    summary: str


REGRESSIONS: list[Regression] = [
    Regression(
        bug='#1 a queued trigger deleted by a release',
        seed=11289, violation='END/queued-never-ran:ran:failed>duplicate>queued>duplicate',
        found_in_s=209.7, found_by='--focus QUEUE,pause,sqs,fail seeds 1..',
        choices=(
            1, 2, 0, 1, 0, 0, 0, 0, 3, 3, 0, 3, 1, 2, 1, 1, 0, 2, 3, 3, 3, 0, 0, 0, 2, 7, 0, 18,
            0, 0, 1, 7, 1, 0, 0, 3, 0, 0, 0, 0, 0, 6, 0, 0, 0, 7, 2, 7, 1, 7, 0, 2, 18, 0, 0, 0,
            7, 2, 0, 1, 0, 0, 7, 2, 0, 3, 0, 7, 5, 7, 6, 0, 2, 0, 9, 0, 1
        ),
        summary=("QUEUE: the far-future tick's run fails (failed@); 7 h later a run acquires "
                 'with that old mark in its prune list, the tick is redelivered and queued '
                 '(queued@, queued_n 1), the release prunes the queued mark: its message is '
                 'decided duplicate, queued_n stays up'),
    ),
    Regression(
        bug='#2 force release erases the stuck run',
        seed=5001, violation='END/no-run-record:lease_lost',
        found_in_s=1.3, found_by='explore seeds 5000.. (2 workers)',
        choices=(
            0, 3, 1, 0, 2, 0, 0, 1, 2, 0, 3, 0, 3, 1, 2, 0, 3, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 2, 11, 12, 0, 2, 0, 6, 4, 0, 1, 0, 1, 0, 1,
            0, 10, 0, 3, 5, 0, 5, 0, 12, 0, 1
        ),
        summary=("a tick's run is force-released by the operator; its release reads "
                 "'released' (last_run_id is its own), writes no record; a redelivery of the "
                 'tick runs the handler again'),
    ),
    Regression(
        bug='#3 paused job, failed queued trigger loops',
        seed=6203, violation='END/failed-unfaulted:queued:StoreError: acquire for job',
        found_in_s=126.3, found_by='--focus QUEUE,pause,sqs,fail seeds 1..',
        choices=(
            1, 3, 3, 3, 0, 0, 0, 3, 0, 1, 0, 1, 3, 0, 3, 3, 0, 3, 1, 3, 2, 3, 4, 0, 0, 3, 0, 1,
            0, 0, 0, 0, 4, 9, 3, 0, 0, 3, 4, 1, 0, 4, 0, 0, 4, 0, 0, 0, 0, 17, 0, 21, 5, 1, 0,
            3, 0, 0, 2, 0, 7, 2, 0, 3, 14, 0, 5
        ),
        summary=("QUEUE: a queued trigger's send is lost after it landed, the undo marks it "
                 'failed@0; the operator pauses; its message is decided 8 times, each '
                 'refused (paused needs queued@), StoreError with no fault injected'),
    ),
    Regression(
        bug='#5 COALESCE undo strands triggers',
        seed=5091, violation='END/coalesced-never-followed',
        found_in_s=56.9, found_by='explore seeds 5000.. (2 workers)',
        choices=(
            2, 0, 1, 1, 3, 0, 0, 1, 2, 0, 0, 1, 2, 1, 0, 0, 0, 3, 2, 7, 5, 0, 0, 7, 2, 21, 4, 2,
            13, 8, 2, 0, 0, 3, 0, 0, 0, 0, 1, 0, 0, 1, 0, 12, 0, 1
        ),
        summary=('COALESCE: a coalesced trigger sets follow_up, its send times out, the undo '
                 'removes follow_up; the trigger coalesced meanwhile gets no follow-up run '
                 'once the queue drains'),
    ),
    Regression(
        bug='#6 REPLACE re-runs the displaced trigger',
        seed=5031, violation='RERUN/ran-again:manual:displaced',
        found_in_s=16.7, found_by='explore seeds 5000.. (2 workers)',
        choices=(
            3, 0, 0, 0, 3, 3, 3, 1, 2, 0, 0, 0, 0, 0, 0, 0, 3, 2, 1, 0, 1, 0, 0, 3, 1, 13, 14,
            21, 2, 3, 3, 0, 0, 0, 0, 0, 12, 7, 1, 7, 1, 0, 12, 0, 3, 0, 0, 2, 0, 0, 0, 0, 0, 0,
            0, 0, 2, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4, 0, 0, 2
        ),
        summary=("REPLACE: a manual trigger's live run is displaced by a newer trigger; "
                 'after the newer run released, a redelivery of the displaced trigger (mark '
                 'running@, lease free) runs again'),
    ),
    Regression(
        bug='#7 a queued trigger whose run loses its lease is never run',
        seed=5225, violation='END/queued-never-ran:queued>ran:lease_lost>duplicate',
        found_in_s=142.4, found_by='explore seeds 5000.. (2 workers)',
        choices=(
            1, 2, 0, 0, 1, 3, 2, 0, 3, 0, 1, 2, 2, 1, 2, 2, 3, 1, 0, 2, 2, 2, 0, 3, 0, 3, 0, 0,
            0, 0, 0, 0, 5, 3, 0, 1, 0, 0, 0, 1, 6, 1, 0, 0, 0, 0, 3, 0, 0, 2, 0, 7, 3, 0, 1, 0,
            0, 2, 0, 3, 9, 0, 1, 0, 5, 0, 1, 0, 3, 0, 1, 0, 14, 4, 0, 1, 0, 0, 3, 0, 13, 7, 4, 0
        ),
        summary=("QUEUE: a queued trigger's run outlives its lease (clock +3 min, no "
                 'renewal), ends lease_lost, its mark goes done and its message is deleted: '
                 'later deliveries are duplicate, it never runs to the end'),
    ),
    Regression(
        bug="#8 a failed queued trigger's retry dropped after its mark ages out",
        seed=15646, violation='END/queued-never-ran:queued>ran:failed>duplicate',
        found_in_s=295.2, found_by='--focus QUEUE,pause,sqs,fail seeds 1..',
        choices=(
            1, 2, 0, 0, 1, 3, 0, 3, 0, 0, 3, 3, 3, 0, 3, 2, 1, 0, 1, 0, 2, 0, 2, 0, 2, 12, 0, 0,
            1, 0, 0, 0, 7, 3, 7, 4, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 7, 4, 9, 0, 0,
            0, 0, 4, 5, 0, 0, 1, 0, 1, 0, 6, 7, 6, 5, 0, 0, 0, 0, 0, 0, 0, 0, 9, 3
        ),
        summary=("QUEUE: a queued trigger's run fails (failed@); 5 h later a paused decision "
                 'prunes its old mark; its message comes back and is decided duplicate: '
                 'never retried, never dead-lettered'),
    ),
    Regression(
        bug='#9 the lease row grows without bound',
        seed=5004, violation='BOUND/row-size',
        found_in_s=3.9, found_by='explore seeds 5000.. (2 workers)',
        choices=(
            2, 1, 0, 1, 1, 0, 2, 0, 0, 0, 0, 2, 2, 3, 0, 3, 3, 0, 0, 3, 0, 0, 3, 3, 0, 17, 1, 7,
            0, 7, 2, 7, 1, 17, 1, 21, 2, 0, 17, 0, 18, 7, 5, 0, 0, 7, 0, 9, 0, 1, 0, 0, 0, 0,
            13, 0, 1, 0, 3, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 21, 5, 1, 3, 13, 0, 1, 0,
            0, 0, 0, 14, 0, 7, 1, 0, 0, 8, 1, 5, 3, 0, 0, 0, 4, 20, 3, 1, 17, 1, 7, 0, 0, 0, 20,
            0, 1, 20, 2
        ),
        summary=('a burst of distinct manual triggers (long ids) leaves one mark each on the '
                 'lease row: over 2 KB'),
    ),
    Regression(
        bug='#10 a damaged lease row wedges or crashes the job',
        seed=5024, violation='END/crash:ValueError',
        found_in_s=12.7, found_by='explore seeds 5000.. (2 workers)',
        choices=(
            0, 0, 0, 0, 0, 1, 3, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 7, 3, 0, 0, 0, 1, 19, 2
        ),
        summary=('fence set to a string: every trigger crashes with ValueError, and release '
                 '--force crashes too (no way out)'),
    ),
    Regression(
        bug='#10 a damaged lease row wedges or crashes the job',
        seed=5303, violation='FENCE/stale-write',
        found_in_s=191.1, found_by='explore seeds 5000.. (2 workers)',
        choices=(
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 2, 7, 3, 1, 0, 0, 1, 0, 0,
            19, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 19, 1
        ),
        summary=('fence removed from the row: the next acquisition issues fence 1 again '
                 "(fence 2 was issued): two runs share fences, the stale run's writes are "
                 'accepted'),
    ),
    Regression(
        bug='#11 a trigger redelivered after its mark aged out runs twice',
        seed=5137, violation='RERUN/ran-again:manual:returned-ran',
        found_in_s=89.9, found_by='explore seeds 5000.. (2 workers)',
        choices=(
            0, 1, 1, 3, 3, 2, 10, 17, 0, 20, 1, 1, 0, 0, 0, 0, 0, 7, 0, 7, 0, 7, 0, 7, 5, 7, 1,
            20, 5, 1, 0, 0, 0, 5, 0, 1, 0, 7, 5, 7, 2, 1, 1, 0, 2, 0, 0, 4, 5
        ),
        summary=("a manual trigger ran; 5 h later (Lambda's async retries keep an event up "
                 'to 6 h) a redelivery finds its mark pruned (dedup_window 2 h) and runs it '
                 'again; the far-future tick has the same shape'),
    ),
    Regression(
        bug='#11 a trigger redelivered after its mark aged out runs twice',
        seed=7667, violation='RERUN/ran-again:far-future-tick:returned-ran',
        found_in_s=154.5, found_by='--focus QUEUE,pause,sqs,fail seeds 1..',
        choices=(
            1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 3, 2, 3, 0, 3, 2, 0, 3, 0, 0, 1, 2, 2, 18, 0, 0,
            0, 7, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 12, 0, 1, 0, 6, 0, 2,
            0, 14, 1, 0, 0, 0, 0, 7, 5, 17, 1, 3, 0, 0, 0, 3, 6, 0, 1, 0, 0, 1, 0, 0, 2, 0, 0,
            0, 0, 0, 1, 3, 7, 0, 0, 0, 5, 7, 1, 0, 1, 0, 3, 0, 0, 5, 10, 0, 2, 0, 0, 1, 0, 2
        ),
        summary=('a tick scheduled in 2062 runs (never stale); hours later its mark is '
                 'pruned (dedup_window) and a redelivery runs it again'),
    ),
    Regression(
        bug='new: a manual trigger id of 122-128 characters can never run when queued',
        seed=5019, violation='END/queued-never-ran:queued',
        found_in_s=9.6, found_by='explore seeds 5000.. (2 workers)',
        choices=(
            1, 2, 0, 1, 0, 2, 2, 1, 0, 3, 0, 0, 0, 2, 2, 3, 3, 2, 2, 1, 0, 3, 3, 1, 1, 7, 2, 3,
            0, 0, 0, 14, 12, 0, 0, 4, 0, 19, 1, 8, 1, 3, 0, 0, 0, 0, 0, 20, 2, 1
        ),
        summary=("parse_event accepts trigger_id up to 128 chars, but the queue message's id "
                 "'job@manual:<id>' must fit 128 after 'job@': the message is refused "
                 '(InvalidTriggerError) on every delivery and dead-lettered; queued_n stays '
                 'up, later ticks are dropped'),
    ),
]
