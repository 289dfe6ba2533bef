"""Child of the cold start figure: import one handler module, invoke it once.

Usage: ``python bench/coldstart_child.py MODULE SCHEDULED_AT`` with the repository root
on ``PYTHONPATH`` and the emulator's environment set. Prints one line,
``BENCH_RESULT {"import_ms": .., "first_invoke_ms": .., "total_ms": .., "cpu_ms": ..}``,
after whatever the handler itself printed (logs, metrics). ``cpu_ms``: the CPU time this
process spent over ``total_ms`` (its own work, without the wait for the emulator's
answers or for a core on a busy machine).

Only the standard library is imported before the clock starts.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

RESULT_PREFIX = "BENCH_RESULT "
MODULES_PREFIX = "BENCH_MODULES "


def main(module_name: str, scheduled_at: str) -> None:
    started, cpu_started = time.perf_counter(), time.process_time()
    module = importlib.import_module(module_name)
    imported = time.perf_counter()
    from bench.lambda_context import FakeLambdaContext  # stdlib only

    result = module.lambda_handler({"job": "bench-cold", "scheduled_at": scheduled_at},
                                   FakeLambdaContext())
    invoked, cpu_done = time.perf_counter(), time.process_time()
    if result != {"ok": True}:
        raise SystemExit(f"the handler did not run: {result!r}")
    timings = {
        "import_ms": (imported - started) * 1000,
        "first_invoke_ms": (invoked - imported) * 1000,
        "total_ms": (invoked - started) * 1000,
        "cpu_ms": (cpu_done - cpu_started) * 1000,
    }
    print(RESULT_PREFIX + json.dumps(timings), flush=True)
    if os.environ.get("BENCH_LIST_MODULES") == "1":
        # for the parent: the source files this start imported (it compiles them)
        files = sorted({m.__file__ for m in list(sys.modules.values())
                        if (getattr(m, "__file__", None) or "").endswith(".py")})
        print(MODULES_PREFIX + json.dumps(files), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
