"""Child of the cold start figure: import one handler module, invoke it once.

Usage: ``python bench/coldstart_child.py MODULE SCHEDULED_AT`` with the repository root
on ``PYTHONPATH`` and the emulator's environment set. Prints one line,
``BENCH_RESULT {"import_ms": .., "first_invoke_ms": .., "total_ms": ..}``, after
whatever the handler itself printed (logs, metrics).

Only the standard library is imported before the clock starts.
"""

from __future__ import annotations

import importlib
import json
import sys
import time

RESULT_PREFIX = "BENCH_RESULT "


def main(module_name: str, scheduled_at: str) -> None:
    started = time.perf_counter()
    module = importlib.import_module(module_name)
    imported = time.perf_counter()
    from bench.lambda_context import FakeLambdaContext  # stdlib only

    result = module.lambda_handler({"job": "bench-cold", "scheduled_at": scheduled_at},
                                   FakeLambdaContext())
    invoked = time.perf_counter()
    if result != {"ok": True}:
        raise SystemExit(f"the handler did not run: {result!r}")
    timings = {
        "import_ms": (imported - started) * 1000,
        "first_invoke_ms": (invoked - imported) * 1000,
        "total_ms": (invoked - started) * 1000,
    }
    print(RESULT_PREFIX + json.dumps(timings), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
