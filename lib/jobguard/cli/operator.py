"""The commands an operator changes a job's state with by hand: ``pause``, ``resume``,
``release`` and ``repair`` (the lease row), ``resolve`` (uncertain or failed items, under
the job's lease). Changes when one of these commands' checks or answers change."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._safe_text import safe_text
from .jobs import _defined_jobs, _job_name, _known_job
from .output import _ms, _out, _shown
from .prompts import _confirm, _login
from .refusal import CommandError
from .stacks import _stores


def cmd_pause(args: argparse.Namespace) -> int:
    """Pause a job. A job already paused keeps its pause: the same reason again is a
    no-op (exit 0); another is refused (exit 1) unless ``--replace``, as ``kubectl
    annotate`` keeps a value unless ``--overwrite``."""
    _job_name(args)
    if not args.reason or not args.reason.strip():
        raise CommandError("--reason", "say why (it is shown on every paused trigger)")
    store, _ = _stores(args)
    job = _known_job(args, store)
    from .._bounds import MAX_TEXT_BYTES, bounded_text

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
    from ..errors import DamagedRowError

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
    from ..requests import ForceRelease

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
    from ..errors import DamagedRowError

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


def cmd_resolve(args: argparse.Namespace) -> int:
    """An operator's finding for unresolved items, under the job's lease (see
    :func:`jobguard.recovery.resolve`)."""
    from datetime import timedelta

    from ..config import JobConfig
    from ..errors import InvalidRequestError, LeaseBusyError
    from ..recovery import resolve

    _job_name(args)
    if (args.found is None) == (not args.not_found):
        raise CommandError("--found", "say what you found at the destination: --found "
                           "DESTINATION_ID (it holds the effect) or --not-found (it does "
                           "not: the item is redone by the next run)")
    if not args.reason or not args.reason.strip():
        raise CommandError("--reason", "say why (it is written on the run record)")
    if args.wait < 0:
        raise CommandError("--wait", f"must be 0 or more seconds, got {args.wait}")
    from ..workitems import check_key

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


@contextmanager
def _library_logs_quiet() -> Iterator[None]:
    """While a command runs the guard in this process (``resolve``): jobguard's own
    JSON log lines, written for CloudWatch, reach the operator only from warning
    up, and on stderr; its EMF metrics too (stdout is the command's answer)."""
    import contextlib
    import logging

    from ..observability import _logger

    _logger()  # jobguard's logger "jobguard", made now: its handler is known
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
