"""``jobguard``: see and steer guarded jobs, against AWS or the local emulator.

Examples::

    jobguard status crm-sync
    jobguard runs crm-sync --last 20 --status failed
    jobguard items crm-sync --status uncertain
    jobguard recover crm-sync --from 000100 --to 000400            # plan
    jobguard recover crm-sync --from 000100 --to 000400 --execute --confirm TOKEN
    jobguard release crm-sync --force
    jobguard runbook crm-sync
    jobguard timeline crm-sync report-export --since 6h --html timeline.html

Human tables by default; ``--output json`` (or ``--json``) for scripts, ``--output text``
for tab-separated lines. Global options go before or after the command, as the AWS CLI
takes them (``--profile``, ``--region``, ``AWS_*``); ``--endpoint-url`` (or
``AWS_ENDPOINT_URL``) points everything at the local emulator. Every time is UTC, in
ISO 8601 with its ``Z``.

Every command finds what it reads from the stack built with jobguard.cdk that ``--stack``
(or ``JOBGUARD_STACK``) names: its outputs, read once per command, name the table, the
jobs as deployed and their functions, the recovery function. The table is ``--table``,
else ``--stack``'s, else ``JOBGUARD_TABLE``, else ``JOBGUARD_STACK``'s. ``recover`` and
``drill`` default to the stacks ``JobGuard`` and ``JobGuard-drills``.

Without a stack, ``runbook`` reads the job definitions (and any command, to check a job
name the table does not know) from the module ``--jobs-module`` or
``JOBGUARD_JOBS_MODULE`` names, found in the installed packages first, then in the
working folder. Nothing is imported from the working folder unless named.

The package, one reason to change per module: this one is the command line itself (every
command, its options and help texts, as ``jobguard --help`` lists them and
``tests/unit/test_api_pin.py`` pins them) and :func:`main`; ``parsing`` reads it,
``endings`` turns a command's end into its exit status; the commands are in ``history``
(status, runs, run, items), ``operator`` (pause, resume, release, repair, resolve),
``recover``, ``runbook`` and ``launchers`` (timeline, drill, local); what they
share is in ``stacks`` (stack, table, stores), ``jobs`` (which job), ``aws`` (clients),
``output``, ``prompts`` and ``refusal``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from .._safe_text import safe_streams
from .endings import _crash, run_command
from .history import _MAX_LAST, RUN_KEYS, cmd_items, cmd_run, cmd_runs, cmd_status
from .launchers import cmd_drill, cmd_local, cmd_timeline
from .operator import cmd_pause, cmd_release, cmd_repair, cmd_resolve, cmd_resume
from .parsing import _global_options, _Parser, _version
from .recover import cmd_recover
from .refusal import CommandError as CommandError
from .runbook import cmd_runbook
from .stacks import DRILL_STACK, RECOVER_STACK, STACK_ENV

# imported from here by the tests (``from jobguard.cli import NO_TABLE``, ``cli._stack``)
from .stacks import NO_TABLE as NO_TABLE
from .stacks import _stack as _stack

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="jobguard", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"jobguard {_version()}",
                        help="print the version and exit")
    _global_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, *, job: bool = True) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if job:
            cmd.add_argument("job", metavar="JOB", help="the job's name (e.g. crm-sync)")
        _global_options(cmd, top=False)
        return cmd

    command("status", "lease holder, pending triggers, last runs").set_defaults(
        run=cmd_status)
    runs = command("runs", "the run log, newest first")
    runs.epilog = ("--output json: a list whose every entry has the same keys, in this "
                   f"order, null where a run has none: {', '.join(RUN_KEYS)}. extra: what "
                   "the run recorded beside them (item counts, cursor range, a recovery's "
                   "figures; {} when nothing); damaged: null, or {sk, problem} for a row "
                   "that is not a readable run record (its other keys null).")
    runs.add_argument("--last", type=int, default=20, help=f"how many runs, 1 to {_MAX_LAST:,} "
                      "(default 20)")
    runs.add_argument("--status", help="only runs with this status (e.g. failed)")
    runs.set_defaults(run=cmd_runs)
    one = command("run", "one run with its counts and range", job=False)
    one.add_argument("run_id", metavar="RUN_ID", help="the run id (26 characters)")
    one.add_argument("--job", help="look only in this job (default: every job in the "
                     "table, then those --jobs-module defines)")
    one.set_defaults(run=cmd_run)
    items = command("items", "unresolved work items")
    items.add_argument("--status", choices=["uncertain", "failed", "claimed", "rejected"],
                       help="only items in this state (rejected: records no work id "
                            "could be made for, listed only when asked)")
    items.set_defaults(run=cmd_items)
    pause = command("pause", "record every trigger as paused. A job already paused "
                    "keeps its pause: the same reason again changes nothing (exit 0), "
                    "another is refused (exit 1) unless --replace")
    pause.add_argument("--reason", required=True,
                       help="why (shown on every paused trigger's record)")
    pause.add_argument("--replace", action="store_true",
                       help="a job already paused: replace its reason (its pause time is "
                            "kept)")
    pause.set_defaults(run=cmd_pause)
    command("resume", "undo pause (a job not paused: said, nothing written, exit 0)"
            ).set_defaults(run=cmd_resume)
    release = command("release", "free a stuck lease and bump the fence")
    release.add_argument("--force", action="store_true",
                         help="required: the holder can write nothing more afterwards")
    release.add_argument("--yes", action="store_true", help="do not ask")
    release.add_argument("--reason", help="why (written on the released run's record)")
    release.set_defaults(run=cmd_release)
    repair = command("repair", "rewrite the lease row: holder cleared, fence past every "
                     "fence issued, queued count recounted (a damaged row, or a count "
                     "left by a dead-lettered trigger)")
    repair.add_argument("--yes", action="store_true", help="do not ask")
    repair.add_argument("--force", action="store_true",
                        help="rewrite a healthy row too (without it, a readable row whose "
                             "queued count is right is left as it is: said, exit 0)")
    repair.set_defaults(run=cmd_repair)
    command("runbook", "the job's runbook, from its definition").set_defaults(
        run=cmd_runbook)
    recover = command("recover", "plan (default) or execute a bounded recovery")
    recover.add_argument("--from", dest="from_cursor",
                         help="replay records after this cursor (as a checkpoint means it)")
    recover.add_argument("--to", dest="to_cursor",
                         help="... up to and including this cursor")
    recover.add_argument("--from-time", dest="from_time",
                         help="or a time range: from this ISO 8601 time with its timezone")
    recover.add_argument("--to-time", dest="to_time",
                         help="... to this one (at most 7 days after --from-time)")
    recover.add_argument("--mode", default="unfinished",
                         help="unfinished (default: never attempted, failed, uncertain), "
                              "failed, or uncertain; completed items are never replayed")
    recover.add_argument("--max-items", type=int, default=1000,
                         help="refuse a range holding more records (default 1000)")
    recover.add_argument("--execute", action="store_true",
                         help="execute the plan, through the recovery function's "
                              "'execute' alias (default: plan only, a dry run)")
    recover.add_argument("--confirm", metavar="TOKEN",
                         help="the plan's token (required above the confirmation "
                              "threshold; always compared when given)")
    recover.add_argument("--requested-by",
                         help="who asks (written on the recovery's run record; default "
                              "your login name)")
    recover.add_argument("--function-name",
                         help="the deployed recovery function (default: the stack's "
                              "RecoveryFunctionName output; the stack: --stack, else "
                              f"{STACK_ENV}, else {RECOVER_STACK})")
    recover.add_argument("--direct", action="store_true",
                         help="run the recovery in this process instead of the Lambda, "
                              "with your own credentials on the table and the job's data "
                              "(no execute permission is checked: yours are)")
    recover.add_argument("--modules", help="job modules to load with --direct (default: "
                         "JOBGUARD_RECOVERY_MODULES)")
    recover.set_defaults(run=cmd_recover)
    timeline = command("timeline", "the jobs' runs, decisions and takeovers on a time axis: "
                       "a terminal view, or a self-contained HTML page", job=False)
    timeline.add_argument("jobs", nargs="+", metavar="JOB",
                          help="one or more jobs (they share the axis)")
    timeline.add_argument("--since", help="the last DURATION, e.g. 90m, 24h, 7d (default "
                          "24h)")
    timeline.add_argument("--from", dest="from_time",
                          help="or a range: from this ISO 8601 time with its timezone")
    timeline.add_argument("--to", dest="to_time", help="... to this one (at most 31 days)")
    timeline.add_argument("--html", metavar="FILE",
                          help="write the page to FILE (inline SVG and CSS: no network): a "
                               "regular file, new (permissions as your umask gives) or "
                               "replaced whole (keeping its permissions); a symlink, FIFO or "
                               "device is refused, never written through")
    timeline.add_argument("--open", action="store_true",
                          help="open the page in a browser (written to --html, else to a "
                               "new file in the temporary folder that only you can read)")
    timeline.add_argument("--width", type=int,
                          help="columns of the terminal view (default: the terminal's)")
    timeline.add_argument("--whole-range", action="store_true",
                          help="draw the chart over the whole range asked (by default, when "
                               "the runs fill less than a third of it, it opens on where "
                               "they are and says so)")
    timeline.set_defaults(run=cmd_timeline)
    resolve = command("resolve", "record what you found at the destination for uncertain "
                      "or failed items (a handler without reconcile=): under the job's "
                      "lease, who and why on its run record")
    resolve.add_argument("work_ids", metavar="WORK_ID", nargs="+",
                         help="the work item(s), as `jobguard items` lists them")
    resolve.add_argument("--found", metavar="DESTINATION_ID",
                         help="the destination holds it, under this id (one WORK_ID): "
                              "completed")
    resolve.add_argument("--not-found", action="store_true",
                         help="the destination does not hold it: a retryable failure, "
                              "redone by the next run (or a recovery)")
    resolve.add_argument("--reason", required=True, help="why (written on the run record)")
    resolve.add_argument("--requested-by",
                         help="who (written on the run record; default your login name)")
    resolve.add_argument("--wait", type=int, default=60,
                         help="seconds to wait for a running run's lease (default 60)")
    resolve.set_defaults(run=cmd_resolve)
    local = command("local", "load under injected faults on the embedded emulator", job=False)
    local.add_argument("--faults", default="any=0.1",
                       help="KIND[:OPERATION][@SITE][#N|=P],... (default: any=0.1)")
    local.add_argument("--seed", type=int, default=1, help="the faults' seed (default 1)")
    local.add_argument("--triggers", type=int, default=1000,
                       help="how many triggers (default 1000)")
    local.add_argument("--jobs", type=int, default=5, help="how many jobs (default 5)")
    local.add_argument("--threads", type=int, default=8,
                       help="concurrent workers (default 8)")
    local.add_argument("--items-per-job", type=int, default=40,
                       help="work items per job (default 40)")
    local.set_defaults(run=cmd_local)
    drill = command(
        "drill", "run the failure drills against a drillable stack (LambdaBundle(..., "
        "drills=True), its jobs read from its "
        f"outputs: --stack, else {STACK_ENV}, else {DRILL_STACK} (locally: --endpoint-url; "
        "in AWS: --profile/--region)", job=False)
    drill.add_argument("--only", action="append", metavar="NAME",
                       help="run only this drill (repeatable)")
    drill.add_argument("--job", help="drill this job of the stack (any guarded job of a "
                       "drillable deployment: the library installs its switches) instead of "
                       "jobguard's own examples (crm-sync, report-export, when the stack has them)")
    drill.add_argument("--html", metavar="FILE", help="also write one page with every "
                       "drill's checks and timeline to FILE (a regular file, checked before "
                       "the drills run; a symlink, FIFO or device is refused)")
    drill.set_defaults(run=cmd_drill)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``jobguard`` command; its exit status. Everything it prints, on stdout and
    stderr, reaches the terminal through :func:`jobguard._safe_text.safe_streams`."""
    with safe_streams():
        try:
            return _main(argv)
        except Exception as exc:  # noqa: BLE001 - a crash, said here (exit status 1)
            _crash(exc)
            return 1


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # A jobs module is imported only when named, and the working folder is never put on
    # sys.path otherwise (_project_folder_last_on_path): see README "The operator's folder".
    args.jobs_module_field = ("--jobs-module" if args.jobs_module
                              else "JOBGUARD_JOBS_MODULE")
    args.jobs_module = args.jobs_module or os.environ.get("JOBGUARD_JOBS_MODULE") or None
    args.json = args.output == "json"
    return run_command(args)
