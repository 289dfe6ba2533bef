"""Bounded, confirmable recovery: plan, then replay only the safe remainder.

A recovery names a job and a bounded range (cursors, or times the job maps to cursors).
It plans first (a dry run is the default): it selects the source records in the range,
classifies each from the ledger, and returns counts, a sample and a confirmation token
bound to the request and to the plan. Executing a plan larger than the threshold needs
that token; a token from another request or from a plan that has since changed is
refused. Execution takes the job's lease like any run (so it never overlaps a scheduled
run), writes its own run record, reconciles uncertain items first, replays only what the
mode asks for, and never moves the job's checkpoint.

This module executes; the request and the plan are :mod:`jobguard._recovery_plan`'s
(exported here).

Example:
    >>> plan = recover({"job": "crm-sync", "cursor_from": "0", "cursor_to": "500"})
    ... # doctest: +SKIP
    >>> recover({"job": "crm-sync", "cursor_from": "0", "cursor_to": "500",
    ...          "dry_run": False, "confirm": plan["token"]})  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from . import registry
from ._recovery_plan import (
    SAMPLE_SIZE,
    Plan,
    RecoveryMode,
    RecoveryRequest,
    _identities,
    _name_damaged,
    _state,
    make_plan,
    parse_request,
)
from .claims import destination_id_problem, remaining_ms
from .errors import InvalidRequestError
from .triggers import Trigger, TriggerKind
from .workitems import DamagedItem, ItemState

__all__ = ["EXECUTE_ALIAS", "Plan", "RecoveryMode", "RecoveryRequest", "Summary", "make_plan",
           "parse_request", "recover", "resolve"]

EXECUTE_ALIAS = "execute"
"""The recovery function's alias through which an execution must come: the deployed
function plans when invoked any other way (:mod:`jobguard.functions.recovery`), so IAM
can let many plan (``lambda:InvokeFunction`` on the function's own ARN) and few execute
(on ``function:NAME:execute``). The confirmation token checks a plan; it permits
nothing."""

CONFIRM_THRESHOLD = 100
DEFAULT_WAIT = timedelta(seconds=60)


@dataclass
class Summary:
    """The reconciliation summary a recovery returns (and writes on its run record)."""

    selected: int = 0
    already_completed: int = 0
    reconciled: int = 0
    replayed: int = 0
    failed: int = 0
    still_uncertain: int = 0
    skipped_by_mode: int = 0
    conflicts: int = 0
    rejected: int = 0  # records no work id can be made for: reported, never replayed
    deferred: int = 0  # a displaced run (REPLACE) may still call for them: left for later
    left: int = 0  # planned items not replayed: the invocation ran out of time
    stopped: str | None = None  # "time" when it did
    next_cursor: str | None = None  # a recovery from here replays the rest

    def as_dict(self) -> dict[str, Any]:
        """The counts; with ``left``, ``stopped`` and ``next_cursor`` when it stopped."""
        values = dict(self.__dict__)
        if self.stopped is None:
            for key in ("left", "stopped", "next_cursor"):
                values.pop(key)
        return values


def confirm_threshold() -> int:
    """Plans larger than this need the dry run's token (``JOBGUARD_RECOVERY_CONFIRM_ABOVE``,
    default 100): a deployment setting, never a field of the request."""
    from . import environment

    return environment.confirm_above(CONFIRM_THRESHOLD)


def recover(event: object, *, job: Any = None, guard_options: dict[str, Any] | None = None,
            threshold: int | None = None, context: Any = None) -> dict[str, Any]:
    """Plan (dry run) or execute a recovery. ``job`` defaults to the registered one.

    Returns the plan (``mode: "plan"``) or the execution's summary (``mode: "executed"``).
    Bad input raises :class:`InvalidRequestError` naming the field, before anything is
    written. ``context`` (the Lambda context) bounds the wait for a running run's lease:
    a ``wait_seconds`` that leaves less than the job's ``time_margin`` of the invocation
    is refused, since the run could not take a single item after it.
    """
    from .guard import GuardedJob

    request = parse_request(event)
    limit = confirm_threshold() if threshold is None else threshold
    if job is None:
        from .errors import ConfigError

        try:
            job = registry.get(request.job)
        except ConfigError as exc:
            plain = registry.guarded_in_modules(request.job)
            if plain is None:
                raise InvalidRequestError("job", str(exc).split(": ", 1)[1]) from None
            return _plan_plain(plain, request, threshold=limit)
    if job.config.name != request.job:
        raise InvalidRequestError("job", f"{request.job!r} is not this job ({job.config.name!r})")
    from .clock import to_ms

    wait = _wait(request, job.config.time_margin, context)
    guard = GuardedJob(job.config, lambda e, c: None, **(guard_options or job._guard_options))
    runtime = guard.runtime()
    plan = make_plan(job, runtime.items, request, now_ms=to_ms(guard.clock.now()))
    answer: dict[str, Any] = {"job": request.job, "range": _range(request),
                              "mode": request.mode.value, "plan": plan.as_dict()}
    if request.dry_run:
        answer["result"] = "planned"
        answer["needs_confirmation"] = plan.to_replay > limit
        return answer
    _check_confirmation(plan, request, limit)
    import uuid

    trigger = Trigger(request.job, f"{request.job}@recovery:{uuid.uuid4().hex[:16]}",
                      TriggerKind.RECOVERY, requested_by=request.requested_by)
    summary = Summary()
    invocation = context

    def execute(event: Any, context: Any) -> dict[str, Any]:
        from .run import current_run

        run = current_run()
        run.stats.update({"recovery_range": json.dumps(_range(request)),
                          "recovery_mode": request.mode.value})
        # Judged again on the plan made under the lease: the ledger may have changed
        # while the recovery waited for it (a plan of 50 can have become 250).
        fresh = make_plan(job, runtime.items, request, now_ms=to_ms(run.clock.now()))
        _check_under_lease(plan, fresh, request, limit)
        _execute(job, run, request, fresh, summary, invocation)
        run.stats.update({f"recovery_{k}": v for k, v in summary.as_dict().items()})
        return summary.as_dict()

    guard.handler = execute
    outcome = guard.run_exclusive(trigger, wait=wait.total_seconds(), ignore_pause=True)
    answer["result"] = "executed"
    answer["summary"] = outcome if isinstance(outcome, dict) and "selected" in outcome else (
        summary.as_dict())
    if isinstance(outcome, dict) and outcome.get("jobguard") == "lease_lost":
        answer["result"] = "lease_lost"
    return answer


PLAIN_NEXT_STEPS = (
    "{job} is a plain @guarded job: recovery plans its unresolved items but cannot replay "
    "them (the code that does them is its handler's). Settle each uncertain item after "
    "looking at the destination: jobguard resolve {job} WORK_ID --found DESTINATION_ID "
    "(or --not-found) --reason '...'; its next run retries failed, retryable items (give "
    "the handler reconcile= to have runs settle uncertain ones themselves)")


def _plan_plain(job: Any, request: RecoveryRequest, *, threshold: int) -> dict[str, Any]:
    """A plain ``@guarded`` job's recovery: its unresolved items from the ledger (those
    last written in the time range), planned; never executed (:data:`PLAIN_NEXT_STEPS`)."""
    from .clock import to_ms

    if request.time_from is None or request.time_to is None:
        raise InvalidRequestError("cursor_from", f"{request.job!r} is a plain @guarded job, "
                                  "which has no cursors: recover it by time_from/time_to")
    runtime = job.runtime()
    now_ms = to_ms(job.clock.now())
    low, high = to_ms(request.time_from), to_ms(request.time_to)
    # The ledger lists unresolved items by state, not by time: items outside the window
    # take places in a listing of max_items + 1, so list further until the window holds
    # more than max_items or the listing ends (every item of the job seen).
    limit = request.max_items + 1
    while True:
        listed = runtime.items.unresolved(job.config.name, limit=limit, now_ms=now_ms)
        rows = [r for r in listed if low <= (r.updated_at_ms or r.created_at_ms or 0) <= high]
        if len(rows) > request.max_items or len(listed) < limit:
            break
        limit *= 2
    if len(rows) > request.max_items:
        raise InvalidRequestError(
            "max_items", f"the range holds more than {request.max_items} unresolved items: "
            "narrow it or raise max_items")
    plan = Plan(selected=len(rows))
    for row in rows:
        if isinstance(row, DamagedItem):
            _name_damaged(plan, row)
            continue
        if row.state is ItemState.FAILED:
            plan.failed += 1
        else:
            plan.uncertain += 1
        plan.replay_ids.append(row.work_id)
    plan.sample = sorted(plan.replay_ids)[:SAMPLE_SIZE]
    fingerprint = {"request": request.identity(),
                   "plan": sorted(f"{r.work_id}={_state(r)}" for r in rows)}
    plan.token = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:24]
    next_steps = PLAIN_NEXT_STEPS.format(job=request.job)
    if not request.dry_run:
        raise InvalidRequestError("dry_run", next_steps)
    return {"job": request.job, "range": _range(request), "mode": request.mode.value,
            "plan": plan.as_dict(), "result": "planned", "needs_confirmation": False,
            "plain": True, "next_steps": next_steps}


def _check_confirmation(plan: Plan, request: RecoveryRequest, limit: int) -> None:
    """Before the lease: a given token must match this plan, whatever its size; a plan
    above the threshold needs one."""
    if request.confirm is not None and request.confirm != plan.token:
        raise InvalidRequestError(
            "confirm", f"does not match this plan ({plan.to_replay} items to replay): run "
            "the dry run of this same request and pass its token (a token from another "
            "request, or from before the ledger changed, is refused)")
    if request.confirm is None and plan.to_replay > limit:
        raise InvalidRequestError(
            "confirm", f"required: {plan.to_replay} items exceed the threshold of {limit}; "
            "run the dry run and pass its token")


def _check_under_lease(confirmed: Plan, fresh: Plan, request: RecoveryRequest,
                       limit: int) -> None:
    """Under the lease, the plan is judged again: the ledger may have moved while the
    recovery waited. A plan at or under the threshold needs no token; above it, the
    token must have confirmed every item it would replay (a plan that only shrank, as a
    run finished some of them, stays confirmed)."""
    if fresh.token == confirmed.token:
        return
    unconfirmed = set(fresh.replay_ids) - set(confirmed.replay_ids)
    if request.confirm is not None:
        # a given token confirmed exactly the items of its plan: never more, at any size
        if not unconfirmed:
            return
        raise InvalidRequestError(
            "confirm", f"the plan grew while the recovery waited for the lease: "
            f"{len(unconfirmed)} of its {fresh.to_replay} items were not in the plan you "
            "confirmed; plan again and pass its token")
    if fresh.to_replay <= limit:
        return
    raise InvalidRequestError(
        "confirm", f"required: the plan grew while the recovery waited for the lease: "
        f"{fresh.to_replay} items exceed the threshold of {limit}"
        + ("" if request.confirm is None else
           f" and {len(set(fresh.replay_ids) - set(confirmed.replay_ids))} of them were not "
           "in the plan you confirmed")
        + "; plan again and pass its token")


def _wait(request: RecoveryRequest, margin: timedelta, context: Any) -> timedelta:
    """The wait for a held lease that fits this invocation (see :func:`recover`)."""
    remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
    if remaining_ms is None:  # not in Lambda (the CLI): no deadline but the caller's
        return (DEFAULT_WAIT if request.wait_seconds is None
                else timedelta(seconds=request.wait_seconds))
    usable = timedelta(milliseconds=remaining_ms()) - margin
    if request.wait_seconds is None:
        return max(timedelta(0), min(DEFAULT_WAIT, usable / 2))
    wait = timedelta(seconds=request.wait_seconds)
    if wait >= usable:
        raise InvalidRequestError(
            "wait_seconds",
            f"{request.wait_seconds} s does not fit this invocation: it has "
            f"{usable.total_seconds():.0f} s left before the job's {margin} time margin, and "
            "a run that waited that long could not take a single item; wait at most "
            f"{max(0, int(usable.total_seconds()) - 1)} s, or retry when the run has ended")
    return wait


def _range(request: RecoveryRequest) -> dict[str, str | None]:
    """The request's range as answered and recorded: times in UTC with their ``Z``."""
    if request.time_from is not None:
        return {"time_from": _utc(request.time_from),
                "time_to": _utc(request.time_to) if request.time_to else None}
    return {"cursor_from": request.cursor_from, "cursor_to": request.cursor_to}


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _execute(job: Any, run: Any, request: RecoveryRequest, plan: Plan, summary: Summary,
             context: Any = None) -> None:
    """Reconcile uncertain items first, then replay the safe remainder, a page at a time:
    each page one lookup, one job-row write that claims it (with the previous page's
    outcomes), and its completion facts 25 to a request.

    Like every run, it stops taking items when the invocation's remaining time, less the
    longest item so far, is under the job's ``time_margin``: the items not started are
    given back (no claim left open), the summary says ``stopped: time``, how many are
    ``left`` and the ``next_cursor`` to recover from."""
    claims = run.work_claims(reconcile=job.reconcile)
    by_id, _, _ = _identities(job, plan.records)
    key_of = {id(r): w for w, r in by_id.items()}
    summary.selected = plan.selected
    summary.rejected = plan.rejected
    if plan.rejected:
        run.telemetry_count("ItemsRejected", plan.rejected)
    summary.already_completed = plan.completed
    summary.skipped_by_mode = plan.skipped_by_mode
    summary.conflicts = plan.conflicts
    if plan.conflicts:
        run.telemetry_count("PayloadConflicts", plan.conflicts)
    report = claims.report
    before = (report.reconciled, report.failed, report.uncertain, report.conflicts)
    replay = [by_id[w] for w in plan.replay_ids]
    size = job.config.batch_size
    margin_ms = job.config.time_margin.total_seconds() * 1000
    longest_ms = 0.0
    done = 0  # records of ``replay`` taken or given back

    def out_of_time() -> bool:
        return bool(remaining_ms(context) - longest_ms < margin_ms)

    while done < len(replay) and not out_of_time():
        page = replay[done:done + size]
        items = claims.claim_page(page, job.work_id, job.payload, replay_failed=True)
        for index, item in enumerate(items):
            if out_of_time():
                for unstarted in items[index:]:
                    unstarted.release()  # never started: no claim left behind
                summary.stopped = "time"
                break
            started_ms = remaining_ms(context)
            job.process_one(run, item)
            summary.replayed += 1
            if started_ms != float("inf"):  # no Lambda context: no deadline
                longest_ms = max(longest_ms, started_ms - remaining_ms(context))
        if summary.stopped:
            keys = {item.key for item in items if item.outcome == "release"}
            done += next((i for i, r in enumerate(page) if key_of.get(id(r)) in keys),
                         len(page))
            break
        done += len(page)
    if done < len(replay):
        summary.stopped = "time"
        summary.left = len(replay) - done
        summary.next_cursor = (job.cursor_of(replay[done - 1]) if done
                               else request.cursor_from)
    elif claims.report.deferred:
        # items a displaced run may still call for: after its deadline, if there is time
        held = claims.after_holds(context, job.config.time_margin.total_seconds() * 1000)
        items = claims.claim_page(held, job.work_id, job.payload, again=True,
                                  replay_failed=True) if held else []
        for index, item in enumerate(items):
            if out_of_time():
                for unstarted in items[index:]:
                    unstarted.release()  # never started: the next recovery replays it
                summary.stopped = "time"
                summary.left = len(items) - index
                summary.next_cursor = request.cursor_from  # what is done is skipped
                break
            job.process_one(run, item)
            summary.replayed += 1
    summary.deferred = claims.report.deferred
    claims.flush()  # completions, then the last page's outcomes (never the checkpoint)
    summary.reconciled = report.reconciled - before[0]
    summary.failed = report.failed - before[1]
    summary.still_uncertain = report.uncertain - before[2]
    # the plan counted the conflicts; the claims report them again as it meets them
    report.conflicts, report.conflict_ids = before[3], report.conflict_ids[:before[3]]


