"""``jobguard``: see and steer guarded jobs, against AWS or the local emulator.

Examples::

    jobguard status crm-sync
    jobguard runs crm-sync --last 20 --status failed
    jobguard items crm-sync --status uncertain
    jobguard recover crm-sync --from 000100 --to 000400            # plan
    jobguard recover crm-sync --from 000100 --to 000400 --execute --confirm TOKEN
    jobguard release crm-sync --force
    jobguard runbook crm-sync

Human tables by default, ``--json`` for scripts. AWS settings as the AWS CLI takes
them (``--profile``, ``--region``, ``AWS_*``); ``--endpoint-url`` (or
``AWS_ENDPOINT_URL``) points everything at the local emulator.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .callsites import SURFACE, Path, call_site

__all__ = ["main"]


class CommandError(Exception):
    """A refused command: printed as ``error: <field>: <message>``, exit status 2."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


# -- plumbing ------------------------------------------------------------------------

RECOVER_INVOKE = call_site(
    "cli.recover.invoke", "lambda", "Invoke", "_invoke",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=SURFACE,
    note="the operator sees the error naming `Invoke`, exit status 1; sent once (no SDK "
         "resend, the answer awaited 900 s): a lost answer says the recovery may have run, "
         "and running it again replays nothing twice (lease, completed items skipped)",
    paths=(Path.OPERATOR,),
)


_LAMBDA_MAX_S = 900  # the longest a Lambda function runs
_REGION = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")  # botocore's own rule
_RUN_ID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")  # jobguard.ids: 26 Crockford base32


def _session(args: argparse.Namespace) -> Any:
    import boto3
    from botocore.exceptions import ProfileNotFound

    if args.region is not None and not _REGION.fullmatch(args.region):
        raise CommandError("--region", f"{args.region!r} is not a region name (e.g. eu-west-1)")
    region = args.region
    if region is None and args.endpoint_url and not (
            os.environ.get("AWS_DEFAULT_REGION")):
        region = "us-east-1"  # a local endpoint (make demo's local AWS) needs no choice
    try:
        session = boto3.Session(profile_name=args.profile, region_name=region)
        if args.endpoint_url and args.profile is None and session.get_credentials() is None:
            # The local AWS accepts any key; an AWS endpoint would refuse these.
            session = boto3.Session(region_name=region, aws_access_key_id="test",
                                    aws_secret_access_key="test")
        return session
    except ProfileNotFound:
        raise CommandError("--profile", f"no AWS profile {args.profile!r} in this "
                           "machine's AWS config") from None


def _endpoint(args: argparse.Namespace) -> str | None:
    from urllib.parse import urlsplit

    field = "--endpoint-url" if args.endpoint_url else "AWS_ENDPOINT_URL"
    endpoint = args.endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
    if endpoint is not None:
        parts = urlsplit(endpoint)
        if (parts.scheme not in ("http", "https") or not parts.netloc
                or endpoint != endpoint.strip()):
            raise CommandError(field, f"{endpoint!r} is not an http(s) URL (e.g. "
                               "http://127.0.0.1:4566)")
    return endpoint


def _client(args: argparse.Namespace, service: str) -> Any:
    endpoint = _endpoint(args)
    return _session(args).client(service, endpoint_url=endpoint)


def _table(args: argparse.Namespace) -> str:
    from .environment import check_table_name
    from .errors import ConfigError

    field = "--table" if args.table is not None else "JOBGUARD_TABLE"
    table = args.table if args.table is not None else os.environ.get("JOBGUARD_TABLE")
    if not table:
        raise CommandError(field, "no table: pass --table or set JOBGUARD_TABLE")
    try:
        return check_table_name(table, field=field)
    except ConfigError as exc:
        raise CommandError(field, str(exc).split(": ", 1)[1]) from None


def _stores(args: argparse.Namespace) -> tuple[Any, Any]:
    from .dynamodb import DynamoJobStore
    from .dynamodb_items import DynamoItemStore

    ddb = _client(args, "dynamodb")
    table = _table(args)
    return DynamoJobStore(table, client=ddb), DynamoItemStore(table, client=ddb)


