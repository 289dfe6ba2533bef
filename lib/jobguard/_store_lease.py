"""The lease row, taken and kept: acquire (with its takeover and REPLACE), take, renew
and the deferred message's wake receipt.

Changes when how a run comes to hold a job changes: the conditions an acquisition puts on
the lease row, the fence mark and the trigger's item, and what it reads back when its
answer was lost. Giving the lease up is :mod:`jobguard._store_release`; an operator's
commands on the row are :mod:`jobguard._store_operator`.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from ._dynamo import Expr as _Expr
from ._dynamo import code as _code
from ._dynamo import old_item as _old_item
from ._dynamo import plain as _plain
from ._dynamo import transient
from ._store_table import StoreTable, _fences
from .callsites import RETRY, SURFACE, Path, call_site
from .errors import StoreError
from .lease import Acquired, Busy, LeaseState
from .requests import Acquisition, Take
from .trigger_state import Refused, Route, State, TriggerRecord

# -- call sites (see jobguard.callsites) --------------------------------------------

ACQUIRE = call_site(
    "dynamodb.acquire", "dynamodb", "TransactWriteItems", "LeaseRows.acquire",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="a retry refused by its own write is recognised (the lease row names this run; "
         "not a continuation's, whose run id its deliveries share: a duplicate, the "
         "lease expires unrun); an unanswered attempt is resolved by the next attempt's "
         "refusal or a read",
    paths=(Path.RUN,), parts=("Put", "Update"),
)

RENEW = call_site(
    "dynamodb.renew", "dynamodb", "UpdateItem", "LeaseRows.renew",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="the heartbeat resolves a failed renewal with a consistent read and retries "
         "before its local deadline; past it the run stops (`lease_lost`); an expiry "
         "never moves backwards",
    paths=(Path.RUN,),
)

SET_WAKE = call_site(
    "dynamodb.set_wake", "dynamodb", "UpdateItem", "LeaseRows.set_wake",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="the deferred message is reported failed and comes back after its visibility "
         "timeout; the retry's condition (holder) still holds",
    paths=(Path.QUEUE,),
)


def _error_text(exc: BaseException) -> str:
    """What an unresolved call answered (the service's own words, bounded)."""
    cause = exc.__cause__ if isinstance(exc, StoreError) and exc.__cause__ else exc
    return str(cause)[:300]


def _follow_up_gate(lease: LeaseState, item: TriggerRecord | None) -> int:
    """The gate a follow-up's acquisition checks on its own item: the gate as read (the
    decision has judged it against the row's ``served_fence``), or, before the item was
    read, the lease fence it was seen at."""
    if item is not None and item.gate_fence is not None:
        return item.gate_fence  # as read: the decision judged it against served_fence
    return lease.fence


class LeaseRows(StoreTable):
    """A run's hold on the job's lease row: acquire, take, renew, set_wake."""

    def acquire(self, request: Acquisition) -> Acquired | Refused:
        """Take the job's lease from the row as observed, in one transaction.

        The conditions, each on the value this write replaces:

        - the lease row: exactly ``request.lease`` (its fence, and no holder; or the
          holder named, expired by more than the skew margin unless ``replace``), not
          paused (unless ``ignore_pause``), and (``queue_gate``, a direct ``QUEUE``
          trigger) no pending queued trigger;
        - the fence high-water mark: no higher than the fence observed;
        - the trigger's item: exactly ``request.item`` (absent, or its state and run id);
        - on a takeover, the displaced run's trigger becomes ``lost`` (``replaced``
          under REPLACE; left alone unless ``mark_displaced``) and its record is written
          (``displaced``);
        - ``keep_follow_up`` (a recovery): a recovery replays a range, it does not do
          the job's regular work, so it never absorbs the pending follow-up: the
          follow-up stays named on the row (its release sends it) and its gate moves
          with the fence;
        - ``origin``: kept on the trigger's item while the run holds the lease, for the
          record an operator's force release writes of it.

        Returns :class:`Acquired` with the new fence, or :class:`Refused` with what
        was there instead.
        """
        r = request
        job, trigger_id, run_id, now_ms, skew_ms = (r.job, r.trigger_id, r.run_id, r.now_ms,
                                                    r.skew_ms)
        lease, item, route, trigger_kind = r.lease, r.item, r.route, r.trigger_kind
        replace, keep_follow_up, record_ttl_s = r.replace, r.keep_follow_up, r.record_ttl_s
        fence = max(lease.fence, r.high_water) + 1
        e = _Expr()
        pieces = [self._lease_condition(e, lease)]
        held = lease.is_held(now_ms, skew_ms)
        # A continuation takes the lease only from the hand-off the row names (its run
        # id, pre-assigned, is the row's): the chain holds the job like one run, so it
        # carries what waits behind it (wake-up, follow-up) as a recovery does.
        carry = trigger_kind == "continuation"
        if carry:
            pieces.append(f"{e.n('handed_from')} = {e.v(lease.handed_from or '-')}")
        if replace and held and lease.expires_at_ms is not None:
            # the live holder's expiry as read: a renewal since refuses this write (we
            # decide again), so the hold written below bounds its deadline exactly
            pieces.append(f"{e.n('expires_at_ms')} = {e.v(lease.expires_at_ms)}")
        if lease.run_id is not None and not (replace and held) and not carry:
            # A takeover of a lease seen expired holds only while it still is: a holder
            # that renewed since our read is alive, so (under REPLACE) its trigger ends
            # `replaced`, not `lost` for its retry to run again; refused, we decide again.
            pieces.append(f"{e.n('expires_at_ms')} < {e.v(now_ms - skew_ms)}")
        if not r.ignore_pause:
            pieces.append(f"attribute_not_exists({e.n('paused_at_ms')})")
        queued = e.n("queued_n")
        if r.queue_gate:
            pieces.append(f"(attribute_not_exists({queued}) OR {queued} <= {e.v(0)})")
        sets = [
            f"{e.n('fence')} = {e.v(fence)}",
            f"{e.n('run_id')} = {e.v(run_id)}",
            f"{e.n('holder_owner')} = {e.v(r.owner)}",
            f"{e.n('trigger_id')} = {e.v(trigger_id)}",
            f"{e.n('acquired_at_ms')} = {e.v(now_ms)}",
            f"{e.n('heartbeat_at_ms')} = {e.v(now_ms)}",
            f"{e.n('expires_at_ms')} = {e.v(now_ms + r.lease_ms)}",
            f"{e.n('prev_run_id')} = "
            f"{e.v((lease.handed_from if carry else lease.run_id) or lease.last_run_id or '-')}",
        ]
        if not keep_follow_up:
            sets.append(f"{e.n('served_fence')} = {e.v(fence)}")  # a run that serves
        if keep_follow_up:
            # a service run (recovery, reconciler): the follow-up stays named, exactly as
            # seen (a follow-up the row names but we did not see refuses this write)
            fu = e.n("follow_up")
            pieces.append(f"attribute_not_exists({fu})" if lease.follow_up is None
                          else f"{fu} = {e.v(lease.follow_up)}")
            removes = [e.n("handed_from")] if carry else [e.n("wake_receipt"),
                                                          e.n("handed_from")]
        else:
            removes = [e.n("wake_receipt"), e.n("follow_up"), e.n("handed_from")]
        update = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes)
        if route is Route.QUEUE and item is not None and item.state is State.QUEUED \
                and trigger_kind == "queued":
            # count it off, never below 0: a row deleted and made again since it was
            # queued no longer counts it (compare-and-set on the count as observed)
            if lease.queued_n > 0:
                update += f" ADD {queued} {e.v(-1)}"
                pieces.append(f"{queued} > {e.v(0)}")
            else:
                pieces.append(f"(attribute_not_exists({queued}) OR {queued} <= {e.v(0)})")
        actions = [self._update(self._lease_key(job), e, update, " AND ".join(pieces))]
        kinds = ["lease"]
        f = _Expr()
        hw = f.n("hw")
        # the job's skew margin beside the fence: an operator's release, which knows no
        # job's configuration, bounds a freed run's deadline with it
        set_hw = f"SET {hw} = {f.v(fence)}, {f.n('skew_ms')} = {f.v(skew_ms)}"
        if replace and held and lease.expires_at_ms is not None:
            # REPLACE takes the lease from a live run, which learns it only at its next
            # renewal: until its local deadline (its last renewal + the lease - the
            # skew margin, on its own clock: at most its expiry, pinned above, + the
            # margin on ours) it may still call the destination for its open claim.
            # Every run leaves that claim alone until then (jobguard.claims).
            set_hw += (f", {f.n('hold_until_ms')} = "
                       f"{f.v(lease.expires_at_ms + skew_ms)}")
        actions.append(self._update(
            self._fence_key(job), f, set_hw,
            f"attribute_not_exists({hw}) OR {hw} < {f.v(fence)}"))
        kinds.append("fence")
        written = self._trigger_write(
            job, trigger_id, item, state=State.RUNNING, route=route, run_id=run_id,
            now_ms=now_ms, ttl_epoch_s=r.trigger_ttl_s, fence=fence,
            gate_fence=fence if trigger_kind == "follow_up" else None, kind=trigger_kind,
            gate=_follow_up_gate(lease, item) if trigger_kind == "follow_up" else None,
            origin=r.origin)
        actions.append(written)
        kinds.append("trigger")
        if lease.run_id is not None and lease.trigger_id and lease.trigger_id != trigger_id \
                and r.mark_displaced:
            target = State.REPLACED if replace and held else State.LOST
            actions.append(self._end_trigger(job, lease.trigger_id, lease.run_id, target,
                                             now_ms, record_ttl_s or r.trigger_ttl_s))
            kinds.append("displaced_trigger")
        if r.displaced is not None:
            actions.append(self._run_put(r.displaced, record_ttl_s))
            kinds.append("displaced_record")
        if keep_follow_up and lease.follow_up:
            # still pending: queued, and not absorbable (no run that serves started
            # after its gate: decide's ABSORB test, on the row's served_fence as read,
            # which the lease condition pins with the fence). Never `gate = fence`: an
            # operator's repair moves the fence on without the gate.
            g = _Expr()
            actions.append(self._update(
                self._trigger_key(job, lease.follow_up), g,
                f"SET {g.n('gate_fence')} = {g.v(fence)}",
                f"{g.n('state')} = {g.v(State.QUEUED.value)} AND "
                f"{g.n('gate_fence')} >= {g.v(lease.served_fence)}"))
            kinds.append("follow_up_gate")
        try:
            refused = self._transact("acquire", job, actions, kinds)
        except BotoCoreError as exc:
            return self._acquire_unknown(job, run_id, exc, shared_run_id=carry)
        except StoreError as exc:
            if exc.__cause__ is not None and transient(exc.__cause__):
                return self._acquire_unknown(job, run_id, exc, shared_run_id=carry)
            raise
        if refused is None:
            _fences[(self.table_name, job)] = fence
            return Acquired(fence=fence, displaced_run_id=None if carry else lease.run_id,
                            trigger_item=written["Put"]["Item"] if "Put" in written else None)
        if refused.lease is not None and refused.lease.run_id == run_id and not carry:
            # Our own earlier attempt landed; its response was lost. (Never for a
            # continuation: its run id is the hand-off's, shared by every delivery of it,
            # so a row naming it may be another delivery's run: decided again, it is a
            # duplicate. An attempt of ours that landed unanswered holds the lease
            # unrun until it expires, like a lost invoke: the next tick takes over.)
            return Acquired(fence=refused.lease.fence,
                            expires_at_ms=refused.lease.expires_at_ms,
                            displaced_run_id=refused.lease.prev_run_id
                            if refused.lease.prev_run_id not in (None, "-") else None)
        return refused

    def take(self, request: Take) -> Acquired | Busy:
        """Take the lease for a direct trigger if it is free (or expired, or ``replace``),
        deciding again from each refusal; :class:`Busy` when a live run holds it or the
        trigger was already decided. For tools and tests; handlers go through the guard.
        """
        trigger, now_ms, skew_ms, replace = (request.trigger, request.now_ms,
                                             request.skew_ms, request.replace)
        job = trigger.job
        lease = self.expected_lease(job)
        item: TriggerRecord | None = None
        high_water = 0
        for _ in range(8):
            if item is not None and item.live(now_ms) and item.state not in (
                    State.FAILED, State.LOST, State.RUNNING):
                return Busy(lease)
            if lease.is_held(now_ms, skew_ms) and not replace:
                return Busy(lease)
            result = self.acquire(Acquisition(
                job=job, trigger_id=trigger.trigger_id, trigger_kind=trigger.kind.value,
                route=Route.DIRECT, run_id=request.run_id, owner=request.owner,
                now_ms=now_ms, lease_ms=request.lease_ms, skew_ms=skew_ms, lease=lease,
                item=item, trigger_ttl_s=now_ms // 1000 + 86_400, high_water=high_water,
                replace=replace, ignore_pause=True))
            if isinstance(result, Acquired):
                return result
            lease = result.lease or lease
            if result.trigger_failed:
                item = result.trigger
            if result.high_water is not None:
                high_water = result.high_water
        return Busy(lease)

    def _acquire_unknown(self, job: str, run_id: str, exc: Exception, *,
                         shared_run_id: bool = False) -> Acquired | Refused:
        """The acquisition's answer was an error: no answer, or one after which an
        earlier attempt of the SDK's may have landed (its answer lost, the retries
        throttled). Only a consistent read tells; the run starts only if the row names it
        (never for a continuation, whose run id every delivery of it shares).
        """
        state = self.read_lease(job)
        if state.run_id == run_id and not shared_run_id:
            return Acquired(fence=state.fence, displaced_run_id=None,
                            expires_at_ms=state.expires_at_ms)
        return Refused(lease=state, unanswered=_error_text(exc))

    def renew(self, job: str, *, run_id: str, fence: int, now_ms: int, lease_ms: int) -> bool:
        """Extend the lease; False when it is no longer ours (never re-creates a row).

        An expiry never moves backwards: a worker whose wall clock stepped back asks
        for an earlier expiry than the row has, its condition fails, and the lease (still
        ours, with the later expiry) counts as renewed.
        """
        e = _Expr()
        new_expiry = e.v(now_ms + lease_ms)
        condition = (f"{e.n('run_id')} = {e.v(run_id)} AND {e.n('fence')} = {e.v(fence)} "
                     f"AND {e.n('expires_at_ms')} < {new_expiry}")
        update = (f"SET {e.n('expires_at_ms')} = {new_expiry}, "
                  f"{e.n('heartbeat_at_ms')} = {e.v(now_ms)}")
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job),
                UpdateExpression=update, ConditionExpression=condition,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                row = _plain(_old_item(exc))
                return row.get("run_id") == run_id and row.get("fence") == fence
            raise StoreError("renew", job, str(exc)) from exc
        return True

    def set_wake(self, job: str, *, holder_run_id: str, receipt: str) -> bool:
        """Leave a deferred message's receipt for the holder to wake at release."""
        e = _Expr()
        update = f"SET {e.n('wake_receipt')} = {e.v(receipt)}"
        condition = f"{e.n('run_id')} = {e.v(holder_run_id)}"
        try:
            self._client.update_item(
                TableName=self.table_name, Key=self._lease_key(job),
                UpdateExpression=update, ConditionExpression=condition,
                **e.params(update, condition),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise StoreError("set_wake", job, str(exc)) from exc
        return True
