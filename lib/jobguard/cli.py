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
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, NoReturn

from ._safe_text import safe_streams, safe_text
from .callsites import RETRY, SURFACE, Path, call_site

__all__ = ["main"]


class CommandError(Exception):
    """A refused command: printed as ``error: <field>: <message>``, exit status 2 (1: the
    command was understood, and the table's state refuses it; nothing written)."""

    def __init__(self, field: str, message: str, *, code: int = 2) -> None:
        self.field = field
        self.code = code
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

KNOWN_JOBS_SCAN = call_site(
    "cli.known_jobs.scan", "dynamodb", "Scan", "_jobs_in_table",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read, only for a job name neither defined nor on the table: the command "
         "fails naming the call, nothing written",
    paths=(Path.OPERATOR,),
)


_MAX_LAST = 10_000  # runs --last: the most runs a listing reads (pages of the run log)
_LAMBDA_MAX_S = 900  # the longest a Lambda function runs
_REGION = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")  # botocore's own rule
_RUN_ID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")  # jobguard.ids: 26 Crockford base32


def _session(args: argparse.Namespace) -> Any:
    import boto3
    from botocore.exceptions import ProfileNotFound

    if args.region is not None and not _REGION.fullmatch(args.region):
        raise CommandError("--region", f"{args.region!r} is not a region name (e.g. eu-west-1)")
    # AWS_REGION first, as the AWS CLI v2 reads it (botocore reads only
    # AWS_DEFAULT_REGION, then the profile's)
    region = args.region or os.environ.get("AWS_REGION") or None
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
        try:
            parts = urlsplit(endpoint)
            _ = parts.port  # a port out of range, a broken IPv6 host: ValueError
        except ValueError as exc:
            raise CommandError(field, f"{endpoint!r} is not a URL ({exc})") from None
        if (parts.scheme not in ("http", "https") or not parts.netloc
                or endpoint != endpoint.strip()):
            raise CommandError(field, f"{endpoint!r} is not an http(s) URL (e.g. "
                               "http://127.0.0.1:4566)")
    return endpoint


def _client(args: argparse.Namespace, service: str) -> Any:
    from botocore.config import Config

    endpoint = _endpoint(args)
    # Standard retry mode, as the AWS CLI v2 uses by default (boto3's own default is
    # "legacy": up to 10 attempts for DynamoDB, half a minute of backoff before an
    # operator sees a throttled call's error).
    return _session(args).client(service, endpoint_url=endpoint,
                                 config=Config(retries={"mode": "standard"}))


NO_TABLE = ("no table: pass --stack STACK or --table TABLE (or set JOBGUARD_STACK / "
            "JOBGUARD_TABLE)")


def _table(args: argparse.Namespace) -> str:
    """The command's table: ``--table``, else the table of the stack ``--stack`` names,
    else ``JOBGUARD_TABLE``, else the table of the stack ``JOBGUARD_STACK`` names (flags
    before variables, a table before a stack). What named it is kept for errors."""
    from .environment import check_table_name
    from .errors import ConfigError

    named = _named_stack(args)
    from_stack = None
    if args.table is not None:
        table, field = args.table, "--table"
    elif named is not None and named[1] == "--stack":
        from_stack, table = named, _deployment(args).table
    elif os.environ.get("JOBGUARD_TABLE"):  # set but empty: unset, as ${VAR:-}
        table, field = os.environ["JOBGUARD_TABLE"], "JOBGUARD_TABLE"
        if named is not None:  # both variables set: a leftover export must not win silently
            try:
                theirs = _deployment(args).table
            except CommandError:  # no such stack: the command says so where it reads it
                theirs = table
            if theirs != table:
                raise CommandError("JOBGUARD_TABLE", f"{table!r}, but JOBGUARD_STACK "
                                   f"{named[0]!r} has table {theirs!r}: unset one of them, "
                                   "or pass --table or --stack to choose")
    elif named is not None:
        from_stack, table = named, _deployment(args).table
    else:
        raise CommandError("--table", NO_TABLE)
    if from_stack is not None:
        field = "--stack"
    elif not table:
        raise CommandError(field, NO_TABLE)
    try:
        table = check_table_name(table, field=field)
    except ConfigError as exc:
        said = str(exc).split(": ", 1)[1]
        if from_stack is not None:
            said = f"stack {from_stack[0]!r} ({from_stack[1]}): its TableName output {said}"
        raise CommandError(field, said) from None
    args.resolved_table, args.table_field = table, field
    return table


def _stores(args: argparse.Namespace) -> tuple[Any, Any]:
    from .dynamodb import DynamoJobStore
    from .dynamodb_items import DynamoItemStore

    ddb = _client(args, "dynamodb")
    table = _table(args)
    return DynamoJobStore(table, client=ddb), DynamoItemStore(table, client=ddb)


def _project_folder_last_on_path() -> None:
    """Let named code (``--jobs-module``, ``--modules``) be found in the project's folder.

    The working folder goes *last* on ``sys.path``, and only once the operator has named a
    module to import from it: installed packages (boto3, botocore, jobguard itself) are
    always found first, so a ``boto3.py`` or ``json.py`` in the folder never replaces them,
    while ``--jobs-module myjobs.jobs`` run from the checkout that holds ``myjobs/`` still
    works (and an installed ``myjobs`` wins). Without a named module the folder is never
    on the path: a ``handlers/jobs.py`` left in a shared folder is never run."""
    try:
        cwd = os.getcwd()
    except OSError:  # the folder was removed: only installed packages remain
        return
    if cwd not in sys.path:
        sys.path.append(cwd)


def _definitions(args: argparse.Namespace, *, needed_by: str) -> dict[str, Any]:
    """The named jobs module's definitions (``{name: JobDefinition}``); a one-line error
    naming ``--jobs-module``/``JOBGUARD_JOBS_MODULE`` when none is named."""
    module_name = args.jobs_module
    if module_name is None:
        raise CommandError("--jobs-module", f"{needed_by} needs the job definitions: name "
                           "the deployed stack with --stack STACK (or JOBGUARD_STACK), or "
                           "the module whose JOBS lists them with --jobs-module MODULE or "
                           "JOBGUARD_JOBS_MODULE (this repository's examples: handlers.jobs)")
    field = args.jobs_module_field
    _project_folder_last_on_path()
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CommandError(field, f"cannot import {module_name!r}: {exc} (looked in the "
                           "installed packages, then in this folder)") from exc
    except Exception as exc:  # noqa: BLE001 - the module's own failure, said plainly
        raise CommandError(field, f"importing {module_name!r} failed: "
                           f"{type(exc).__name__}: {exc}") from None
    jobs = getattr(module, "JOBS", None)
    if jobs is None:
        raise CommandError(field, f"{module_name!r} has no JOBS")
    try:
        defined = {job.name: job for job in jobs}
    except (TypeError, AttributeError):
        raise CommandError(field, f"{module_name}.JOBS must be a list of job "
                           f"definitions, got {jobs!r:.80}") from None
    if not all(isinstance(name, str) for name in defined):
        raise CommandError(field, f"{module_name}.JOBS holds a job without a name")
    return defined


def _job_name(args: argparse.Namespace, field: str = "JOB") -> str:
    from .config import validate_job_name
    from .errors import ConfigError

    try:
        return validate_job_name(args.job, field_name=field)
    except ConfigError as exc:
        raise CommandError(field, str(exc).split(": ", 1)[1]) from None


