"""Trigger items: a decision that runs nothing (skip, queue, drop, coalesce, paused,
absorb, supersede) written with its record in one transaction, its undo when the queue
message could not be sent, and the count of a job's queued triggers.

Changes when a trigger's non-run decision changes: what each decision checks on the
lease row and writes on the trigger's item (the decision itself is
:mod:`jobguard.trigger_state`'s). It builds on :class:`jobguard._store_runs.RunRecords`
because a duplicate's decision is only its record, written if absent.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError

from ._dynamo import Expr as _Expr
from ._store_runs import RunRecords
from ._store_table import _HOLD_ATTRS
from .callsites import RETRY, SURFACE, Path, call_site
from .errors import StoreError
from .records import RunRecord
from .requests import DecisionWrite
from .schema import (
    PARTITION_KEY,
    SORT_KEY,
    TRIGGER_PREFIX,
    TTL_ATTRIBUTE,
    job_pk,
    run_sk,
)
from .trigger_state import TERMINAL, Next, Refused, Route, State, TriggerRecord

# -- call sites (see jobguard.callsites) --------------------------------------------

RECORD_DECISION = call_site(
    "dynamodb.record_decision", "dynamodb", "TransactWriteItems",
    "TriggerItems.record_decision",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="nothing half-written (one transaction); a retry refused by its own write is "
         "recognised (the trigger item names this decision's run id)",
    paths=(Path.RUN,), parts=("ConditionCheck", "Put", "Update"),
)

UNDO_QUEUED = call_site(
    "dynamodb.undo_queued", "dynamodb", "TransactWriteItems", "TriggerItems.undo_queued",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="compensation after a failed send: the trigger back to what it was, queued_n - 1, "
         "its record deleted; if it fails too, the trigger's redelivery finds it `queued` "
         "and sends its message again",
    paths=(Path.QUEUED,), parts=("Delete", "Update"),
)


DECISION_TARGET: dict[Next, State] = {
    Next.SKIP: State.SKIPPED, Next.QUEUE: State.QUEUED, Next.DROP: State.DROPPED,
    Next.COALESCE: State.COALESCED, Next.PAUSED: State.PAUSED, Next.ABSORB: State.ABSORBED,
    Next.SUPERSEDE: State.SUPERSEDED}
"""The state a decision (``record_decision``) writes on the trigger's item: each is the
target of the ``TRANSITIONS`` edge of the same event, which
``tests/unit/test_decision_wiring.py`` checks (with the guard's record and metric maps)."""


class TriggerItems(RunRecords):
    """A trigger's item and its decision: record_decision, undo_queued, count_queued."""

    def count_queued(self, job: str, now_ms: int) -> int:
        """The job's queued triggers, counted from their items (what :meth:`repair`
        writes as the lease row's ``queued_n``)."""
        return self._count_queued(job, now_ms)

    def _count_queued(self, job: str, now_ms: int) -> int:
        count = 0
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :t)",
            "FilterExpression": "#s = :q AND #k = :kind AND #ttl >= :now",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY, "#s": "state",
                                         "#k": "kind", "#ttl": TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":pk": {"S": job_pk(job)}, ":t": {"S": TRIGGER_PREFIX},
                                          ":q": {"S": "queued"}, ":kind": {"S": "queued"},
                                          ":now": {"N": str(now_ms // 1000)}},
            "ConsistentRead": True, "Select": "COUNT",
        }
        while True:
            response = self._client.query(**kwargs)
            count += int(response.get("Count", 0))
            if "LastEvaluatedKey" not in response:
                return count
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def record_decision(self, request: DecisionWrite) -> Refused | None:
        """Write a non-run decision, the trigger's new state and its record, atomically.

        The lease row is checked for what the decision was based on (the holder still
        the one observed, the queue bound, pause) and the trigger item for the state it
        replaces. ``follow_up`` (COALESCE): the follow-up's id, its gate fence (the
        holder's) and its item's TTL. Returns None when written, or what refused it.
        """
        r = request
        record, step, lease, item, route, now_ms = (r.record, r.step, r.lease, r.item, r.route,
                                                    r.now_ms)
        skew_ms, max_queued, trigger_ttl_s, record_ttl_s, follow_up = (
            r.skew_ms, r.max_queued, r.trigger_ttl_s, r.record_ttl_s, r.follow_up)
        job = record.job
        if step is Next.DUPLICATE or (step is Next.SUPERSEDE and item is not None
                                      and item.state in TERMINAL):
            # Never over another record: one under this delivery's run id means its own
            # acquisition (or decision) landed unseen, and what ended it wrote the record
            # that says so (an operator's release naming who and why, a takeover, a
            # replacement); "duplicate" would erase it.
            self.put_run(record, record_ttl_s, only_if_absent=True)
            return None
        target = DECISION_TARGET[step]
        e = _Expr()
        run_id_a, expires = e.n("run_id"), e.n("expires_at_ms")
        held = (f"({run_id_a} = {e.v(lease.run_id or '-')} AND "
                f"{expires} >= {e.v(now_ms - skew_ms)})")
        not_paused = f"attribute_not_exists({e.n('paused_at_ms')})"
        queued_n = e.n("queued_n")
        lease_key = self._lease_key(job)
        # A trigger still `running` under a run the row (as read) does not name has its
        # item moved by this decision (below): only while the row still does not name
        # that run. A read older than a retake of the trigger (a delivery of the same
        # trigger took the lease since) would otherwise end a live run's trigger: DROP,
        # PAUSED and QUEUE do not otherwise pin the holder.
        unnamed = (item.run_id if item is not None and item.state is State.RUNNING
                   and item.run_id and lease.run_id != item.run_id else None)
        if unnamed is not None:
            not_named = (f" AND (attribute_not_exists({run_id_a}) OR "
                         f"{run_id_a} <> {e.v(unnamed)})")
            not_paused += not_named
        else:
            not_named = ""
        handed = (record.trigger_kind == "continuation" and lease.handed_from is not None
                  and lease.trigger_id == record.trigger_id)
        if step is Next.SKIP:
            lease_action = self._check(lease_key, e, f"{held} AND {not_paused}")
        elif step is Next.SUPERSEDE:
            # the row does not name the continuation (its hand-off is gone)
            tid = e.n("trigger_id")
            lease_action = self._check(
                lease_key, e, f"attribute_not_exists({tid}) OR {tid} <> {e.v(record.trigger_id)}")
        elif step is Next.PAUSED and handed:
            # a paused job ends the chain: the hand-off is freed with the decision (what
            # waits behind the chain stays on the row for the run after the pause)
            lease_action = self._update(
                lease_key, e,
                f"SET {e.n('released_at_ms')} = {e.v(now_ms)}, {e.n('last_run_id')} = "
                f"{e.v(lease.handed_from)}, {e.n('released_by')} = {e.v('run')} "
                f"REMOVE {', '.join(e.n(n) for n in _HOLD_ATTRS)}",
                f"attribute_exists({e.n('paused_at_ms')}) AND {self._lease_condition(e, lease)}"
                f" AND {e.n('handed_from')} = {e.v(lease.handed_from)}")
        elif step is Next.QUEUE:
            condition = (f"(attribute_not_exists({queued_n}) OR {queued_n} < {e.v(max_queued)})"
                         f" AND ({held} OR {queued_n} > {e.v(0)}) AND {not_paused}")
            lease_action = self._update(lease_key, e, f"ADD {queued_n} {e.v(1)}", condition)
        elif step is Next.DROP:
            lease_action = self._check(lease_key, e,
                                       f"{queued_n} >= {e.v(max_queued)}{not_named}")
        elif step is Next.COALESCE:
            assert follow_up is not None
            fu = e.n("follow_up")
            condition = (f"{held} AND {not_paused} AND (attribute_not_exists({fu}) OR "
                         f"{fu} = {e.v(follow_up[0])})")
            lease_action = self._update(lease_key, e, f"SET {fu} = {e.v(follow_up[0])}",
                                        condition)
        elif step is Next.PAUSED:
            paused = f"attribute_exists({e.n('paused_at_ms')}){not_named}"
            if record.trigger_kind == "follow_up":
                # never while a live holder's row names it (it waits for that release)
                fu = e.n("follow_up")
                paused += (f" AND (attribute_not_exists({fu}) OR {fu} <> "
                           f"{e.v(record.trigger_id)} OR attribute_not_exists({run_id_a}) OR "
                           f"{expires} < {e.v(now_ms - skew_ms)})")
            if item is not None and item.state is State.QUEUED and \
                    record.trigger_kind == "queued" and lease.queued_n > 0:
                lease_action = self._update(lease_key, e, f"ADD {queued_n} {e.v(-1)}",
                                            f"{paused} AND {queued_n} > {e.v(0)}")
            elif item is not None and item.state is State.QUEUED and \
                    record.trigger_kind == "queued":
                # not counted on this row (deleted and made again since): nothing to take
                lease_action = self._check(
                    lease_key, e, f"{paused} AND (attribute_not_exists({queued_n}) OR "
                    f"{queued_n} <= {e.v(0)})")
            else:
                lease_action = self._check(lease_key, e, paused)
        else:  # ABSORB: a run started after the one the follow-up follows
            gate = item.gate_fence if item is not None and item.gate_fence is not None else 0
            lease_action = self._check(lease_key, e,
                                       f"{e.n('served_fence')} > {e.v(gate)}{not_named}")
        trigger_action = self._trigger_write(
            job, record.trigger_id, item, state=target,
            route=Route.QUEUE if step is Next.QUEUE else route, run_id=record.run_id,
            now_ms=now_ms, ttl_epoch_s=trigger_ttl_s,
            into=follow_up[0] if follow_up is not None else None,
            kind="queued" if step is Next.QUEUE else record.trigger_kind or None)
        actions = [lease_action, trigger_action, self._run_put(record, record_ttl_s)]
        kinds = ["lease", "trigger", "record"]
        if item is not None and item.state is State.RUNNING and step is not Next.QUEUE \
                and lease.run_id == item.run_id:
            # A dead run's trigger whose run still holds the row (the job paused before
            # anyone took the lease over): the delivery is recorded, the trigger is left
            # to the takeover, which names it. A run the row no longer names (the row
            # deleted and made again) is never named by a takeover: its trigger takes
            # the decision (conditioned on that run), so the next delivery is a
            # duplicate. Queued, it becomes queued: its message runs it, and counts it
            # off the row.
            actions, kinds = [lease_action, actions[2]], ["lease", "record"]
        if follow_up is not None:
            follow_up_id, gate_fence, follow_up_ttl = follow_up
            f = _Expr()
            state = f.n("state")
            actions.append(self._update(
                self._trigger_key(job, follow_up_id), f,
                f"SET {state} = {f.v(State.QUEUED.value)}, {f.n('route')} = "
                f"{f.v(Route.QUEUE.value)}, {f.n('gate_fence')} = {f.v(gate_fence)}, "
                f"{f.n('run_id')} = if_not_exists({f.n('run_id')}, {f.v(record.run_id)}), "
                f"{f.n('kind')} = {f.v('follow_up')}, {f.n('job')} = {f.v(job)}, "
                f"{f.n('at_ms')} = if_not_exists({f.n('at_ms')}, {f.v(now_ms)}), "
                f"{f.n(TTL_ATTRIBUTE)} = {f.v(follow_up_ttl)}",
                f"attribute_not_exists({state}) OR {state} = {f.v(State.QUEUED.value)}"))
            kinds.append("follow_up")
        try:
            refused = self._transact("record_decision", job, actions, kinds)
        except BotoCoreError as exc:
            raise StoreError("record_decision", job, str(exc)) from exc
        if refused is not None and refused.trigger_failed and refused.trigger is not None \
                and refused.trigger.run_id == record.run_id \
                and (record.trigger_kind != "continuation" or refused.trigger.state is target):
            return None  # our own earlier attempt landed (its response was lost)
        return refused

    def undo_queued(self, record: RunRecord, *, prior: TriggerRecord | None,
                    now_ms: int) -> bool:
        """Take back a ``queued`` decision whose message could not be sent: the trigger
        back to ``prior``, ``queued_n - 1``, the decision's record deleted. One
        transaction, conditioned on the trigger still being queued by that decision."""
        job = record.job
        key = self._trigger_key(job, record.trigger_id)
        t = _Expr()
        condition = (f"{t.n('state')} = {t.v(State.QUEUED.value)} AND "
                     f"{t.n('run_id')} = {t.v(record.run_id)}")
        if prior is None:
            trigger_action: dict[str, Any] = {"Delete": {
                "TableName": self.table_name, "Key": key, "ConditionExpression": condition,
                **t.params(condition)}}
        else:
            update = (f"SET {t.n('state')} = {t.v(prior.state.value)}, "
                      f"{t.n('route')} = {t.v(prior.route.value)}, "
                      f"{t.n('run_id')} = {t.v(prior.run_id or '-')}")
            trigger_action = self._update(key, t, update, condition)
        e = _Expr()
        queued_n = e.n("queued_n")
        actions = [
            trigger_action,
            self._update(self._lease_key(job), e, f"ADD {queued_n} {e.v(-1)}",
                         f"{queued_n} > {e.v(0)}"),
            {"Delete": {"TableName": self.table_name,
                        "Key": {PARTITION_KEY: {"S": job_pk(job)},
                                SORT_KEY: {"S": run_sk(record.run_id)}}}},
        ]
        try:
            return self._transact("undo_queued", job, actions,
                                  ["trigger", "lease", "record"]) is None
        except BotoCoreError as exc:
            raise StoreError("undo_queued", job, str(exc)) from exc
