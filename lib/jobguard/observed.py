"""What a delivery knows of its job while it decides, and how each refusal adds to it.

The decision table (:mod:`jobguard.trigger_state`) says what a delivery does from the
lease row and its trigger's item; this module holds the delivery's side of that walk:
the value it decides from (:class:`Observed`), the one fold that takes a refused write
into it (:meth:`Observed.after`), and the delivery's own guards (``STALE``: :func:`late`,
and the new run id once its landed attempt's run was ended: :func:`landed_and_ended`).
It changes when what a refusal can show changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from .config import JobConfig
from .lease import LeaseState
from .trigger_state import Next, Refused, TriggerRecord
from .triggers import Trigger

__all__ = ["Observed", "landed_and_ended", "late"]


def late(trigger: Trigger, now: datetime, config: JobConfig) -> bool:
    """``STALE``'s first guard: a direct tick (or rule event) delivered past
    ``stale_after``. It is recorded stale unless owed (:attr:`Observed.owed`)."""
    return trigger.scheduled_at is not None and not trigger.is_from_queue \
        and now - trigger.scheduled_at > config.stale_after


def landed_and_ended(run_id: str, refused: Refused) -> bool:
    """A refused acquisition shows that an earlier attempt under ``run_id`` landed and
    its run has been ended since: the row names it as the run before or the last one
    released, or the trigger's item names it (the row, refusing, no longer does). The
    delivery then decides again under a new run id: what ended that run (taken over,
    replaced, force-released) wrote its record under this one."""
    lease, item = refused.lease, refused.trigger
    if lease is not None and run_id in (lease.prev_run_id, lease.last_run_id):
        return True
    return item is not None and item.run_id == run_id


@dataclass(frozen=True, kw_only=True)
class Observed:
    """What a delivery knows of its job when it decides: what it read, and what each
    refusal of its writes showed (:meth:`after`). Requests are built from it alone."""

    lease: LeaseState
    """The lease row as last seen."""
    item: TriggerRecord | None = None
    """The trigger's own item as last seen (None: absent, or not seen yet)."""
    high_water: int = 0
    """The fence high-water mark, when a refusal showed it above the row's fence."""
    unmarkable: str | None = None
    """A holder whose trigger item a takeover could not mark (decided meanwhile): a
    takeover of that holder leaves its item alone; a new holder is marked again."""
    follow_up_served: bool = False
    """The pending follow-up left its gate (ran or was absorbed) under a service run's
    acquisition: the lease is taken without carrying it."""
    owed: bool = False
    """A late tick its job already accepted onto its queue (its item queued or
    coalesced): decided (a duplicate, which sends it again), not recorded stale."""

    def stale(self, trigger: Trigger, now: datetime, config: JobConfig) -> bool:
        """``STALE``'s guard: late, and not owed."""
        return late(trigger, now, config) and not self.owed

    def after(self, refused: Refused, step: Next) -> Observed:
        """What is known once ``step``'s write was refused with ``refused``."""
        return replace(
            self,
            lease=refused.lease if refused.lease is not None else self.lease,
            item=refused.trigger if refused.trigger_failed else self.item,
            high_water=refused.high_water if refused.high_water is not None
            else self.high_water,
            unmarkable=self.lease.run_id if refused.displaced_failed and step is Next.RUN
            else self.unmarkable,
            # (the store reports no gate refusal beside a changed or conflicting row)
            follow_up_served=self.follow_up_served or refused.follow_up_failed,
        )