def _defined_jobs(args: argparse.Namespace) -> dict[str, Any]:
    """The named jobs module's definitions; none, and nothing imported, when no module is
    named (the commands that read the table need none)."""
    if args.jobs_module is None:
        return {}
    return _definitions(args, needed_by=args.command)


def _jobs_in_table(store: Any, *, pages: int = 10) -> set[str]:
    """Jobs that have a lease row in the table (a bounded scan: operator tooling only)."""
    from .schema import LEASE_SK, PARTITION_KEY, SORT_KEY

    found: set[str] = set()
    kwargs: dict[str, Any] = {
        "TableName": store.table_name, "FilterExpression": "#sk = :lease",
        "ProjectionExpression": "#pk", "ExpressionAttributeNames": {
            "#sk": SORT_KEY, "#pk": PARTITION_KEY},
        "ExpressionAttributeValues": {":lease": {"S": LEASE_SK}}}
    for _ in range(pages):
        page = store.client.scan(**kwargs)
        for item in page.get("Items", []):
            found.add(item[PARTITION_KEY]["S"].removeprefix("JOB#"))
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return found


def _known_job(args: argparse.Namespace, store: Any, field: str = "JOB",
               also: Sequence[str] = ()) -> str:
    """The command's job, checked: known to the table (it has run here), in ``also`` (the
    jobs a command loaded itself), or defined in the named jobs module. Anything else is a
    typo until shown otherwise: refused, naming the known jobs and the nearest match,
    before anything is written. The jobs module is imported only when the table does not
    know the job and one is named: with none named, the table alone decides."""
    import difflib

    job = _job_name(args, field)
    deployment = getattr(args, "deployment", None)  # the stack read for the table, if any
    deployed = set(deployment.jobs) if deployment is not None else set()
    if store.read_lease_raw(job) is not None or job in also or job in deployed:
        return job
    defined = _defined_jobs(args)
    if job in defined:
        return job
    known = sorted(set(defined) | set(also) | deployed | _jobs_in_table(store))
    nearest = difflib.get_close_matches(job, known, n=1, cutoff=0.6)
    hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
    where = (f"not in {args.jobs_module}" if args.jobs_module is not None
             else "no jobs module named (--jobs-module)")
    if deployment is not None:
        where = f"not a job of stack {deployment.stack!r}, {where}"
    raise CommandError(field, f"no job {job!r}: {where} and never run in table "
                       f"{store.table_name} (known: {', '.join(known) or 'none'}){hint}")


_LAST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the last a date can show


def _ms(ms: int | None) -> str | None:
    """An epoch-milliseconds time as ISO 8601 UTC with its ``Z`` (None when unset: null in
    JSON, "-" in a table or text; a number no date can show, as that number)."""
    if not ms:
        return None
    if not 0 < ms <= _LAST_MS:  # a row anyone may write: said, never a crash
        return f"{ms} ms (not a time)"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_times(row: dict[str, Any]) -> dict[str, Any]:
    """``*_at_ms`` times and the ``ttl_epoch_s`` expiry shown as ISO 8601 UTC (``*_at``,
    ``ttl_at``); durations (``*_ms`` without ``_at``) stay numbers, and so does a time no
    date can show (after the year 9999), under its own name."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        number = isinstance(value, int) and not isinstance(value, bool)
        if (key.endswith("_at_ms") or key == "ttl_epoch_s") and (number or value is None):
            ms = value * 1000 if key == "ttl_epoch_s" and value else value
            if ms and not 0 < ms <= _LAST_MS:
                out[key] = value  # a row anyone may write: shown, never a crash
            else:
                out["ttl_at" if key == "ttl_epoch_s" else key.removesuffix("_ms")] = _ms(ms)
        else:
            out[key] = value
    return out


def _shown(value: Any) -> Any:
    """``value`` with every text in it made one safe line (:func:`safe_text`), for human
    text composed from it; numbers and None stay as they are. JSON uses the values
    themselves (its escapes are exact and safe)."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_text(k): _shown(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_shown(v) for v in value]
    return value


def _table_text(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    """Rows as an aligned table, one line per row: each cell one safe line."""
    if not rows:
        return "(none)"
    cells = [[safe_text(row.get(c, "") if row.get(c) is not None else "-") for c in columns]
             for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, "  ".join("-" * w for w in widths), *body])


def _text(data: Any) -> str:
    """``--output text``: one line per row (or per key), fields separated by tabs. A
    field is one safe line (a tab, a newline or an escape inside a value is shown as its
    escape: it never makes a new field or a new line); a map or a list is compact JSON."""
    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, dict | list):
            return json.dumps(value, default=str, separators=(",", ":"))
        return safe_text(value)

    if isinstance(data, list):
        columns: list[str] = []
        for row in data:
            columns += [k for k in row if k not in columns]
        return "\n".join("\t".join(cell(row.get(c)) for c in columns) for row in data)
    if isinstance(data, dict):
        return "\n".join(f"{safe_text(k)}\t{cell(v)}" for k, v in data.items())
    return cell(data)


def _out(args: argparse.Namespace, data: Any, human: str) -> None:
    """Print the command's answer: ``data`` as JSON (exact: ``json.dumps`` escapes every
    control and non-ASCII character) or as text lines, else ``human``, which the
    command composed from :func:`_shown` values (and which the stream escapes again)."""
    output = getattr(args, "output", None) or "table"
    if output == "json":
        print(json.dumps(data, indent=2, default=str, ensure_ascii=True))
    elif output == "text":
        print(_text(data))
    else:
        print(human)


RUN_KEYS = ("job", "run_id", "trigger_id", "trigger_kind", "policy", "decision", "status",
            "started_at", "ended_at", "duration_ms", "fence", "owner", "holder_run_id",
            "holder_fence", "scheduled_at", "requested_by", "delivery_id", "error", "detail",
            "extra", "damaged")
"""The keys of every entry of ``runs --output json`` (and ``status``'s ``last_runs``), in
this order, whatever the run's kind and status: null where a run has none. ``extra``
holds what the run recorded beside them (its item counts and cursor range, a recovery's
figures, a rejected message's sender; ``{}`` when nothing), ``damaged`` is null for a
readable record, and for a damaged row ``{"sk", "problem"}`` (its other keys null)."""


def _run_entry(row: Any) -> dict[str, Any]:
    """A run-log row as one entry of :data:`RUN_KEYS`."""
    from .records import DamagedRun

    if isinstance(row, DamagedRun):
        return {**dict.fromkeys(RUN_KEYS), **row.as_dict()}
    own = _with_times(row.as_dict())
    base = {k: own.get(k) for k in RUN_KEYS}
    base["extra"] = _with_times(dict(row.extra))
    return base


def _run_log(rows: Sequence[Any], columns: Sequence[str]) -> tuple[list[dict[str, Any]], str]:
    """Run-log rows (run records and :class:`~jobguard.records.DamagedRun` rows) as data
    for JSON and text, each entry with the same keys (:data:`RUN_KEYS`), and as a table:
    a damaged row is listed in its place with status ``DAMAGED``, then named under the
    table with what is wrong."""
    from .records import DamagedRun

    data: list[dict[str, Any]] = []
    table: list[dict[str, Any]] = []
    notes: list[str] = []
    for row in rows:
        data.append(_run_entry(row))
        if isinstance(row, DamagedRun):
            table.append({"run_id": row.run_id, "status": "DAMAGED"})
            notes.append(f"damaged row {safe_text(row.sk)}: {safe_text(row.problem)}")
        else:
            chain = {k: v for k, v in (data[-1].get("extra") or {}).items()
                     if k in _CHAIN_KEYS}
            table.append({**data[-1], **chain})
    return data, "\n".join([_table_text(table, columns), *notes])


