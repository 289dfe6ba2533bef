"""The lease row, given up: a run's release (the trigger ended and the record written in
the same transaction) and a chain link's hand-off to its continuation.

Changes when how a run ends its hold changes: what a release removes from the row, when
a retry counts an earlier landed attempt as its own, what a hand-off writes for the next
link. Taking the lease is :mod:`jobguard._store_lease`.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from ._dynamo import Expr as _Expr
from ._dynamo import item as _item
from ._dynamo import transient
from ._store_lease import _error_text
from ._store_table import _HOLDER_ATTRS, StoreTable
from .callsites import RETRY, Path, call_site
from .errors import StoreError
from .lease import HandOff, Released, backoff
from .requests import Release
from .schema import (
    TTL_ATTRIBUTE,
)
from .trigger_state import Refused, Route, State

# -- call sites (see jobguard.callsites) --------------------------------------------

RELEASE = call_site(
    "dynamodb.release", "dynamodb", "TransactWriteItems", "LeaseRelease.release",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="retried with backoff while the lease is still the run's; an error answer is read "
         "back (consistent reads of the row, then of the trigger's item): a release that "
         "landed unanswered, or a retry refused by it (`last_run_id` = run id, released by "
         "`run`), counts as released and keeps the wake receipt and follow-up it found",
    paths=(Path.RUN,), parts=("Put", "Update"),
)

HAND_OFF = call_site(
    "dynamodb.hand_off", "dynamodb", "TransactWriteItems", "LeaseRelease.hand_off",
    throttle=RETRY, server_error=RETRY, timeout=RETRY, lost=RETRY,
    note="a link's release naming its continuation; an error answer is read back (the row "
         "naming the hand-off: landed); refused while paused, it releases instead (the "
         "chain ends)",
    paths=(Path.RUN,), parts=("Put", "Update"),
)


class LeaseRelease(StoreTable):
    """A run giving up the job's lease row: release, hand_off."""

    def release(self, request: Release) -> Released:
        """Free the lease, end the trigger and write the run record, in one transaction.

        The row is kept (with its fence) so the fence never resets. A deferred message's
        wake-up receipt and the holder's pending follow-up are removed by the write that
        saw them (a first attempt conditioned on their absence returns them) and
        returned, also when a retry finds that an earlier attempt landed. An attempt
        answered with an error (throttled, a 5xx, no answer: an earlier attempt of the
        SDK's may have landed unanswered) is read back, as an acquisition is.
        ``keep_follow_up`` (a service run: recovery, reconciler) leaves the follow-up
        named on the row but still returns it, so the releaser can send its message
        again when it has the queue (the coalescing sender's send may have failed).
        """
        job, run_id, fence, trigger_id = (request.job, request.run_id, request.fence,
                                          request.trigger_id)
        outcome, record, record_ttl_s, trigger_ttl_s, keep_follow_up = (
            request.outcome, request.record, request.record_ttl_s, request.trigger_ttl_s,
            request.keep_follow_up)
        wake: str | None = None
        follow_up: str | None = None
        end_trigger = True
        throttles = 0  # tries refused for the partition's throttle (for the error)
        for attempt in range(8):
            e = _Expr()
            condition = f"{e.n('run_id')} = {e.v(run_id)} AND {e.n('fence')} = {e.v(fence)}"
            # a service run leaves the follow-up named for the next run, but learns it
            # (so it can send its message again: the coalescing sender may have failed)
            watched = (("wake_receipt", wake), ("follow_up", follow_up))
            for name, value in watched:
                condition += (f" AND attribute_not_exists({e.n(name)})" if value is None
                              else f" AND {e.n(name)} = {e.v(value)}")
            # a service run without the queue leaves the follow-up named for the next run
            # (what the condition pins absent has nothing to remove)
            absent = {name for name, value in watched if value is None}
            removed = [n for n in _HOLDER_ATTRS
                       if n not in absent and not (keep_follow_up and n == "follow_up")]
            update = (
                f"SET {e.n('released_at_ms')} = {e.v(record.ended_at_ms)}, "
                f"{e.n('last_run_id')} = {e.v(run_id)}, {e.n('released_by')} = {e.v('run')} "
                f"REMOVE {', '.join(e.n(n) for n in removed)}"
            )
            actions = [self._update(self._lease_key(job), e, update, condition)]
            kinds = ["lease"]
            if end_trigger:
                t = _Expr()
                st = t.n("state")
                ours = (f"attribute_not_exists({st}) OR ({st} = "
                        f"{t.v(State.RUNNING.value)} AND {t.n('run_id')} = {t.v(run_id)})")
                if request.trigger_item is not None:
                    # written whole by the acquisition, and unchanged while it is ours
                    # (or gone, its TTL past): written whole again, no update expression
                    whole = {**request.trigger_item, **_item({
                        "state": outcome.value, "at_ms": record.ended_at_ms,
                        TTL_ATTRIBUTE: trigger_ttl_s, "run_id": run_id,
                        "ended_by": "release"})}
                    actions.append(self._put(whole, t, ours))
                else:
                    actions.append(self._update(
                        self._trigger_key(job, trigger_id), t,
                        f"SET {st} = {t.v(outcome.value)}, {t.n('at_ms')} = "
                        f"{t.v(record.ended_at_ms)}, {t.n(TTL_ATTRIBUTE)} = "
                        f"{t.v(trigger_ttl_s)}, {t.n('run_id')} = {t.v(run_id)}, "
                        f"{t.n('ended_by')} = {t.v('release')}, {t.n('route')} = "
                        f"if_not_exists({t.n('route')}, {t.v(Route.DIRECT.value)})", ours))
                kinds.append("trigger")
            actions.append(self._run_put(record, record_ttl_s))
            kinds.append("record")
            try:
                refused = self._transact("release", job, actions, kinds)
            except (StoreError, BotoCoreError) as exc:
                cause = exc.__cause__ if isinstance(exc, StoreError) else exc
                if cause is None or not transient(cause):
                    raise
                # Its answer was an error: no answer, or one after which an earlier
                # attempt of the SDK's may have landed (its answer lost, the retries
                # throttled). A consistent read tells, as for the acquisition: a landed
                # release is recognised below, a row still ours tells what to remove.
                unknown = _error_text(exc)
                refused = self._release_unknown(job, run_id, trigger_id)
                if refused is None or (refused.lease is not None
                                       and refused.lease.run_id == run_id):
                    if attempt == 7:
                        ended = record.status.value + (f": {record.error}" if record.error
                                                       else "")
                        raise StoreError(
                            "release", job, f"run {run_id} (fence {fence}) ended {ended}, and "
                            f"could not release its lease or write its record: no attempt "
                            f"landed in 8 tries (last: {unknown}); the lease stays its own "
                            "until it expires, then the next trigger takes it over") from exc
                    backoff(attempt)
                    if refused is None:
                        continue
            if refused is None:
                return Released(released=True, wake_receipt=wake, follow_up=follow_up)
            mine = refused.trigger
            if refused.trigger_failed and mine is not None and mine.run_id == run_id \
                    and mine.ended_by == "release":
                # Our own earlier attempt landed (its response was lost): the trigger item
                # says so even if another run has taken and released the lease since.
                return Released(released=True, wake_receipt=wake, follow_up=follow_up)
            if refused.trigger_failed and refused.lease is None:
                # The lease is still ours but the trigger moved on (decided after its item
                # outlived its TTL): release without touching it.
                end_trigger = False
                continue
            state = refused.lease
            if state is None:
                throttles += refused.throttled
                if attempt < 7:  # (no wait after the last try)
                    backoff(attempt, throttled=refused.throttled)  # a conflict: look again
                continue
            if state.run_id == run_id and state.fence == fence:
                wake = state.wake_receipt
                follow_up = state.follow_up
                continue
            if state.last_run_id == run_id and state.released_by == "run":
                return Released(released=True, wake_receipt=wake, follow_up=follow_up)
            return Released(released=False, state=state)
        raise StoreError("release", job, _kept_refusing(run_id, fence, throttles))

    def hand_off(self, request: HandOff) -> Released | None:
        """Release the lease to a continuation instead of freeing it (:class:`HandOff`).

        Returns ``Released(released=True)`` when handed (also when an earlier attempt
        landed unanswered), ``Released(released=False, state=...)`` when the lease is no
        longer this run's, and None when it is but may not be handed (the job paused,
        the run's trigger decided since, the next link's trigger already there): the
        caller then releases as usual, and the chain ends.
        """
        r = request
        throttles = 0  # tries refused for the partition's throttle (for the error)
        for attempt in range(8):
            e = _Expr()
            condition = (f"{e.n('run_id')} = {e.v(r.run_id)} AND {e.n('fence')} = "
                         f"{e.v(r.fence)} AND attribute_not_exists({e.n('paused_at_ms')})")
            update = (
                f"SET {e.n('run_id')} = {e.v(r.next_run_id)}, "
                f"{e.n('trigger_id')} = {e.v(r.next_trigger_id)}, "
                f"{e.n('handed_from')} = {e.v(r.run_id)}, "
                f"{e.n('acquired_at_ms')} = {e.v(r.now_ms)}, "
                f"{e.n('heartbeat_at_ms')} = {e.v(r.now_ms)}, "
                f"{e.n('expires_at_ms')} = {e.v(r.now_ms + r.lease_ms)}, "
                f"{e.n('released_at_ms')} = {e.v(r.now_ms)}, "
                f"{e.n('last_run_id')} = {e.v(r.run_id)}, {e.n('released_by')} = {e.v('run')}")
            t = _Expr()
            st = t.n("state")
            done = self._update(
                self._trigger_key(r.job, r.trigger_id), t,
                f"SET {st} = {t.v(State.DONE.value)}, {t.n('at_ms')} = {t.v(r.now_ms)}, "
                f"{t.n(TTL_ATTRIBUTE)} = {t.v(r.trigger_ttl_s)}, "
                f"{t.n('run_id')} = {t.v(r.run_id)}, {t.n('ended_by')} = {t.v('release')}, "
                f"{t.n('route')} = if_not_exists({t.n('route')}, {t.v(Route.DIRECT.value)})",
                f"attribute_not_exists({st}) OR ({st} = {t.v(State.RUNNING.value)} AND "
                f"{t.n('run_id')} = {t.v(r.run_id)})")
            handed = self._trigger_write(
                r.job, r.next_trigger_id, None, state=State.HANDED, route=Route.DIRECT,
                run_id=r.next_run_id, now_ms=r.now_ms, ttl_epoch_s=r.next_ttl_s,
                fence=r.fence, kind="continuation")
            actions = [self._update(self._lease_key(r.job), e, update, condition), done,
                       handed, self._run_put(r.record, r.record_ttl_s)]
            try:
                refused = self._transact("hand_off", r.job, actions,
                                         ["lease", "trigger", "next", "record"])
            except (StoreError, BotoCoreError) as exc:
                cause = exc.__cause__ if isinstance(exc, StoreError) else exc
                if cause is None or not transient(cause):
                    raise
                try:
                    refused = Refused(lease=self.read_lease(r.job))
                except (StoreError, ClientError, BotoCoreError):
                    refused = Refused(conflict=True)
                if refused.lease is not None and refused.lease.run_id == r.run_id:
                    refused = Refused(conflict=True)  # not landed: try again
            if refused is None:
                return Released(released=True)
            state = refused.lease
            if state is None:
                if not refused.conflict:
                    return None  # a trigger moved on: release as usual
                throttles += refused.throttled
                if attempt < 7:  # (no wait after the last try)
                    backoff(attempt, throttled=refused.throttled)
                continue
            if state.handed_from == r.run_id and state.run_id == r.next_run_id:
                return Released(released=True)  # our earlier attempt landed unanswered
            if state.run_id == r.run_id and state.fence == r.fence:
                return None  # still ours, but paused: release as usual (the chain ends)
            return Released(released=False, state=state)
        raise StoreError("hand_off", r.job, _kept_refusing(r.run_id, r.fence, throttles))

    def _release_unknown(self, job: str, run_id: str, trigger_id: str) -> Refused | None:
        """What a release whose answer was an error left: the lease row (still the run's,
        or released by it), and, when the row has moved on since, the trigger's item (a
        release by the run says so there). None when the reads fail too."""
        try:
            state = self.read_lease(job)
            if state.run_id == run_id or state.last_run_id == run_id:
                return Refused(lease=state)
            return Refused(lease=state, trigger=self.read_trigger(job, trigger_id),
                           trigger_failed=True)
        except (StoreError, ClientError, BotoCoreError):
            return None


def _kept_refusing(run_id: str, fence: int, throttles: int) -> str:
    """The error of a release or hand-off none of whose eight tries landed."""
    return (f"run {run_id} (fence {fence}): none of 8 tries landed, {throttles} refused "
            "for the partition's throttle (ThrottlingError: its write capacity is spent, "
            "see docs/capacity.md), the others by concurrent transactions or by what the "
            "row said (read again); the lease stays the run's until it expires, then the "
            "next trigger takes it over")
