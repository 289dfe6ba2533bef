"""The lease row, read as a value: bounded, validated, and nothing about triggers.

The row holds the holder (run id, owner, trigger, acquired/expires/heartbeat times),
the fence, pause, the count of pending queued triggers, the pending follow-up of the
holder and one wake-up receipt: a fixed set of attributes, so its size does not grow
with the trigger history (triggers have items of their own: :mod:`jobguard.trigger_state`).

An expired lease is a hint, not a guarantee: a paused worker may still believe it holds
it. That is why every write a run makes carries its fence, and why a lease is only taken
over once it has been expired for longer than the skew margin.

A row written by hand or by a bug is never trusted blindly: :func:`parse_lease` refuses
any attribute of the wrong type, or missing where the row needs it, with a
:class:`DamagedRowError` naming the job, the row, the attribute and the repair command.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from .errors import DamagedRowError

__all__ = ["Acquired", "Busy", "HandOff", "LeaseState", "Released", "backoff",
           "parse_lease"]


@dataclass(frozen=True, kw_only=True)
class LeaseState:
    """A snapshot of a job's lease row."""

    job: str
    """The job's name (from the row's key)."""
    fence: int = 0
    """The last fence issued: grows by one with every acquisition, never reset."""
    run_id: str | None = None
    """The run holding the lease (None: free)."""
    owner: str | None = None
    """The holder's function and instance."""
    trigger_id: str | None = None
    """The trigger the holder runs for."""
    acquired_at_ms: int | None = None
    """When the holder took the lease."""
    expires_at_ms: int | None = None
    """When the lease lapses unless renewed; free once past it by the skew margin."""
    heartbeat_at_ms: int | None = None
    """The holder's last renewal."""
    released_at_ms: int | None = None
    """When the lease was last released."""
    last_run_id: str | None = None
    """The run that held it last (after a release)."""
    released_by: str | None = None
    """``run`` (its own release) or ``operator:<who>`` (``jobguard release --force``)."""
    paused_at_ms: int | None = None
    """When the job was paused (None: not paused)."""
    paused_reason: str | None = None
    """Why (``jobguard pause --reason``)."""
    paused_by: str | None = None
    """Who paused the job (``jobguard pause`` writes the operator's login name)."""
    queued_n: int = 0
    """QUEUE: triggers waiting on the job's trigger queue, checked against
    ``max_queued``."""
    follow_up: str | None = None
    """COALESCE: the trigger id of the one follow-up run owed after the active run."""
    wake_receipt: str | None = None
    """A trigger-queue message waiting for the lease: woken when the holder releases."""
    prev_run_id: str | None = None
    """The run that held the lease before the current acquisition (``-``: none)."""
    served_fence: int = 0
    """The fence of the last run that served triggers (not a recovery or a reconciler
    sweep): a follow-up is absorbed only once a run past its gate has served it. 0 when
    unknown (a recreated row): the follow-up then runs, once more at worst."""
    handed_from: str | None = None
    """A hand-off (continuation): the run that handed the lease to the continuation the
    row names (``run_id``, ``trigger_id``, pre-assigned); only that continuation's
    delivery takes it, until it expires like a lease (:mod:`jobguard.trigger_state`)."""
    exists: bool = True
    """False when the row does not exist (a new job, or a deleted row)."""

    def is_held(self, now_ms: int, skew_ms: int) -> bool:
        """Held, from the point of view of a worker whose clock reads ``now_ms``.

        A lease is free only once it has been expired for longer than the skew margin.
        """
        return (
            self.run_id is not None
            and self.expires_at_ms is not None
            and self.expires_at_ms >= now_ms - skew_ms
        )


_INT = ("acquired_at_ms", "expires_at_ms", "heartbeat_at_ms", "released_at_ms",
        "paused_at_ms", "served_fence")
_STR = ("run_id", "holder_owner", "trigger_id", "last_run_id", "released_by",
        "paused_reason", "paused_by", "follow_up", "wake_receipt", "prev_run_id",
        "handed_from")
_HELD_NEEDS = ("expires_at_ms", "holder_owner", "trigger_id", "acquired_at_ms")
_HOLDER_MARKS = ("holder_owner", "expires_at_ms")


def _repair(job: str) -> str:
    return f"jobguard release --force {job}"