_CHAIN_KEYS = ("link", "continues", "continued_by")
"""A chain link's place and neighbours, shown as columns of ``runs`` when present."""


# -- commands ------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    from .errors import DamagedRowError

    store, _ = _stores(args)
    job = _known_job(args, store)
    try:
        lease = store.read_lease(job)
    except DamagedRowError as damage:
        data = {"job": job, "damaged": {"row": damage.row, "attribute": damage.attribute,
                                        "problem": str(damage), "repair": damage.repair},
                "lease_row": store.read_lease_raw(job)}
        _out(args, data, f"job {job}: the lease row is damaged: {safe_text(damage.attribute)} "
                         f"({safe_text(damage)}).\nrepair it with: {safe_text(damage.repair)}")
        return 1
    now_ms = int(time.time() * 1000)
    runs, runs_table = _run_log(store.list_runs(job, limit=5),
                                ("run_id", "status", "trigger_id", "fence", "duration_ms"))
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
        "handed_from": lease.handed_from,
        "last_runs": runs,
    }
    d = _shown({**data, "last_run_id": lease.last_run_id})
    if lease.run_id and lease.handed_from:
        # a chain between two links: the holder named is the next link, not started yet
        # (owner and heartbeat are the link before's)
        holder = (f"handed by run {d['handed_from']} to its continuation, run "
                  f"{d['holder_run_id']}, not started yet (fence {d['fence']}), handed "
                  f"{d['acquired_at']}, expires in {d['expires_in_s']} s")
    elif lease.run_id:
        holder = (f"held by run {d['holder_run_id']} (fence {d['fence']}, owner "
                  f"{d['owner']}), acquired {d['acquired_at']}, expires in "
                  f"{d['expires_in_s']} s, last heartbeat {d['last_heartbeat']}")
    else:
        holder = f"free (fence {d['fence']}, last run {d['last_run_id'] or '-'})"
    human = "\n".join([
        f"job {job}: {holder}",
        f"pending: {d['pending_queued']} queued, follow-up {d['pending_follow_up'] or 'none'}; "
        f"paused: {d['paused'] or 'no'}",
        "",
        runs_table,
    ])
    _out(args, data, human)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from .records import DamagedRun, RunStatus

    job = _job_name(args)
    if not 1 <= args.last <= _MAX_LAST:
        raise CommandError("--last", f"give 1 to {_MAX_LAST:,} runs, got {args.last}")
    statuses = [s.value for s in RunStatus]
    if args.status is not None and args.status not in statuses:
        raise CommandError("--status", f"{args.status!r} is not a run status; one of "
                           f"{', '.join(statuses)} (an unknown one would list nothing)")
    store, _ = _stores(args)
    _known_job(args, store)
    records = store.list_runs(job, limit=max(args.last * 5, 50) if args.status else args.last)
    if args.status:  # a damaged row's status is unknown: listed whatever is asked
        records = [r for r in records
                   if isinstance(r, DamagedRun) or r.status.value == args.status]
    columns: tuple[str, ...] = ("run_id", "started_at", "status", "decision", "trigger_id",
                                "fence", "holder_run_id", "duration_ms")
    shown = records[: args.last]
    if any(not isinstance(r, DamagedRun) and ("continues" in r.extra
                                              or "continued_by" in r.extra) for r in shown):
        # a chain's links, each naming the one before and after it (README "Continuation")
        columns += ("link", "continues", "continued_by")
    rows, table = _run_log(shown, columns)
    _out(args, rows, table)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .records import DamagedRun

    if not _RUN_ID.fullmatch(args.run_id):
        raise CommandError("RUN_ID", f"{args.run_id!r} is not a run id (26 characters, e.g. "
                           "01M8K455D5SMBCC61XNCBKW1C4)")
    if args.job is not None:
        args.job = _job_name(args, field="--job")
    store, _ = _stores(args)
    # without --job: every job run in the table, then (only when a jobs module is named,
    # and the run was not found) the jobs it defines that the table does not know
    jobs = [args.job] if args.job else sorted(_jobs_in_table(store))
    looked: list[str] = []
    while jobs:
        for job in jobs:
            record = store.get_run(job, args.run_id)
            if isinstance(record, DamagedRun):  # named, with what is wrong: exit 1
                _out(args, record.as_dict(), f"run {args.run_id} of job {safe_text(job)}: "
                     f"its row {safe_text(record.sk)} is damaged: "
                     f"{safe_text(record.problem)}")
                return 1
            if record is not None:
                data = _with_times(record.as_dict())
                human = "\n".join(f"{safe_text(k):>20}: {'-' if v is None else safe_text(v)}"
                                  for k, v in data.items())
                _out(args, data, human)
                return 0
        looked += jobs
        deployment = getattr(args, "deployment", None)
        jobs = [] if args.job else sorted(
            (set(_defined_jobs(args)) | set(deployment.jobs if deployment else ()))
            - set(looked))
    raise CommandError("RUN_ID", f"no run {args.run_id!r} in jobs "
                       f"{', '.join(sorted(looked)) or '(none)'}")


def cmd_items(args: argparse.Namespace) -> int:
    """A job's unresolved items. A row that is not a readable item
    (:class:`~jobguard.workitems.DamagedItem`) is listed too, whatever ``--status``
    asks: in JSON and text with its readable keys null and ``damaged`` = ``{"pk", "sk",
    "problem"}`` (null on every readable item), in the table with state ``DAMAGED``,
    then named under it with what is wrong."""
    from .workitems import DamagedItem, ItemRecord, ItemState

    store, items = _stores(args)
    job = _known_job(args, store)
    states = [ItemState(args.status)] if args.status else None
    keys = [f.name for f in dataclasses.fields(ItemRecord)]
    rows: list[dict[str, Any]] = []
    table: list[dict[str, Any]] = []
    notes: list[str] = []
    for r in items.unresolved(job, states=states, now_ms=int(time.time() * 1000)):
        if isinstance(r, DamagedItem):
            rows.append(_with_times({**dict.fromkeys(keys), **r.as_dict()}))
            table.append({"work_id": r.work_id, "state": "DAMAGED"})
            notes.append(f"damaged row {safe_text(r.pk)}: {safe_text(r.problem)}")
        else:
            rows.append(_with_times({**{k: getattr(r, k) for k in keys},
                                     "state": r.state.value, "damaged": None}))
            table.append(rows[-1])
    _out(args, rows, "\n".join([_table_text(table, ("work_id", "state", "run_id", "fence",
                                                    "attempts", "updated_at", "last_error")),
                                *notes]))
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    """Pause a job. A job already paused keeps its pause: the same reason again is a
    no-op (exit 0); another is refused (exit 1) unless ``--replace``, as ``kubectl
    annotate`` keeps a value unless ``--overwrite``."""
    _job_name(args)
    if not args.reason or not args.reason.strip():
        raise CommandError("--reason", "say why (it is shown on every paused trigger)")
    store, _ = _stores(args)
    job = _known_job(args, store)
    from ._bounds import MAX_TEXT_BYTES, bounded_text

    reason = bounded_text(args.reason.strip()) or ""
    who = _login()
    cut = (f" (the reason was cut to {MAX_TEXT_BYTES:,} bytes)"
           if reason != args.reason.strip() else "")
    tried = False
    for _ in range(3):  # again only if another operator paused or resumed meanwhile
        row = store.read_lease_raw(job) or {}  # read as written: a damaged row too
        paused_at = row.get("paused_at_ms")
        was = row.get("paused_reason") if paused_at is not None else None
        # a pause of ours whose answer was lost (resent, then refused by its own write)
        ours = tried and was == reason and row.get("paused_by") == who
        if paused_at is None or ours:
            if ours or store.pause(job, reason=reason, now_ms=int(time.time() * 1000),
                                   by=who):
                _out(args, {"job": job, "paused": reason, "changed": True, "was": None},
                     f"job {job} paused: {safe_text(reason)}{cut}")
                return 0
            tried = True
            continue
        since = _since(row)
        if was == reason:
            _out(args, {"job": job, "paused": reason, "changed": False, "was": was},
                 f"job {job} is already paused ({since}) for this reason; nothing changed")
            return 0
        if not args.replace:
            raise CommandError("JOB", f"job {job} is already paused ({since}): "
                               f"{safe_text(was)!r}; nothing written: pass --replace to "
                               "replace the reason, or resume it first", code=1)
        if store.pause(job, reason=reason, now_ms=int(time.time() * 1000), by=who,
                       replace=True):
            _out(args, {"job": job, "paused": reason, "changed": True, "was": was},
                 f"job {job} paused: {safe_text(reason)}{cut} (reason replaced; was: "
                 f"{safe_text(was)}, paused {since})")
            return 0
    raise CommandError("JOB", "the pause changed meanwhile; look again (jobguard status)",
                       code=1)


