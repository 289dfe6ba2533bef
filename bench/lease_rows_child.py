"""Child of the lease-row figure: ``lease_row_bytes_10k_triggers`` in a process of its own.

Usage: ``python -m bench.lease_rows_child --triggers N`` with the repository root on
``PYTHONPATH``. Decides ``N`` distinct manual triggers against a held lease
(:func:`bench.request_counts.lease_row_after_triggers`) on the in-process emulator
(:func:`jobguard.local.emulator.in_process`: moto without the HTTP server, DynamoDB
requests serialised, the same store code and the same moto backend as the benchmark's
emulator) and prints one line,
``BENCH_RESULT {"lease_row_bytes": .., "triggers": .., "seconds": ..}``.

The 10,000 decisions are some 20,000 sequential DynamoDB requests, each parsed and
evaluated by moto: minutes of one core, whatever the machine. In the benchmark's own
process they would share its one interpreter (and its lock) with every other stage; as a
child they run on the other core beside the stages that only count (requests, write
units), never beside a timed one (:mod:`bench.run`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time

RESULT_PREFIX = "BENCH_RESULT "


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lease_rows_child")
    parser.add_argument("--triggers", type=int, required=True)
    args = parser.parse_args(argv)

    from bench.common import create_jobguard_table
    from bench.request_counts import lease_row_after_triggers
    from jobguard.local.emulator import in_process

    started = time.perf_counter()
    with in_process() as aws, open(os.devnull, "w") as null, \
            contextlib.redirect_stdout(null):  # the library's log lines and metrics
        ddb = aws.client("dynamodb")
        size = lease_row_after_triggers(create_jobguard_table(ddb), ddb, args.triggers)
    result = {"lease_row_bytes": size, "triggers": args.triggers,
              "seconds": round(time.perf_counter() - started, 1)}
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
