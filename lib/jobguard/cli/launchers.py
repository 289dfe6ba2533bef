"""The commands that hand over to a tool of their own: ``timeline`` (jobguard.timeline),
``drill`` (jobguard.drill) and ``local`` (jobguard.local.load), each given the options
checked and the stack or store it reads. Changes when what these commands check before
handing over changes."""

from __future__ import annotations

import argparse
import sys
import time

from .jobs import _job_name, _known_job
from .output import _counts, _out
from .refusal import CommandError, _nearest
from .stacks import DRILL_STACK, _deployment, _stores


def cmd_timeline(args: argparse.Namespace) -> int:
    """The jobs' runs on a time axis: a terminal view, or a page (``--html``/``--open``)."""
    import shutil

    from ..timeline.command import TimelineOutput, check_html_path, timeline_command
    from ..timeline.window import WindowError, window_from_options

    now_ms = int(time.time() * 1000)
    try:
        window = window_from_options(since=args.since, from_=args.from_time,
                                     to=args.to_time, now_ms=now_ms)
        html = check_html_path(args.html) if args.html is not None else None
    except (WindowError, TimelineOutput) as exc:
        raise CommandError(exc.field, str(exc).split(": ", 1)[1]) from None
    if args.width is not None and not 60 <= args.width <= 1000:
        raise CommandError("--width", "give 60 to 1000 columns")
    store, _ = _stores(args)
    jobs: list[str] = []
    for name in args.jobs:
        args.job = name
        job = _known_job(args, store)
        if job not in jobs:
            jobs.append(job)
    width = args.width or shutil.get_terminal_size((100, 24)).columns
    return timeline_command(store, jobs, window, now_ms=now_ms, html=html,
                            open_page=args.open, output=getattr(args, "output", None)
                            or "table", width=width, zoom=not args.whole_range)


def cmd_drill(args: argparse.Namespace) -> int:
    from ..drill.runner import main_drill

    # the deployment's jobs, their policies and whether they are drillable: its outputs
    deployment = _deployment(args, DRILL_STACK)
    if args.table is not None and args.table != deployment.table:
        raise CommandError("--table", f"drill uses stack {deployment.stack!r}'s own table "
                           f"({deployment.table}), the one its functions write; --table "
                           f"{args.table!r} is another: leave --table out")
    if args.job is not None:
        job = _job_name(args, field="--job")
        if job not in deployment.jobs:
            known = sorted(deployment.jobs)
            raise CommandError("--job", f"no job {job!r} in stack {deployment.stack!r} (its "
                               f"jobs: {', '.join(known) or 'none'}){_nearest(job, known)}")
    try:
        return main_drill(args, deployment=deployment)
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise CommandError(field, message or field) from None


def cmd_local(args: argparse.Namespace) -> int:
    """Load under injected faults on the embedded emulator, then the invariants."""
    from ..faults import parse_rules
    from ..local.load import run_load

    for flag, given in (("--stack", args.stack), ("--table", args.table)):
        if given is not None:
            raise CommandError(flag, "local runs its own embedded emulator and table: it "
                               "reads no stack and no table (leave it out)")
    if args.triggers <= 0 or args.jobs <= 0 or args.threads <= 0:
        raise CommandError("--triggers", "--triggers, --jobs and --threads must be >= 1")
    try:
        parse_rules(args.faults)
    except ValueError as exc:
        raise CommandError("--faults", str(exc).split(": ", 1)[1]) from None
    import contextlib
    import logging

    logging.getLogger("botocore").setLevel(logging.CRITICAL)
    with contextlib.redirect_stdout(sys.stderr):  # the runs' JSON logs and EMF metrics
        summary = run_load(triggers=args.triggers, jobs=args.jobs, fault_spec=args.faults,
                           seed=args.seed, threads=args.threads,
                           items_per_job=args.items_per_job)
    human = "\n".join([
        f"{summary['triggers']} triggers, {summary['jobs']} jobs, {summary['threads']} threads, "
        f"faults {summary['faults'] or 'none'}, seed {summary['seed']}",
        f"decisions/s {summary['decisions_per_s']}  ({summary['seconds']} s)",
        f"decisions {_counts(summary['decisions'])}",
        f"decided {summary['decided']} of {summary['triggers']} triggers "
        f"({summary['decided_share']:.1%})",
        f"not decided: malformed on purpose {summary['malformed_planned']} (refused "
        f"{summary['malformed_refused']}), failed after Lambda's retries "
        f"{summary['failed_after_retries']}, refused unplanned {summary['invalid_unplanned']}",
        f"runs {_counts(summary['runs'])}",
        f"items {_counts(summary['items'])}, AWS calls {_counts(summary['calls'])}, faults "
        f"injected {summary['faults_injected']} ({_counts(summary['faults_by_kind'])})",
        f"invariant checks {_counts(summary['checks'])}",
        f"destination calls {summary['destination_calls']}, work ids called more than once "
        f"by policy {_counts(summary['called_twice_by_policy'])}",
        f"violations {len(summary['violations'])}",
        *summary["violations"][:20],
    ])
    _out(args, summary, human)
    return 0 if not summary["violations"] else 1