def _since(row: dict[str, Any]) -> str:
    """``since <time> by <who>`` of a lease row's pause, each value one safe line."""
    at, by = row.get("paused_at_ms"), row.get("paused_by")
    when = (_ms(at) if isinstance(at, int) and not isinstance(at, bool) else None) or at
    return f"since {safe_text(when)}" + (f" by {safe_text(by)}" if by else "")


def cmd_resume(args: argparse.Namespace) -> int:
    store, _ = _stores(args)
    job = _known_job(args, store)
    row = store.read_lease_raw(job) or {}  # read as written: a damaged row too
    if row.get("paused_at_ms") is None:
        _out(args, {"job": job, "paused": None, "changed": False, "was": None},
             f"job {job} is not paused; nothing to resume")
        return 0
    # False: resumed meanwhile (by another operator, or this call's own write whose
    # answer was lost and resent): not paused now either way, as asked
    store.resume(job)
    was = row.get("paused_reason")
    _out(args, {"job": job, "paused": None, "changed": True, "was": was},
         f"job {job} resumed (it was paused {_since(row)}: {safe_text(was)})")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    _job_name(args)
    if not args.force:
        raise CommandError("--force", "releasing a lease by hand needs --force")
    store, _ = _stores(args)
    job = _known_job(args, store)
    from .errors import DamagedRowError
    from .requests import ForceRelease
    who = _login() or "operator"
    try:
        lease = store.read_lease(job)
    except DamagedRowError as damage:
        print(f"job {job}: the lease row is damaged ({safe_text(damage.attribute)}); "
              "rewriting it", file=sys.stderr)
        if not args.yes:
            _confirm("repair it (holder cleared, fence moved past every fence issued)? "
                     "[y/N] ")
        fence = store.repair(job, now_ms=int(time.time() * 1000), by=who)
        _out(args, {"job": job, "repaired": True, "fence": fence},
             f"repaired; fence is now {fence}")
        return 0
    if lease.run_id is None:
        _out(args, {"job": job, "released": False, "reason": "free"}, f"job {job} is not held")
        return 0
    print(f"job {job} is held by run {safe_text(lease.run_id)} (fence {lease.fence}, owner "
          f"{safe_text(lease.owner)}), last heartbeat {_ms(lease.heartbeat_at_ms) or '-'}",
          file=sys.stderr)
    if not args.yes:
        _confirm("release it and bump the fence so that run can write nothing more? [y/N] ")
    released = store.force_release(ForceRelease(  # the holder seen, by whom, why
        job, holder_run_id=lease.run_id, fence=lease.fence, by=who, reason=args.reason,
        now_ms=int(time.time() * 1000)))
    if not released:
        raise CommandError("JOB", "the lease changed hands meanwhile; look again")
    data = {"job": job, "released": True, "old_run_id": lease.run_id,
            "fence": lease.fence + 1}
    _out(args, data, f"released; fence is now {lease.fence + 1}: run "
                     f"{safe_text(lease.run_id)} can write nothing more")
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    """Rewrite a damaged lease row, or one whose queued count its trigger items do not
    bear out. A row that is readable and whose count is right is left as it is (said,
    exit 0) unless ``--force``."""
    from .errors import DamagedRowError

    store, _ = _stores(args)
    job = _known_job(args, store)
    now_ms = int(time.time() * 1000)
    if store.read_lease_raw(job) is None:
        _out(args, {"job": job, "repaired": False, "reason": "no lease row"},
             f"job {job} has no lease row (it never ran here): nothing to repair")
        return 0
    why = ""
    try:
        lease = store.read_lease(job)
    except DamagedRowError as damage:
        why = f"its {safe_text(damage.attribute)} is damaged ({safe_text(damage)})"
    else:
        queued = store.count_queued(job, now_ms)
        if queued != lease.queued_n:
            why = (f"its queued count is {lease.queued_n}, its trigger items say {queued}")
        elif not args.force:
            held = (f"; it is held by run {safe_text(lease.run_id)}: to free it, "
                    f"jobguard release {job} --force" if lease.run_id else "")
            _out(args, {"job": job, "repaired": False, "reason": "healthy",
                        "fence": lease.fence, "queued": queued},
                 f"job {job}: the lease row is healthy (fence {lease.fence}, {queued} "
                 f"queued, as its trigger items say){held}; nothing to repair, nothing "
                 "written (--force rewrites it anyway)")
            return 0
        else:
            why = "--force"
    if why:
        print(f"job {job}: {why}", file=sys.stderr)
    if not args.yes:
        _confirm(f"rewrite the lease row of {job} (a live holder loses its lease)? [y/N] ")
    fence = store.repair(job, now_ms=now_ms, by=_login() or "operator")
    lease = store.read_lease(job)
    _out(args, {"job": job, "repaired": True, "fence": fence, "queued": lease.queued_n},
         f"repaired; fence is now {fence}, {lease.queued_n} queued")
    return 0


DRILL_DEPLOYMENT = ("A drill deployment (LambdaBundle(drills=True)): its schedule is disabled "
                    "(only `jobguard drill` delivers ticks), it runs on the drill clock, its "
                    "function honours drill fault switches, and it has no dead-man alarm. "
                    "Never production.")


