"""The read-only commands over a job's history: ``status`` (the lease and the last
runs), ``runs`` (the run log), ``run`` (one run) and ``items`` (unresolved work items),
and the run log's entries (:data:`RUN_KEYS`). Changes when what these commands show
changes."""

from __future__ import annotations

import argparse
import dataclasses
import re
import time
from collections.abc import Sequence
from typing import Any

from .._safe_text import safe_text
from .jobs import _defined_jobs, _job_name, _jobs_in_table, _known_job
from .output import _ms, _out, _shown, _table_text, _with_times
from .refusal import CommandError
from .stacks import _stores

_MAX_LAST = 10_000  # runs --last: the most runs a listing reads (pages of the run log)
_RUN_ID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")  # jobguard.ids: 26 Crockford base32


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
    from ..records import DamagedRun

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
    from ..records import DamagedRun

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


def cmd_status(args: argparse.Namespace) -> int:
    from ..errors import DamagedRowError

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
    from ..records import DamagedRun, RunStatus

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
    from ..records import DamagedRun

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
    from ..workitems import DamagedItem, ItemRecord, ItemState

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
