"""A trigger's state machine, written once: states, events, who writes, what guards.

Every trigger has one item of its own in the table (``TRIGGER#<trigger id>``, TTL'd),
never an attribute on the lease row: the lease row stays the same size whatever the
trigger rate, and a trigger's state is changed only by a write conditioned on the
state it replaces (``state = :from AND run_id = :run``), never removed or overwritten
on the strength of an older read. Expiry is by TTL, and every condition treats an
item past its ``ttl_epoch_s`` as absent (TTL deletes days late).

The table (``TRANSITIONS``) is the specification: the protocol page's diagram is drawn
from it and ``tests/unit/test_trigger_state.py`` walks every (state, event) pair. The
store's conditions are written by hand (``_store_lease``, ``_store_release``,
``_store_triggers``), each saying which edge it writes; the scenario tests and the
explorer hold them to the table. Adding a case: docs/contributing.md, "Adding a protocol
case" (``tests/unit/test_decision_wiring.py`` checks the maps it names).

::

    (absent) ──run──► running ──release ok──► done
       │                 │ ├──release failed──► failed ──run again──► running
       │                 │ ├──lease lost / taken over──► lost ──run again──► running
       │                 │ ├──replaced (REPLACE)──► replaced
       │                 │ └──force release (operator)──► released
       ├──skip──► skipped        ├──pause──► paused
       ├──queue──► queued ──run──► running      (queued ──undo──► absent)
       ├──coalesce──► coalesced (into the holder's follow-up, itself ``queued``)
       ├──drop──► dropped        follow-up queued/failed/lost ──absorb──► absorbed
       ├──stale──► (its item unchanged: a late tick, its record only; unless owed)
       └──hand off──► handed ──run──► running       (a continuation: a link of a chain)
                         ├──pause──► paused (the hand-off freed: the chain ends)
                         ├──taken over / replaced / force release──► lost / replaced /
                         │                                           released
                         └──supersede──► superseded (the row no longer names it)

A continuation (``BatchJob`` out of time with records left, ``JobConfig.max_chain``) is
handed the lease by the link before it, in that link's release transaction: the lease
row names the continuation's trigger and pre-assigned run id with ``handed_from`` (the
link before), its expiry a lease away, so every other trigger meets the chain held; only
the delivery of that continuation takes it (fence + 1, conditioned on ``handed_from``).

A trigger that arrived directly (a tick, a rule, a manual invoke) and one that waits
on the trigger queue (a queued trigger, a follow-up) have different *routes*: only a
delivery of the same route may run it again, so a direct redelivery never races the
queue message that owns a queued trigger's retries.

A delivery decides from what it has observed (:class:`jobguard.observed.Observed`),
sends one request, and when refused folds the refusal in (``Observed.after``) and decides
again. Its own guards are named here too: ``STALE`` (``Observed.stale``) and a new run id
once its own landed attempt's run was ended (:func:`jobguard.observed.landed_and_ended`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .config import JobConfig, OverlapPolicy
from .lease import LeaseState
from .records import RunOrigin
from .triggers import Trigger, TriggerKind

__all__ = [
    "TERMINAL",
    "TRANSITIONS",
    "Event",
    "Next",
    "Refused",
    "Route",
    "State",
    "Transition",
    "TriggerRecord",
    "decide",
    "names_hand_off",
    "route_of",
]


class State(StrEnum):
    """Where a trigger is. Terminal states end it; a later delivery is a duplicate."""

    QUEUED = "queued"
    """Waiting on the trigger queue (``QUEUE`` triggers and ``COALESCE`` follow-ups)."""
    RUNNING = "running"
    """A run of this trigger took the lease (``run_id``, ``fence``)."""
    FAILED = "failed"
    """Its run raised. Runs again when the same route delivers it again."""
    LOST = "lost"
    """Its run lost the lease (heartbeat refused, local deadline passed, or taken over
    after it expired). Lease loss is not success: runs again like ``failed``."""
    DONE = "done"
    SKIPPED = "skipped"
    COALESCED = "coalesced"
    """Folded into the holder's follow-up (``into``)."""
    DROPPED = "dropped"
    PAUSED = "paused"
    REPLACED = "replaced"
    """``REPLACE``: a newer trigger took the lease from its live run. Never runs again."""
    ABSORBED = "absorbed"
    """A follow-up whose purpose a later run already served."""
    RELEASED = "released"
    """An operator force-released its run. Never runs again (recover instead)."""
    HANDED = "handed"
    """A continuation the lease row names (``handed_from``): only its delivery runs it."""
    SUPERSEDED = "superseded"
    """A continuation whose hand-off was gone when it was delivered (replaced, force
    released, taken over after it expired): it never runs."""