def cmd_runbook(args: argparse.Namespace) -> int:
    """The job's runbook: from the deployed stack's outputs (the definition as deployed,
    and the runbook link its author set), or from the named jobs module. Flags before
    variables: ``--stack``, ``--jobs-module``, then ``JOBGUARD_STACK``,
    ``JOBGUARD_JOBS_MODULE``."""
    from .runbook import render

    job = _job_name(args)
    named = _named_stack(args)
    module_flag = args.jobs_module is not None and args.jobs_module_field == "--jobs-module"
    if named is not None and (named[1] == "--stack" or not module_flag):
        deployment = _deployment(args)
        if job not in deployment.jobs:
            known = sorted(deployment.jobs)
            raise CommandError("JOB", f"no job {job!r} in stack {deployment.stack!r} "
                               f"({named[1]}; its jobs: {', '.join(known) or 'none'})"
                               f"{_nearest(job, known)}")
        deployed = deployment.jobs[job]
        text = render(deployed.definition, fleet=deployed.fleet)
        if deployed.drills:  # said first: its alarms and schedule are not production's
            title, _, rest = text.partition("\n")
            text = f"{title}\n\n{DRILL_DEPLOYMENT}\n{rest}"
        if deployed.runbook:
            text = f"Runbook: {deployed.runbook}\n\n{text}"
        _out(args, {"job": job, "stack": deployment.stack, "link": deployed.runbook,
                    "drills": deployed.drills, "fleet": deployed.fleet, "runbook": text},
             text)
        return 0
    definitions = _definitions(args, needed_by="runbook")
    if job not in definitions:
        raise CommandError("JOB", f"{job!r} is not defined in {args.jobs_module} "
                           f"(known: {', '.join(definitions)}){_nearest(job, list(definitions))}")
    text = render(definitions[job])
    _out(args, {"job": job, "stack": None, "link": None, "drills": None, "fleet": None,
                "runbook": text}, text)
    return 0


def _ask(question: str) -> str | None:
    """A yes/no question on stderr (stdout is the command's answer: ``--output json``
    stays parseable), the reply from stdin: a terminal's, or a pipe's first line (``echo
    y | jobguard release JOB --force``, as ``rm -i`` reads it). None when stdin has no
    line to give (closed, at its end, or not readable)."""
    print(question, end="", file=sys.stderr, flush=True)
    stdin = sys.stdin
    try:
        line = stdin.readline() if stdin is not None else ""
    except (OSError, ValueError):  # closed, or not readable (a test's stand-in)
        line = ""
    try:
        terminal = stdin is not None and stdin.isatty()
    except (OSError, ValueError):
        terminal = False
    if not terminal:
        print(file=sys.stderr)  # the answer came from a pipe: end the question's line
    return line.strip() if line else None


def _confirm(question: str) -> None:
    """Go on only if the operator answers y (or yes); else refused naming ``--yes``."""
    answer = _ask(question)
    if answer is None:
        raise CommandError("--yes", "not confirmed: stdin gave no answer, nothing written "
                           "(pipe y into the command, or pass --yes)")
    if answer.lower() not in ("y", "yes"):
        said = f"the answer was {answer!r}, not y" if answer else "an empty answer"
        raise CommandError("--yes", f"not confirmed: {said}, nothing written (answer y, "
                           "or pass --yes)")


def _login() -> str | None:
    """The operator's login name ($LOGNAME, $USER, ..., else the account's), or None."""
    import getpass

    try:
        return getpass.getuser() or None
    except (OSError, KeyError):
        return None


def cmd_recover(args: argparse.Namespace) -> int:
    request: dict[str, Any] = {"job": _job_name(args), "mode": args.mode,
                               "dry_run": not args.execute, "max_items": args.max_items,
                               "requested_by": args.requested_by or _login()}
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
    store, _ = _stores(args)
    # --direct loads the job modules the operator named (--modules): their jobs are known;
    # none named is said after the job name is checked
    named = args.direct and bool(args.modules or os.environ.get("JOBGUARD_RECOVERY_MODULES"))
    _known_job(args, store, also=_load_recovery_modules(args) if named else ())
    if args.direct:
        if not named:
            _load_recovery_modules(args)  # refused, naming --modules
        answer = _recover_direct(args, request)
    else:
        if not args.function_name:
            args.function_name = _recovery_function(args, execute=args.execute)
        answer = _invoke(args, request)
    if answer.get("result") in ("refused", "busy"):
        # the function's error starts with its own field name: said once, as the option
        field = str(answer.get("field") or "request")
        error = str(answer.get("error", "refused"))
        if error.startswith(f"{field}: "):
            error = error[len(field) + 2:]
        raise CommandError(_OPTION_OF.get(field, field), _options_in(error))
    _out(args, answer, _recovery_text(_shown(answer)))
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    """An operator's finding for unresolved items, under the job's lease (see
    :func:`jobguard.recovery.resolve`)."""
    from datetime import timedelta

    from .config import JobConfig
    from .errors import InvalidRequestError, LeaseBusyError
    from .recovery import resolve

    _job_name(args)
    if (args.found is None) == (not args.not_found):
        raise CommandError("--found", "say what you found at the destination: --found "
                           "DESTINATION_ID (it holds the effect) or --not-found (it does "
                           "not: the item is redone by the next run)")
    if not args.reason or not args.reason.strip():
        raise CommandError("--reason", "say why (it is written on the run record)")
    if args.wait < 0:
        raise CommandError("--wait", f"must be 0 or more seconds, got {args.wait}")
    from .workitems import check_key

    if args.found is not None and len(set(args.work_ids)) != 1:
        raise CommandError("--found", "a destination id proves one work item: name exactly "
                           "one (not found: several at once is fine)")
    for text in args.work_ids:
        try:
            check_key(text)
        except ValueError as exc:
            raise CommandError("WORK_ID", f"{text!r}: {str(exc).split(': ', 1)[-1]}") from None
    store, items = _stores(args)
    job = _known_job(args, store)
    # Each item in the ledger before the lease is taken: a typo writes nothing (no run,
    # no run record), as `kubectl get` of a name that is not there.
    held = items.get_many(job, args.work_ids, now_ms=int(time.time() * 1000))
    missing = [w for w in dict.fromkeys(args.work_ids) if w not in held]
    if missing:
        raise CommandError("WORK_ID", f"no work item {', '.join(map(repr, missing))} in "
                           f"job {job}'s ledger; nothing written (`jobguard items {job}` "
                           "lists the unresolved ones)", code=1)
    # the job's own lease settings: as deployed (the stack read for the table), else as
    # the named definitions say; else the defaults
    deployment = getattr(args, "deployment", None)
    definitions = ({name: d.definition for name, d in deployment.jobs.items()}
                   if deployment is not None and job in deployment.jobs
                   else _defined_jobs(args))
    config = definitions[job].config() if job in definitions else JobConfig(name=job)
    fields = {"work_id": "WORK_ID", "found": "--found", "reason": "--reason",
              "requested_by": "--requested-by"}
    try:
        with _library_logs_quiet():
            answer = resolve(config, list(args.work_ids), found=args.found, reason=args.reason,
                             requested_by=args.requested_by or _login() or "",
                             guard_options={"store": store},
                             wait=timedelta(seconds=args.wait))
    except InvalidRequestError as exc:
        raise CommandError(fields.get(exc.field, exc.field),
                           str(exc).split(": ", 1)[1]) from None
    except LeaseBusyError as exc:
        raise CommandError("JOB", f"{exc}; try again when the run has ended, or "
                           "--wait longer") from None
    if answer.get("result") != "resolved":
        now = answer.get("items")
        raise CommandError("JOB", f"the resolution did not finish: {answer.get('outcome')}"
                           + (f"; the items now: {', '.join(f'{w} {s}' for w, s in now.items())}"
                              "; run it again for any still uncertain" if now else ""))
    shown = _shown(answer)
    lines = [f"resolved in run {shown['run_id']} (by {shown['requested_by']}: "
             f"{shown['reason']})"]
    for key, said in (("found", "completed (found at the destination)"),
                      ("not_found", "failed, retryable (not found: the next run redoes it)"),
                      ("already_completed", "already completed: left as it was"),
                      ("unknown", "not unresolved (never claimed, or a live run's): "
                                  "left as it was"),
                      ("held", "not resolved: a displaced run may still call the destination "
                               "for it until its hold (`jobguard items` shows held_until_ms); "
                               "resolve it after that")):
        if shown.get(key):
            lines.append(f"{said}: {', '.join(shown[key])}")
    _out(args, answer, "\n".join(lines))
    return 0


