"""Load under injected faults, on the embedded emulator: ``jobguard local --faults SPEC``.

Many triggers across several jobs of the crm-sync shape (a source of changed contacts,
one note per contact in a :class:`~jobguard.destinations.DynamoDBDestination`), fired by
several threads with random overlaps and duplicate deliveries, while
:class:`jobguard.faults.Faults` injects throttling, 5xx, timeouts and lost responses
into every AWS call site. The ticks are scheduled inside the window a job accepts (see
``jobguard.local._load_plan``): nearly all reach a decision; a few are deliberately late
(decided ``stale``) and a few deliberately malformed (refused, counted on their own).
A delivery that fails is retried as Lambda retries an asynchronous invoke
(:data:`~jobguard.runbook.ASYNC_RETRIES` times). Queued triggers and follow-ups are
delivered by the local event source mapping. Afterwards each job gets one clean run
(the next tick), and the invariants are checked against the ledger, the run log and
the destination:

- ONCE: no work id's side effect was called more than once, under every policy: each
  destination put that reached the emulator is counted per work id (a lost response's
  SDK resend is the same call; a call refused before it was sent is none), whatever the
  ledger or the destination's conditional write made of it; and the ledger's
  destination id is the stored one;
- END: every item completed; none claimed, none uncertain after the clean run;
- FENCE: writes carrying an old fence are refused;
- CKPT: the checkpoint never moved backwards and never passed an unfinished item;
- STALE: a tick delivered after ``stale_after`` never ran;
- REFUSED: a malformed tick was refused and left no trigger behind.

This module is the run, its one reason to change: the threads that deliver the plan, the
retries and the settling, and the summary (what ``jobguard local`` prints). The schedule
is :mod:`jobguard.local._load_plan`, the job and its tables
:mod:`jobguard.local._load_world`, the checks :mod:`jobguard.local._load_checks`; their
names are importable from here as before.

Example:
    >>> summary = run_load(triggers=1000, jobs=5, fault_rate=0.1, seed=1)  # doctest: +SKIP
    >>> summary["decided"] >= 900, summary["violations"]  # doctest: +SKIP
    (True, [])
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from typing import Any

from ..config import JobConfig, OverlapPolicy
from ..destinations import DynamoDBDestination
from ..records import RunRecord
from ..workitems import ItemState, WorkId
from ._load_checks import Invariants, check_invariants, checkpoint_cursor_ok, puts_reached
from ._load_world import NotesJob, World, contacts
from .throughput import PartitionThroughput

__all__ = ["Invariants", "NotesJob", "World", "check_invariants", "main", "run_load"]

POLICIES = (OverlapPolicy.SKIP, OverlapPolicy.QUEUE, OverlapPolicy.COALESCE,
            OverlapPolicy.REPLACE, OverlapPolicy.SKIP)


_ENDED_NOT_RUN = ("skipped", "coalesced", "dropped", "absorbed")
"""A final trigger's ends that are not a run: it met a held lease."""


# -- the load --------------------------------------------------------------------------


class _Budget:
    def get_remaining_time_in_millis(self) -> int:
        return 900_000


INVALID, ERROR = "invalid", "error"
"""A delivery's end that is no decision: refused as malformed (``InvalidTriggerError``),
or failed on every attempt (Lambda then puts the event on the failed-ticks queue)."""


def _decision_of(result: Any) -> str:
    """What a handler's answer says the trigger did: a decision, or ``ran``."""
    if isinstance(result, dict) and "jobguard" in result:
        return str(result.get("decision") or result["jobguard"])
    return "ran"


