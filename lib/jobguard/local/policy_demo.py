"""``make demo-embedded``: a guarded job meets its next trigger, under each run policy.

Runs on the embedded emulator (moto over HTTP on 127.0.0.1, DynamoDB serialized), with
no AWS account. For each policy, one run is held open longer than the schedule's
interval while more ticks arrive (one of them delivered twice); then the run ends and
the trigger queue is drained as the Lambda event source mapping would. The demo then
reads the run log and the lease row back and checks what the policy promises.

Exit code 0 only when every check held.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["main"]

TICKS = 4


@dataclass
class _Scenario:
    policy: str
    expect: Callable[[dict[str, int]], bool]
    promise: str
    runs: list[tuple[str, int]] = field(default_factory=list)
    max_active: int = 0


def _scenarios() -> list[_Scenario]:
    return [
        _Scenario("SKIP", lambda c: c["ran"] == 1 and c["skipped"] == TICKS,
                  "one run; every tick during it recorded as skipped, naming the holder"),
        _Scenario("QUEUE", lambda c: c["ran"] == 1 + TICKS and c["queued"] == TICKS,
                  "every tick queued, then run once each, in order, one at a time"),
        _Scenario("COALESCE", lambda c: c["ran"] == 2 and c["coalesced"] == TICKS,
                  f"{TICKS} ticks during the run collapse into exactly one follow-up run"),
        _Scenario("REPLACE", lambda c: c["lease_lost"] == TICKS and c["succeeded"] == 1,
                  "each tick takes the lease over with a higher fence; the old run stops"),
    ]


def _play(scenario: _Scenario, aws: Any, table: str) -> dict[str, Any]:
    from jobguard import GuardedJob, JobConfig, OverlapPolicy, current_run, hooks
    from jobguard.dynamodb import DynamoJobStore
    from jobguard.local.esm import deliver_once
    from jobguard.records import RunRecord
    from jobguard.triggerqueue import TriggerQueue
    from jobguard.triggers import format_instant

    name = f"demo-{scenario.policy.lower()}"
    policy = OverlapPolicy(scenario.policy)
    sqs, ddb = aws.client("sqs"), aws.client("dynamodb")
    store = DynamoJobStore(table, client=ddb)
    queue = None
    if policy in (OverlapPolicy.QUEUE, OverlapPolicy.COALESCE):
        url = sqs.create_queue(QueueName=f"{name}-triggers.fifo",
                               Attributes={"FifoQueue": "true"})["QueueUrl"]
        queue = TriggerQueue(url, client=sqs)
    hold = threading.Event()
    lost = threading.Event()
    active = {"n": 0}
    lock = threading.Lock()

    def lambda_handler(event: Any, context: Any) -> str:
        run = current_run()
        with lock:
            active["n"] += 1
            scenario.max_active = max(scenario.max_active, active["n"])
            scenario.runs.append((run.trigger.trigger_id, run.fence))
        try:
            if len(scenario.runs) == 1 or policy is OverlapPolicy.REPLACE:
                hold.wait(30)  # the run takes longer than the schedule's interval
            run.ensure_lease()
            return "synced"
        finally:
            with lock:
                active["n"] -= 1

    config = JobConfig(name=name, policy=policy, table_name=table,
                       lease=timedelta(seconds=30), heartbeat_every=timedelta(seconds=1))
    job = GuardedJob(config, lambda_handler, store=store, queue=queue)
    # the last TICKS + 1 minutes' ticks, oldest first (a tick is never ahead of the clock)
    now = datetime.now(UTC).replace(microsecond=0)
    events = [{"job": name, "scheduled_at": format_instant(now - timedelta(minutes=TICKS - m))}
              for m in range(TICKS + 1)]
    threads: list[threading.Thread] = []

    def fire(event: dict[str, Any]) -> None:
        thread = threading.Thread(target=job, args=(event, None), daemon=True)
        thread.start()
        threads.append(thread)

    first_in = threading.Event()
    with hooks.on("after_acquire", lambda **ctx: first_in.set()), \
            hooks.on("lease_lost", lambda **ctx: lost.set()):
        fire(events[0])
        first_in.wait(10)
        for event in events[1:]:
            if policy is OverlapPolicy.REPLACE:
                first_in.clear()
                fire(event)
                first_in.wait(10)
            else:
                job(event, None)
        job(events[1], None)  # the same tick, delivered a second time
        hold.set()
        for thread in threads:
            thread.join(30)
        if queue is not None:
            while deliver_once(sqs, queue.url, job):
                pass
    counts: dict[str, int] = {}
    for record in store.list_runs(name, limit=100):
        if not isinstance(record, RunRecord):
            counts["damaged"] = counts.get("damaged", 0) + 1
            continue
        counts[record.status.value] = counts.get(record.status.value, 0) + 1
        if record.decision.value == "ran":
            counts["ran"] = counts.get("ran", 0) + 1
    lease = store.read_lease(name)
    counts.setdefault("duplicate", 0)
    ok = (scenario.expect(_with_zeros(counts)) and counts["duplicate"] >= 1
          and scenario.max_active <= (1 if policy is not OverlapPolicy.REPLACE else TICKS + 1)
          and lease.run_id is None and lease.queued_n == 0)
    if policy is not OverlapPolicy.REPLACE:
        ok = ok and scenario.max_active == 1
    fences = [fence for _, fence in scenario.runs]
    ok = ok and fences == sorted(fences) and len(set(fences)) == len(fences)
    return {"policy": scenario.policy, "promise": scenario.promise, "triggers": TICKS + 2,
            "counts": _with_zeros(counts), "max_concurrent": scenario.max_active,
            "fences": fences, "final_fence": lease.fence, "held": ok}


def _crash_and_recover(aws: Any, table: str) -> dict[str, Any]:
    """A crm-sync-shaped BatchJob dies after creating some notes; an operator plans and
    executes a recovery. Checked on the ledger and the destination."""
    from jobguard import BatchJob, JobConfig, Page, WorkId, hooks
    from jobguard.destinations import DynamoDBDestination
    from jobguard.dynamodb import DynamoJobStore
    from jobguard.dynamodb_items import DynamoItemStore
    from jobguard.recovery import recover
    from jobguard.testing import ManualClock

    ddb = aws.client("dynamodb")
    DynamoDBDestination.create_table(ddb, "demo-notes")
    notes = DynamoDBDestination("demo-notes", client=ddb)
    feed = [{"seq": f"{i:06d}", "contact": f"contact-{i}"} for i in range(1, 13)]
    calls: list[str] = []

    class NotesJob(BatchJob[dict[str, str]]):
        def select(self, cursor: str | None, limit: int) -> Page[dict[str, str]]:
            rows = [r for r in feed if cursor is None or r["seq"] > cursor][:limit]
            return Page(rows, rows[-1]["seq"] if rows else cursor)

        def work_id(self, record: dict[str, str]) -> WorkId:
            return WorkId(f"{record['contact']}@{record['seq']}", "create-note")

        def cursor_of(self, record: dict[str, str]) -> str:
            return record["seq"]

        def process(self, record: dict[str, str], item: Any) -> str:
            calls.append(item.key)
            return notes.put(item.key, {"text": f"{record['contact']} changed"})

        def reconcile(self, record: Any, item: Any) -> str | None:
            return notes.reconcile(item.work_id)

    clock = ManualClock()
    store = DynamoJobStore(table, client=ddb)
    job = NotesJob(JobConfig(name="demo-crm-sync", table_name=table, batch_size=6,
                             lease=timedelta(minutes=2)), store=store, clock=clock)
    died, never = threading.Event(), threading.Event()

    def die_after_five(**ctx: Any) -> None:
        if len(calls) == 5:
            died.set()
            never.wait(60)  # the worker is gone: no outcome, no release

    with hooks.on("before_item", die_after_five):
        worker = threading.Thread(
            target=job.handler(), args=({"job": "demo-crm-sync", "manual": True,
                                          "trigger_id": "doomed"}, None), daemon=True)
        worker.start()
        died.wait(10)
    clock.advance(timedelta(minutes=3))  # its lease is long gone
    request = {"job": "demo-crm-sync", "cursor_from": "000000", "cursor_to": "000012",
               "requested_by": "demo"}
    plan = recover(request, job=job, threshold=5)
    done = recover({**request, "dry_run": False, "confirm": plan["plan"]["token"]}, job=job,
                   threshold=5)
    again = recover({**request, "dry_run": False}, job=job, threshold=5)
    never.set()
    worker.join(10)  # it wakes up fenced out: it writes nothing
    ids = [str(job.work_id(r)) for r in feed]
    rows = DynamoItemStore(table, client=ddb).get_many("demo-crm-sync", ids)
    written = {i["work_id"]["S"] for i in ddb.scan(TableName="demo-notes")["Items"]}
    held = (len(written) == len(feed) and len(calls) == len(set(calls)) == len(feed)
            and all(r.state.value == "completed" for r in rows.values())
            and again["summary"]["replayed"] == 0)
    return {"plan": plan["plan"], "summary": done["summary"], "again": again["summary"],
            "destination_calls": len(calls), "notes": len(written), "held": held}


def _with_zeros(counts: dict[str, int]) -> dict[str, int]:
    keys = ("ran", "succeeded", "lease_lost", "skipped", "queued", "coalesced", "dropped",
            "duplicate", "stale", "paused")
    return {k: counts.get(k, 0) for k in keys}


def main(argv: list[str] | None = None) -> int:
    import logging

    from jobguard.dynamodb import create_table
    from jobguard.local.emulator import LocalAWS

    logging.disable(logging.INFO)
    as_json = "--json" in (argv if argv is not None else sys.argv[1:])
    with LocalAWS() as aws:
        table = "jobguard-demo"
        create_table(aws.client("dynamodb"), table)
        if not as_json:
            print(f"embedded AWS emulator at {aws.endpoint_url}; table {table}\n")
        results = []
        for scenario in _scenarios():
            import contextlib
            import io

            with contextlib.redirect_stdout(io.StringIO()):  # EMF metric lines
                result = _play(scenario, aws, table)
            results.append(result)
            if not as_json:
                c = result["counts"]
                print(f"{result['policy']:<9} {result['promise']}")
                print(f"          triggers {result['triggers']} (one delivered twice) -> "
                      f"ran {c['ran']}, skipped {c['skipped']}, queued {c['queued']}, "
                      f"coalesced {c['coalesced']}, duplicate {c['duplicate']}, "
                      f"lease_lost {c['lease_lost']}; max concurrent runs "
                      f"{result['max_concurrent']}; fences {result['fences']}; "
                      f"{'HELD' if result['held'] else 'VIOLATED'}\n")
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            recovery = _crash_and_recover(aws, table)
    if as_json:
        print(json.dumps({"policies": results, "recovery": recovery}, indent=2))
    else:
        header = f"{'policy':<9} {'triggers':>8} {'runs':>5} {'skipped':>8} {'queued':>7} " \
                 f"{'coalesced':>10} {'duplicate':>10} {'lease_lost':>11} {'verdict':>8}"
        print(header)
        print("-" * len(header))
        for r in results:
            c = r["counts"]
            print(f"{r['policy']:<9} {r['triggers']:>8} {c['ran']:>5} {c['skipped']:>8} "
                  f"{c['queued']:>7} {c['coalesced']:>10} {c['duplicate']:>10} "
                  f"{c['lease_lost']:>11} {'held' if r['held'] else 'VIOLATED':>8}")
        plan, summary = recovery["plan"], recovery["summary"]
        print(f"""
CRASH AND RECOVER: a BatchJob died after its destination created 5 of 12 notes
  plan:    {plan['selected']} selected, {plan['uncertain']} uncertain (claimed by the dead run), \
{plan['never_attempted']} never attempted -> {plan['to_replay']} to replay; token {plan['token']}
  execute: reconciled {summary['reconciled']} (found at the destination, not redone), \
replayed {summary['replayed']}, failed {summary['failed']}
  again:   replayed {recovery['again']['replayed']}, already completed \
{recovery['again']['already_completed']}
  destination: {recovery['notes']} notes from {recovery['destination_calls']} calls; \
{'held' if recovery['held'] else 'VIOLATED'}""")
    ok = all(r["held"] for r in results) and recovery["held"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