STACK_ENV = "JOBGUARD_STACK"
_STACK_NAME = re.compile(r"[A-Za-z][-A-Za-z0-9]{0,127}|arn:[!-~]+")
RECOVER_STACK = "JobGuard"
"""``recover``'s stack when neither ``--stack`` nor ``JOBGUARD_STACK`` names one."""
DRILL_STACK = "JobGuard-drills"
"""``drill``'s stack when neither ``--stack`` nor ``JOBGUARD_STACK`` names one."""


def _named_stack(args: argparse.Namespace) -> tuple[str, str] | None:
    """The stack ``--stack`` (else ``JOBGUARD_STACK``) names, and which named it; None
    when neither does. A name no stack can have is refused here, before any AWS call."""
    if getattr(args, "stack", None) is not None:
        stack, named_by = args.stack, "--stack"
    elif os.environ.get(STACK_ENV):  # set but empty: unset, as the shell's ${VAR:-}
        stack, named_by = os.environ[STACK_ENV], STACK_ENV
    else:
        return None
    if not _STACK_NAME.fullmatch(stack):
        raise CommandError("--stack", f"{stack!r} ({named_by}) is not a CloudFormation stack "
                           "name (a letter, then letters, digits and '-', at most 128) or "
                           "stack ARN: name the deployed one with --stack STACK or "
                           f"{STACK_ENV}")
    return stack, named_by


def _stack(args: argparse.Namespace, default: str | None) -> tuple[str, str]:
    """The stack a command reads (``--stack``, else ``JOBGUARD_STACK``, else ``default``),
    and what named it, for an error to say."""
    named = _named_stack(args)
    if named is not None:
        return named
    if default is None:
        raise CommandError("--stack", f"no stack: pass --stack STACK (or set {STACK_ENV})")
    return default, f"the default: no --stack or {STACK_ENV}"


def _no_stack(stack: str, named_by: str, exc: BaseException) -> str:
    """The one line for a stack that does not exist: which, named by what, how to name
    another."""
    return (f"there is no stack {stack!r} ({named_by}; CloudFormation: {exc}): name the "
            f"deployed one with --stack STACK or {STACK_ENV}")


def _not_jobguards(stack: str, named_by: str, exc: BaseException) -> str:
    """The one line for a stack whose outputs are not what jobguard's constructs write."""
    return (f"stack {stack!r} ({named_by}) is not one jobguard can read: {exc}: name the "
            f"deployed one with --stack STACK or {STACK_ENV}")


def _deployment(args: argparse.Namespace, default: str | None = None, *,
                field: str = "--stack", wrap: Any = None) -> Any:
    """The :class:`~jobguard.deployment.Deployment` of the command's stack (``--stack``,
    else ``JOBGUARD_STACK``, else ``default``), read from its outputs through
    CloudFormation ``DescribeStacks`` once per invocation. A stack that does not exist,
    or whose outputs are not jobguard's, is one line naming it and what named it (exit 2),
    as ``field``, its text through ``wrap`` when given."""
    from botocore.exceptions import ClientError

    from .deployment import Deployment, DeploymentError

    stack, named_by = _stack(args, default)
    read: dict[str, Any] = args.__dict__.setdefault("deployments", {})
    if stack in read:
        return read[stack]
    # (CloudFormation speaks XML: outside the fault matrix, whose injected answers are
    # JSON. A throttle or outage here is said plainly, exit 1, before anything else.)
    try:
        described = _client(args, "cloudformation").describe_stacks(StackName=stack)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ValidationError":
            raise
        said = _no_stack(stack, named_by, exc)
        raise CommandError(field, wrap(said) if wrap else said) from None
    outputs = {o["OutputKey"]: o["OutputValue"]
               for o in described["Stacks"][0].get("Outputs", []) or []
               if "OutputKey" in o and "OutputValue" in o}
    try:
        deployment = Deployment.from_outputs(stack, outputs)
    except DeploymentError as exc:
        said = _not_jobguards(stack, named_by, exc)
        raise CommandError(field, wrap(said) if wrap else said) from None
    read[stack] = deployment
    args.deployment = deployment
    return deployment


@contextmanager
def _library_logs_quiet() -> Iterator[None]:
    """While a command runs the guard in this process (``resolve``): jobguard's own
    Powertools log lines, written for CloudWatch, reach the operator only from warning
    up, and on stderr; its EMF metrics too (stdout is the command's answer)."""
    import contextlib
    import logging

    from .observability import _logger

    _logger()  # Powertools' logger "jobguard", made now: its handler is known
    logger = logging.getLogger("jobguard")
    level = logger.level
    streams = [(h, h.stream) for h in logger.handlers if isinstance(h, logging.StreamHandler)]
    logger.setLevel(logging.WARNING)
    # (assigned, not setStream: that flushes the stream it replaces, which may be closed)
    for handler, _ in streams:
        handler.stream = sys.stderr
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        logger.setLevel(level)
        for handler, stream in streams:
            handler.stream = stream


def _recovery_function(args: argparse.Namespace, *, execute: bool) -> str:
    """The deployed recovery function, from the stack's outputs (``--stack``, else
    ``JOBGUARD_STACK``, else ``JobGuard``): ``RecoveryFunctionName`` for a plan, the
    ``execute`` alias (``RecoveryExecuteArn``) for an execution."""
    deployment = _deployment(
        args, RECOVER_STACK, field="--function-name",
        wrap=lambda said: (f"not given, and {said}; or pass --function-name, or --direct "
                           "to run the recovery in this process"))
    table = getattr(args, "resolved_table", None)
    if table is not None and table != deployment.table:  # --table, or JOBGUARD_TABLE
        _, named_by = _stack(args, RECOVER_STACK)
        raise CommandError(args.table_field, f"recover runs the recovery function of stack "
                           f"{deployment.stack!r} ({named_by}), which recovers its own table "
                           f"({deployment.table}), not {table}: name the stack of {table} with "
                           "--stack, or pass --function-name, or --direct to recover it in "
                           "this process")
    if execute and deployment.recovery_execute:
        return str(deployment.recovery_execute)
    if deployment.recovery_function:
        return str(deployment.recovery_function)
    raise CommandError("--function-name", f"not given, and stack {deployment.stack!r} has no "
                       "RecoveryFunctionName output: pass --function-name")