def _definitions(args: argparse.Namespace) -> dict[str, Any]:
    try:
        module = importlib.import_module(args.jobs_module)
    except ImportError as exc:
        raise CommandError("--jobs-module", f"cannot import {args.jobs_module!r}: {exc}") from exc
    jobs = getattr(module, "JOBS", None)
    if jobs is None:
        raise CommandError("--jobs-module", f"{args.jobs_module!r} has no JOBS")
    return {job.name: job for job in jobs}


def _job_name(args: argparse.Namespace, field: str = "JOB") -> str:
    from .config import validate_job_name
    from .errors import ConfigError

    try:
        return validate_job_name(args.job, field_name=field)
    except ConfigError as exc:
        raise CommandError(field, str(exc).split(": ", 1)[1]) from None


def _ms(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _table_text(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    if not rows:
        return "(none)"
    cells = [[str(row.get(c, "") if row.get(c) is not None else "-") for c in columns]
             for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def _out(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else human)


# -- commands ------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    from .errors import DamagedRowError

    store, _ = _stores(args)
    job = _job_name(args)
    try:
        lease = store.read_lease(job)
    except DamagedRowError as damage:
        data = {"job": job, "damaged": {"row": damage.row, "attribute": damage.attribute,
                                        "problem": str(damage), "repair": damage.repair},
                "lease_row": store.read_lease_raw(job)}
        _out(args, data, f"job {job}: the lease row is damaged: {damage.attribute} "
                         f"({damage}).\nrepair it with: {damage.repair}")
        return 1
    now_ms = int(time.time() * 1000)
    runs = [r.as_dict() for r in store.list_runs(job, limit=5)]
    data = {
        "job": job,
        "held": lease.run_id is not None,
        "holder_run_id": lease.run_id,
        "owner": lease.owner,
        "trigger_id": lease.trigger_id,
        "fence": lease.fence,
        "acquired_at": _ms(lease.acquired_at_ms),
        "expires_in_s": None if lease.expires_at_ms is None
        else round((lease.expires_at_ms - now_ms) / 1000, 1),
        "last_heartbeat": _ms(lease.heartbeat_at_ms),
        "pending_queued": lease.queued_n,
        "pending_follow_up": lease.follow_up,
        "paused": lease.paused_reason if lease.paused_at_ms else None,
        "last_runs": runs,
    }
    holder = (f"held by run {lease.run_id} (fence {lease.fence}, owner {lease.owner}), "
              f"acquired {data['acquired_at']}, expires in {data['expires_in_s']} s, last "
              f"heartbeat {data['last_heartbeat']}" if lease.run_id
              else f"free (fence {lease.fence}, last run {lease.last_run_id or '-'})")
    human = "\n".join([
        f"job {job}: {holder}",
        f"pending: {lease.queued_n} queued, follow-up {lease.follow_up or 'none'}; "
        f"paused: {data['paused'] or 'no'}",
        "",
        _table_text(runs, ("run_id", "status", "trigger_id", "fence", "duration_ms")),
    ])
    _out(args, data, human)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from .records import RunStatus

    job = _job_name(args)
    if args.last <= 0:
        raise CommandError("--last", "must be at least 1")
    statuses = [s.value for s in RunStatus]
    if args.status is not None and args.status not in statuses:
        raise CommandError("--status", f"{args.status!r} is not a run status; one of "
                           f"{', '.join(statuses)} (an unknown one would list nothing)")
    store, _ = _stores(args)
    records = store.list_runs(job, limit=max(args.last * 5, 50) if args.status else args.last)
    if args.status:
        records = [r for r in records if r.status.value == args.status]
    rows = [r.as_dict() for r in records[: args.last]]
    for row in rows:
        row["started"] = _ms(row.get("started_at_ms"))
    _out(args, rows, _table_text(rows, ("run_id", "started", "status", "decision", "trigger_id",
                                        "fence", "holder_run_id", "duration_ms")))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    if not _RUN_ID.fullmatch(args.run_id):
        raise CommandError("RUN_ID", f"{args.run_id!r} is not a run id (26 characters, e.g. "
                           "01M8K455D5SMBCC61XNCBKW1C4)")
    if args.job is not None:
        args.job = _job_name(args, field="--job")
    store, _ = _stores(args)
    jobs = [args.job] if args.job else list(_definitions(args))
    for job in jobs:
        record = store.get_run(job, args.run_id)
        if record is not None:
            data = record.as_dict()
            human = "\n".join(f"{k:>16}: {v}" for k, v in data.items())
            _out(args, data, human)
            return 0
    raise CommandError("RUN_ID", f"no run {args.run_id!r} in jobs {', '.join(jobs) or '(none)'}")


def cmd_items(args: argparse.Namespace) -> int:
    from .workitems import ItemState

    _, items = _stores(args)
    job = _job_name(args)
    states = [ItemState(args.status)] if args.status else None
    rows = [{**r.__dict__, "state": r.state.value,
             "updated": _ms(r.updated_at_ms)} for r in items.unresolved(job, states=states)]
    _out(args, rows, _table_text(rows, ("work_id", "state", "run_id", "fence", "attempts",
                                        "updated", "last_error")))
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    store, _ = _stores(args)
    job = _job_name(args)
    if not args.reason or not args.reason.strip():
        raise CommandError("--reason", "say why (it is shown on every paused trigger)")
    store.pause(job, reason=args.reason.strip(), now_ms=int(time.time() * 1000))
    _out(args, {"job": job, "paused": args.reason}, f"job {job} paused: {args.reason}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    store, _ = _stores(args)
    job = _job_name(args)
    store.resume(job)
    _out(args, {"job": job, "paused": None}, f"job {job} resumed")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    store, _ = _stores(args)
    job = _job_name(args)
    if not args.force:
        raise CommandError("--force", "releasing a lease by hand needs --force")
    from .errors import DamagedRowError

    who = os.environ.get("USER") or "operator"
    try:
        lease = store.read_lease(job)
    except DamagedRowError as damage:
        print(f"job {job}: the lease row is damaged ({damage.attribute}); rewriting it",
              file=sys.stderr)
        if not args.yes:
            answer = input("repair it (holder cleared, fence moved past every fence issued)? "
                           "[y/N] ") if sys.stdin.isatty() else ""
            if answer.strip().lower() not in ("y", "yes"):
                raise CommandError("--yes", "not confirmed (answer y, or pass --yes)") from None
        fence = store.repair(job, now_ms=int(time.time() * 1000), by=who)
        _out(args, {"job": job, "repaired": True, "fence": fence},
             f"repaired; fence is now {fence}")
        return 0
    if lease.run_id is None:
        _out(args, {"job": job, "released": False, "reason": "free"}, f"job {job} is not held")
        return 0
    print(f"job {job} is held by run {lease.run_id} (fence {lease.fence}, owner "
          f"{lease.owner}), last heartbeat {_ms(lease.heartbeat_at_ms)}", file=sys.stderr)
    if not args.yes:
        answer = input("release it and bump the fence so that run can write nothing more? "
                       "[y/N] ") if sys.stdin.isatty() else ""
        if answer.strip().lower() not in ("y", "yes"):
            raise CommandError("--yes", "not confirmed (answer y, or pass --yes)")
    released = store.force_release(job, holder_run_id=lease.run_id, fence=lease.fence,
                                   now_ms=int(time.time() * 1000), by=who,
                                   reason=args.reason)
    if not released:
        raise CommandError("JOB", "the lease changed hands meanwhile; look again")
    data = {"job": job, "released": True, "old_run_id": lease.run_id,
            "fence": lease.fence + 1}
    _out(args, data, f"released; fence is now {lease.fence + 1}: run {lease.run_id} can "
                     "write nothing more")
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    store, _ = _stores(args)
    job = _job_name(args)
    if not args.yes:
        answer = input(f"rewrite the lease row of {job} (a live holder loses its lease)? "
                       "[y/N] ") if sys.stdin.isatty() else ""
        if answer.strip().lower() not in ("y", "yes"):
            raise CommandError("--yes", "not confirmed (answer y, or pass --yes)")
    fence = store.repair(job, now_ms=int(time.time() * 1000),
                         by=os.environ.get("USER") or "operator")
    lease = store.read_lease(job)
    _out(args, {"job": job, "repaired": True, "fence": fence, "queued": lease.queued_n},
         f"repaired; fence is now {fence}, {lease.queued_n} queued")
    return 0


def cmd_runbook(args: argparse.Namespace) -> int:
    from .runbook import render

    definitions = _definitions(args)
    job = _job_name(args)
    if job not in definitions:
        raise CommandError("JOB", f"{job!r} is not defined in {args.jobs_module} "
                           f"({', '.join(definitions)})")
    text = render(definitions[job])
    _out(args, {"job": job, "runbook": text}, text)
    return 0


def cmd_recover(args: argparse.Namespace) -> int:
    request: dict[str, Any] = {"job": _job_name(args), "mode": args.mode,
                               "dry_run": not args.execute, "max_items": args.max_items,
                               "requested_by": args.requested_by or os.environ.get("USER")}
    by_time = args.from_time is not None or args.to_time is not None
    if by_time and (args.from_cursor is not None or args.to_cursor is not None):
        raise CommandError("--from", "give --from/--to or --from-time/--to-time, not both")
    if by_time:
        request.update(time_from=args.from_time, time_to=args.to_time)
    else:
        request.update(cursor_from=args.from_cursor, cursor_to=args.to_cursor)
    if args.confirm is not None:
        if not args.execute:
            raise CommandError("--confirm", "is only used with --execute (a plan needs no "
                               "token)")
        request["confirm"] = args.confirm
    request = {k: v for k, v in request.items() if v is not None}
    _check_request(request)  # refused here, naming the option, before anything is invoked
    if args.direct:
        answer = _recover_direct(args, request)
    else:
        if not args.function_name:
            raise CommandError("--function-name", "name the deployed recovery function, or "
                               "pass --direct to run it in this process")
        answer = _invoke(args, request)
    if answer.get("result") in ("refused", "busy"):
        raise CommandError(answer.get("field") or "request", answer.get("error", "refused"))
    _out(args, answer, _recovery_text(answer))
    return 0


def _invoke(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    """The deployed recovery function's answer; its own failure is an error, not an answer."""
    from botocore.config import Config
    from botocore.exceptions import ReadTimeoutError

    from .errors import JobGuardError

    # One attempt, and an answer awaited as long as a function may run: an SDK resend
    # would start a second recovery beside the first (which then finds its lease busy).
    lambda_ = _session(args).client("lambda", endpoint_url=_endpoint(args), config=Config(
        read_timeout=_LAMBDA_MAX_S, retries={"total_max_attempts": 1}))
    try:
        response = lambda_.invoke(
            FunctionName=args.function_name, Payload=json.dumps(request).encode())
    except ReadTimeoutError as exc:
        raise JobGuardError(f"recover: no answer from {args.function_name} ({exc}); the "
                            f"recovery may have run: look at `jobguard runs {request['job']}` "
                            "before invoking it again") from exc
    payload = response["Payload"].read() or b"{}"
    if response.get("FunctionError"):
        said = payload[:500].decode(errors="replace")
        raise JobGuardError(f"recover: function {args.function_name} failed "
                            f"({response['FunctionError']}): {said}")
    answer: dict[str, Any] = json.loads(payload)
    return answer


_OPTION_OF = {"job": "JOB", "cursor_from": "--from", "cursor_to": "--to",
              "time_from": "--from-time", "time_to": "--to-time", "mode": "--mode",
              "max_items": "--max-items", "confirm": "--confirm",
              "requested_by": "--requested-by"}


def _check_request(request: dict[str, Any]) -> None:
    from .errors import InvalidRequestError
    from .recovery import parse_request

    try:
        parse_request(request)
    except InvalidRequestError as exc:
        raise CommandError(_OPTION_OF.get(exc.field, exc.field),
                           str(exc).split(": ", 1)[1]) from None


def _recover_direct(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    from . import hooks, registry
    from .errors import InvalidRequestError, LeaseBusyError
    from .recovery import recover

    if args.endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    if args.table:
        os.environ["JOBGUARD_TABLE"] = args.table
    if args.modules:
        os.environ["JOBGUARD_RECOVERY_MODULES"] = args.modules
    registry.load_from_environment()
    done = {"n": 0}

    def progress(**ctx: Any) -> None:
        done["n"] += 1
        if sys.stderr.isatty():
            print(f"\rreplayed {done['n']} items", end="", file=sys.stderr, flush=True)

    import contextlib

    try:
        # The library's JSON logs and EMF metrics go to stderr: stdout is the answer.
        with hooks.on("after_process", progress), contextlib.redirect_stdout(sys.stderr):
            answer = recover(request)
    except InvalidRequestError as exc:
        raise CommandError(exc.field, str(exc).split(": ", 1)[1]) from None
    except LeaseBusyError as exc:
        raise CommandError("JOB", str(exc)) from None
    finally:
        if done["n"] and sys.stderr.isatty():
            print(file=sys.stderr)
    return answer


def _recovery_text(answer: dict[str, Any]) -> str:
    plan = answer.get("plan", {})
    lines = [f"recovery of {answer.get('job')} {answer.get('range')} mode {answer.get('mode')}",
             f"plan: {plan.get('selected', 0)} selected, {plan.get('completed', 0)} completed, "
             f"{plan.get('failed', 0)} failed, {plan.get('uncertain', 0)} uncertain, "
             f"{plan.get('never_attempted', 0)} never attempted -> {plan.get('to_replay', 0)} "
             f"to replay ({plan.get('skipped_by_mode', 0)} skipped by mode)"]
    if plan.get("sample"):
        lines.append("sample: " + ", ".join(plan["sample"]))
    if answer.get("result") == "planned":
        lines.append(f"token: {plan.get('token')}"
                     + ("  (required: pass --execute --confirm TOKEN)"
                        if answer.get("needs_confirmation") else "  (pass --execute to run)"))
    else:
        summary = answer.get("summary", {})
        lines.append("done: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    return "\n".join(lines)


def cmd_local(args: argparse.Namespace) -> int:
    """Load under injected faults on the embedded emulator, then the invariants."""
    from .faults import parse_rules
    from .local.load import run_load

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
        f"faults {summary['faults']!r} seed {summary['seed']}",
        f"decisions/s {summary['decisions_per_s']}  ({summary['seconds']} s)",
        f"decisions {summary['decisions']}",
        f"runs {summary['runs']}",
        f"items {summary['items']}, AWS calls {summary['calls']}, faults injected "
        f"{summary['faults_injected']} {summary['faults_by_kind']}",
        f"invariant checks {summary['checks']}",
        f"violations {len(summary['violations'])}",
        *summary["violations"][:20],
    ])
    _out(args, summary, human)
    return 0 if not summary["violations"] else 1


# -- parser ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobguard", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--endpoint-url", help="AWS endpoint (the local emulator)")
    parser.add_argument("--profile", help="AWS profile, as the AWS CLI takes it")
    parser.add_argument("--region", help="AWS region")
    parser.add_argument("--table", help="jobguard table (default: JOBGUARD_TABLE)")
    parser.add_argument("--jobs-module", default=os.environ.get("JOBGUARD_JOBS_MODULE",
                                                                "handlers.jobs"),
                        help="module whose JOBS lists the job definitions")
    sub = parser.add_subparsers(dest="command", required=True)

    def job_command(name: str, help_text: str) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help_text)
        command.add_argument("job", metavar="JOB")
        return command

    job_command("status", "lease holder, pending triggers, last runs").set_defaults(
        run=cmd_status)
    runs = job_command("runs", "the run log, newest first")
    runs.add_argument("--last", type=int, default=20)
    runs.add_argument("--status")
    runs.set_defaults(run=cmd_runs)
    one = sub.add_parser("run", help="one run with its counts and range")
    one.add_argument("run_id", metavar="RUN_ID")
    one.add_argument("--job")
    one.set_defaults(run=cmd_run)
    items = job_command("items", "unresolved work items")
    items.add_argument("--status", choices=["uncertain", "failed", "claimed"])
    items.set_defaults(run=cmd_items)
    pause = job_command("pause", "record every trigger as paused")
    pause.add_argument("--reason", required=True)
    pause.set_defaults(run=cmd_pause)
    job_command("resume", "undo pause").set_defaults(run=cmd_resume)
    release = job_command("release", "free a stuck lease and bump the fence")
    release.add_argument("--force", action="store_true")
    release.add_argument("--yes", action="store_true", help="do not ask")
    release.add_argument("--reason", help="why (written on the released run's record)")
    release.set_defaults(run=cmd_release)
    repair = job_command("repair", "rewrite the lease row: holder cleared, fence past every "
                         "fence issued, queued count recounted (a damaged row, or a count "
                         "left by a dead-lettered trigger)")
    repair.add_argument("--yes", action="store_true", help="do not ask")
    repair.set_defaults(run=cmd_repair)
    job_command("runbook", "the job's runbook, from its definition").set_defaults(
        run=cmd_runbook)
    recover = job_command("recover", "plan (default) or execute a bounded recovery")
    recover.add_argument("--from", dest="from_cursor")
    recover.add_argument("--to", dest="to_cursor")
    recover.add_argument("--from-time", dest="from_time")
    recover.add_argument("--to-time", dest="to_time")
    recover.add_argument("--mode", default="unfinished")
    recover.add_argument("--max-items", type=int, default=1000)
    recover.add_argument("--execute", action="store_true")
    recover.add_argument("--confirm")
    recover.add_argument("--requested-by")
    recover.add_argument("--function-name", help="the deployed recovery function")
    recover.add_argument("--direct", action="store_true", help="run in this process")
    recover.add_argument("--modules", help="job modules to load with --direct")
    recover.set_defaults(run=cmd_recover)
    local = sub.add_parser("local", help="load under injected faults on the embedded emulator")
    local.add_argument("--faults", default="any=0.1",
                       help="KIND[:OPERATION][@SITE][#N|=P],... (default: any=0.1)")
    local.add_argument("--seed", type=int, default=1)
    local.add_argument("--triggers", type=int, default=1000)
    local.add_argument("--jobs", type=int, default=5)
    local.add_argument("--threads", type=int, default=8)
    local.add_argument("--items-per-job", type=int, default=40)
    local.set_defaults(run=cmd_local)
    drill = sub.add_parser(
        "drill", help="run the failure drills against a stack deployed with "
        "-c jobguard:drills=true (locally: --endpoint-url; in AWS: --profile/--region)")
    drill.add_argument("--stack", default="JobGuard-drills",
                       help="the drills deployment's CloudFormation stack (JobGuard-drills; "
                            "locally JobGuard-local)")
    drill.add_argument("--only", action="append", metavar="NAME",
                       help="run only this drill (repeatable)")
    drill.add_argument("--job", help="drill this job (any deployed guarded job: the "
                       "library installs its switches) instead of the examples")
    drill.set_defaults(run=cmd_drill)
    return parser


def cmd_drill(args: argparse.Namespace) -> int:
    from .drill.runner import main_drill

    try:
        return main_drill(args)
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise CommandError(field, message or field) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the project's handlers/ and job modules
    try:
        code: int = args.run(args)
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a command's failure, said plainly
        from botocore.exceptions import BotoCoreError, ClientError

        from .errors import JobGuardError

        if isinstance(exc, ClientError | BotoCoreError):
            # AWS failed (throttled, 5xx, unreachable): say which call, change nothing.
            print(f"error: {args.command}: AWS call failed: {exc}", file=sys.stderr)
            return 1
        if not isinstance(exc, JobGuardError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