def run_load(*, triggers: int = 1000, jobs: int = 5, items_per_job: int = 40,
             fault_spec: str | None = None, fault_rate: float = 0.1, seed: int = 1,
             threads: int = 8, log: Callable[[str], None] | None = None,
             job_class: type[NotesJob] | None = None,
             throughput: PartitionThroughput | None = None, rounds: int | None = None,
             backoff_scale: float = 0.01) -> dict[str, Any]:
    """Fire ``triggers`` ticks across ``jobs`` jobs under faults; check the invariants.

    Args:
        job_class: the job the load runs (default :class:`NotesJob`); a subclass
            changes what a run does with each record, e.g. to see that the checks
            catch a job that calls its destination twice.
        throughput: per-partition limits the emulator serves DynamoDB under
            (:mod:`jobguard.local.throughput`); past them requests are throttled as on
            AWS. The checker's own reads are not budgeted. The summary's
            ``throughput`` says what was charged and refused.
        rounds: a fleet's schedule instead of ``triggers`` random ticks: a tick a
            second per job, ``rounds`` of them, round ``k`` delivered no earlier than
            ``k`` seconds after the start (``jobguard.local._load_plan.plan_fleet``).
        backoff_scale: multiplies botocore's retry backoff (throttling under a budget
            wants the real one, 1.0: the buckets refill in real seconds).

    Returns the summary (also what ``jobguard local --json`` prints).
    """
    from .. import hooks
    from ..clock import SystemClock
    from ..dynamodb import DynamoJobStore
    from ..errors import InvalidTriggerError
    from ..faults import Faults
    from ..runbook import ASYNC_RETRIES
    from ..triggerqueue import TriggerQueue
    from ._load_plan import LATE_TICK, MALFORMED_TICK, TICKS_BEHIND, plan_fleet, plan_load
    from .emulator import in_process
    from .esm import deliver_once
    from .throughput import PartitionBudget

    say = log or (lambda text: None)
    spec = fault_spec if fault_spec is not None else f"any={fault_rate}"
    rng = random.Random(seed)
    job_type = job_class or NotesJob
    budget = PartitionBudget(throughput) if throughput is not None else None
    with in_process(throughput=budget):
        world = World.create()
        store = DynamoJobStore(world.table, client=world.ddb)
        notes = DynamoDBDestination(world.notes_table, client=world.ddb)
        names = [f"job{j}" for j in range(jobs)]
        configs: dict[str, JobConfig] = {}
        handlers: dict[str, Any] = {}
        queues: dict[str, str] = {}
        sources = {name: contacts(items_per_job, f"{name}-contact") for name in names}
        for j, name in enumerate(names):
            policy = POLICIES[j % len(POLICIES)]
            queue_url = world.fifo_queue(name) if policy in (
                OverlapPolicy.QUEUE, OverlapPolicy.COALESCE) else None
            configs[name] = JobConfig(
                name=name, policy=policy, table_name=world.table, trigger_queue_url=queue_url,
                batch_size=5, lease=timedelta(seconds=6), skew_margin=timedelta(seconds=1),
                max_queued=50)
            queue = TriggerQueue(queue_url, client=world.sqs) if queue_url else None
            handlers[name] = job_type(configs[name], sources[name], notes, store=store,
                                      queue=queue).handler()
            if queue_url:
                queues[name] = queue_url
        # Relative to the clock the handlers read (the system clock): inside the window
        # they accept, whatever the date.
        plan = (plan_fleet(names, rounds, now=SystemClock().now(), rng=rng)
                if rounds is not None else
                plan_load(names, triggers, now=SystemClock().now(),
                          stale_after=configs[names[0]].stale_after, rng=rng))
        outcomes: list[str] = [""] * len(plan)
        errors: Counter[str] = Counter()
        retries = Counter[str]()
        checkpoints: dict[str, list[tuple[int, str | None]]] = {name: [] for name in names}
        ckpt_violations: list[str] = []
        lock = threading.Lock()
        cursor = {"next": 0}

        faults = Faults.parse(spec, seed=seed, backoff_scale=backoff_scale,
                              clients=[world.ddb, world.sqs])

        @contextmanager
        def checking() -> Iterator[None]:
            """The checker's own calls: neither faulted nor budgeted."""
            with faults.suspended(), (budget.suspended() if budget else nullcontext()):
                yield

        def observe(job: str, **_: Any) -> None:
            with checking():
                seq, at, ok = checkpoint_cursor_ok(world, job, [
                    str(WorkId(r["id"], "create-note")) for r in sources[job]])
            with lock:
                checkpoints[job].append((seq, at))
                if not ok:
                    ckpt_violations.append(f"CKPT: {job} checkpoint passed an unfinished item")

        def deliver(name: str) -> None:
            if name in queues:
                try:
                    deliver_once(world.sqs, queues[name], handlers[name], visibility_s=2)
                except Exception as exc:  # noqa: BLE001 - the mapping would retry
                    with lock:
                        errors[f"delivery:{type(exc).__name__}"] += 1

        def invoke(name: str, event: dict[str, Any]) -> str:
            """One asynchronous invoke: the first attempt and Lambda's retries of it."""
            for attempt in range(1 + ASYNC_RETRIES):
                if attempt:
                    with lock:
                        retries["attempts"] += 1
                try:
                    return _decision_of(handlers[name](event, _Budget()))
                except InvalidTriggerError as exc:
                    # refused before anything was written: a retry is refused the same
                    with lock:
                        errors[type(exc).__name__] += 1
                    return INVALID
                except Exception as exc:  # noqa: BLE001 - Lambda retries the event
                    with lock:
                        errors[type(exc).__name__] += 1
            return ERROR

        def worker() -> None:
            while True:
                with lock:
                    n = cursor["next"]
                    cursor["next"] += 1
                if n >= len(plan):
                    return
                if rounds is not None:  # a tick a second per job: round k at k seconds
                    time.sleep(max(0.0, started + n // jobs - time.perf_counter()))
                outcomes[n] = invoke(plan[n].job, plan[n].event)
                if n % 3 == 0:
                    deliver(plan[n].job)

        started = time.perf_counter()
        with faults, hooks.on("after_claim", observe):
            pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join()
            elapsed = time.perf_counter() - started
            faults.rules.clear()  # the faults end; the system settles
            say(f"{len(plan)} triggers in {elapsed:.1f} s; settling")
            # Queues drain (visibility may hide a deferred message for a few seconds).
            def drain(name: str) -> None:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    if not deliver_once(world.sqs, queues[name], handlers[name],
                                        wait_s=1, visibility_s=2):
                        with checking():
                            lease = store.read_lease(name)
                        if lease.queued_n <= 0 and lease.follow_up is None:
                            break

            # The next tick of every job: a clean run once any lease ends.
            finals: dict[str, Any] = {}
            stuck: dict[str, str] = {}  # a job with no clean run: what its last try saw

            def final_run(name: str) -> None:
                skew_ms = int(configs[name].skew_margin.total_seconds() * 1000)
                final_id = f"final-{uuid.uuid4().hex}"
                tick: dict[str, Any] = {"job": name, "manual": True, "trigger_id": final_id}
                trigger_id = f"{name}@manual:{final_id}"
                # Under a budget each try may meet a throttled partition, and a try that
                # fails at once would spend the next second's budget before it refills:
                # bounded by time, not by a count of tries (a fast machine spent 400
                # tries inside one lease and left a job with no clean run), and a try
                # that raised waits longer each time, up to 2 s.
                deadline = time.monotonic() + (60 if budget is None else 240)
                pause = 0.1
                while time.monotonic() < deadline:
                    with checking():
                        lease = store.read_lease(name)
                        item = store.read_trigger(name, trigger_id)
                    if item is not None and item.state.value == "done":
                        finals[name] = lease
                        break
                    stuck[name] = (f"trigger {trigger_id} "
                                   f"{item.state.value if item else 'absent'}; lease {lease}")
                    if item is not None and item.state.value in _ENDED_NOT_RUN:
                        # it met a lease still held (a run whose release never landed
                        # holds it until it expires): the next tick, a new trigger
                        if name in queues:  # a follow-up it folded into runs meanwhile
                            deliver_once(world.sqs, queues[name], handlers[name],
                                         visibility_s=2)
                        final_id = f"final-{uuid.uuid4().hex}"
                        tick = {"job": name, "manual": True, "trigger_id": final_id}
                        trigger_id = f"{name}@manual:{final_id}"
                        time.sleep(0.5)
                        continue
                    if item is not None and item.state.value == "running" \
                            and lease.run_id == item.run_id \
                            and lease.is_held(int(time.time() * 1000), skew_ms):
                        # Its run raised holding the lease (a release the throttle
                        # refused): a delivery now is a duplicate whose record spends the
                        # partition's budget that the takeover will need (ticking it every
                        # 0.1 s starved that takeover for minutes). Lambda's own retry
                        # comes a minute later; this one once the lease can be taken.
                        assert lease.expires_at_ms is not None
                        time.sleep(min(2.0, max(0.1, (lease.expires_at_ms + skew_ms) / 1000
                                                - time.time())))
                        continue
                    if item is not None and item.route.value == "queue" and name in queues \
                            and item.state.value in ("failed", "lost", "running"):
                        # A queued trigger whose run failed: only its message runs it again
                        # (a direct tick is a duplicate)
                        deliver_once(world.sqs, queues[name], handlers[name], visibility_s=2)
                    elif item is None or item.state.value in ("failed", "lost", "running"):
                        try:
                            handlers[name](tick, _Budget())
                        except Exception as exc:  # noqa: BLE001 - throttled: tick again
                            with lock:
                                errors[f"final:{type(exc).__name__}"] += 1
                            pause = min(pause * 2, 2.0)
                        else:
                            pause = 0.1
                    elif name in queues:  # queued behind others: the mapping delivers it
                        deliver_once(world.sqs, queues[name], handlers[name], visibility_s=2)
                    time.sleep(pause)

            # each job on its own, the jobs side by side (as the fleet's functions are)
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=threads) as settle:
                list(settle.map(drain, list(queues)))
                say(f"queues drained at {time.perf_counter() - started:.1f} s")
                list(settle.map(final_run, names))
                say(f"every job's next tick ran at {time.perf_counter() - started:.1f} s")
            settled = time.perf_counter() - started
            with checking():  # the checker's reads: not the load under test
                inv = Invariants()
                for violation in ckpt_violations:
                    inv.violations.append(violation)
                reached = puts_reached(faults)
                stored = world.notes()
                runs: Counter[str] = Counter()
                items_done = failed_items = 0
                from ..dynamodb_items import DynamoItemStore

                store_items = DynamoItemStore(world.table, client=world.ddb)
                sourced: set[str] = set()
                for name in names:
                    work_ids = [str(WorkId(r["id"], "create-note")) for r in sources[name]]
                    sourced.update(work_ids)
                    lease = store.read_lease(name)
                    rows = store.list_runs(name, limit=1_000_000)
                    records = [r for r in rows if isinstance(r, RunRecord)]
                    damaged = [str(r) for r in rows if not isinstance(r, RunRecord)]
                    inv.require("RECORDS", not damaged, f"{name}: run-log rows jobguard cannot "
                                f"read: {damaged[:3]}")
                    runs.update(r.status.value for r in records)
                    stale = next(((r.run_id, r.fence) for r in records
                                  if r.fence is not None and r.fence < lease.fence), None)
                    check_invariants(world, name, work_ids, stored, reached, checkpoints[name],
                                     stale=stale, found=inv)
                    # the source's items that ended failed (one read of them, by key: the
                    # unresolved index is 16 queries a job, and the checks above made them)
                    failed_items += sum(
                        1 for row in store_items.get_many(name, work_ids).values()
                        if row.state is ItemState.FAILED)
                    items_done += len(work_ids)
                    inv.require("END", name in finals, f"{name}: no clean run after the faults "
                                f"(last seen: {stuck.get(name)})")
                    recorded = {r.trigger_id for r in records}
                    for planned, outcome in zip(plan, outcomes, strict=True):
                        if planned.job != name:
                            continue
                        if planned.kind == LATE_TICK:
                            inv.require("STALE", outcome not in ("ran", "lease_lost"),
                                        f"{planned.trigger_id} ran {outcome!r}, after stale_after")
                        elif planned.kind == MALFORMED_TICK:
                            inv.require(
                                "REFUSED", outcome == INVALID and planned.trigger_id not in recorded
                                and store.read_trigger(name, planned.trigger_id) is None,
                                f"{planned.trigger_id} was not refused whole: {outcome!r}")
                stray = sorted(set(reached) - sourced)
                inv.require("ONCE", not stray, f"puts for work ids no source has: {stray[:5]}")
        injected = faults.summary()
        by_kind: Counter[str] = Counter()
        for call in faults.injected:
            by_kind[call.fault.value if call.fault else "-"] += 1
        decisions = Counter(outcomes)
        malformed = [o for p, o in zip(plan, outcomes, strict=True) if p.kind == MALFORMED_TICK]
        decided = sum(n for what, n in decisions.items() if what not in (INVALID, ERROR))
        policy_of = {name: configs[name].policy.value for name in names}
        called_twice = {policy: 0 for policy in dict.fromkeys(policy_of.values())}
        for name, n in inv.called_twice.items():
            called_twice[policy_of[name]] += n
        return {
            "triggers": len(plan),
            "jobs": jobs,
            "threads": threads,
            "seed": seed,
            "faults": spec,
            "seconds": round(elapsed, 2),
            "settled_s": round(settled, 2),
            "decisions_per_s": round(len(plan) / elapsed, 1),
            "decisions": dict(sorted(decisions.items())),
            "decided": decided,
            "decided_share": round(decided / len(plan), 3),
            "malformed_planned": len(malformed),
            "malformed_refused": malformed.count(INVALID),
            "late_planned": sum(1 for p in plan if p.kind == LATE_TICK),
            "redelivered": sum(1 for p in plan if p.again),
            "invalid_unplanned": decisions[INVALID] - malformed.count(INVALID),
            "failed_after_retries": decisions[ERROR],
            "sender_retries": retries["attempts"],
            "tick_window_s": [-int(TICKS_BEHIND.total_seconds()), 0],
            "errors_surfaced": dict(sorted(errors.items())),
            "runs": dict(sorted(runs.items())),
            "runs_ran": sum(v for k, v in runs.items()
                            if k in ("succeeded", "incomplete", "failed", "lease_lost",
                                     "abandoned")),
            "items": items_done,
            "items_failed_reported": failed_items,
            "destination_calls": sum(reached.values()),
            "called_twice_by_policy": called_twice,
            "calls": len(faults.calls),
            "faults_injected": sum(by_kind.values()),
            "faults_by_kind": dict(sorted(by_kind.items())),
            "fault_rate": round(sum(by_kind.values()) / max(1, len(faults.calls)), 3),
            "checks": dict(sorted(inv.checked.items())),
            "violations": inv.violations,
            "injected_by_site": injected,
            **({"throttled_requests": budget.summary()["throttled_requests"],
                "throughput": budget.summary()} if budget is not None else {}),
        }


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - thin wrapper
    """``jobguard local ARGS``, run as the command runs it: in a process of its own (the
    command calls :func:`run_load`; the load does not import the command)."""
    return subprocess.call([sys.executable, "-m", "jobguard.cli", "local", *(argv or [])])