TERMINAL = frozenset({State.DONE, State.SKIPPED, State.COALESCED, State.DROPPED,
                      State.PAUSED, State.REPLACED, State.ABSORBED, State.RELEASED,
                      State.SUPERSEDED})
RETRYABLE = frozenset({State.FAILED, State.LOST})


class Route(StrEnum):
    """How a trigger reaches the guard."""

    DIRECT = "direct"
    """Invoked directly: Scheduler tick, EventBridge rule, manual invoke."""
    QUEUE = "queue"
    """Delivered from the job's trigger queue: queued trigger or follow-up."""


def route_of(trigger: Trigger) -> Route:
    return Route.QUEUE if trigger.is_from_queue else Route.DIRECT


class Event(StrEnum):
    """What moves a trigger."""

    RUN = "run"
    RELEASE_OK = "release_ok"
    RELEASE_FAILED = "release_failed"
    RELEASE_LOST = "release_lost"
    TAKEN_OVER = "taken_over"
    REPLACED = "replaced"
    FORCE_RELEASE = "force_release"
    SKIP = "skip"
    QUEUE = "queue"
    UNDO_QUEUE = "undo_queue"
    COALESCE = "coalesce"
    DROP = "drop"
    PAUSE = "pause"
    ABSORB = "absorb"
    HAND_OFF = "hand_off"
    SUPERSEDE = "supersede"
    STALE = "stale"


@dataclass(frozen=True)
class Transition:
    """One edge: ``event`` moves a trigger from ``source`` to ``target``."""

    source: State | None
    """``None``: the trigger has no live item (never seen, or past its TTL)."""
    event: Event
    target: State | None
    writer: str
    guard: str
    """The condition the write carries, besides ``state = source`` (or absent) and, for
    states with a run, ``run_id`` = the run it names."""


_ANY_RUN = "the run's release: lease row run_id and fence are the run's"
_DELIVERY = "the trigger's delivery (acquisition transaction)"
_DECISION = "the trigger's delivery (decision transaction, with its run record)"
_HANDED = "lease row names the hand-off (trigger id, run id, handed_from)"

