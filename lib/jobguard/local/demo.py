"""``make demo``: a guarded job meets its next trigger, under each run policy.

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
    start = datetime.now(UTC).replace(microsecond=0)
    events = [{"job": name, "scheduled_at": format_instant(start + timedelta(minutes=m))}
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
    if as_json:
        print(json.dumps(results, indent=2))
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
    return 0 if all(r["held"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
