"""Figure 5: cold start, a fresh interpreter importing a handler module and completing
its first invocation against the emulator.

Each child is a new ``python`` process (``bench/coldstart_child.py``) with the
emulator's environment; the parent pre-creates the tables. jobguard and Powertools
children alternate, each with its own tick so every invocation really runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .common import BenchError, Ticks, median

ROOT = Path(__file__).resolve().parent.parent
CHILD = ROOT / "bench" / "coldstart_child.py"
MODULES = {
    "jobguard": "bench.handlers.guarded_min",
    "powertools": "bench.handlers.powertools_min",
}
RESULT_PREFIX = "BENCH_RESULT "
MODULES_PREFIX = "BENCH_MODULES "
# Quiet or development settings must not leak in: the child runs with defaults.
_DROP = ("POWERTOOLS_", "JOBGUARD_", "IDEMPOTENCY_TABLE", "AWS_")


@dataclass
class ColdStart:
    """Medians over the children of one side, in milliseconds."""

    import_ms: float
    first_invoke_ms: float
    total_ms: float
    emulator_ms: float
    client_ms: float
    cpu_ms: float
    """CPU time of the child over ``total_ms``: the Lambda's own work, without waits."""
    samples: list[float]


def _child_env(aws_env: dict[str, str], tables: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP)}
    env.update(aws_env)
    env["JOBGUARD_TABLE"] = tables["jobguard"]
    env["IDEMPOTENCY_TABLE"] = tables["powertools"]
    # The checkout's own library first: an editable install may point at another
    # checkout (a worktree), and the figure is of the code beside this bench.
    env["PYTHONPATH"] = os.pathsep.join((str(ROOT / "lib"), str(ROOT)))
    return env


def _one(module: str, scheduled_at: str, env: dict[str, str], *,
         compile_imports: bool = False) -> dict[str, float]:
    """One child. ``compile_imports``: then compile to bytecode every source file it
    imported (third-party packages included), for the children after it."""
    if compile_imports:
        env = {**env, "BENCH_LIST_MODULES": "1"}
    proc = subprocess.run(
        [sys.executable, str(CHILD), module, scheduled_at],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or not lines:
        raise BenchError(f"cold start child {module} failed ({proc.returncode}): "
                         f"{proc.stderr.strip()[-800:]}")
    if compile_imports:
        import contextlib
        import py_compile

        listed = [ln for ln in proc.stdout.splitlines() if ln.startswith(MODULES_PREFIX)]
        for source in json.loads(listed[-1][len(MODULES_PREFIX):]) if listed else []:
            # (a read-only install keeps what it has: both sides alike)
            with contextlib.suppress(OSError, py_compile.PyCompileError):
                py_compile.compile(source, doraise=True)
    timings: dict[str, float] = json.loads(lines[-1][len(RESULT_PREFIX):])
    return timings


def run(aws_env: dict[str, str], tables: dict[str, str], ticks: Ticks,
        repeats: int = 11, service_s: Callable[[], float] = lambda: 0.0) -> dict[str, ColdStart]:
    """``repeats`` children per side, interleaved (alternating which side goes first),
    after one discarded child per side (warms the page cache); medians per side.

    Both sides import bytecode, as a Lambda does from a package built by pip or from the
    runtime's own boto3: jobguard's sources and the bench handlers are compiled here,
    and each discarded child lists every source file it imported (botocore, urllib3,
    Powertools...), which is compiled before the measured children. An installer that
    writes no bytecode (uv by default), or PYTHONDONTWRITEBYTECODE, would otherwise
    have every child compile its imports again, and the figure would be mostly the
    compiler's (about 300 ms a side on 2 vCPU).
    """
    import compileall

    for folder in (ROOT / "lib" / "jobguard", ROOT / "bench" / "handlers", ROOT / "bench"):
        compileall.compile_dir(str(folder), quiet=1, maxlevels=0 if folder.name == "bench"
                               else 10)
    env = _child_env(aws_env, tables)
    for module in MODULES.values():
        _one(module, ticks.take(), env, compile_imports=True)
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in MODULES}
    order = list(MODULES)
    for round_no in range(repeats):
        for side in order if round_no % 2 == 0 else reversed(order):
            before = service_s()
            sample = _one(MODULES[side], ticks.take(), env)
            # The emulator's own time on this child's DynamoDB requests (moto parsing
            # expressions in Python), measured in the server: not the Lambda's work.
            sample["emulator_ms"] = (service_s() - before) * 1000
            sample["client_ms"] = sample["total_ms"] - sample["emulator_ms"]
            runs[side].append(sample)
    return {side: _medians(samples) for side, samples in runs.items()}


def _medians(samples: list[dict[str, float]]) -> ColdStart:
    return ColdStart(
        import_ms=median([s["import_ms"] for s in samples]),
        first_invoke_ms=median([s["first_invoke_ms"] for s in samples]),
        total_ms=median([s["total_ms"] for s in samples]),
        emulator_ms=median([s["emulator_ms"] for s in samples]),
        client_ms=median([s["client_ms"] for s in samples]),
        cpu_ms=median([s["cpu_ms"] for s in samples]),
        samples=[round(s["total_ms"], 1) for s in samples],
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.coldstart [REPEATS]``: this figure alone, on its own emulator,
    printed (not written to the results file: ``make bench`` records it)."""
    import argparse

    from bench.common import create_idempotency_table, create_jobguard_table
    from jobguard.local.emulator import LocalAWS

    parser = argparse.ArgumentParser(prog="python -m bench.coldstart")
    parser.add_argument("repeats", type=int, nargs="?", default=11)
    args = parser.parse_args(argv)
    with LocalAWS() as aws:
        ddb = aws.client("dynamodb")
        tables = {"jobguard": create_jobguard_table(ddb),
                  "powertools": create_idempotency_table(ddb)}
        result = run(aws.env(), tables, Ticks(), args.repeats,
                     service_s=lambda: aws.dynamodb_service_s)
    ours, theirs = result["jobguard"], result["powertools"]
    for side, r in result.items():
        print(f"{side:10} total {r.total_ms:6.1f} ms (import {r.import_ms:5.1f}, first "
              f"invoke {r.first_invoke_ms:5.1f}; emulator {r.emulator_ms:4.1f}, client "
              f"{r.client_ms:5.1f}; cpu {r.cpu_ms:5.1f}) samples {r.samples}")
    print(f"cold_start_ratio {ours.total_ms / theirs.total_ms:.3f} "
          f"(cpu {ours.cpu_ms / theirs.cpu_ms:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