def _invoke(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    """The deployed recovery function's answer; its own failure is an error, not an answer.

    A plan invokes the function itself; an execution its ``execute`` alias, the only way
    in that may execute (:mod:`jobguard.functions.recovery`): the caller's IAM
    permissions decide whether they may, not the plan's token."""
    from botocore.config import Config
    from botocore.exceptions import ReadTimeoutError

    from .errors import JobGuardError
    from .recovery import EXECUTE_ALIAS

    # One attempt, and an answer awaited as long as a function may run: an SDK resend
    # would start a second recovery beside the first (which then finds its lease busy).
    lambda_ = _session(args).client("lambda", endpoint_url=_endpoint(args), config=Config(
        read_timeout=_LAMBDA_MAX_S, retries={"total_max_attempts": 1}))
    where: dict[str, str] = {"FunctionName": args.function_name}
    if request.get("dry_run") is False and not args.function_name.endswith(
            f":{EXECUTE_ALIAS}"):
        where["Qualifier"] = EXECUTE_ALIAS
    try:
        response = lambda_.invoke(**where, Payload=json.dumps(request).encode())
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
              "requested_by": "--requested-by", "dry_run": "--execute"}


def _options_in(text: str) -> str:
    """A recovery's message with its request fields named as this CLI's options
    (``recover by cursor_from/cursor_to`` -> ``recover by --from/--to``)."""
    import re

    return re.sub(r"\b(cursor_from|cursor_to|time_from|time_to|max_items)\b",
                  lambda m: _OPTION_OF[m.group(1)], text)


def _check_request(request: dict[str, Any]) -> None:
    from .errors import InvalidRequestError
    from .recovery import parse_request

    try:
        parse_request(request)
    except InvalidRequestError as exc:
        raise CommandError(_OPTION_OF.get(exc.field, exc.field),
                           str(exc).split(": ", 1)[1]) from None


def _load_recovery_modules(args: argparse.Namespace) -> list[str]:
    """``recover --direct``: import the job modules named by ``--modules`` (or
    ``JOBGUARD_RECOVERY_MODULES``), as the recovery function does; their registered jobs."""
    from . import registry
    from .errors import ConfigError

    if args.endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint_url
    os.environ["JOBGUARD_TABLE"] = _table(args)
    if args.modules:
        os.environ["JOBGUARD_RECOVERY_MODULES"] = args.modules
    if os.environ.get("JOBGUARD_RECOVERY_MODULES"):
        _project_folder_last_on_path()  # named: they may live in the project's folder
    try:
        return registry.load_from_environment()
    except ConfigError as exc:
        field, _, message = str(exc).partition(": ")
        raise CommandError("--modules" if "MODULES" in field else field, message) from None
    except Exception as exc:  # noqa: BLE001 - a job module failed to load: say which, why
        raise CommandError("--modules", f"loading the job modules "
                           f"({os.environ.get('JOBGUARD_RECOVERY_MODULES')}) failed: "
                           f"{type(exc).__name__}: {exc} (does the module need an "
                           "environment variable this shell does not have?)") from None


