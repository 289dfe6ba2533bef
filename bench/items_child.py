"""Child of the scale figure: one job processes ``--items`` work items, in runs.

Usage: ``python bench/items_child.py --items N [--per-run M] [--batch-size B]`` with
the repository root on ``PYTHONPATH`` and the environment pointing at an emulator that
runs in another process (so its memory is not ours). Creates its table, then invokes
the guarded ``BatchJob`` (batch ``B``, page flush, no-op destination) with a fake Lambda
context that reports plenty of time left until the run has processed ``M`` items, then
none: each run stops on time and checkpoints, the next resumes from the checkpoint,
until all ``N`` items are completed. Prints one line,
``BENCH_RESULT {"seconds": .., "runs": .., "baseline_rss_mb": .., "peak_rss_mb": ..}``.

``peak_rss_mb`` is this process's own peak resident set after the last run, ``VmHWM``
in ``/proc/self/status``; ``baseline_rss_mb`` the same before the first run (imports,
client, table created). ``ru_maxrss_mb`` (``getrusage(RUSAGE_SELF).ru_maxrss``) is
reported too but is not used: Linux carries the parent's high-water mark across
fork + exec into it, so in a child of the benchmark (~140 MB, with its in-process
emulator) it reads the parent's peak, not the child's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import time
import uuid
from typing import Any

RESULT_PREFIX = "BENCH_RESULT "


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _peak_rss_mb() -> float:
    """This process's own peak RSS (``VmHWM``: the high-water mark of its address space,
    which starts afresh at exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    raise SystemExit("no VmHWM in /proc/self/status (Linux only)")


class BudgetContext:
    """Plenty of time left until the job has made ``budget`` more destination calls."""

    def __init__(self, job: Any, budget: int) -> None:
        self.job = job
        self.until = job.calls + budget
        self.aws_request_id = str(uuid.uuid4())
        self.function_name = "bench-scale"

    def get_remaining_time_in_millis(self) -> int:
        return 900_000 if self.job.calls < self.until else 0


def noop_destination(key: str, record: dict[str, Any]) -> str:
    return f"note-{key}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, required=True)
    parser.add_argument("--per-run", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args(argv)

    from bench.counting import COUNTER

    COUNTER.install()
    from bench.items import ItemSync, item_config
    from jobguard.dynamodb import create_table

    table = f"bench-scale-{uuid.uuid4().hex[:8]}"
    import botocore.session

    create_table(botocore.session.get_session().create_client("dynamodb"), table)
    name = "bench-scale"
    job = ItemSync(item_config(name, table, batch_size=args.batch_size, flush="page"),
                   args.items, noop_destination)
    handler = job.handler()
    handler.runtime()
    baseline = _peak_rss_mb()
    runs = 0
    run_seconds: list[float] = []
    COUNTER.reset()
    started = time.perf_counter()
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        while job.calls < args.items:
            runs += 1
            run_started = time.perf_counter()
            report = handler({"job": name, "manual": True, "trigger_id": f"run-{runs}"},
                             BudgetContext(job, args.per_run))
            if not isinstance(report, dict) or not report.get("completed"):
                raise SystemExit(f"run {runs} completed nothing: {report!r}")
            run_seconds.append(round(time.perf_counter() - run_started, 2))
            if runs > args.items // max(1, args.per_run) + 2:
                raise SystemExit(f"too many runs: {report!r}")
    seconds = time.perf_counter() - started
    checkpoint = handler.runtime().items.read_checkpoint(name)
    if checkpoint.cursor != str(args.items):
        raise SystemExit(f"checkpoint at {checkpoint.cursor}, expected {args.items}")
    result = {"seconds": seconds, "runs": runs, "baseline_rss_mb": baseline,
              "peak_rss_mb": _peak_rss_mb(), "ru_maxrss_mb": _maxrss_mb(),
              "requests": COUNTER.total(),
              "calls": job.calls, "run_seconds": run_seconds}
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
