"""The commands that hand over to a tool of their own: ``timeline`` (jobguard.timeline)
and ``drill`` (jobguard.drill), each given the options checked and the stack or store
it reads. Changes when what these commands check before handing over changes."""

from __future__ import annotations

import argparse
import time

from .jobs import _job_name, _known_job
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
