"""What the guard asks of the store, one value per transition: each store transition
takes one of these (built by the decision side, from what it observed) and answers with
one typed value (:class:`~jobguard.lease.Acquired`, :class:`~jobguard.trigger_state.Refused`,
:class:`~jobguard.lease.Released`, ...).

A request says which trigger and run, the row and item as observed, and what the write
must carry; the store turns it into the conditions and items of one transaction (what
is written is the store's business, never the caller's). This module changes when a
transition needs to know something new. Pure values: nothing here talks to DynamoDB.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from .lease import LeaseState
from .records import RunOrigin, RunRecord
from .trigger_state import Next, Route, State, TriggerRecord

__all__ = ["Acquisition", "DecisionWrite", "ForceRelease", "Release", "Take"]


@dataclass(frozen=True, kw_only=True)
class Acquisition:
    """Take the job's lease for one trigger, from the row as observed
    (:meth:`jobguard.dynamodb.DynamoJobStore.acquire`)."""

    job: str
    trigger_id: str
    trigger_kind: str
    """The trigger's kind (``TriggerKind`` value): a ``follow_up`` carries its gate, a
    ``queued`` trigger counts itself off, a ``continuation`` takes only its hand-off."""
    route: Route
    run_id: str
    owner: str
    now_ms: int
    lease_ms: int
    skew_ms: int
    lease: LeaseState
    """The lease row as observed: the write holds only while it still is."""
    item: TriggerRecord | None
    """The trigger's item as observed (None: absent)."""
    trigger_ttl_s: int
    high_water: int = 0
    """The fence high-water mark as observed (0: not seen above the row's fence)."""
    replace: bool = False
    """``REPLACE``: a live holder's lease is taken (its trigger ends ``replaced``)."""
    queue_gate: bool = False
    """A direct ``QUEUE`` trigger: only while no queued trigger is pending."""
    ignore_pause: bool = False
    """A recovery told to run on a paused job."""
    displaced: RunRecord | None = None
    """On a takeover, the displaced run's record, written in the same transaction."""
    record_ttl_s: int = 0
    mark_displaced: bool = True
    """False: leave the displaced holder's trigger item alone (it could not be marked:
    decided meanwhile)."""
    keep_follow_up: bool = False
    """A service run or a chain's link: the pending follow-up stays named on the row (its
    gate moves with the fence), it is not served by this run."""
    origin: RunOrigin | None = None
    """Kept on the trigger's item while the run holds the lease."""


@dataclass(frozen=True)
class Take:
    """A tool's or a test's direct take of a free (or expired, or ``replace``) lease
    (:meth:`jobguard.dynamodb.DynamoJobStore.take`); handlers go through the guard."""

    trigger: Any
    """The :class:`jobguard.triggers.Trigger` it runs for."""
    _: KW_ONLY
    run_id: str
    owner: str
    now_ms: int
    lease_ms: int
    skew_ms: int = 0
    replace: bool = False


@dataclass(frozen=True)
class Release:
    """A run's own release: free the lease, end its trigger ``outcome``, write its
    ``record`` (:meth:`jobguard.dynamodb.DynamoJobStore.release`)."""

    job: str
    _: KW_ONLY
    run_id: str
    fence: int
    trigger_id: str
    outcome: State
    record: RunRecord
    record_ttl_s: int
    trigger_ttl_s: int
    keep_follow_up: bool = False
    """A service run: the follow-up stays named on the row (and is still returned)."""
    trigger_item: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """The run's trigger item as its acquisition wrote it whole (:attr:`Acquired.trigger_item`):
    the release then writes it whole too, ending ``outcome``. Nothing but the run moves
    a ``running`` item without changing its state or run id, so while the release's
    condition holds the item is exactly that."""


@dataclass(frozen=True)
class DecisionWrite:
    """A trigger's non-run decision (``step``), its new state and its ``record``, from the
    row and item as observed (:meth:`jobguard.dynamodb.DynamoJobStore.record_decision`)."""

    record: RunRecord
    _: KW_ONLY
    step: Next
    lease: LeaseState
    item: TriggerRecord | None
    route: Route
    now_ms: int
    skew_ms: int
    max_queued: int
    trigger_ttl_s: int
    record_ttl_s: int
    follow_up: tuple[str, int, int] | None = None
    """COALESCE: the follow-up's id, its gate fence (the holder's) and its item's TTL."""


@dataclass(frozen=True)
class ForceRelease:
    """An operator frees a stuck lease (``jobguard release --force``), conditioned on the
    holder they saw (:meth:`jobguard.dynamodb.DynamoJobStore.force_release`)."""

    job: str
    _: KW_ONLY
    holder_run_id: str
    fence: int
    now_ms: int
    by: str = "operator"
    reason: str | None = None
    record_ttl_s: int | None = None