TRANSITIONS: tuple[Transition, ...] = (
    # a run starts (one transaction with the lease, the fence high-water mark and, on a
    # takeover, the displaced run's trigger and record)
    Transition(None, Event.RUN, State.RUNNING, _DELIVERY,
               "direct route; lease free (or, REPLACE, the holder named); not paused; "
               "QUEUE: no pending queued trigger"),
    Transition(State.QUEUED, Event.RUN, State.RUNNING, _DELIVERY,
               "queue route; lease free; not paused; queued: queued_n - 1; follow-up: "
               "gate_fence >= served_fence (no run that serves started after the holder it "
               "follows), its gate as read"),
    Transition(State.FAILED, Event.RUN, State.RUNNING, _DELIVERY,
               "same route as the failed run; lease free; not paused; follow-up: its gate as "
               "read, not absorbed"),
    Transition(State.LOST, Event.RUN, State.RUNNING, _DELIVERY,
               "same route as the lost run; lease free; not paused; follow-up: its gate as "
               "read, not absorbed; "
               "a new run id when the lost run was this delivery's own attempt, landed "
               "unanswered (landed_and_ended)"),
    Transition(State.RUNNING, Event.RUN, State.RUNNING, _DELIVERY,
               "same route; the run it names died: the lease row names that run, expired "
               "by more than the skew margin (a takeover of its own trigger)"),
    # a run ends
    Transition(State.RUNNING, Event.RELEASE_OK, State.DONE, _ANY_RUN, "run_id = the run"),
    Transition(State.RUNNING, Event.RELEASE_FAILED, State.FAILED, _ANY_RUN,
               "run_id = the run"),
    Transition(State.RUNNING, Event.RELEASE_LOST, State.LOST, _ANY_RUN, "run_id = the run"),
    Transition(State.RUNNING, Event.TAKEN_OVER, State.LOST,
               "the next acquisition (takeover transaction)",
               "lease row names the run, expired by more than the skew margin"),
    Transition(State.RUNNING, Event.REPLACED, State.REPLACED,
               "a REPLACE trigger's acquisition (takeover transaction)",
               "lease row names the live run and its fence"),
    Transition(State.RUNNING, Event.FORCE_RELEASE, State.RELEASED,
               "jobguard release --force (one transaction with the lease and the record)",
               "lease row names the run and its fence"),
    # decisions of a trigger that did not get the lease
    Transition(None, Event.SKIP, State.SKIPPED, _DECISION,
               "SKIP; lease held by the holder observed"),
    Transition(State.FAILED, Event.SKIP, State.SKIPPED, _DECISION,
               "SKIP; direct route; lease held by the holder observed"),
    Transition(State.LOST, Event.SKIP, State.SKIPPED, _DECISION,
               "SKIP; direct route; lease held by the holder observed"),
    Transition(None, Event.QUEUE, State.QUEUED, _DECISION,
               "QUEUE; queued_n < max_queued and (lease held or queued_n > 0); queued_n + 1"),
    Transition(State.FAILED, Event.QUEUE, State.QUEUED, _DECISION,
               "QUEUE; direct route; as above"),
    Transition(State.LOST, Event.QUEUE, State.QUEUED, _DECISION,
               "QUEUE; direct route; as above"),
    Transition(State.QUEUED, Event.UNDO_QUEUE, None,
               "the deciding delivery, when its message could not be sent",
               "run_id = the decision's run id; queued_n - 1; its record deleted"),
    Transition(None, Event.DROP, State.DROPPED, _DECISION, "QUEUE; queued_n >= max_queued"),
    Transition(State.FAILED, Event.DROP, State.DROPPED, _DECISION,
               "QUEUE; direct route; queued_n >= max_queued"),
    Transition(State.LOST, Event.DROP, State.DROPPED, _DECISION,
               "QUEUE; direct route; queued_n >= max_queued"),
    Transition(None, Event.COALESCE, State.COALESCED, _DECISION,
               "COALESCE; lease held by the holder observed; its follow-up created queued "
               "(once per holder) and named on the lease row"),
    Transition(State.FAILED, Event.COALESCE, State.COALESCED, _DECISION,
               "COALESCE; direct route; as above"),
    Transition(State.LOST, Event.COALESCE, State.COALESCED, _DECISION,
               "COALESCE; direct route; as above"),
    Transition(None, Event.PAUSE, State.PAUSED, _DECISION, "job paused"),
    Transition(State.QUEUED, Event.PAUSE, State.PAUSED, _DECISION,
               "job paused; queued: queued_n - 1; follow-up: not while the row names it "
               "under a live holder (it waits for that release)"),
    Transition(State.FAILED, Event.PAUSE, State.PAUSED, _DECISION, "job paused; same route"),
    Transition(State.LOST, Event.PAUSE, State.PAUSED, _DECISION, "job paused; same route"),
    # a late tick: its record only (never over this delivery's own), its item untouched
    *(Transition(state, Event.STALE, state, "the tick's delivery (its run record only)",
                 "a direct tick past stale_after; not owed (its item not queued or "
                 "coalesced: a late redelivery of a tick on the queue is decided, and sends "
                 "the message again)")
      for state in (None, State.FAILED, State.LOST)),
    Transition(State.QUEUED, Event.ABSORB, State.ABSORBED, _DECISION,
               "follow-up; served_fence > gate_fence (a run that serves started after its "
               "holder); the row does not name its run"),
    Transition(State.FAILED, Event.ABSORB, State.ABSORBED, _DECISION,
               "follow-up; as above"),
    Transition(State.LOST, Event.ABSORB, State.ABSORBED, _DECISION,
               "follow-up; as above"),
    # continuation: a chain of runs holding the job like one run
    Transition(None, Event.HAND_OFF, State.HANDED,
               "the link before's release (hand-off transaction, with its trigger done and "
               "its record naming the next link)",
               "lease row names the link before and its fence; not paused; link < max_chain"),
    Transition(State.HANDED, Event.RUN, State.RUNNING, _DELIVERY,
               f"continuation; {_HANDED}, fence as handed; not paused (expiry not checked: "
               "nobody took it over)"),
    Transition(State.HANDED, Event.PAUSE, State.PAUSED, _DECISION,
               f"job paused; {_HANDED}: the row freed in the same transaction (chain ends)"),
    Transition(State.HANDED, Event.TAKEN_OVER, State.LOST,
               "the next acquisition (takeover transaction)",
               "lease row names the hand-off, expired by more than the skew margin"),
    Transition(State.HANDED, Event.REPLACED, State.REPLACED,
               "a REPLACE trigger's acquisition (takeover transaction)",
               "lease row names the hand-off and its fence"),
    Transition(State.HANDED, Event.FORCE_RELEASE, State.RELEASED,
               "jobguard release --force, or the link before withdrawing its hand-off when "
               "its invoke was refused (one transaction with the lease and the record)",
               "lease row names the hand-off and its fence"),
    # a continuation delivered once its hand-off is gone, from whatever its item says
    *(Transition(state, Event.SUPERSEDE, State.SUPERSEDED, _DECISION,
                 "continuation; lease row does not name it")
      for state in (None, State.HANDED, State.LOST, State.FAILED)),
)


