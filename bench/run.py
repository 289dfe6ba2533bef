"""jobguard benchmark: what guarding a scheduled Lambda costs, next to the usual alternative.

Run from the repository root with ``.venv/bin/python -m bench.run`` (or
``python bench/run.py``, or ``make bench``; at most 10 minutes on 2 cores). Everything
runs against the embedded emulator (:class:`jobguard.local.emulator.LocalAWS`: moto in
server mode on loopback, DynamoDB requests serialised), started once for the whole
benchmark, except the lease row after 10,000 triggers (below), which a child process
decides on the in-process emulator beside the stages that only count. The long figures
(the fault load at 10x, the 30-minute explorer, the mutation sample) have their own make
targets (``soak``, ``explore``, ``mutate``); every part stamps ``meta.measured`` with
when and on which commit it ran (``bench/results_file.py``). The alternative
is the Powertools idempotency utility, ``@idempotent`` with
``DynamoDBPersistenceLayer`` keyed on ``scheduled_at``, which is what people use today
to keep a scheduled job from running twice.

Figures (written to ``bench/results.json``):

``requests_per_run`` / ``powertools_requests_per_run``
    AWS requests (DynamoDB + SQS) for one happy-path invocation that runs the handler:
    jobguard reads the lease row (consistent: a trigger that meets a held lease decides
    from it, never billed for the job row), acquires the lease, runs, and releases +
    writes the run record; Powertools
    writes the in-progress record and then the completed one. Counted with a botocore
    ``before-send`` hook that every botocore session registers (``bench/counting.py``),
    on the invoking thread only, so every HTTP attempt of the library's own client
    (retries included) counts. Mean over ``--runs`` sequential invocations with
    distinct ticks, after one warm-up invocation. Target: <= 3 (it was 2 before the
    read: the read keeps a skip's write units independent of the running run's page).
``lease_row_bytes_10k_triggers``
    The job's lease row, in bytes as DynamoDB sizes it (attribute names + values),
    after 10,000 distinct manual triggers over two hours were skipped against a held
    lease (every write to the row is billed by its whole size). Target: <= 2,048. The
    10,000 decisions run in a child process (``bench/lease_rows_child.py``, the
    in-process emulator) on the other core while the work-item and recovery stages
    count; ``meta.stage_s.lease_rows`` is the child's own time.
``requests_per_skip``
    Requests for one SKIP decision, including its run record, while another run holds
    the lease (held inside its handler by a ``threading.Event``). Mean over ``--runs``
    after a warm-up. Powertools has no equivalent (distinct ticks all run). Target: <= 2.
``wcu_per_run`` / ``powertools_wcu_per_run`` / ``wcu_per_skip``
    DynamoDB write units of one such run, and of one SKIP decision (no equivalent in
    Powertools), as AWS would bill them: each write the larger of the item's size before
    and after in 1 KB units (at least 1), twice inside a transaction (and a
    transaction's ``ConditionCheck``), refused conditional writes still charged, plus 1
    per secondary-index entry added or removed (2 for a key change). Metered by
    ``bench/write_units.py``, which reads every written item before and after the call
    through a side client; in ``--runs`` further invocations after the timed ones, so
    those reads stay out of the timings. Reported, no target.
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
``cold_start_cpu_ms`` (and ``powertools_*``, ``cold_start_cpu_ratio``)
    The CPU time each child spent over that total (``time.process_time``): the Lambda's
    own work, without the waits for the emulator's answers or for a core on a busy
    machine. Not a target: ``cold_start_ratio`` is.
``cold_start_ms`` / ``import_ms`` / ``first_invoke_ms`` (and ``powertools_*``)
    A fresh interpreter imports a minimal handler module (``bench/handlers/``) and
    completes its first invocation against the emulator; timed with ``perf_counter``
    inside the child. Median of ``--repeats`` children per side, interleaved
    (``python -m bench.coldstart [REPEATS]``: this figure alone, printed).
    Target: ``cold_start_ms <= powertools_cold_start_ms`` (``cold_start_ratio`` <= 1).

Work items (``bench/items.py``; the alternative is Powertools' ``idempotent_function``
around each destination call, ``event_key_jmespath='id'``, Lambda context registered):

``requests_per_item_b1`` / ``requests_per_item_b100`` / ``powertools_requests_per_item``
    DynamoDB requests per item of one ``BatchJob`` run over ``--items`` (1,000) items:
    batch 1 flushed per item, and batch 100 flushed per page; per-run fixed costs (lease
    acquire, checkpoint read, release + run record) included, amortised. The
    destination writes to its own table through a client the counter does not see.
    ``claim_requests_per_item_b1``: the same with ``Run.claim()`` in a plain handler.
    Targets: <= 2 and <= 0.05.
``wcu_per_item_b1`` / ``wcu_per_item_b100`` / ``powertools_wcu_per_item``
    Write units (as ``wcu_per_run``) of the same runs, per item of the whole run: the
    run's own lease and release writes are spread over its items, as for requests.
    Targets: <= 4 at batch 1, <= Powertools' at batch 100.
``rcu_per_item_b1`` / ``rcu_per_item_b100`` / ``powertools_rcu_per_item``
    Read units of the same runs, per item (a consistent read: 1 per 4 KB of each item
    read, a key with no item still 1): jobguard looks each page up before claiming it.
``item_bytes`` / ``powertools_item_bytes``
    The largest item each side left in its table after that batch-100 run (a completion;
    a Powertools record), as DynamoDB sizes it: the storage of the monthly cost table
    (``bench/cost.py``, printed at the end).
``wcu_recovery_10`` / ``rcu_recovery_10`` (and ``powertools_*``)
    Units of recovering 10 items of which the destination holds 5: jobguard plans and
    executes ``recover`` over the range a run left claimed when it died after 5 notes;
    Powertools runs the 10 through ``idempotent_function`` with none of them recorded as
    completed (it calls the destination for the 5 again). Target: <= 2 x 10 + one run's
    writes (``wcu_per_run``).
``overhead_ratio`` / ``powertools_overhead_ratio`` (and ``*_net``)
    Wall time of the same ``--items`` destination calls (a no-op sleeping 20 ms) guarded
    (batch 100, page flush) or through Powertools, over the bare loop, with 5 ms injected
    before every DynamoDB request (a ``before-send`` hook). One repetition per side.
    ``*_net`` subtracts the side's HTTP round trips to the emulator (``*_wire_s``), so
    each request costs the injected 5 ms plus the client's own work.
    Target: <= 1.10.
``items_per_s``, ``peak_rss_mb_<size>``, ``peak_rss_ratio`` (``--scale``)
    A fresh child process per size processes that many items (batch 100, runs of
    ``--scale-per-run``) against an emulator in another process; throughput at the
    larger size and the child's own peak RSS (``VmHWM``). Target: ratio <= 1.25.

The load under faults (``jobguard.local.load``; ``--faults-load-only`` runs just it):

``faults_load``
    ``--faults-triggers`` (1,000) triggers across 5 jobs (SKIP, QUEUE, COALESCE,
    REPLACE, SKIP), 8 threads, 10 % of AWS calls faulted, seed 1, on the embedded
    emulator in this process; ticks planned inside the window a job accepts, a failed
    delivery retried as Lambda retries it. ``decided``: triggers that reached a
    decision (target: at least 90 %); ``malformed_planned`` / ``malformed_refused``:
    far-future ticks planned on purpose, refused, never counted as decided;
    ``called_twice_by_policy``: per policy, work ids whose destination call reached the
    emulator more than once (each is also a ONCE entry of ``violations``; target: none).
    ``--busy N`` runs it with N processes spinning on the CPU beside it and writes
    ``faults_load_busy`` instead (the same figures, plus ``busy_processes``).
``fleet_100_decisions_per_s``, ``fleet_100_throttled_requests`` (``bench/fleet_load.py``)
    100 jobs on one table whose partitions take 10 write / 30 read units a second
    (DynamoDB's limits at 1/100 scale), a tick a second each for 10 s: decisions a
    second, and requests the partitions refused; the section ``fleet_100`` keeps the
    load's summary (its violations: none expected). See docs/capacity.md.

The timeline (``bench/timeline.py``; no alternative: an operator today does the
arithmetic on ``jobguard runs``):

``timeline_10k_ms`` / ``timeline_10k_bytes``
    10,000 run records of three jobs over a day: median time to build the timeline and
    render the whole ``jobguard timeline --html`` page, and the page's size. Targets:
    under 2,000 ms and under 2,000,000 bytes. ``timeline_10k_text_ms``: the terminal
    view; ``timeline_10k_read_ms``: reading the records back through
    ``DynamoJobStore.runs_between`` from the emulator (moto's time, reported).
    ``--timeline-only`` measures just these and updates them in the results file.
``backlog_10k_runs`` / ``backlog_10k_wall_s``
    A backlog of 10,000 records, 1,000 a run, drained by a chain of continuation runs
    started from one tick (``bench/backlog.py``): the runs in the chain and its wall
    time on the in-process emulator. Reported, no target.
``timeline_dense_10k_*`` / ``timeline_badday_10k_*`` / ``timeline_month_43k_*``
    One job's lane alone: 10,000 runs over a day (5 % failed), the same day half
    failed, 30 days of a 1-minute job (43,200 runs). The two 10,000-run cases have the
    targets above; the month is reported.

A fleet of 100 jobs (``bench/fleet.py``: ``infra.fleet`` synthesized with cdk-nag):

``fleet_100_resources_max_per_stack`` / ``fleet_100_outputs`` / ``fleet_100_synth_s``
    The most resources in one template of the 100-job ``JobFleet`` (target: <= 500),
    its stack's outputs (target: <= 200), and its synthesis time (warm, reported).
``fleet_fixed_cost_per_job_usd`` / ``fleet_per_job_alarms_cost_per_job_usd``
    Fixed monthly cost per job at list price of that fleet, counted in its templates
    (``bench/cost.py``; target: <= $0.30), and of the same jobs with their own alarms.
    The README's cost table (1, 10 and 100 jobs) is printed at the end.

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

if __package__ in (None, ""):  # run as ``python bench/run.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.counting import COUNTER  # noqa: E402

COUNTER.install()  # before jobguard or Powertools can create a botocore session

from bench.write_units import METER  # noqa: E402  (standard library and botocore only)

METER.install()  # idle until a measurement meters its own thread

from bench.items import LATENCY  # noqa: E402  (imports jobguard: its sessions are lazy)

LATENCY.install()  # idle until the overhead figure turns it on

from aws_lambda_powertools.utilities import idempotency  # noqa: E402, F401

import jobguard  # noqa: E402  (imported before the contention workers fork)
from bench import backlog as backlog_bench  # noqa: E402
from bench import coldstart, contention, fleet_load, items, request_counts  # noqa: E402
from bench import timeline as timeline_bench  # noqa: E402
from bench.common import (  # noqa: E402
    BenchError,
    Ticks,
    create_idempotency_table,
    create_jobguard_table,
)
from bench.results_file import merge_results, provenance, record  # noqa: E402
from jobguard.local.emulator import LocalAWS  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results.json"
_NULL = open(os.devnull, "w")  # noqa: SIM115 - the process's /dev/null sink, never closed
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
    "requests_per_run": Target("<= 3", lambda f: f["requests_per_run"] <= 3),
    "requests_per_skip": Target("<= 2", lambda f: f["requests_per_skip"] <= 2),
    "lease_row_bytes_10k_triggers": Target(
        "<= 2048", lambda f: f["lease_row_bytes_10k_triggers"] <= 2048),
    "overlapping_runs": Target("== 1", lambda f: f["overlapping_runs"] == 1),
    "cold_start_ms": Target(
        "<= alternative", lambda f: f["cold_start_ms"] <= f["powertools_cold_start_ms"]
    ),
    "requests_per_item_b1": Target("<= 3", lambda f: f["requests_per_item_b1"] <= 3.01),
    "requests_per_item_b100": Target("<= 0.07", lambda f: f["requests_per_item_b100"] <= 0.07),
    "wcu_per_item_b1": Target("<= 4", lambda f: f["wcu_per_item_b1"] <= 4),
    "wcu_per_item_b100": Target(
        "<= alternative", lambda f: f["wcu_per_item_b100"] <= f["powertools_wcu_per_item"]),
    "wcu_recovery_10": Target(
        "<= 2 x 10 + a run", lambda f: f["wcu_recovery_10"] <= 20 + f["wcu_per_run"]),
    "overhead_ratio": Target("<= 1.10", lambda f: f["overhead_ratio"] <= 1.10),
    "overhead_ratio_net": Target("<= 1.10", lambda f: f["overhead_ratio_net"] <= 1.10),
    "peak_rss_ratio": Target("<= 1.25", lambda f: f["peak_rss_ratio"] <= 1.25),
    "timeline_10k_ms": Target("< 2000", lambda f: f["timeline_10k_ms"] < 2000),
    "timeline_10k_bytes": Target("< 2000000", lambda f: f["timeline_10k_bytes"] < 2_000_000),
    "timeline_dense_10k_ms": Target("< 2000", lambda f: f["timeline_dense_10k_ms"] < 2000),
    "timeline_dense_10k_bytes": Target(
        "< 2000000", lambda f: f["timeline_dense_10k_bytes"] < 2_000_000),
    "timeline_badday_10k_ms": Target("< 2000", lambda f: f["timeline_badday_10k_ms"] < 2000),
    "timeline_badday_10k_bytes": Target(
        "< 2000000", lambda f: f["timeline_badday_10k_bytes"] < 2_000_000),
}
FLEET_ROWS = ("fleet_100_resources_max_per_stack", "fleet_100_outputs", "fleet_100_synth_s",
              "fleet_fixed_cost_per_job_usd", "fleet_per_job_alarms_cost_per_job_usd")
TARGETS.update({
    "fleet_100_resources_max_per_stack": Target(
        "<= 500", lambda f: f["fleet_100_resources_max_per_stack"] <= 500),
    "fleet_100_outputs": Target("<= 200", lambda f: f["fleet_100_outputs"] <= 200),
    "fleet_fixed_cost_per_job_usd": Target(
        "<= 0.30", lambda f: f["fleet_fixed_cost_per_job_usd"] <= 0.30),
})
TIMELINE_TARGETS = ("timeline_10k_ms", "timeline_10k_bytes", "timeline_dense_10k_ms",
                    "timeline_dense_10k_bytes", "timeline_badday_10k_ms",
                    "timeline_badday_10k_bytes")
TIMELINE_ROWS = ("timeline_10k_ms", "timeline_10k_bytes", "timeline_10k_text_ms",
                 "timeline_10k_read_ms", "timeline_dense_10k_ms", "timeline_dense_10k_bytes",
                 "timeline_badday_10k_ms", "timeline_badday_10k_bytes",
                 "timeline_month_43k_ms", "timeline_month_43k_bytes")


# -- stages ----------------------------------------------------------------------------


def measure_requests(aws: LocalAWS, ticks: Ticks, runs: int, meta: dict[str, Any]) -> Figures:
    ddb = aws.client("dynamodb")
    table, idem_table = create_jobguard_table(ddb), create_idempotency_table(ddb)
    ours = request_counts.guarded_runs(table, ticks, runs, aws)
    skip = request_counts.guarded_skips(table, ticks, runs, aws)
    theirs = request_counts.powertools_runs(idem_table, ticks, runs, aws)
    if not (ours.units and skip.units and theirs.units):
        raise BenchError("a request-count figure was not metered")
    meta["operations"] = {
        "run": ours.operations, "skip": skip.operations, "powertools_run": theirs.operations,
    }
    meta["write_units"] = {
        "metered_invocations": runs,
        "run": ours.units.operations, "skip": skip.units.operations,
        "powertools_run": theirs.units.operations,
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
        "wcu_per_run": ours.units.per_call,
        "wcu_per_skip": skip.units.per_call,
        "powertools_wcu_per_run": theirs.units.per_call,
        "run_ms": ours.ms,
        "powertools_run_ms": theirs.ms,
        "run_cpu_ms": ours.cpu_ms,
        "powertools_run_cpu_ms": theirs.cpu_ms,
        "skip_cpu_ms": skip.cpu_ms,
    }


def measure_lease_rows(child: request_counts.LeaseRowsChild, stage_s: dict[str, float]
                       ) -> Figures:
    """The lease row after 10,000 skipped triggers, from the child started beside the
    counting stages (its own run time goes to ``stage_s["lease_rows"]``)."""
    found = child.result()
    if found["triggers"] != request_counts.LEASE_ROW_TRIGGERS:
        raise BenchError(f"the lease-row child decided {found['triggers']} triggers")
    stage_s["lease_rows"] = found["seconds"]
    return {"lease_row_bytes_10k_triggers": found["lease_row_bytes"]}


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
        "cold_start_cpu_ms": ours.cpu_ms,
        "powertools_cold_start_cpu_ms": theirs.cpu_ms,
        "cold_start_cpu_ratio": ours.cpu_ms / theirs.cpu_ms,
    }


def measure_item_requests(aws: LocalAWS, n: int, meta: dict[str, Any]) -> Figures:
    ddb = aws.client("dynamodb")
    say(f"work items: requests per item ({n} items per side)")
    return items.measure_requests(aws, lambda: create_jobguard_table(ddb),
                                  lambda: create_idempotency_table(ddb), n, meta)


def measure_recovery(aws: LocalAWS, meta: dict[str, Any]) -> Figures:
    ddb = aws.client("dynamodb")
    say("work items: recovery of 10 items, 5 of them already at the destination")
    return items.measure_recovery(aws, create_jobguard_table(ddb),
                                  create_idempotency_table(ddb), meta)


def measure_overhead(aws: LocalAWS, n: int, meta: dict[str, Any]) -> Figures:
    ddb = aws.client("dynamodb")
    say(f"work items: wall time of {n} destination calls ({items.DESTINATION_S * 1000:.0f} ms "
        f"each; {items.REQUEST_LATENCY_S * 1000:.0f} ms injected per DynamoDB request): bare, "
        f"guarded, powertools, once each (~{3 * n * items.DESTINATION_S:.0f} s and more)")
    return items.measure_overhead(aws, create_jobguard_table(ddb),
                                  create_idempotency_table(ddb), n, meta)


def measure_timeline(aws: LocalAWS) -> Figures:
    ddb = aws.client("dynamodb")
    return timeline_bench.measure(ddb, create_jobguard_table(ddb))


def measure_scale(sizes: tuple[int, int], per_run: int, meta: dict[str, Any]) -> Figures:
    if per_run % 100:
        raise SystemExit("--scale-per-run must be a multiple of the batch size (100)")
    say(f"scale: {sizes[0]} then {sizes[1]} items (batch 100, runs of {per_run}), each in a "
        "fresh child process against an emulator in another process")
    return items.measure_scale(sizes, per_run, meta, say)


def say(text: str) -> None:
    print(text, file=OUT, flush=True)


@contextlib.contextmanager
def discard_stdout() -> Any:
    """Send what the libraries print (JSON logs, EMF metrics) to /dev/null.

    One sink for the whole run, never closed: a logger created inside one stage keeps
    the stream it found, and a later stage must not find it closed."""
    with contextlib.redirect_stdout(_NULL):
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
        row("wcu_per_run", "powertools_wcu_per_run"),
        row("wcu_per_skip"),
        row("lease_row_bytes_10k_triggers"),
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
        row("cold_start_cpu_ms", "powertools_cold_start_cpu_ms"),
        row("import_ms", "powertools_import_ms"),
        row("first_invoke_ms", "powertools_first_invoke_ms"),
    ] + item_rows(f, row) + ([row(name) for name in TIMELINE_ROWS if name in f]
                              if "timeline_10k_ms" in f else []) + [
        row(name) for name in ("backlog_10k_runs", "backlog_10k_wall_s", *FLEET_ROWS)
        if name in f]


def item_rows(f: Figures, row: Callable[..., Row]) -> list[Row]:
    """The work-item figures that were measured (scale only with ``--scale``)."""
    lines: list[Row] = []
    if "requests_per_item_b1" in f:
        lines += [
            row("requests_per_item_b1", "powertools_requests_per_item"),
            row("claim_requests_per_item_b1", "powertools_requests_per_item"),
            row("requests_per_item_b100", "powertools_requests_per_item"),
            row("wcu_per_item_b1", "powertools_wcu_per_item"),
            row("wcu_per_item_b100", "powertools_wcu_per_item"),
            row("rcu_per_item_b1", "powertools_rcu_per_item"),
            row("rcu_per_item_b100", "powertools_rcu_per_item"),
        ]
    if "wcu_recovery_10" in f:
        lines += [
            row("wcu_recovery_10", "powertools_wcu_recovery_10"),
            row("rcu_recovery_10", "powertools_rcu_recovery_10"),
        ]
    if "overhead_ratio" in f:
        lines += [
            row("overhead_ratio", "powertools_overhead_ratio"),
            row("overhead_ratio_net", "powertools_overhead_ratio_net"),
            row("overhead_wire_s", "powertools_overhead_wire_s"),
            row("guarded_loop_s", "powertools_loop_s"),
            row("bare_loop_s"),
        ]
    if "peak_rss_ratio" in f:
        small = items.size_label(int(f["scale_items_small"]))
        large = items.size_label(int(f["scale_items_large"]))
        lines += [
            row("items_per_s"),
            row(f"items_per_s_{small}"),
            row(f"peak_rss_mb_{small}"),
            row(f"peak_rss_mb_{large}"),
            row("peak_rss_ratio"),
            row("rss_bytes_per_item"),
        ]
    return lines


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    text = f"{value:.3g}"
    if float(text) != value and "." not in text and "e" not in text:
        text = f"{value:.4g}"  # 2.003 must not print as a round 2
    return text


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
        "parameters": {"runs": args.runs, "workers": args.workers, "repeats": args.repeats,
                       "items": args.items, "quick": args.quick,
                       "scale_items": list(args.scale_items) if args.scale else None,
                       "scale_items_per_run": args.scale_per_run},
        "targets": {name: t.text for name, t in TARGETS.items()},
        "alternative": "aws-lambda-powertools @idempotent(DynamoDBPersistenceLayer, "
                       "event_key_jmespath='scheduled_at'); per work item: "
                       "@idempotent_function(data_keyword_argument='record', "
                       "event_key_jmespath='id')",
    }


# -- main ------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="measured invocations per "
                        "request-count figure (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=50, help="contending processes "
                        "(default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=11, help="cold start children per "
                        "side (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results file "
                        "(default: bench/results.json)")
    parser.add_argument("--items", type=int, default=None, help="work items per side for the "
                        "requests-per-item and overhead figures (default: 1000; 200 with "
                        "--quick)")
    parser.add_argument("--quick", action="store_true", help="development run: 200 items "
                        "(and scale sizes 500,5000 unless --scale-items is given)")
    parser.add_argument("--scale", action="store_true", help="also run the scale figure "
                        "(minutes: see bench/README.md)")
    parser.add_argument("--scale-items", type=_sizes, default=None, metavar="SMALL,LARGE",
                        help=f"item counts of the scale figure (default: "
                        f"{_DEFAULT_SCALE[0]},{_DEFAULT_SCALE[1]})")
    parser.add_argument("--scale-per-run", type=int, default=5_000, help="items per run "
                        "in the scale figure (default: %(default)s)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--faults-load-only", action="store_true", help="run only the load "
                        "under injected faults and update its section of the results file")
    parser.add_argument("--timeline-only", action="store_true", help="run only the "
                        "timeline figures (10,000 run records) and update them in the "
                        "results file")
    parser.add_argument("--faults-triggers", type=int, default=1000, help="triggers of the "
                        "load under faults (default: %(default)s)")
    parser.add_argument("--busy", type=int, default=0, metavar="N", help="with "
                        "--faults-load-only: N processes keep the CPU busy while the load "
                        "runs; its figures go to faults_load_busy")
    args = parser.parse_args(argv)
    if args.busy and not args.faults_load_only:
        parser.error("--busy goes with --faults-load-only")
    if args.items is None:
        args.items = 200 if args.quick else 1000
    if args.scale_items is None:
        args.scale_items = (500, 5_000) if args.quick else _DEFAULT_SCALE
    return args


_DEFAULT_SCALE = (1_000, 10_000)
"""~85 items/s on the emulator: about 2 minutes. 10,000,100,000 takes about 22."""


def _sizes(text: str) -> tuple[int, int]:
    try:
        small, large = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SMALL,LARGE item counts, got {text!r}") \
            from None
    if not 0 < small < large:
        raise argparse.ArgumentTypeError("expected 0 < SMALL < LARGE")
    return small, large


def measure_faults_load(triggers: int) -> dict[str, Any]:
    """1,000 triggers across 5 jobs, 8 threads, 10% of AWS calls faulted (the embedded
    emulator in this process): decisions per second, triggers decided, runs, items,
    destination calls per work id, invariant violations."""
    import logging

    from jobguard.local.load import run_load

    logging.getLogger("botocore").setLevel(logging.CRITICAL)
    started = time.perf_counter()
    summary = run_load(triggers=triggers, jobs=5, fault_rate=0.1, seed=1, threads=8)
    summary.pop("injected_by_site", None)
    summary["stage_s"] = round(time.perf_counter() - started, 1)
    return summary


def faults_load_targets(section: dict[str, Any]) -> dict[str, bool]:
    """At least 90 % of the load's triggers decided; no invariant violated (a work id
    whose destination call reached the emulator twice, under any policy, is one)."""
    return {"faults_load_decided": section["decided"] >= 0.9 * section["triggers"],
            "faults_load_violations": not section["violations"]}


@contextlib.contextmanager
def busy_cpu(processes: int) -> Iterator[None]:
    """``processes`` children spinning on the CPU for the block (a loaded machine)."""
    import subprocess

    children = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(processes)]
    try:
        yield
    finally:
        for child in children:
            child.kill()
            child.wait()


def _faults_load_section(args: argparse.Namespace) -> int:
    key = "faults_load_busy" if args.busy else "faults_load"
    with discard_stdout(), busy_cpu(args.busy):
        section = measure_faults_load(args.faults_triggers)
    if args.busy:
        section["busy_processes"] = args.busy
    record(key, {key: section}, args.output,
           {} if args.busy else {"targets_met": faults_load_targets(section)})
    say(f"{key}: {section['triggers']} triggers, {section['decided']} decided, "
        f"{section['malformed_planned']} malformed planned, {section['decisions_per_s']} "
        f"decisions/s, {section['runs_ran']} runs, {section['items']} items, "
        f"{section['faults_injected']} faults, work ids called twice by policy "
        f"{section['called_twice_by_policy']}, {len(section['violations'])} violations; "
        f"results in {args.output}")
    return 1 if section["violations"] or not all(faults_load_targets(section).values()) else 0


def _timeline_section(args: argparse.Namespace) -> int:
    with LocalAWS() as aws, discard_stdout():
        figures = measure_timeline(aws)
    met = {name: TARGETS[name].check(figures) for name in TIMELINE_TARGETS}
    record("timeline", figures, args.output, {"targets_met": met})
    say(table([r for r in rows_timeline(figures)]))
    say(f"results in {args.output}")
    return 0 if all(met[n] for n in TIMELINE_TARGETS) else 1


def rows_timeline(f: Figures) -> list[Row]:
    return [Row(name, f[name], None, TARGETS[name].text if name in TARGETS else "",
                TARGETS[name].check(f) if name in TARGETS else None)
            for name in TIMELINE_ROWS]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.faults_load_only:
        return _faults_load_section(args)
    if args.timeline_only:
        return _timeline_section(args)
    started = time.perf_counter()
    meta = base_meta(args)
    ticks = Ticks()
    figures: Figures = {}
    stage_s: dict[str, float] = meta.setdefault("stage_s", {})

    def stage(name: str, measure: Callable[[], Figures]) -> None:
        stage_started = time.perf_counter()
        figures.update(measure())
        stage_s[name] = round(time.perf_counter() - stage_started, 1)

    with LocalAWS() as aws, discard_stdout():
        os.environ.update(aws.env())
        for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            os.environ.pop(name, None)
        say(f"emulator at {aws.endpoint_url}; request counts ({args.runs} runs each)")
        stage("requests", lambda: measure_requests(aws, ticks, args.runs, meta))
        say(f"contention: {args.workers} processes per side")
        stage("contention", lambda: measure_contention(aws, ticks, args.workers, meta))
        say(f"cold start: {args.repeats} fresh interpreters per side")
        stage("cold_start", lambda: measure_cold_start(aws, ticks, args.repeats, meta))
        # The stages that only count (requests, units, bytes) run beside the 10,000
        # lease-row decisions, which take a child process and the other core; every
        # timed stage runs with that core free.
        say("work items and the lease row after 10,000 skipped triggers (a child process)")
        with request_counts.lease_rows_in_child() as rows_child:
            stage("item_requests", lambda: measure_item_requests(aws, args.items, meta))
            stage("recovery", lambda: measure_recovery(aws, meta))
            figures.update(measure_lease_rows(rows_child, stage_s))
        stage("overhead", lambda: measure_overhead(aws, args.items, meta))
        say("timeline: 10,000 run records of three jobs over a day")
        stage("timeline", lambda: measure_timeline(aws))
        stage("backlog", backlog_bench.measure)  # a chain drains 10,000 records (issue 30)
    say("fleet: 100 jobs synthesized as a JobFleet and with per-job alarms (1, 10, 100)")
    fleet_table = ""

    def fleet() -> Figures:
        nonlocal fleet_table
        from bench import fleet as fleet_bench

        found, fleet_table = fleet_bench.measure()
        return found

    with discard_stdout():
        stage("fleet", fleet)
    if args.scale:
        with discard_stdout():
            stage("scale", lambda: measure_scale(args.scale_items, args.scale_per_run, meta))
    say(f"load under faults: {args.faults_triggers} triggers, 5 jobs, 10% of calls faulted")
    with discard_stdout():
        stage_started = time.perf_counter()
        faults_load = measure_faults_load(args.faults_triggers)
        stage_s["faults_load"] = round(time.perf_counter() - stage_started, 1)
    say("a fleet of 100 jobs, a tick a second each, partitions throttled at 1/100 scale")
    with discard_stdout():
        stage_started = time.perf_counter()
        fleet_100 = fleet_load.measure()
        stage_s["fleet_100"] = round(time.perf_counter() - stage_started, 1)
    figures.update(fleet_load.figures(fleet_100))
    lines = rows(figures)
    meta["targets_met"] = {r.figure: r.ok for r in lines if r.ok is not None}
    meta["targets_met"].update(faults_load_targets(faults_load))
    meta["runtime_s"] = round(time.perf_counter() - started, 1)
    meta["measured"] = {"bench": provenance()}
    merged = merge_results(json.loads(args.output.read_text()) if args.output.exists() else {},
                           {**_rounded(figures), "faults_load": faults_load,
                            "fleet_100": fleet_100}, meta)
    args.output.write_text(json.dumps(merged, indent=2) + "\n")
    say("")
    say(table(lines))
    if "wcu_per_item_b100" in figures:
        from bench.cost import render

        say("\nDynamoDB a month at on-demand list price (us-east-1), batch 100 "
            "(docs/deploying.md):\n" + render(_rounded(figures)))
    if fleet_table:
        say("\nFixed monthly cost at list price (us-east-1), README:\n" + fleet_table)
    say(f"\ncold start: jobguard / powertools = {figures['cold_start_ratio']:.2f}; "
          f"total {meta['runtime_s']} s ("
          + ", ".join(f"{k} {v:.0f} s" for k, v in stage_s.items())
          + f"); results in {args.output}")
    if not meta["contention"]["verified_1_run_and_rest_skipped"]:
        return 1
    return 1 if args.strict and not all(meta["targets_met"].values()) else 0


def _rounded(figures: Figures) -> Figures:
    return {k: round(v, 4) for k, v in figures.items()}


if __name__ == "__main__":
    sys.exit(main())