def parse_lease(job: str, row: dict[str, Any] | None) -> LeaseState:
    """Read a lease row (plain values) as a :class:`LeaseState`, refusing damage.

    Raises:
        DamagedRowError: an attribute of the wrong type, or missing where needed
            (a held row without ``expires_at_ms``; a row that was ever held without
            ``fence``).
    """
    if row is None:
        return LeaseState(job=job, exists=False)

    def damaged(attribute: str, problem: str) -> DamagedRowError:
        return DamagedRowError(job, "LEASE", attribute, problem, _repair(job))

    for name in _INT:
        value = row.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise damaged(name, f"must be a number (epoch ms), got {value!r}")
    for name in _STR:
        value = row.get(name)
        if value is not None and not isinstance(value, str):
            raise damaged(name, f"must be a string, got {value!r}")
    fence = row.get("fence")
    if fence is not None and (not isinstance(fence, int) or isinstance(fence, bool)
                              or fence < 0):
        raise damaged("fence", f"must be a whole number >= 0, got {fence!r}")
    queued = row.get("queued_n", 0)
    if not isinstance(queued, int) or isinstance(queued, bool):
        raise damaged("queued_n", f"must be a whole number, got {queued!r}")
    ever_held = any(row.get(n) is not None for n in ("run_id", "acquired_at_ms",
                                                       "released_at_ms", "last_run_id"))
    if fence is None and ever_held:
        raise damaged("fence", "is missing from a row that has been held")
    if row.get("run_id") is not None:
        for name in _HELD_NEEDS:
            if row.get(name) is None:
                raise damaged(name, f"is missing while run {row['run_id']} holds the lease")
    elif any(row.get(name) is not None for name in _HOLDER_MARKS):
        # every write that frees the row removes these with run_id: a row naming a
        # holder's owner or expiry without its run is damaged, not free (read as free,
        # the next run would take it beside a holder that may still be calling)
        raise damaged("run_id", "is missing from a row that names a holder "
                                "(holder_owner or expires_at_ms)")
    return LeaseState(
        job=job,
        fence=int(fence or 0),
        run_id=row.get("run_id"),
        owner=row.get("holder_owner"),
        trigger_id=row.get("trigger_id"),
        acquired_at_ms=row.get("acquired_at_ms"),
        expires_at_ms=row.get("expires_at_ms"),
        heartbeat_at_ms=row.get("heartbeat_at_ms"),
        released_at_ms=row.get("released_at_ms"),
        last_run_id=row.get("last_run_id"),
        released_by=row.get("released_by"),
        paused_at_ms=row.get("paused_at_ms"),
        paused_reason=row.get("paused_reason"),
        paused_by=row.get("paused_by"),
        queued_n=max(0, queued),
        follow_up=row.get("follow_up"),
        wake_receipt=row.get("wake_receipt"),
        prev_run_id=row.get("prev_run_id"),
        served_fence=int(row.get("served_fence") or 0),
        handed_from=row.get("handed_from"),
        exists=fence is not None,
    )


@dataclass(frozen=True)
class Acquired:
    """The lease is ours, with ``fence``. ``displaced_run_id``: the run whose lease we
    took over (expired, or replaced), recorded in the same transaction."""

    fence: int
    displaced_run_id: str | None = None
    expires_at_ms: int | None = None
    """The expiry the row holds, when the acquisition was recognised from a read of it
    (an earlier attempt that landed unanswered): the run's local deadline counts from
    that attempt, not from the one that read it."""
    trigger_item: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """The run's trigger item (DynamoDB JSON) when this acquisition wrote it whole (it
    had nothing live in it): the run's release writes it whole again."""


@dataclass(frozen=True)
class Busy:
    """The trigger did not get the lease; ``state`` is the row it failed against."""

    state: LeaseState


@dataclass(frozen=True)
class Released:
    """Outcome of a release. ``released`` is False when the lease was no longer ours."""

    released: bool
    wake_receipt: str | None = None
    follow_up: str | None = None
    """The holder's pending follow-up: the releasing run sends its message (again: the
    coalescing delivery may have failed to), with the same deduplication id; only a
    delivery that finds the follow-up's item ``queued`` runs."""
    state: LeaseState | None = None


@dataclass(frozen=True, kw_only=True)
class HandOff:
    """A link's release that hands the job to its continuation (one transaction): the
    lease row names the next link (``next_trigger_id``, ``next_run_id``, ``handed_from``
    = this run) with an expiry a lease away, this run's trigger ends ``done``, the next
    link's trigger item is made ``handed``, and this run's ``record`` is written."""

    job: str
    run_id: str
    fence: int
    trigger_id: str
    record: Any
    """This link's run record (:class:`jobguard.RunRecord`), naming the next link."""
    next_trigger_id: str
    next_run_id: str
    now_ms: int
    lease_ms: int
    record_ttl_s: int
    trigger_ttl_s: int
    """This link's trigger item's TTL once done."""
    next_ttl_s: int
    """The next link's trigger item's TTL (it must outlive the hand-off and the run)."""


THROTTLE_SPAN_S = (3.15, 6.3)
"""What the seven waits between eight throttled tries add up to, at least and at most
(:func:`backoff`): longer than a partition's one second of refill; with a page commit's
five waits before it (at most 3.1 s), a release's still fit the 10 s a ``BatchJob`` keeps
for its end (``time_margin``), the requests' own time aside."""


def backoff(attempt: int, *, throttled: bool = False) -> None:
    """Jittered exponential backoff between conflicting attempts: never a spin.

    A conflict (another worker's transaction on the same items) clears in milliseconds:
    up to 10 ms doubling to 320 ms. A throttle (the partition's capacity spent) clears
    only as its budget refills, over a second or more, and an attempt sent sooner is
    refused again: at least half of 100 ms doubling to 1.6 s, so that eight tries span
    3.15 to 6.3 s (:data:`THROTTLE_SPAN_S`; on the conflict schedule a run on a
    throttled partition gave up inside one second's refill). No loop waits after its
    last try.
    """
    if throttled:
        cap = min(1.6, 0.1 * 2 ** attempt)
        time.sleep(random.uniform(cap / 2, cap))
        return
    time.sleep(random.uniform(0, 0.01 * 2 ** min(attempt, 5)))
