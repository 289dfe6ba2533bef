"""Where a command's stack, table and stores come from: ``--stack``/``JOBGUARD_STACK``
read through CloudFormation once per command, ``--table``/``JOBGUARD_TABLE``, in that
order, each refusal naming what named it. Changes when the way a deployment is found
changes."""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

from .aws import _client
from .refusal import CommandError

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

    from ..deployment import Deployment, DeploymentError

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


NO_TABLE = ("no table: pass --stack STACK or --table TABLE (or set JOBGUARD_STACK / "
            "JOBGUARD_TABLE)")


def _table(args: argparse.Namespace) -> str:
    """The command's table: ``--table``, else the table of the stack ``--stack`` names,
    else ``JOBGUARD_TABLE``, else the table of the stack ``JOBGUARD_STACK`` names (flags
    before variables, a table before a stack). What named it is kept for errors."""
    from ..environment import check_table_name
    from ..errors import ConfigError

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
    from ..dynamodb import DynamoJobStore
    from ..dynamodb_items import DynamoItemStore

    ddb = _client(args, "dynamodb")
    table = _table(args)
    return DynamoJobStore(table, client=ddb), DynamoItemStore(table, client=ddb)