def transition(source: State | None, event: Event) -> Transition | None:
    """The edge ``event`` takes from ``source``, or None (the event is refused there)."""
    return _BY_EDGE.get((source, event))


_BY_EDGE = {(t.source, t.event): t for t in TRANSITIONS}


@dataclass(frozen=True, kw_only=True)
class TriggerRecord:
    """A trigger's item, read as a value."""

    trigger_id: str
    state: State
    route: Route
    run_id: str | None = None
    """The run holding it (``running``), the run that ended it, or the decision's run."""
    fence: int | None = None
    at_ms: int = 0
    ttl_epoch_s: int = 0
    gate_fence: int | None = None
    """Follow-ups: they run only while the lease fence is still this (no other run
    started since the run they follow, or since their own last attempt)."""
    into: str | None = None
    """Coalesced triggers: the follow-up they were folded into."""
    ended_by: str | None = None
    """Who moved it out of ``running``: ``release`` (its run), ``takeover``, ``operator``."""
    kind: str | None = None
    """The trigger's kind as last written (a run's trigger kind; ``queued`` once queued)."""
    origin: RunOrigin | None = None
    """The origin of the last run that took it (``run_id`` names that run while it is
    ``running``), as its acquisition wrote it; None on items written before it was kept.
    """

    def live(self, now_ms: int) -> bool:
        """False once past its TTL: treated as absent, as every condition does."""
        return self.ttl_epoch_s >= now_ms // 1000  # whole seconds, as the conditions


class Next(StrEnum):
    """What a trigger does, decided from what it knows of the lease row and its item."""

    RUN = "run"
    """Take the lease (free, expired, or REPLACE)."""
    DUPLICATE = "duplicate"
    PAUSED = "paused"
    SKIP = "skip"
    QUEUE = "queue"
    DROP = "drop"
    COALESCE = "coalesce"
    ABSORB = "absorb"
    DEFER = "defer"
    """A queued trigger or follow-up found the lease held: wait on the queue."""
    SUPERSEDE = "supersede"
    """A continuation whose hand-off is gone: recorded, nothing run."""


