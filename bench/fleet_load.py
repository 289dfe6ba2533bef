"""A fleet of 100 jobs on one table at 1/100 scale: what partition throttling does.

``python -m bench.fleet_load`` (and ``make bench``): 100 jobs of the crm-sync shape (20
contacts each, batch 5; the load's policies in turn: SKIP, QUEUE, COALESCE, REPLACE,
SKIP) on one table of the in-process emulator, whose DynamoDB serves each partition key
at most 10 write units and 30 read units a second (DynamoDB's 1,000 / 3,000 at 1/100
scale, :mod:`jobguard.local.throughput`), each job ticked once a second for 10 seconds
(``jobguard.local.load.run_load(rounds=10)``), botocore's backoff as in a Lambda. Then
every job's next tick, and the load's checks (ONCE, END, FENCE, CKPT) on the ledger,
the run log and the destination:

``fleet_100_decisions_per_s``
    Triggers decided a second while the ticks were delivered (8 threads, one process,
    2 shared cores: the machine's figure, not DynamoDB's).
``fleet_100_throttled_requests``
    Requests the partitions refused (each attempt of the SDK's counts): retried by
    botocore (single-item calls) or by jobguard (cancelled transactions, unprocessed
    batch keys).

The section ``fleet_100`` keeps the whole summary (refusals by operation and by key
kind, the hottest partition, violations: none expected).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

JOBS, ROUNDS, ITEMS, SCALE = 100, 10, 20, 0.01


def measure(jobs: int = JOBS, rounds: int = ROUNDS) -> dict[str, Any]:
    from jobguard.local.load import run_load
    from jobguard.local.throughput import PartitionThroughput

    logging.getLogger("botocore").setLevel(logging.CRITICAL)
    started = time.perf_counter()
    summary = run_load(jobs=jobs, rounds=rounds, items_per_job=ITEMS, fault_spec="any=0",
                       seed=1, threads=8, throughput=PartitionThroughput().scaled(SCALE),
                       backoff_scale=1.0)
    for noise in ("injected_by_site", "faults_by_kind", "tick_window_s", "malformed_planned",
                  "malformed_refused", "late_planned", "redelivered", "invalid_unplanned"):
        summary.pop(noise, None)
    summary["stage_s"] = round(time.perf_counter() - started, 1)
    return summary


def figures(summary: dict[str, Any]) -> dict[str, float]:
    return {"fleet_100_decisions_per_s": summary["decisions_per_s"],
            "fleet_100_throttled_requests": summary["throttled_requests"]}


def main() -> int:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the runs' own log lines
        summary = measure()
    print(json.dumps({**figures(summary), "fleet_100": summary}, indent=2))
    return 1 if summary["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())


# -- the capacity model (docs/capacity.md), from the measured write sizes ----------------

PARTITION_WCU_S, PARTITION_RCU_S, TABLE_WRU_S = 1000, 3000, 40_000
JOB_ROW_UNITS_B100, JOB_ROW_UNITS_B1 = 5, 1
"""The job row's write at batch 100 (a claim of 100 work ids, 4.4 KB) and at batch 1."""


def capacity_model(results: dict[str, Any]) -> dict[str, int]:
    """docs/capacity.md's figures from ``bench/results.json``'s write sizes."""
    run, skip = results["wcu_per_run"], results["wcu_per_skip"]
    per_item = results["wcu_per_item_b100"]
    return {
        "runs_per_s_one_job": int(PARTITION_WCU_S // run),
        "not_run_per_s_one_job": int(PARTITION_WCU_S // skip),
        "items_per_s_one_job_b100": PARTITION_WCU_S // JOB_ROW_UNITS_B100 * 100,
        "items_per_s_one_job_b1": PARTITION_WCU_S // JOB_ROW_UNITS_B1,
        "jobs_tick_a_minute": int(TABLE_WRU_S / (run / 60)),
        "jobs_tick_a_minute_1000_items": int(TABLE_WRU_S / ((run + 1000 * per_item) / 60)),
        "jobs_tick_a_second": int(TABLE_WRU_S / run),
        "items_per_s_table_b100": int(round(TABLE_WRU_S / per_item, -2)),
    }
