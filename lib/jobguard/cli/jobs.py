"""Which job a command means: its name checked, then known to the table, to the stack or
to the jobs module ``--jobs-module``/``JOBGUARD_JOBS_MODULE`` names (imported only when
named); a typo refused with the nearest known job. Changes when the way a job name is
checked or the job definitions are found changes."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..callsites import RETRY, SURFACE, Path, call_site
from .refusal import CommandError

KNOWN_JOBS_SCAN = call_site(
    "cli.known_jobs.scan", "dynamodb", "Scan", "_jobs_in_table",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=RETRY,
    note="a read, only for a job name neither defined nor on the table: the command "
         "fails naming the call, nothing written",
    paths=(Path.OPERATOR,),
)


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
    from ..config import validate_job_name
    from ..errors import ConfigError

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
    from ..schema import LEASE_SK, PARTITION_KEY, SORT_KEY

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