def decide(lease: LeaseState, item: TriggerRecord | None, trigger: Trigger,
           config: JobConfig, now_ms: int, *, ignore_pause: bool = False) -> Next:
    """What ``trigger`` does, given the lease row and its own item. Pure.

    Example:
        >>> cfg = JobConfig(name="j")
        >>> held = LeaseState(job="j", fence=3, run_id="R1", expires_at_ms=10_000)
        >>> decide(held, None, Trigger("j", "j@t", TriggerKind.TICK), cfg, now_ms=5_000)
        <Next.SKIP: 'skip'>
    """
    skew_ms = int(config.skew_margin.total_seconds() * 1000)
    held = lease.is_held(now_ms, skew_ms)
    route = route_of(trigger)
    if item is not None and not item.live(now_ms):
        item = None
    state = item.state if item is not None else None

    if trigger.kind is TriggerKind.CONTINUATION:
        return _continuation(lease, state, trigger, ignore_pause)
    if state in TERMINAL:
        return Next.DUPLICATE
    if item is not None and item.route is not route:
        # A queued trigger's retries belong to its message, and a message never runs a
        # trigger that arrived directly.
        return Next.DUPLICATE
    if state is State.RUNNING:
        assert item is not None
        if lease.run_id == item.run_id:
            if held:
                return Next.DUPLICATE if route is Route.DIRECT else Next.DEFER
            # Its own run died holding the lease: a takeover of its own trigger, whatever
            # the policy (it had its turn before anything queued behind it). A paused job
            # records the delivery and leaves the trigger to whoever takes the lease over.
            if lease.paused_at_ms is not None and not ignore_pause:
                return Next.PAUSED
            return Next.RUN
        # Its run is gone without its item being moved: decide as for a lost trigger.
        state = State.LOST

    if route is Route.QUEUE:
        if state is None:
            # A message whose trigger was never recorded queued (its decision was undone
            # or never landed) or is long forgotten.
            return Next.DUPLICATE
        if trigger.kind is TriggerKind.FOLLOW_UP and item is not None \
                and item.gate_fence is not None and lease.served_fence > item.gate_fence \
                and lease.run_id != item.run_id:
            return Next.ABSORB
        if trigger.kind is TriggerKind.FOLLOW_UP and held \
                and lease.follow_up == trigger.trigger_id:
            # The row names it while the holder it follows holds the job: every COALESCE
            # trigger meeting that holder folds into it, so it stays queued until that
            # release (which wakes it), paused or not.
            return Next.DEFER
        if lease.paused_at_ms is not None and not ignore_pause:
            return Next.PAUSED
        return Next.DEFER if held else Next.RUN

    # A direct delivery: absent, failed, lost, or running with its run dead.
    if lease.paused_at_ms is not None and not ignore_pause:
        return Next.PAUSED
    policy = config.policy
    if policy is OverlapPolicy.QUEUE and (held or lease.queued_n > 0):
        return Next.DROP if lease.queued_n >= config.max_queued else Next.QUEUE
    if not held or policy is OverlapPolicy.REPLACE:
        return Next.RUN
    if policy is OverlapPolicy.SKIP:
        return Next.SKIP
    return Next.COALESCE


def names_hand_off(lease: LeaseState, trigger: Trigger) -> bool:
    """The lease row holds ``trigger``'s hand-off: its link may take the lease."""
    return lease.handed_from is not None and lease.trigger_id == trigger.trigger_id


def _continuation(lease: LeaseState, state: State | None, trigger: Trigger,
                  ignore_pause: bool) -> Next:
    """A continuation runs only from the hand-off the lease row names; anything else
    (its link holds or held the lease: a duplicate; the hand-off gone) runs nothing.
    One ended by another's hand (replaced, force-released) is recorded ``superseded``
    without a write to its item, on each delivery."""
    if state in (State.REPLACED, State.RELEASED):
        return Next.SUPERSEDE
    if state in TERMINAL:
        return Next.DUPLICATE
    if names_hand_off(lease, trigger) and state in (None, State.HANDED):
        if lease.paused_at_ms is not None and not ignore_pause:
            return Next.PAUSED
        return Next.RUN
    if lease.trigger_id == trigger.trigger_id or state is State.RUNNING:
        return Next.DUPLICATE
    return Next.SUPERSEDE


@dataclass(frozen=True)
class Refused:
    """A transaction's conditions did not hold. Each field is the item whose condition
    failed, as it was (``ALL_OLD``); a field left ``None`` with its ``*_failed`` flag
    False means that item was as the caller expected."""

    lease: LeaseState | None = None
    trigger: TriggerRecord | None = None
    trigger_failed: bool = False
    high_water: int | None = None
    follow_up_failed: bool = False
    """A recovery's acquisition could not carry the pending follow-up's gate along
    although the lease row was as seen (the follow-up ran or was absorbed meanwhile):
    take the lease without it. Never set beside a refused or conflicting lease row."""
    displaced_failed: bool = False
    """A takeover's displaced trigger was no longer the displaced run's: take over
    without moving it (it was decided meanwhile)."""
    conflict: bool = False
    """A concurrent transaction touched the same items: look again after a backoff."""
    throttled: bool = False
    """Among what refused it, the partition's capacity (``ThrottlingError``): the
    backoff before the next attempt is a throttle's, seconds rather than milliseconds."""
    unanswered: str | None = None
    """The attempt's answer was an error (throttled, a 5xx, no answer at all), and a
    consistent read found that it had not landed: the error, to try again after a backoff
    and to name if no attempt lands."""
