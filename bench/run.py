"""jobguard benchmark: what guarding a scheduled Lambda costs, next to the usual alternative.

Run from the repository root with ``.venv/bin/python -m bench.run`` (or
``python bench/run.py``, or ``make bench``). Everything runs against the embedded
emulator (:class:`jobguard.local.emulator.LocalAWS`: moto in server mode on loopback,
DynamoDB requests serialised), started once for the whole benchmark. The alternative
is the Powertools idempotency utility, ``@idempotent`` with
``DynamoDBPersistenceLayer`` keyed on ``scheduled_at``, which is what people use today
to keep a scheduled job from running twice.

Figures (written to ``bench/results.json``):

``requests_per_run`` / ``powertools_requests_per_run``
    AWS requests (DynamoDB + SQS) for one happy-path invocation that runs the handler:
    jobguard acquires the lease, runs, and releases + writes the run record; Powertools
    writes the in-progress record and then the completed one. Counted with a botocore
    ``before-send`` hook that every botocore session registers (``bench/counting.py``),
    on the invoking thread only, so every HTTP attempt of the library's own client
    (retries included) counts. Mean over ``--runs`` sequential invocations with
    distinct ticks, after one warm-up invocation. Target: <= 2.
``requests_per_skip``
    Requests for one SKIP decision, including its run record, while another run holds
    the lease (held inside its handler by a ``threading.Event``). Mean over ``--runs``
    after a warm-up. Powertools has no equivalent (distinct ticks all run). Target: <= 2.
``run_ms`` / ``powertools_run_ms``
    Median wall time of those happy-path invocations (no-op handler), emulator included
    (moto's expression parsing dominates it; real DynamoDB latency is per request).
``run_cpu_ms`` / ``powertools_run_cpu_ms`` / ``skip_cpu_ms``
    Median CPU time of the invoking thread for the same invocations (``thread_time``):
    the library's and botocore's own work, without the emulator (other threads).
``contention_50_s`` / ``decisions_per_s``
    ``--workers`` (50) processes, forked after the imports, each with its own client
    (built after the fork) and its own tick, released at once by a
    ``multiprocessing.Barrier``. The winner holds its run open until every trigger has
    decided. ``contention_50_s`` is
    the time from barrier release to the 49th skip decision; ``decisions_per_s`` is
    49 divided by it. The run records must show exactly 1 run and 49 skipped.
``powertools_contention_50_s``, ``powertools_decisions_per_s``, ``powertools_overlapping_runs``
    The same 50 processes with the Powertools handler: with no lease, all 50 distinct
    ticks run, at the same time. Time is barrier release to the 50th handler start.
``overlapping_runs``
    jobguard's count of handlers running at once in that test (must be 1).
``contention_requests_per_skip``
    Mean requests made by a skipping worker under that contention.
``cold_start_client_ms`` / ``cold_start_emulator_ms`` (and ``powertools_*``)
    The same children's total split in two: the time the emulator spent serving their
    DynamoDB requests (timed inside the server, around moto's handling) and the rest,
    which is what the Lambda itself spends (imports, client, its own work, the wire).
``cold_start_ms`` / ``import_ms`` / ``first_invoke_ms`` (and ``powertools_*``)
    A fresh interpreter imports a minimal handler module (``bench/handlers/``) and
    completes its first invocation against the emulator; timed with ``perf_counter``
    inside the child. Median of ``--repeats`` children per side, interleaved.
    Target: ``cold_start_ms <= powertools_cold_start_ms``.

Both libraries run with their default settings: their log lines and EMF metrics are
formatted and written as in Lambda, but to ``/dev/null`` while a stage runs (the
cold start children's output is captured and discarded), so the table stays readable.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

if __package__ in (None, ""):  # run as ``python bench/run.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.counting import COUNTER  # noqa: E402

COUNTER.install()  # before jobguard or Powertools can create a botocore session

import jobguard  # noqa: E402  (imported before the contention workers fork)
from aws_lambda_powertools.utilities import idempotency  # noqa: E402, F401
from jobguard.local.emulator import LocalAWS  # noqa: E402

from bench import coldstart, contention, request_counts  # noqa: E402
from bench.common import Ticks, create_idempotency_table, create_jobguard_table  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results.json"
OUT: TextIO = sys.stdout
"""The real stdout: ``sys.stdout`` is ``/dev/null`` while the stages run."""

Figures = dict[str, float]


@dataclass(frozen=True)
class Row:
    """One line of the printed table."""

    figure: str
    ours: float
    alternative: float | None
    target: str = ""
    ok: bool | None = None


@dataclass(frozen=True)
class Target:
    text: str
    check: Callable[[Figures], bool]


TARGETS: dict[str, Target] = {
    "requests_per_run": Target("<= 2", lambda f: f["requests_per_run"] <= 2),
    "requests_per_skip": Target("<= 2", lambda f: f["requests_per_skip"] <= 2),
    "overlapping_runs": Target("== 1", lambda f: f["overlapping_runs"] == 1),
    "cold_start_ms": Target(
        "<= alternative", lambda f: f["cold_start_ms"] <= f["powertools_cold_start_ms"]
    ),
}


# -- stages ----------------------------------------------------------------------------


def measure_requests(aws: LocalAWS, ticks: Ticks, runs: int, meta: dict[str, Any]) -> Figures:
    ddb = aws.client("dynamodb")
    table, idem_table = create_jobguard_table(ddb), create_idempotency_table(ddb)
    ours = request_counts.guarded_runs(table, ticks, runs)
    skip = request_counts.guarded_skips(table, ticks, runs)
    theirs = request_counts.powertools_runs(idem_table, ticks, runs)
    meta["operations"] = {
        "run": ours.operations, "skip": skip.operations, "powertools_run": theirs.operations,
    }
    meta["lease_row_bytes"] = {
        "after_runs": request_counts.lease_row_bytes(ddb, table, "bench-run"),
        "after_skips": request_counts.lease_row_bytes(ddb, table, "bench-skip"),
        "decided_triggers": {"after_runs": runs + 1, "after_skips": runs + 2},
    }
    meta["first_invocation_requests"] = {
        "run": ours.first_requests, "skip": skip.first_requests,
        "powertools_run": theirs.first_requests,
    }
    return {
        "requests_per_run": ours.requests,
        "requests_per_skip": skip.requests,
        "powertools_requests_per_run": theirs.requests,
        "run_ms": ours.ms,
        "powertools_run_ms": theirs.ms,
        "run_cpu_ms": ours.cpu_ms,
        "powertools_run_cpu_ms": theirs.cpu_ms,
        "skip_cpu_ms": skip.cpu_ms,
    }


def measure_contention(aws: LocalAWS, ticks: Ticks, workers: int,
                       meta: dict[str, Any]) -> Figures:
    ddb = aws.client("dynamodb")
    ours = contention.run("jobguard", create_jobguard_table(ddb), ddb, ticks, workers)
    theirs = contention.run("powertools", create_idempotency_table(ddb), ddb, ticks, workers)
    verified = (
        ours.ran == 1
        and ours.decisions_seen == {"ran": 1, "skipped": workers - 1}
        and ours.records == {"succeeded": 1, "skipped": workers - 1}
    )
    meta["contention"] = {
        "workers": workers,
        "jobguard_decisions": ours.decisions_seen,
        "jobguard_run_records": ours.records,
        "powertools_record_statuses": theirs.records,
        "verified_1_run_and_rest_skipped": verified,
    }
    say(f"contention ({workers} processes): jobguard run records {ours.records} "
          f"-> {'exactly 1 run + ' + str(workers - 1) + ' skipped' if verified else 'WRONG'}; "
          f"powertools records {theirs.records}, {theirs.overlapping_runs} ran at once")
    return {
        "contention_50_s": ours.decided_s,
        "decisions_per_s": ours.decisions_per_s,
        "overlapping_runs": ours.overlapping_runs,
        "contention_requests_per_skip": ours.requests_per_decision,
        "powertools_contention_50_s": theirs.decided_s,
        "powertools_decisions_per_s": theirs.decisions_per_s,
        "powertools_overlapping_runs": theirs.overlapping_runs,
    }


def measure_cold_start(aws: LocalAWS, ticks: Ticks, repeats: int,
                       meta: dict[str, Any]) -> Figures:
    ddb = aws.client("dynamodb")
    tables = {"jobguard": create_jobguard_table(ddb),
              "powertools": create_idempotency_table(ddb)}
    result = coldstart.run(aws.env(), tables, ticks, repeats,
                           service_s=lambda: aws.dynamodb_service_s)
    ours, theirs = result["jobguard"], result["powertools"]
    meta["cold_start_samples_ms"] = {"jobguard": ours.samples, "powertools": theirs.samples}
    return {
        "cold_start_ms": ours.total_ms,
        "import_ms": ours.import_ms,
        "first_invoke_ms": ours.first_invoke_ms,
        "powertools_cold_start_ms": theirs.total_ms,
        "powertools_import_ms": theirs.import_ms,
        "powertools_first_invoke_ms": theirs.first_invoke_ms,
        "cold_start_ratio": ours.total_ms / theirs.total_ms,
        "cold_start_emulator_ms": ours.emulator_ms,
        "powertools_cold_start_emulator_ms": theirs.emulator_ms,
        "cold_start_client_ms": ours.client_ms,
        "powertools_cold_start_client_ms": theirs.client_ms,
    }


def say(text: str) -> None:
    print(text, file=OUT, flush=True)


@contextlib.contextmanager
def discard_stdout() -> Any:
    """Send what the libraries print (JSON logs, EMF metrics) to /dev/null."""
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        yield


# -- report ----------------------------------------------------------------------------


def rows(f: Figures) -> list[Row]:
    def row(name: str, alternative: str | None = None) -> Row:
        target = TARGETS.get(name)
        return Row(name, f[name], f[alternative] if alternative else None,
                   target.text if target else "", target.check(f) if target else None)

    return [
        row("requests_per_run", "powertools_requests_per_run"),
        row("requests_per_skip"),
        row("run_ms", "powertools_run_ms"),
        row("run_cpu_ms", "powertools_run_cpu_ms"),
        row("skip_cpu_ms"),
        row("contention_50_s", "powertools_contention_50_s"),
        row("decisions_per_s", "powertools_decisions_per_s"),
        row("overlapping_runs", "powertools_overlapping_runs"),
        row("contention_requests_per_skip"),
        row("cold_start_ms", "powertools_cold_start_ms"),
        row("cold_start_client_ms", "powertools_cold_start_client_ms"),
        row("cold_start_emulator_ms", "powertools_cold_start_emulator_ms"),
        row("import_ms", "powertools_import_ms"),
        row("first_invoke_ms", "powertools_first_invoke_ms"),
    ]


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def table(lines: list[Row]) -> str:
    header = ("figure", "jobguard", "alternative", "ratio", "target", "ok")
    cells = [header] + [
        (r.figure, _num(r.ours), _num(r.alternative),
         f"{r.ours / r.alternative:.2f}" if r.alternative else "-",
         r.target or "-", {True: "yes", False: "NO", None: "-"}[r.ok])
        for r in lines
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    out = [" | ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)) for cell in cells]
    out.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(out)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def base_meta(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": {
            "jobguard": jobguard.__version__,
            "aws-lambda-powertools": _version("aws-lambda-powertools"),
            "boto3": _version("boto3"),
            "moto": _version("moto"),
        },
        "parameters": {"runs": args.runs, "workers": args.workers, "repeats": args.repeats},
        "targets": {name: t.text for name, t in TARGETS.items()},
        "alternative": "aws-lambda-powertools @idempotent(DynamoDBPersistenceLayer, "
                       "event_key_jmespath='scheduled_at')",
    }


# -- main ------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="measured invocations per "
                        "request-count figure (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=50, help="contending processes "
                        "(default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="cold start children per "
                        "side (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results file "
                        "(default: bench/results.json)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    meta = base_meta(args)
    ticks = Ticks()
    with LocalAWS() as aws, discard_stdout():
        os.environ.update(aws.env())
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            os.environ.pop(name, None)
        say(f"emulator at {aws.endpoint_url}; request counts ({args.runs} runs each)")
        figures = measure_requests(aws, ticks, args.runs, meta)
        say(f"contention: {args.workers} processes per side")
        figures.update(measure_contention(aws, ticks, args.workers, meta))
        say(f"cold start: {args.repeats} fresh interpreters per side")
        figures.update(measure_cold_start(aws, ticks, args.repeats, meta))
    lines = rows(figures)
    meta["targets_met"] = {r.figure: r.ok for r in lines if r.ok is not None}
    meta["runtime_s"] = round(time.perf_counter() - started, 1)
    args.output.write_text(json.dumps({**_rounded(figures), "meta": meta}, indent=2) + "\n")
    say("")
    say(table(lines))
    say(f"\ncold start: jobguard / powertools = {figures['cold_start_ratio']:.2f}; "
          f"total {meta['runtime_s']} s; results in {args.output}")
    if not meta["contention"]["verified_1_run_and_rest_skipped"]:
        return 1
    return 1 if args.strict and not all(meta["targets_met"].values()) else 0


def _rounded(figures: Figures) -> Figures:
    return {k: round(v, 4) for k, v in figures.items()}


if __name__ == "__main__":
    sys.exit(main())