def _recover_direct(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    """The recovery, run in this process (its job modules loaded first:
    :func:`_load_recovery_modules`)."""
    from . import hooks
    from .errors import ConfigError, InvalidRequestError, LeaseBusyError
    from .recovery import recover

    done = {"n": 0}

    # the progress line's own carriage return: written past the stream's escaping
    terminal = getattr(sys.stderr, "inner", sys.stderr)

    def progress(**ctx: Any) -> None:
        done["n"] += 1
        if terminal.isatty():
            print(f"\rreplayed {done['n']} items", end="", file=terminal, flush=True)

    import contextlib

    try:
        # The library's JSON logs and EMF metrics go to stderr: stdout is the answer.
        with hooks.on("after_process", progress), contextlib.redirect_stdout(sys.stderr):
            answer = recover(request)
    except (InvalidRequestError, ConfigError) as exc:  # named as the option the user typed
        raise CommandError(_OPTION_OF.get(exc.field, exc.field),
                           _options_in(str(exc).split(": ", 1)[1])) from None
    except LeaseBusyError as exc:
        raise CommandError("JOB", str(exc)) from None
    except KeyError as exc:
        # the job's own code read a variable this shell does not set (its function has it)
        raise CommandError("--direct", f"the job's code needs the environment variable "
                           f"{exc} (set as on its deployed function), or run the recovery "
                           "through the deployed function (without --direct)") from None
    finally:
        if done["n"] and terminal.isatty():
            print(file=terminal)
    return answer


def _range_text(bounds: Any) -> str:
    if not isinstance(bounds, dict):
        return str(bounds)
    if bounds.get("time_from") is not None:
        return f"times {bounds.get('time_from')} .. {bounds.get('time_to')}"
    return f"cursors after {bounds.get('cursor_from')} up to {bounds.get('cursor_to')}"


def _recovery_text(answer: dict[str, Any]) -> str:
    """The recovery's answer for a person (``answer`` made :func:`_shown` first: it
    quotes records, rejected ones too)."""
    plan = answer.get("plan", {})
    lines = [f"recovery of {answer.get('job')}, {_range_text(answer.get('range'))}, mode "
             f"{answer.get('mode')}",
             f"plan: {plan.get('selected', 0)} selected, {plan.get('completed', 0)} completed, "
             f"{plan.get('failed', 0)} failed, {plan.get('uncertain', 0)} uncertain, "
             f"{plan.get('never_attempted', 0)} never attempted -> {plan.get('to_replay', 0)} "
             f"to replay ({plan.get('skipped_by_mode', 0)} skipped by mode)"]
    if plan.get("expired"):
        lines.append(f"expired: {plan['expired']} completed items past their TTL count as "
                     "never attempted")
    if plan.get("conflicts"):
        lines.append(f"conflicts: {plan['conflicts']} work ids recorded with another payload "
                     f"({', '.join(plan.get('conflict_ids', []))})")
    if plan.get("rejected"):
        lines.append(f"rejected: {plan['rejected']} records no work id can be made for, "
                     "never replayed (fix them at the source, then recover again): "
                     + "; ".join(plan.get("rejected_sample", [])))
    if plan.get("damaged"):
        lines.append(f"damaged: {plan['damaged']} ledger rows that are not readable items, "
                     "never replayed (look at each, then jobguard resolve it): "
                     + "; ".join(plan.get("damaged_sample", [])))
    if plan.get("sample"):
        lines.append("sample: " + ", ".join(plan["sample"]))
    if answer.get("next_steps"):
        lines.append(f"next: {answer['next_steps']}")
    elif answer.get("result") == "planned":
        lines.append(f"token: {plan.get('token')}"
                     + ("  (required: pass --execute --confirm TOKEN)"
                        if answer.get("needs_confirmation") else "  (pass --execute to run)"))
    else:
        summary = answer.get("summary", {})
        lines.append("done: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    return "\n".join(lines)


def _counts(value: Any) -> str:
    """Counts as people write them (``ran 3, queued 2``), not as a Python dict."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_counts(v)}" for k, v in value.items()) or "none"
    return str(value)


def cmd_timeline(args: argparse.Namespace) -> int:
    """The jobs' runs on a time axis: a terminal view, or a page (``--html``/``--open``)."""
    import shutil

    from .timeline.command import TimelineOutput, check_html_path, timeline_command
    from .timeline.window import WindowError, window_from_options

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


def cmd_local(args: argparse.Namespace) -> int:
    """Load under injected faults on the embedded emulator, then the invariants."""
    from .faults import parse_rules
    from .local.load import run_load

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


# -- parser ----------------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jobguard")
    except PackageNotFoundError:
        from . import __version__

        return __version__


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The options every command takes, before or after it (as the AWS CLI does). On a
    command they default to "not given", so they never undo one given before it."""
    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    group = parser.add_argument_group("global options")
    group.add_argument("--output", choices=("table", "json", "text"), default=default(None),
                       help="table (default), json (for scripts) or text (tab-separated)")
    group.add_argument("--json", dest="output", action="store_const", const="json",
                       default=default(None), help="the same as --output json")
    group.add_argument("--endpoint-url", default=default(None),
                       help="AWS endpoint URL: the local AWS (default: AWS_ENDPOINT_URL)")
    group.add_argument("--profile", default=default(None),
                       help="AWS profile, as the AWS CLI takes it")
    group.add_argument("--region", default=default(None),
                       help="AWS region (default: AWS_REGION, AWS_DEFAULT_REGION, then "
                            "the profile's, as the AWS CLI v2 takes them)")
    group.add_argument("--stack", default=default(None),
                       help="the CloudFormation stack built with jobguard.cdk: its outputs "
                            "name the table, the jobs and their functions, the recovery "
                            "function (default: JOBGUARD_STACK). The table is --table, else "
                            "--stack's, else JOBGUARD_TABLE, else JOBGUARD_STACK's")
    group.add_argument("--table", default=default(None),
                       help="the jobguard table, over the stack's (see --stack)")
    group.add_argument("--jobs-module", default=default(None),
                       help="module whose JOBS lists the job definitions (default: "
                            "JOBGUARD_JOBS_MODULE); imported only when named, looked for "
                            "in the installed packages, then in this folder. Without "
                            "--stack, runbook and drill need it; with one, every command "
                            "reads the jobs from the stack's outputs")


def _nearest(word: str, choices: Sequence[str]) -> str:
    """``; did you mean 'x'?`` for the choice nearest ``word``, or nothing."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {found[0]!r}?" if found else ""


def _refuse(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.exit(2, f"{parser.prog}: error: {safe_text(message)} (see `{parser.prog} "
                   "--help`)\n")


class _Parser(argparse.ArgumentParser):
    """argparse, as the AWS CLI and kubectl refuse: one line naming what was wrong and
    the nearest command or option (Python 3.11's argparse suggests nothing), then where
    the help is; exit status 2. No usage dump."""

    def error(self, message: str) -> NoReturn:
        choice = re.match(r"argument (\S+): invalid choice: '(.*?)' \(choose from (.*)\)$",
                          message, re.S)
        if choice:
            name, word, listed = choice.groups()
            choices = re.findall(r"'([^']*)'", listed)
            what = "command" if name == "COMMAND" else f"{name} value"
            message = (f"unknown {what} {word!r}{_nearest(word, choices)} (one of "
                       f"{', '.join(choices)})")
        _refuse(self, message)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            parser = self._commands.get(command, self) if command else self
            options = [o for a in parser._actions for o in a.option_strings]
            flag = next((e.split("=", 1)[0] for e in extras if e.startswith("-")), None)
            hint = _nearest(flag, options) if flag else ""
            _refuse(parser, f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    @property
    def _commands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}


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


def cmd_drill(args: argparse.Namespace) -> int:
    from .drill.runner import main_drill

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


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``jobguard`` command; its exit status. Everything it prints, on stdout and
    stderr, reaches the terminal through :func:`jobguard._safe_text.safe_streams`."""
    with safe_streams():
        try:
            return _main(argv)
        except Exception as exc:  # noqa: BLE001 - a crash, said here (exit status 1)
            _crash(exc)
            return 1


def _crash(exc: BaseException) -> None:
    """A command's crash on stderr, while the stream still escapes: its traceback, each
    exception's message one safe line (it may quote a record or a remote API's answer;
    Python would print it after ``safe_streams`` restored the raw stream)."""
    import traceback

    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__
                                        else current.__context__)
    for index, one in enumerate(reversed(chain)):
        if index:  # Python's own words between the exceptions of a chain
            print("\nThe above exception was the direct cause of the following exception:\n"
                  if one.__cause__ is not None else "\nDuring handling of the above "
                  "exception, another exception occurred:\n", file=sys.stderr)
        said = "".join(traceback.format_exception_only(type(one), one)).rstrip("\n")
        print("Traceback (most recent call last):\n"
              + "".join(traceback.format_tb(one.__traceback__)) + safe_text(said),
              file=sys.stderr)


def _error(text: object) -> None:
    """An ``error: ...`` line on stderr: one line, whatever the text quotes."""
    print(f"error: {safe_text(text)}", file=sys.stderr)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # A jobs module is imported only when named, and the working folder is never put on
    # sys.path otherwise (_project_folder_last_on_path): see README "The operator's folder".
    args.jobs_module_field = ("--jobs-module" if args.jobs_module
                              else "JOBGUARD_JOBS_MODULE")
    args.jobs_module = args.jobs_module or os.environ.get("JOBGUARD_JOBS_MODULE") or None
    args.json = args.output == "json"
    try:
        code: int = args.run(args)
        sys.stdout.flush()
    except CommandError as exc:
        _error(exc)
        return exc.code
    except BrokenPipeError:
        # the reader stopped early (`| head`): not an error; keep Python's exit quiet
        import contextlib

        # not a real file (a test's capture): nothing left to flush
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        extra = {"moto": "local", "aws_cdk": "cdk", "constructs": "cdk",
                 "cdk_nag": "cdk"}.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        _error(f"{args.command}: needs {exc.name}, which comes with "
               f"pip install 'jobguard[{extra}]'")
        return 2
    except Exception as exc:  # noqa: BLE001 - a command's failure, said plainly
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            NoCredentialsError,
            NoRegionError,
            PartialCredentialsError,
        )

        from .errors import JobGuardError

        if isinstance(exc, ClientError) and exc.response.get("Error", {}).get(
                "Code") == "ResourceNotFoundException" and exc.operation_name not in (
                "Invoke", "DescribeStacks"):
            where = getattr(args, "endpoint_url", None) or os.environ.get("AWS_ENDPOINT_URL")
            table = getattr(args, "resolved_table", None)
            _error(f"{args.command}: AWS said a resource does not exist ({exc}); "
                   f"is the table {table!r} deployed in this account and region"
                   + (f" at {where}" if where else "") + "?")
            return 1
        if isinstance(exc, NoCredentialsError | PartialCredentialsError):
            _error(f"--profile: {args.command}: no AWS credentials found ({exc}): pass "
                   "--profile (or set AWS_PROFILE), or set AWS_ACCESS_KEY_ID and "
                   "AWS_SECRET_ACCESS_KEY; for the local AWS, pass --endpoint-url (or set "
                   "AWS_ENDPOINT_URL)")
            return 2
        if isinstance(exc, NoRegionError):
            _error(f"--region: {args.command}: no AWS region: pass --region (or set "
                   "AWS_REGION), or give the profile one; for the local AWS, pass "
                   "--endpoint-url (or set AWS_ENDPOINT_URL)")
            return 2
        if isinstance(exc, ClientError | BotoCoreError):
            # AWS failed (throttled, 5xx, unreachable): say which call, change nothing.
            _error(f"{args.command}: AWS call failed: {exc}")
            return 1
        if not isinstance(exc, JobGuardError):
            raise
        said = str(exc)
        if "Requested resource not found" in said or "ResourceNotFoundException" in said:
            table = getattr(args, "resolved_table", None)
            said += (f" (table {table!r}: is it deployed in this account and region, and "
                     "is --stack, --table, JOBGUARD_TABLE or JOBGUARD_STACK right?)")
        _error(said)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