MAX_RESOLVE = 1000


def resolve(config: Any, work_ids: list[str], *, found: str | None, reason: str,
            requested_by: str | None, guard_options: dict[str, Any] | None = None,
            wait: timedelta = DEFAULT_WAIT) -> dict[str, Any]:
    """Record what an operator found at the destination for unresolved items: the path
    for a job whose handler has no ``reconcile`` (a plain ``@guarded`` handler claiming
    items without ``reconcile=``), whose uncertain items no run can resolve by itself.

    ``found`` is the destination id the operator saw (the item is completed with it; one
    item per call), or None: not found, the item becomes a retryable failure that the
    next run (or a recovery) redoes. Takes the job's lease like any run (waiting up to
    ``wait`` for a running one), writes under its fence, and leaves a run record (trigger
    ``recovery``) naming who (``requested_by``) and why (``reason``). Only uncertain or
    failed items, and those of a vanished run's open claim, are touched: a completed
    item stays as it is, one never claimed is reported ``unknown``.

    Raises:
        InvalidRequestError: naming the field (``work_id``, ``found``, ``reason``,
            ``requested_by``), before anything is written.
        LeaseBusyError: a run still held the lease when ``wait`` ran out.

    Example:
        >>> resolve(REPORT_EXPORT.config(), ["report@2026-11-29T07:00:00Z:export"],
        ...         found="3HL4kqtJlcpXroDTDmJ", reason="seen in the bucket",
        ...         requested_by="alice")  # doctest: +SKIP
    """
    from .guard import GuardedJob
    from .workitems import check_key

    if not isinstance(reason, str) or not reason.strip():
        raise InvalidRequestError("reason", "say why (it is written on the run record)")
    if not isinstance(requested_by, str) or not requested_by.strip():
        raise InvalidRequestError("requested_by", "say who (it is written on the run record)")
    if not work_ids:
        raise InvalidRequestError("work_id", "name at least one work item")
    if len(work_ids) > MAX_RESOLVE:
        raise InvalidRequestError("work_id", f"at most {MAX_RESOLVE} work items a call")
    for text in work_ids:
        try:
            check_key(text)
        except ValueError as exc:
            raise InvalidRequestError("work_id", f"{text!r}: {exc}") from None
    if found is not None:
        problem = destination_id_problem(found)
        if problem is not None:
            raise InvalidRequestError("found", f"the destination id {problem}")
        if len(set(work_ids)) != 1:
            raise InvalidRequestError("found", "a destination id proves one work item: name "
                                      "exactly one (not found: several at once is fine)")
    import uuid

    from ._bounds import bounded_text

    name = config.name
    trigger = Trigger(name, f"{name}@resolve:{uuid.uuid4().hex[:16]}", TriggerKind.RECOVERY,
                      requested_by=requested_by.strip())
    answer: dict[str, Any] = {"job": name, "reason": reason.strip(),
                              "requested_by": requested_by.strip()}

    def execute(event: Any, context: Any) -> dict[str, Any]:
        from .run import current_run

        run = current_run()
        run.stats.update({"resolve_reason": bounded_text(reason.strip(), 1000) or "",
                          "resolve_mode": "found" if found is not None else "not_found"})
        report = run.work_claims().resolve(work_ids, destination_id=found,
                                           reason=reason.strip())
        run.stats.update({f"resolve_{k}": len(v) for k, v in report.as_dict().items()})
        return {"run_id": run.run_id, **report.as_dict()}

    guard = GuardedJob(config, execute, **(guard_options or {}))
    outcome = guard.run_exclusive(trigger, wait=wait.total_seconds(), ignore_pause=True)
    if isinstance(outcome, dict) and "run_id" in outcome and "jobguard" not in outcome:
        # a report of execute(); a guard outcome ({"jobguard": "lease_lost", "run_id":
        # ...}) names a run too, but nothing was resolved
        answer.update(result="resolved", **outcome)
    else:
        answer.update(result=str(outcome.get("jobguard")) if isinstance(outcome, dict)
                      else "failed", outcome=outcome)
        if answer["result"] == "lease_lost":
            # a found item's completion is written before the fenced job-row write, so a
            # takeover in between leaves it completed: say what each item is now
            rows = guard.runtime().items.get_many(name, list(work_ids))
            answer["items"] = {w: rows[w].state.value if w in rows else "unknown"
                               for w in work_ids}
    return answer
