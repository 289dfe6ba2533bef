"""The operator's commands on a job's lease row: pause, resume, force release (and a
link withdrawing its own hand-off, the same transaction), repair of a damaged row.

Changes when what an operator may do to a job changes: the conditions that keep a command
from freeing a newer holder or undoing a newer pause, and the record a force release
writes for the run it frees. A run's own transitions are :mod:`jobguard._store_lease` and
:mod:`jobguard._store_release`. It builds on :class:`jobguard._store_triggers.TriggerItems`
because a repair recounts the job's queued triggers from their items.
"""

from __future__ import annotations

import dataclasses
import uuid

from botocore.exceptions import ClientError

from ._dynamo import Expr as _Expr
from ._dynamo import code as _code
from ._store_table import _CLOCK_OFFSET_MS, _HOLDER_ATTRS, _LAMBDA_MAX_RUN_MS, _fences
from ._store_triggers import TriggerItems
from .callsites import RETRY, SURFACE, Path, call_site
from .errors import DamagedRowError, StoreError
from .lease import LeaseState
from .records import Decision, RunRecord, RunStatus
from .requests import ForceRelease
from .trigger_state import State

# -- call sites (see jobguard.callsites) --------------------------------------------

PAUSE = call_site(
    "dynamodb.pause", "dynamodb", "UpdateItem", "OperatorCommands.pause",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command; the update is idempotent",
    paths=(Path.OPERATOR,),
)

RESUME = call_site(
    "dynamodb.resume", "dynamodb", "UpdateItem", "OperatorCommands.resume",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command; the update is idempotent",
    paths=(Path.OPERATOR,),
)

