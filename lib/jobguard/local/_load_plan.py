"""The fault load's plan: which job gets which event, in what order (private).

Every tick is scheduled relative to the worker's clock when the plan is made, inside
the window a guarded job accepts (a tick is delivered at or after its time: one ahead of
the worker's clock by more than the job's skew margin is refused)::

    stale_after ago        TICKS_BEHIND ago                     now   MALFORMED_AHEAD
         |  late (stale)  |  on-time ticks, one second each per job |        |  malformed
    -----+----------------+-----------------------------------------+--------+------------>

- on-time ticks: each job's ticks fall on distinct whole seconds from ``TICKS_BEHIND``
  ago up to the clock (a schedule compressed into the load's minutes), drawn at random;
  no two triggers of a job share a time, so the only repeats are the deliveries planned
  as such. They stay accepted while the load runs: none is ahead of the clock, and none
  becomes stale before ``stale_after - TICKS_BEHIND`` has passed (20 minutes with the
  default hour).
- late: a retry delivered after ``stale_after`` (Scheduler retries a tick for up to a
  day): the protocol records it ``stale`` and does not run it.
- malformed: a tick scheduled at least ``MALFORMED_AHEAD`` ahead of the clock, beyond
  the load's skew margin (no schedule sends one: a hand-made early tick): refused with
  ``InvalidTriggerError`` before anything is written. Counted on a line of their own,
  never as a decision.
- about one delivery in ten is delivered again at once (the same event: one trigger).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..triggers import format_instant, tick_trigger_id

TICKS_BEHIND = timedelta(minutes=40)
"""The oldest on-time tick, behind the clock when the plan is made (the newest is a
second behind it)."""

MALFORMED_AHEAD = timedelta(minutes=1)
"""The least a malformed tick is ahead of the clock: more than the load's jobs' skew
margin (1 s), so every one is refused."""

REDELIVERED = 0.1
"""Share of deliveries sent again at once (a duplicate delivery of one trigger)."""

LATE = 0.02
"""Share of triggers that are ticks delivered after ``stale_after``."""

MALFORMED = 0.01
"""Share of triggers that are ticks scheduled ``MALFORMED_AHEAD`` or more ahead."""

TICK, LATE_TICK, MALFORMED_TICK = "tick", "late", "malformed"


@dataclass(frozen=True)
class Planned:
    """One delivery of the load: the job's event and what the plan meant by it."""

    job: str
    event: dict[str, Any]
    trigger_id: str
    """The trigger's identity (job + scheduled time): every delivery of it is one."""
    kind: str
    """``tick`` (on time), ``late`` (past ``stale_after``) or ``malformed``."""
    again: bool = False
    """Another delivery of a trigger planned before (the event just before it)."""


def plan_load(names: list[str], triggers: int, *, now: datetime, stale_after: timedelta,
              rng: random.Random) -> list[Planned]:
    """``triggers`` deliveries over the jobs ``names``, scheduled relative to ``now``."""
    window_s = int(TICKS_BEHIND.total_seconds())
    first = now.replace(microsecond=0) - TICKS_BEHIND
    seen: set[str] = set()
    plan: list[Planned] = []
    while len(plan) < triggers:
        name = rng.choice(names)
        draw = rng.random()
        kind = MALFORMED_TICK if draw < MALFORMED else (
            LATE_TICK if draw < MALFORMED + LATE else TICK)
        # a time no trigger of this job has yet: a trigger delivered again is only ever
        # one planned as such (again=True), so the counts say what was delivered twice
        for _ in range(100):
            if kind == MALFORMED_TICK:
                at = first + TICKS_BEHIND + MALFORMED_AHEAD + timedelta(
                    seconds=rng.randrange(0, 3 * 3600 - 60))
            elif kind == LATE_TICK:
                at = first + TICKS_BEHIND - stale_after - timedelta(
                    seconds=rng.randrange(60, 3600))
            else:
                at = first + timedelta(seconds=rng.randrange(window_s))
            if tick_trigger_id(name, at) not in seen:
                break
        event = {"job": name, "scheduled_at": format_instant(at)}
        trigger_id = tick_trigger_id(name, at)
        # (past 100 draws the window is full: a load far larger than it, delivered again)
        plan.append(Planned(name, event, trigger_id, kind, again=trigger_id in seen))
        seen.add(trigger_id)
        if rng.random() < REDELIVERED and len(plan) < triggers:
            plan.append(Planned(name, dict(event), trigger_id, kind, again=True))
    return plan


def plan_fleet(names: list[str], rounds: int, *, now: datetime,
               rng: random.Random) -> list[Planned]:
    """A tick a second per job: ``rounds`` rounds, round ``k`` holding every job's tick
    scheduled ``rounds - k`` seconds before ``now`` (on time, in the accepted window),
    in a shuffled order; the load delivers round ``k`` no earlier than ``k`` seconds
    after it starts."""
    first = now.replace(microsecond=0) - timedelta(seconds=rounds)
    plan: list[Planned] = []
    for k in range(rounds):
        at = first + timedelta(seconds=k)
        order = list(names)
        rng.shuffle(order)
        for name in order:
            plan.append(Planned(name, {"job": name, "scheduled_at": format_instant(at)},
                                tick_trigger_id(name, at), TICK))
    return plan
