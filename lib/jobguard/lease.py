"""The lease row, read as a value, and the pure decision a losing trigger makes.

Nothing here talks to storage. The store turns the lease row (returned by the failed
acquisition itself, ``ALL_OLD``) into a :class:`LeaseState`; :func:`classify` decides
what the trigger does next. Keeping this pure means every branch is unit-tested
without an emulator.

An expired lease is a hint, not a guarantee: a paused worker may still believe it holds
it. That is why every write a run makes carries its fence, and why a lease is only taken
over once it has been expired for longer than the skew margin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .config import JobConfig, OverlapPolicy
from .triggers import Trigger, TriggerKind

__all__ = [
    "Acquired",
    "Busy",
    "LeaseState",
    "Mark",
    "Next",
    "Released",
    "TriggerMark",
    "classify",
    "prunable",
]


class Mark(StrEnum):
    """State of a trigger as remembered on the lease row (the dedup ledger)."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"
    QUEUED = "queued"
    COALESCED = "coalesced"
    DROPPED = "dropped"
    PAUSED = "paused"

    @property
    def retryable(self) -> bool:
        """A delivery of a trigger in this state may still run."""
        return self in (Mark.RUNNING, Mark.FAILED)


@dataclass(frozen=True, slots=True)
class TriggerMark:
    """One remembered trigger: its state and when it got there (epoch ms)."""

    mark: Mark
    at_ms: int

    def encode(self) -> str:
        return f"{self.mark.value}@{self.at_ms}"

    @classmethod
    def decode(cls, raw: str) -> TriggerMark:
        state, _, at = raw.partition("@")
        return cls(Mark(state), int(at or 0))


@dataclass(frozen=True, kw_only=True)
class LeaseState:
    """A snapshot of a job's lease row."""

    job: str
    fence: int = 0
    run_id: str | None = None
    owner: str | None = None
    trigger_id: str | None = None
    acquired_at_ms: int | None = None
    expires_at_ms: int | None = None
    heartbeat_at_ms: int | None = None
    released_at_ms: int | None = None
    last_run_id: str | None = None
    paused_at_ms: int | None = None
    paused_reason: str | None = None
    queued_n: int = 0
    follow_up: str | None = None
    wake_receipt: str | None = None
    triggers: dict[str, TriggerMark] = field(default_factory=dict)

    def is_held(self, now_ms: int, skew_ms: int) -> bool:
        """Held, from the point of view of a worker whose clock reads ``now_ms``.

        A lease is free only once it has been expired for longer than the skew margin.
        """
        return (
            self.run_id is not None
            and self.expires_at_ms is not None
            and self.expires_at_ms >= now_ms - skew_ms
        )

    def mark_of(self, trigger_id: str) -> TriggerMark | None:
        return self.triggers.get(trigger_id)


class Next(StrEnum):
    """What a trigger that did not get the lease does next."""

    RETRY = "retry"
    """The row allows acquisition after all (it changed): try again."""
    DUPLICATE = "duplicate"
    PAUSED = "paused"
    SKIP = "skip"
    QUEUE = "queue"
    DROP = "drop"
    COALESCE = "coalesce"
    ABSORBED = "absorbed"
    """A follow-up whose purpose another run already served."""
    DEFER = "defer"
    """A queued trigger or follow-up found the lease held: wait on the queue."""


def classify(state: LeaseState, trigger: Trigger, config: JobConfig, now_ms: int) -> Next:
    """Decide what a trigger does after losing the acquisition to ``state``.

    Example:
        >>> from jobguard.triggers import Trigger, TriggerKind
        >>> cfg = JobConfig(name="j")
        >>> held = LeaseState(job="j", fence=3, run_id="R1", expires_at_ms=10_000)
        >>> classify(held, Trigger("j", "j@t", TriggerKind.TICK), cfg, now_ms=5_000)
        <Next.SKIP: 'skip'>
    """
    skew_ms = int(config.skew_margin.total_seconds() * 1000)
    held = state.is_held(now_ms, skew_ms)
    mark = state.mark_of(trigger.trigger_id)

    # A queued trigger or follow-up whose own run failed, or died, runs again when its
    # message comes back: deferred while any run holds the lease, retried once it is free.
    spent_by_own_run = mark is not None and mark.mark in (Mark.FAILED, Mark.RUNNING)

    if trigger.kind is TriggerKind.QUEUED:
        if mark is None or (mark.mark is not Mark.QUEUED and not spent_by_own_run):
            return Next.DUPLICATE
        if state.paused_at_ms is not None:
            return Next.PAUSED
        return Next.DEFER if held else Next.RETRY

    if trigger.kind is TriggerKind.FOLLOW_UP:
        if state.follow_up != trigger.trigger_id and not spent_by_own_run:
            return Next.DUPLICATE if mark is not None else Next.ABSORBED
        if state.paused_at_ms is not None:
            return Next.PAUSED
        return Next.DEFER if held else Next.RETRY

    # A direct delivery: tick, rule, manual.
    if mark is not None and not mark.mark.retryable:
        return Next.DUPLICATE
    if held and state.trigger_id == trigger.trigger_id:
        return Next.DUPLICATE  # the same trigger is running right now
    if held and mark is not None and mark.mark is Mark.RUNNING:
        # It ran and was displaced (REPLACE) or crashed and was taken over: a late
        # redelivery must never replace the newer run holding the lease now.
        return Next.DUPLICATE
    if state.paused_at_ms is not None:
        return Next.PAUSED
    policy = config.policy
    if policy is OverlapPolicy.QUEUE and (held or state.queued_n > 0):
        return Next.DROP if state.queued_n >= config.max_queued else Next.QUEUE
    if not held or policy is OverlapPolicy.REPLACE:
        return Next.RETRY
    if policy is OverlapPolicy.SKIP:
        return Next.SKIP
    return Next.COALESCE


def prunable(state: LeaseState, now_ms: int, config: JobConfig, limit: int = 40) -> list[str]:
    """Trigger marks old enough to forget (outside the dedup window), oldest first.

    Queued and running marks are kept: a pending trigger must stay recognisable.
    """
    horizon = now_ms - int(config.dedup_window.total_seconds() * 1000)
    old = [
        (mark.at_ms, trigger_id)
        for trigger_id, mark in state.triggers.items()
        if mark.at_ms < horizon and mark.mark not in (Mark.QUEUED,)
        and not (mark.mark is Mark.RUNNING and state.trigger_id == trigger_id)
    ]
    old.sort()
    return [trigger_id for _, trigger_id in old[:limit]]


@dataclass(frozen=True)
class Acquired:
    """The lease is ours. ``previous`` is the row as it was before our write."""

    fence: int
    previous: LeaseState


@dataclass(frozen=True)
class Busy:
    """The acquisition's condition failed; ``state`` is the row it failed against."""

    state: LeaseState


@dataclass(frozen=True)
class Released:
    """Outcome of a release. ``released`` is False when the lease was no longer ours."""

    released: bool
    wake_receipt: str | None = None
    state: LeaseState | None = None
    follow_up: str | None = None
    """A follow-up was pending with no deferred message waiting to be woken: its message
    may never have been sent (a send and its compensation both failed), so the releasing
    run sends it again (same deduplication id; only the delivery matching the mark runs)."""
