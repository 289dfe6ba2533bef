"""CDK context the constructs read themselves, so a user's app needs no code for it.

``-c jobguard:local=true`` (``cdk deploy`` into the local AWS): :class:`LambdaBundle`
builds host-platform wheels, :class:`GuardedJob` and :class:`Reconciler` create their
schedules disabled (the local AWS fires schedules with ``<aws.scheduler.scheduled-time>``
left literal, which jobguard rightly refuses as a tick; the drills deliver ticks
themselves), and e-mail alarm destinations subscribe nobody.

``-c jobguard:drillsAccounts=<account>,...``: the test accounts a drillable bundle
(``LambdaBundle(drills=True)``) may deploy to, outside the local AWS. A drill deployment
turns on fault switches, disables every schedule and has no dead-man alarm: it must never
reach a production account because a flag leaked, so :func:`check_drills_account` refuses
it unless the stack is bound to one of these accounts (``env=cdk.Environment(account=...)``;
``cdk deploy`` then refuses any other account's credentials).
"""

from __future__ import annotations

import re
from typing import Any

from aws_cdk import Stack, Token
from constructs import Construct

from jobguard.errors import ConfigError

LOCAL = "jobguard:local"
LOCAL_ACCOUNT = "000000000000"
"""The local AWS's account: a stack bound to another is not for it."""
DRILLS_ACCOUNTS = "jobguard:drillsAccounts"
_ACCOUNT = re.compile(r"\d{12}")


def flag(value: Any, key: str) -> bool:
    """A context flag: true/false, 1/0, yes/no (absent: false); anything else refused."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise ConfigError(key, f"{value!r} is not true or false")


def local_deployment(scope: Construct) -> bool:
    """Whether the app is synthesized for the local AWS (``-c jobguard:local=true``)."""
    return flag(scope.node.try_get_context(LOCAL), LOCAL)


def drills_accounts(scope: Construct) -> tuple[str, ...]:
    """``-c jobguard:drillsAccounts``: 12-digit accounts, comma-separated (or a list)."""
    value = scope.node.try_get_context(DRILLS_ACCOUNTS)
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    accounts = tuple(str(item).strip() for item in items if str(item).strip())
    for account in accounts:
        if not _ACCOUNT.fullmatch(account):
            raise ConfigError(DRILLS_ACCOUNTS, f"{account!r} is not a 12-digit account id")
    return accounts


def check_drills_account(scope: Construct) -> None:
    """Refuse a drill deployment outside the local AWS unless its stack is bound to an
    account on ``-c jobguard:drillsAccounts``."""
    if local_deployment(scope):
        return
    stack = Stack.of(scope)
    accounts = drills_accounts(scope)
    account = None if Token.is_unresolved(stack.account) else stack.account
    if account is not None and account in accounts:
        return
    where = (f"stack {stack.stack_name!r} is bound to no account (env=cdk.Environment("
             "account=...))" if account is None else f"account {account} of stack "
             f"{stack.stack_name!r} is not on it")
    raise ConfigError(DRILLS_ACCOUNTS, f"LambdaBundle(drills=True) turns on fault switches "
                      f"and disables every schedule, for test accounts only: {where}; list "
                      f"them with -c {DRILLS_ACCOUNTS}=<account>,... and bind the stack to "
                      f"one, or deploy to the local AWS with -c {LOCAL}=true "
                      f"(allowed: {', '.join(accounts) or 'none'})")


def check_local_account(scope: Construct) -> None:
    """Refuse ``-c jobguard:local=true`` for a stack bound to a real account: it would
    deploy there with every schedule disabled and no e-mail subscribed, silently."""
    if not local_deployment(scope):
        return
    stack = Stack.of(scope)
    if not Token.is_unresolved(stack.account) and stack.account != LOCAL_ACCOUNT:
        raise ConfigError(LOCAL, f"stack {stack.stack_name!r} is bound to account "
                          f"{stack.account}, and {LOCAL}=true builds for the local AWS "
                          f"(account {LOCAL_ACCOUNT}): schedules disabled, nobody subscribed. "
                          f"Leave {LOCAL} out for a real account")