FORCE_RELEASE = call_site(
    "dynamodb.force_release", "dynamodb", "TransactWriteItems",
    "OperatorCommands._operator_release",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command, one transaction (lease, fence mark, the run's trigger and "
         "record); a retry refused by its own write (released by this operator) counts; "
         "also a link withdrawing a hand-off whose invoke was refused (an error: it expires)",
    paths=(Path.OPERATOR, Path.CONTINUE), parts=("Put", "Update"),
)

REPAIR = call_site(
    "dynamodb.repair", "dynamodb", "TransactWriteItems", "OperatorCommands.repair",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="operator command on a damaged lease row; conditioned on the row as read",
    paths=(Path.OPERATOR,), parts=("Update",),
)


class OperatorCommands(TriggerItems):
    """An operator's commands on the lease row: pause, resume, force_release,
    withdraw_hand_off (a link's own), repair."""

    def pause(self, job: str, *, reason: str, now_ms: int, by: str | None = None,
              replace: bool = False) -> bool:
        """Pause a job: triggers are recorded as ``paused`` until :meth:`resume`. The
        reason is cut at 1,000 UTF-8 bytes, as every text jobguard writes: the lease row
        is read and rewritten by every decision of the job.

        Only a job not paused is paused (False, nothing written, when it already is: its
        pause, reason and time are kept). With ``replace``, only a paused job's reason
        (and who) is replaced, its time kept (False when it is not paused)."""
        from ._bounds import bounded_text

        e = _Expr()
        sets = [f"{e.n('paused_reason')} = {e.v(bounded_text(reason))}"]
        if not replace:
            sets.append(f"{e.n('paused_at_ms')} = {e.v(now_ms)}")
        removes = []
        if by:
            sets.append(f"{e.n('paused_by')} = {e.v(bounded_text(by))}")
        else:
            removes.append(e.n("paused_by"))
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes
                                             else "")
        condition = (f"attribute_exists({e.n('paused_at_ms')})" if replace
                     else f"attribute_not_exists({e.n('paused_at_ms')})")
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job), UpdateExpression=update,
                ConditionExpression=condition, **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def resume(self, job: str) -> bool:
        """Undo :meth:`pause`: True when the job was paused; False, nothing written (no
        row made for a job that never ran), when it was not."""
        e = _Expr()
        update = f"REMOVE {e.n('paused_at_ms')}, {e.n('paused_reason')}, {e.n('paused_by')}"
        condition = f"attribute_exists({e.n('paused_at_ms')})"
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job), UpdateExpression=update,
                ConditionExpression=condition, **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def force_release(self, request: ForceRelease) -> bool:
        """Free a stuck lease and move the fence on, so the old holder can write nothing
        more: one transaction with the fence mark, the run's trigger (``released``: a
        redelivery never runs it again) and its record (``released_by_operator``).
        Conditioned on the holder the operator saw: never frees a newer one. On a
        damaged lease row it repairs the row instead (:meth:`repair`)."""
        job, holder_run_id, fence, now_ms, by = (request.job, request.holder_run_id,
                                                 request.fence, request.now_ms, request.by)
        reason, record_ttl_s = request.reason, request.record_ttl_s
        for _ in range(3):  # again only if the holder renewed between our read and write
            try:
                lease = self.read_lease(job)
            except DamagedRowError:
                # repaired only while the row still names the holder the operator saw
                # (or none it can read): never frees a run that took the lease since
                return self.repair(job, now_ms=now_ms, by=by, holder_run_id=holder_run_id) > 0
            released = self._force_release_seen(job, lease, holder_run_id=holder_run_id,
                                                fence=fence, now_ms=now_ms, by=by,
                                                reason=reason, record_ttl_s=record_ttl_s)
            if released is not None:
                return released
        return False

    def withdraw_hand_off(self, job: str, *, next_run_id: str, fence: int, now_ms: int,
                          reason: str) -> bool:
        """A link whose invoke of the next link was refused frees its hand-off at once:
        the force release's transaction (fence moved on, the pending link's trigger
        ``released``, its record naming the chain), only while the row still names that
        hand-off, never a link that started (its fence is one more) or a newer holder.
        A late delivery of the link then finds it ``superseded``."""
        for _ in range(3):
            lease = self.read_lease(job)
            if lease.handed_from is None:
                return False
            released = self._force_release_seen(job, lease, holder_run_id=next_run_id,
                                                fence=fence, now_ms=now_ms, by="jobguard",
                                                reason=reason, record_ttl_s=None,
                                                withdrawn=True)
            if released is not None:
                return released
        return False

    def _force_release_seen(self, job: str, lease: LeaseState, *, holder_run_id: str,
                           fence: int, now_ms: int, by: str, reason: str | None,
                           record_ttl_s: int | None, withdrawn: bool = False) -> bool | None:
        """One force release from ``lease`` as read: True released, False not (another
        holder, or none), None: the holder renewed since the read (read again).
        ``withdrawn``: the link before frees its own hand-off (its invoke refused), so the
        never-started link is recorded ``superseded`` (nothing ran, no operator did it)."""
        if lease.run_id != holder_run_id or lease.fence != fence:
            # True only when our own earlier attempt landed (its response was lost)
            return lease.released_by == f"operator:{by}" and lease.last_run_id == holder_run_id
        high_water, offset_ms = self._fence_state(job)
        new_fence = max(fence, high_water) + 1
        # The run's story, as its acquisition left it on its trigger's item (the item as
        # read is the run's own: the transaction ends it only while it still is).
        item = self.read_trigger(job, lease.trigger_id) if lease.trigger_id else None
        # (a hand-off not started yet: its item ``handed``, the link before on the row)
        own = item if item is not None and item.state in (State.RUNNING, State.HANDED) \
            and item.run_id == holder_run_id else None
        origin = own.origin if own is not None else None
        record = RunRecord(
            job=job, run_id=holder_run_id, trigger_id=lease.trigger_id or "",
            trigger_kind=(own.kind if own is not None else None) or "",
            policy=origin.policy if origin is not None else "",
            decision=Decision.RAN, status=RunStatus.RELEASED_BY_OPERATOR,
            started_at_ms=lease.acquired_at_ms or now_ms, ended_at_ms=now_ms, fence=fence,
            owner=lease.owner, scheduled_at=origin.scheduled_at if origin else None,
            requested_by=origin.requested_by if origin else None,
            delivery_id=origin.delivery_id if origin else None,
            detail=f"lease force-released by {by}" + (f": {reason}" if reason else ""),
            extra={"continues": lease.handed_from} if lease.handed_from else {},
        )
        if withdrawn:
            record = dataclasses.replace(
                record, decision=Decision.SUPERSEDED, status=RunStatus.SUPERSEDED,
                started_at_ms=now_ms, owner=None,
                detail=f"withdrawn by run {lease.handed_from} before it started: {reason}")
        ttl = record_ttl_s if record_ttl_s is not None else now_ms // 1000 + 30 * 86_400
        if self._operator_release(job, lease, new_fence, now_ms, by, record, ttl,
                                  offset_ms=offset_ms):
            return True
        again = self.read_lease(job)
        renewed = (again.run_id == holder_run_id and again.fence == fence
                   and again.expires_at_ms != lease.expires_at_ms)
        return None if renewed else False

    def _operator_release(self, job: str, lease: LeaseState, new_fence: int, now_ms: int,
                          by: str, record: RunRecord | None, ttl: int, *,
                          mark_trigger: bool = True, offset_ms: int = 0) -> bool:
        e = _Expr()
        condition = self._lease_condition(e, lease)
        update = (f"SET {e.n('fence')} = {e.v(new_fence)}, "
                  f"{e.n('released_at_ms')} = {e.v(now_ms)}, "
                  f"{e.n('released_by')} = {e.v('operator:' + by)}")
        if lease.run_id is not None:
            update += f", {e.n('last_run_id')} = {e.v(lease.run_id)}"
        update += f" REMOVE {', '.join(e.n(n) for n in _HOLDER_ATTRS)}"
        f = _Expr()
        hw = f.n("hw")
        set_hw = f"SET {hw} = {f.v(new_fence)}"
        if lease.run_id is not None and lease.expires_at_ms is not None:
            # As for a REPLACE: the holder, if it is alive, learns of this only at its next
            # renewal and may call the destination for its open claim until its local
            # deadline (at most its expiry, pinned here: a renewal since refuses this
            # write, + the clock offset between two workers); nobody reconciles that
            # claim before then (jobguard.claims).
            condition += f" AND {e.n('expires_at_ms')} = {e.v(lease.expires_at_ms)}"
            set_hw += (f", {f.n('hold_until_ms')} = "
                       f"{f.v(lease.expires_at_ms + (offset_ms or _CLOCK_OFFSET_MS))}")
        actions = [self._update(self._lease_key(job), e, update, condition),
                   self._update(self._fence_key(job), f, set_hw,
                                f"attribute_not_exists({hw}) OR {hw} < {f.v(new_fence)}")]
        kinds = ["lease", "fence"]
        if lease.run_id is not None and lease.trigger_id and mark_trigger:
            actions.append(self._end_trigger(job, lease.trigger_id, lease.run_id,
                                             State.RELEASED, now_ms, ttl, by="operator"))
            kinds.append("displaced_trigger")
        follow_up = self.read_trigger(job, lease.follow_up) if lease.follow_up else None
        if follow_up is not None and follow_up.state is State.QUEUED \
                and follow_up.gate_fence == lease.fence:
            # The holder's pending follow-up: no run started, so it still runs (its gate
            # moves with the fence the operator moved).
            g = _Expr()
            actions.append(self._update(
                self._trigger_key(job, follow_up.trigger_id), g,
                f"SET {g.n('gate_fence')} = {g.v(new_fence)}",
                f"{g.n('state')} = {g.v(State.QUEUED.value)} AND "
                f"{g.n('gate_fence')} = {g.v(lease.fence)}"))
            kinds.append("follow_up")
        if record is not None:
            actions.append(self._run_put(record, ttl))
            kinds.append("record")
        refused = self._transact("force_release", job, actions, kinds)
        if refused is not None and refused.conflict and refused.throttled:
            # nothing was refused by the row: the partition refused the request, and "the
            # lease changed hands" would be untrue. (A concurrent transaction, the
            # holder's renewal, is read again by the caller, as a refused row is.)
            raise StoreError("force_release", job, "refused for the partition's throttle "
                             "(ThrottlingError: its write capacity is spent, see "
                             "docs/capacity.md); nothing was written: try again")
        if refused is not None and refused.displaced_failed and mark_trigger:
            # the stuck run's trigger was decided since (a delivery while paused): leave it
            return self._operator_release(job, lease, new_fence, now_ms, by, record, ttl,
                                          mark_trigger=False, offset_ms=offset_ms)
        if refused is None or (refused.lease is not None
                               and refused.lease.released_by == f"operator:{by}"
                               and refused.lease.last_run_id == lease.run_id
                               and refused.lease.fence == new_fence):
            # applied (or applied by our own earlier attempt whose response was lost)
            _fences[(self.table_name, job)] = new_fence
            return True
        return False

    def repair(self, job: str, *, now_ms: int, by: str = "operator",
               holder_run_id: str | None = None) -> int:
        """Rewrite a damaged lease row: holder cleared, fence past every fence issued,
        pause kept, the queued count recounted from the trigger items. Returns the new
        fence. Conditioned on the row's holder as read (never clobbers a new holder);
        with ``holder_run_id``, only while the row names that holder (or none it can
        read): 0, nothing written, when it names another."""
        raw = self.read_lease_raw(job) or {}
        if holder_run_id is not None and isinstance(raw.get("run_id"), str) \
                and raw["run_id"] != holder_run_id:
            return 0
        fence = raw.get("fence")
        known = fence if isinstance(fence, int) and not isinstance(fence, bool) else 0
        high_water, offset_ms = self._fence_state(job)
        new_fence = max(known, high_water) + 1
        queued = self._count_queued(job, now_ms)
        e = _Expr()
        run = raw.get("run_id")
        condition = (f"{e.n('run_id')} = {e.v(run)}" if isinstance(run, str)
                     else f"attribute_not_exists({e.n('run_id')})")
        # the count is rewritten from a query: only if no decision moved it meanwhile
        seen_n = raw.get("queued_n")
        condition += (f" AND attribute_not_exists({e.n('queued_n')})" if seen_n is None
                      else f" AND {e.n('queued_n')} = {e.v(seen_n)}")
        paused_at, paused_reason = raw.get("paused_at_ms"), raw.get("paused_reason")
        sets = [f"{e.n('fence')} = {e.v(new_fence)}", f"{e.n('queued_n')} = {e.v(queued)}",
                f"{e.n('released_at_ms')} = {e.v(now_ms)}",
                f"{e.n('released_by')} = {e.v('operator:' + by)}"]
        # the holder goes; a pending follow-up stays named (its coalesced triggers are
        # still owed a run: the next run absorbs it, or its message runs it)
        removes = [n for n in _HOLDER_ATTRS if n != "follow_up"] + ["prev_run_id"]
        # the pause as read: an operator's pause (or resume) since is not undone
        condition += (f" AND {e.n('paused_at_ms')} = {e.v(paused_at)}"
                      if paused_at is not None else
                      f" AND attribute_not_exists({e.n('paused_at_ms')})")
        if isinstance(paused_at, int) and not isinstance(paused_at, bool):
            sets.append(f"{e.n('paused_reason')} = {e.v(str(paused_reason or 'paused'))}")
            if not isinstance(raw.get("paused_by"), str):
                removes.append("paused_by")
        else:
            removes += ["paused_at_ms", "paused_reason", "paused_by"]
        if isinstance(run, str):
            sets.append(f"{e.n('last_run_id')} = {e.v(run)}")
        else:
            removes.append("last_run_id")
        update = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(e.n(n) for n in removes)
        f = _Expr()
        hw = f.n("hw")
        set_hw = f"SET {hw} = {f.v(new_fence)}"
        expires = raw.get("expires_at_ms")
        if not isinstance(expires, int) or isinstance(expires, bool):
            expires = None
        if isinstance(run, str) or expires is not None:
            # the holder may be alive (the damage may be elsewhere on the row, or be its
            # run id alone): as for a force release, nobody reconciles its open claim
            # before its deadline: its expiry if the row still says it, else the
            # longest a Lambda can run
            until = expires if expires is not None else now_ms + _LAMBDA_MAX_RUN_MS
            set_hw += f", {f.n('hold_until_ms')} = {f.v(until + offset_ms)}"
        actions = [self._update(self._lease_key(job), e, update, condition),
                   self._update(self._fence_key(job), f, set_hw,
                                f"attribute_not_exists({hw}) OR {hw} < {f.v(new_fence)}")]
        trigger = raw.get("trigger_id")
        if isinstance(run, str) and isinstance(trigger, str):
            t = _Expr()
            actions.append(self._update(
                self._trigger_key(job, trigger), t,
                f"SET {t.n('state')} = {t.v(State.RELEASED.value)}, "
                f"{t.n('ended_by')} = {t.v('operator')}",
                f"attribute_not_exists({t.n('state')}) OR {t.n('run_id')} = {t.v(run)}"))
        try:
            self._client.transact_write_items(TransactItems=actions,
                                              ClientRequestToken=str(uuid.uuid4()))
        except ClientError as exc:
            raise StoreError("repair", job, f"the lease row changed while it was being "
                             f"repaired; run the command again ({exc})") from exc
        _fences[(self.table_name, job)] = new_fence
        return new_fence
