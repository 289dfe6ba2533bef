"""``recover``: a bounded recovery planned or executed through the deployed recovery
function (its ``execute`` alias), or in this process (``--direct``), and its answer for
a person. Changes when the recovery's request, its invocation or its answer changes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..callsites import SURFACE, Path, call_site
from .aws import _endpoint, _session
from .jobs import _job_name, _known_job, _project_folder_last_on_path
from .output import _out, _shown
from .prompts import _login
from .refusal import CommandError
from .stacks import RECOVER_STACK, _deployment, _stack, _stores, _table

RECOVER_INVOKE = call_site(
    "cli.recover.invoke", "lambda", "Invoke", "_invoke",
    throttle=SURFACE, server_error=SURFACE, timeout=SURFACE, lost=SURFACE,
    note="the operator sees the error naming `Invoke`, exit status 1; sent once (no SDK "
         "resend, the answer awaited 900 s): a lost answer says the recovery may have run, "
         "and running it again replays nothing twice (lease, completed items skipped)",
    paths=(Path.OPERATOR,),
)


_LAMBDA_MAX_S = 900  # the longest a Lambda function runs


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

    from ..errors import JobGuardError
    from ..recovery import EXECUTE_ALIAS

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
    from ..errors import InvalidRequestError
    from ..recovery import parse_request

    try:
        parse_request(request)
    except InvalidRequestError as exc:
        raise CommandError(_OPTION_OF.get(exc.field, exc.field),
                           str(exc).split(": ", 1)[1]) from None


def _load_recovery_modules(args: argparse.Namespace) -> list[str]:
    """``recover --direct``: import the job modules named by ``--modules`` (or
    ``JOBGUARD_RECOVERY_MODULES``), as the recovery function does; their registered jobs."""
    from .. import registry
    from ..errors import ConfigError

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
    from .. import hooks
    from ..errors import ConfigError, InvalidRequestError, LeaseBusyError
    from ..recovery import recover

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
