"""The invariants a load is checked against, read from the ledger, the run log and the
destination once it settled.

Its one reason to change: what the load holds jobguard to (ONCE, END, FENCE and CKPT per
job; :mod:`jobguard.local.load` adds STALE and REFUSED from each delivery's answer) and
how each is read back from the table.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..workitems import ItemState
from ._load_world import World

__all__ = ["Invariants", "check_invariants", "checkpoint_cursor_ok", "puts_reached"]


# An item has ended once completed, or failed with a known outcome (reported on the run
# record; replayed by a recovery). Claimed and uncertain items are unfinished.
_ENDED = (ItemState.COMPLETED, ItemState.FAILED)


@dataclass
class Invariants:
    """What the checks found: empty ``violations`` means every invariant held."""

    violations: list[str] = field(default_factory=list)
    checked: Counter[str] = field(default_factory=Counter)
    called_twice: Counter[str] = field(default_factory=Counter)
    """Per job: work ids whose side effect was called more than once (ONCE violations)."""

    def require(self, name: str, ok: bool, message: str) -> None:
        self.checked[name] += 1
        if not ok:
            self.violations.append(f"{name}: {message}")


def check_invariants(world: World, job: str, work_ids: list[str], notes: dict[str, str],
                     puts: Counter[str], checkpoints: list[tuple[int, str | None]],
                     *, stale: tuple[str, int] | None = None,
                     found: Invariants | None = None) -> Invariants:
    """ONCE, END, FENCE and CKPT for one job whose source is ``work_ids``, in order.

    ``puts`` counts the destination calls that reached the emulator, per work id
    (:func:`puts_reached`): more than one for a work id is a ONCE violation whatever
    the job's policy, whether or not the item completed, even when the destination's
    conditional write kept it to one note; ``checkpoints`` the (seq, cursor) observed
    over time; ``stale`` a (run id, fence) that no longer holds the lease, to try
    writing with.
    """
    from ..dynamodb_items import DynamoItemStore
    from ..errors import LeaseLostError
    from ..workitems import Commit, Fence, Unresolved

    inv = found or Invariants()
    items = DynamoItemStore(world.table, client=world.ddb)
    rows = items.get_many(job, work_ids)
    for work_id in work_ids:
        row = rows.get(work_id)
        inv.require("END", row is not None and row.state in _ENDED,
                    f"{job} {work_id} is {row.state.value if row else 'absent'}")
        calls = puts.get(work_id, 0)
        inv.require("ONCE", calls <= 1,
                    f"{job} {work_id}: {calls} puts reached the destination")
        if calls > 1:
            inv.called_twice[job] += 1
        if row is not None and row.state is ItemState.COMPLETED:
            inv.require("ONCE", notes.get(work_id) == row.destination_id,
                        f"{job} {work_id}: ledger says {row.destination_id}, destination "
                        f"{notes.get(work_id)}")
    claimed = items.unresolved(job, states=[ItemState.CLAIMED, ItemState.UNCERTAIN])
    inv.require("END", not claimed,
                f"{job}: unresolved {[(r.work_id, r.state.value) for r in claimed][:5]}")
    # never backwards: in the order written (seq), the cursor never decreases
    cursors = [int(cursor or 0) for _, cursor in sorted(checkpoints)]
    inv.require("CKPT", cursors == sorted(cursors),
                f"{job}: checkpoint went back {[c for _, c in sorted(checkpoints)]}")
    final = items.read_checkpoint(job)
    inv.require("CKPT", final.cursor == f"{len(work_ids):06d}",
                f"{job}: final checkpoint {final.cursor}, source has {len(work_ids)}")
    if stale is not None:
        # A stale run's claim, failure record and checkpoint are refused (its completion
        # facts are not fenced: they state what the destination holds)
        run_id, fence = stale
        lease = Fence(job, run_id, fence)
        now = items.read_row(job)
        for attempt, change in (
                ("claim", Commit(expected=now, claim={"stale:create-note": ""})),
                ("failure", Commit(expected=now, rows=(Unresolved(
                    work_ids[0], ItemState.FAILED, error="stale", retryable=True),))),
                ("checkpoint", Commit(expected=now, checkpoint=(now.checkpoint.seq, "0")))):
            try:
                items.commit(lease, change, now_ms=0)
                inv.require("FENCE", False, f"{job}: a {attempt} with fence {fence} was applied")
            except LeaseLostError:
                inv.require("FENCE", True, "")
        inv.require("FENCE", items.get(job, "stale:create-note") is None,
                    f"{job}: a stale claim left a row")
    return inv


def checkpoint_cursor_ok(world: World, job: str,
                         work_ids: list[str]) -> tuple[int, str | None, bool]:
    """The checkpoint now (seq, cursor), and whether every item before it is completed."""
    from ..dynamodb_items import DynamoItemStore

    items = DynamoItemStore(world.table, client=world.ddb)
    checkpoint = items.read_checkpoint(job)
    upto = int(checkpoint.cursor or 0)
    rows = items.get_many(job, work_ids[:upto])
    done = all(r.state in _ENDED for r in rows.values()) and len(rows) == upto
    return checkpoint.seq, checkpoint.cursor, done


def puts_reached(faults: Any, key_attribute: str = "work_id") -> Counter[str]:
    """Destination puts that reached the emulator, per work id (from the harness's log)."""
    counts: Counter[str] = Counter()
    for call in faults.calls_at("destination.dynamodb.put"):
        if call.reached:
            counts[call.params["Item"][key_attribute]["S"]] += 1
    return counts
